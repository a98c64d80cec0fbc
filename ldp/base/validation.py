"""Checks shared by every validator of user-given values (registry fields, parameters, limits,
records read back, event times).

JSON and YAML give `True` where a number was meant, and Python's `bool` is an `int`: these checks
never accept a bool as a number."""
from __future__ import annotations

import math
from numbers import Integral, Real
from typing import Any, TypeGuard


def is_int(value: Any) -> TypeGuard[int]:
    """An integer (Python or numpy), never a bool."""
    return isinstance(value, Integral) and not isinstance(value, bool)


def is_number(value: Any) -> TypeGuard[float]:
    """An integer or a float (Python or numpy), never a bool; NaN and infinities included."""
    return isinstance(value, Real) and not isinstance(value, bool)


def is_finite_number(value: Any) -> TypeGuard[float]:
    """A number (see `is_number`) that is neither NaN nor infinite."""
    return is_number(value) and math.isfinite(value)


def is_positive_int(value: Any) -> TypeGuard[int]:
    return is_int(value) and value >= 1


def is_nonnegative_int(value: Any) -> TypeGuard[int]:
    return is_int(value) and value >= 0


def is_positive_number(value: Any) -> TypeGuard[float]:
    """A finite number > 0."""
    return is_finite_number(value) and value > 0


#: Longest wall-clock duration a setting may give (a wait, a run's length), in seconds: ten years.
#: Beyond it a value is a typo, not a plan, and platform timers overflow (`time.sleep(1e30)`).
MAX_WAIT_SECONDS = 315_576_000


def seconds_problem(value: Any, maximum: float = MAX_WAIT_SECONDS, zero: bool = False
                    ) -> str | None:
    """Why `value` is not a number of seconds in (0, maximum] ([0, maximum] with `zero`), as a
    phrase to follow the setting's name ("must be ..."), or None. NaN and infinities fail."""
    if not is_finite_number(value):
        return f"must be a finite number of seconds, got {value!r}"
    if value < 0 or (value == 0 and not zero) or value > maximum:
        shown = f"{maximum:,.0f}" if float(maximum).is_integer() else f"{maximum:,}"
        return f"must be in {'[' if zero else '('}0, {shown}] seconds, got {value!r}"
    return None


#: Largest domain size d of a metric (the registry's limit, `ldp plan`'s too): a statistic of d
#: int64 counts is then at most 128 MiB (HR's table of 2 x K, K the next power of two, at most
#: 256 MiB), and an estimate record about 1.2 GB of JSON.
MAX_DOMAIN_SIZE = 1 << 24

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
