"""Event time as text and as integer epoch milliseconds.

Every time in an output record is ISO-8601 UTC text with a trailing ``Z``: whole seconds, and
milliseconds only when there are some (``2024-03-01T00:00:00Z``, ``2024-03-01T00:00:00.250Z``).
Inside the job times are integer milliseconds since the Unix epoch.
"""
from __future__ import annotations

import datetime as dt
import time
from typing import Any

#: Milliseconds in a day.
DAY_MS = 86_400_000
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_NAIVE_EPOCH = dt.datetime(1970, 1, 1)


def iso_from_ms(epoch_ms: int, milliseconds: bool = False) -> str:
    """Epoch milliseconds -> ISO-8601 UTC text: milliseconds shown when not zero, or always
    with `milliseconds` (``2024-03-01T00:00:00.000Z``, the store's fixed-width text)."""
    seconds, ms = divmod(int(epoch_ms), 1000)
    text = (_NAIVE_EPOCH + dt.timedelta(seconds=seconds)).isoformat()
    return f"{text}.{ms:03d}Z" if ms or milliseconds else f"{text}Z"


def ms_from_iso(text: str) -> int:
    """ISO-8601 text (UTC when it names no offset; a trailing ``Z`` allowed) -> epoch
    milliseconds, rounded down. ValueError when `text` is not ISO-8601."""
    moment = dt.datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.timezone.utc)
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


def datetime_from_ms(epoch_ms: int) -> dt.datetime:
    """Epoch milliseconds -> an aware UTC datetime."""
    return _EPOCH + dt.timedelta(milliseconds=int(epoch_ms))


def now_iso() -> str:
    """The wall-clock time now as ISO-8601 UTC text, always with milliseconds."""
    return iso_from_ms(time.time_ns() // 1_000_000, milliseconds=True)


def reports_per_window(config: Any, window_ms: int) -> float | None:
    """Reports one device makes in a window of `window_ms` at the metric's configured rate
    (`config.reports_per_day`; None when no rate is configured): above 1, a memoized device's
    reports in a window share their permanent response
    (ldp_telemetry.ldp.protocols.memoized.TwoStage.repeated_report_variance)."""
    rate = config.reports_per_day
    return None if rate is None else rate * window_ms / DAY_MS
