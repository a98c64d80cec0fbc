"""A device's true values -> the domain points its metric's protocol perturbs.

A frequency metric takes labels of its domain (a labelled domain) or integer indices in [0, d)
(either domain); a numeric metric takes numbers in [low, high], mapped onto the unit interval as
u = (x - low) / (high - low); a string metric takes strings (or UTF-8 bytes) of at most its
`max_bytes` UTF-8 bytes without NUL, padded into rows of bytes. Anything else is an
`InputError` (field ``value``) naming the value: nothing is perturbed from a value the server
would read as another one.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ldp_telemetry.ldp.base.errors import InputError
from ldp_telemetry.ldp.base.registration import did_you_mean
from ldp_telemetry.ldp.base.validation import is_int, is_number
from ldp_telemetry.ldp.protocols.base import NUMERIC, STRINGS
from ldp_telemetry.ldp.protocols.string_keys import as_utf8, padded_rows, string_problem

if TYPE_CHECKING:
    from ldp_telemetry.ldp.config.registry import MetricConfig

VALUE = "value"


def domain_points(config: MetricConfig, values: Any) -> np.ndarray:
    """int64 indices in [0, d) of a frequency metric's values, float64 points in [0, 1] of a
    numeric metric's, or (n, max_bytes) uint8 rows of a string metric's; `values` a sequence or
    array (one value: use a list of one)."""
    array = values if isinstance(values, np.ndarray) else np.asarray(list(values), dtype=object)
    if array.ndim != 1:
        raise InputError(f"values of metric {config.name!r} must be one-dimensional, got shape "
                         f"{array.shape}", VALUE)
    if config.kind == NUMERIC:
        return _unit_points(config, array)
    if config.kind == STRINGS:
        return _string_rows(config, array)
    return _indices(config, array)


def _string_rows(config: MetricConfig, array: np.ndarray) -> np.ndarray:
    """Padded byte rows (ldp.protocols.string_keys) of str or UTF-8 bytes values."""
    encoded = []
    for value in array.tolist():
        try:
            data = as_utf8(value)
        except (TypeError, UnicodeDecodeError) as error:
            raise InputError(f"value {value!r} of metric {config.name!r}: {error}", VALUE) from None
        problem = string_problem(data, config.d)
        if problem:
            raise InputError(f"value {value!r} of metric {config.name!r} {problem}", VALUE)
        encoded.append(data)
    return padded_rows(encoded, config.d)


def _indices(config: MetricConfig, array: np.ndarray) -> np.ndarray:
    d = config.d
    if array.dtype.kind in "iu":
        indices = array.astype(np.int64, copy=False)
    elif array.dtype.kind in "US" and config.labels is not None:
        distinct, inverse = np.unique(array.astype(str), return_inverse=True)
        position = {label: i for i, label in enumerate(config.labels)}
        mapped = np.array([position.get(label, -1) for label in distinct.tolist()],
                          dtype=np.int64)
        _refuse(config, array, mapped[inverse] < 0)
        return mapped[inverse]
    else:
        indices = np.array([_index(config, value) for value in array.tolist()], dtype=np.int64)
    _refuse(config, array, (indices < 0) | (indices >= d))
    return indices


def _index(config: MetricConfig, value: Any) -> int:
    """One value's index, or -1 when it is none (the caller names it)."""
    if is_int(value):
        return int(value)
    if isinstance(value, str) and config.labels is not None:
        try:
            return config.labels.index(value)
        except ValueError:
            return -1
    return -1


def _unit_points(config: MetricConfig, array: np.ndarray) -> np.ndarray:
    if array.dtype.kind in "iuf":
        numbers = array.astype(np.float64)
    else:
        numbers = np.array([float(v) if is_number(v) else np.nan for v in array.tolist()],
                           dtype=np.float64)
    low, high = config.low, config.high
    assert low is not None and high is not None, "a numeric metric has a domain"
    _refuse(config, array, ~((numbers >= low) & (numbers <= high)))  # NaN too
    points: np.ndarray = np.clip(config.to_unit(numbers), 0.0, 1.0)
    return points


def _refuse(config: MetricConfig, array: np.ndarray, bad: np.ndarray) -> None:
    """InputError naming the first bad value (and how many there are) when any is bad."""
    if not bad.any():
        return
    first = array[int(np.flatnonzero(bad)[0])]
    example = first.item() if isinstance(first, np.generic) else first
    count = int(bad.sum())
    subject = f"value {example!r}" if count == 1 else \
        f"{count} values (for example {example!r})"
    raise InputError(f"{subject} of metric {config.name!r}: {_expected(config, example)}", VALUE)


def _expected(config: MetricConfig, example: Any) -> str:
    """What the metric's values must be, as a phrase."""
    if config.kind == NUMERIC:
        return f"expected a number in [{config.low:g}, {config.high:g}]"
    indices = f"an integer index in [0, {config.d})"
    if config.labels is None:
        return f"the domain is sized: expected {indices}"
    shown = ", ".join(map(repr, config.labels[:5])) + (", ..." if config.d > 5 else "")
    return (f"expected one of its {config.d} labels ({shown}) or {indices}"
            f"{did_you_mean(example, config.labels)}")
