"""Type checks shared by every validator of user-given values (registry fields, parameters,
limits, records read back). JSON and YAML give `True` where a number was meant, and Python's
`bool` is an `int`: these checks never accept a bool as a number."""
from __future__ import annotations

import math
from numbers import Integral, Real
from typing import Any


def is_int(value: Any) -> bool:
    """An integer (Python or numpy), never a bool."""
    return isinstance(value, Integral) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    """An integer or a float (Python or numpy), never a bool; NaN and infinities included."""
    return isinstance(value, Real) and not isinstance(value, bool)


def is_finite_number(value: Any) -> bool:
    """A number (see `is_number`) that is neither NaN nor infinite."""
    return is_number(value) and math.isfinite(value)


def is_positive_int(value: Any) -> bool:
    return is_int(value) and value >= 1


def is_nonnegative_int(value: Any) -> bool:
    return is_int(value) and value >= 0


def is_positive_number(value: Any) -> bool:
    """A finite number > 0."""
    return is_finite_number(value) and value > 0
