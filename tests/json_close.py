"""Comparing JSON values written on one machine with those computed on another.

OpenBLAS picks its kernels by CPU when it loads (AVX-512 on some machines, AVX2 on others), and
they round products and least-squares solves differently in the last bits. A value computed
again therefore matches a committed one exactly in everything but its floats, and its floats
only to within a tolerance that the caller states and justifies.
"""
from __future__ import annotations

import math
from typing import Any


def skeleton(value: Any) -> Any:
    """`value` with every float replaced by None: what must match exactly."""
    if isinstance(value, float):
        return None
    if isinstance(value, dict):
        return {key: skeleton(item) for key, item in value.items()}
    if isinstance(value, list):
        return [skeleton(item) for item in value]
    return value


def floats(value: Any) -> list[float]:
    """Every float of `value`, in a fixed order (dict keys sorted)."""
    if isinstance(value, float):
        return [value]
    if isinstance(value, dict):
        return [f for key in sorted(value) for f in floats(value[key])]
    if isinstance(value, list):
        return [f for item in value for f in floats(item)]
    return []


def assert_json_close(value: Any, expected: Any, rel_tol: float, abs_tol: float = 0.0) -> None:
    """`value` equals `expected` in every key, string, integer, boolean and null, and in every
    float to `rel_tol` relative (or `abs_tol` absolute); NaN matches NaN."""
    assert skeleton(value) == skeleton(expected)
    for got, want in zip(floats(value), floats(expected), strict=True):
        assert math.isclose(got, want, rel_tol=rel_tol, abs_tol=abs_tol) or (
            math.isnan(got) and math.isnan(want)), (got, want)
