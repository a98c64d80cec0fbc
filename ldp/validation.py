"""Checks shared by every validator of user-given values (registry fields, parameters, limits,
records read back, event times).

JSON and YAML give `True` where a number was meant, and Python's `bool` is an `int`: these checks
never accept a bool as a number."""
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


#: Valid event times are [EVENT_TIME_MIN_MS, EVENT_TIME_END_MS) = [1970-01-01, 2200-01-01) UTC in
#: epoch milliseconds: a report outside it is a dead letter (`invalid_event_time`), a registry's
#: `not_before` must lie in it, and no window, period or lateness is longer than the span.
EVENT_TIME_MIN_MS = 0
EVENT_TIME_END_MS = 7_258_118_400_000
#: The same span as text, for messages.
EVENT_TIME_SPAN_TEXT = "[1970-01-01T00:00:00Z, 2200-01-01T00:00:00Z)"


def is_valid_event_time(epoch_ms: Any) -> bool:
    """An integer number of epoch milliseconds in [EVENT_TIME_MIN_MS, EVENT_TIME_END_MS)."""
    return is_int(epoch_ms) and EVENT_TIME_MIN_MS <= epoch_ms < EVENT_TIME_END_MS
