"""How the store counts dead letters: the metric and time slice of each (no Beam, no SQL).

A dead letter is a dict in the `schemas/dead_letter.avsc` layout; its `report` (JSON text, when
the report could be decoded) names the metric and the event time it is counted under. Window
estimates are stored as their records give them (`ldp_telemetry.output.records`).
"""
from __future__ import annotations

import json

from ldp_telemetry.ldp.base.errors import StoreError
from ldp_telemetry.ldp.base.times import ms_from_iso
from ldp_telemetry.ldp.base.validation import is_int
from ldp_telemetry.ldp.engine.reasons import UNATTRIBUTED_REASONS

#: Slice bounds of a dead letter that names no known metric or no valid event time.
UNATTRIBUTED_MS = -(2 ** 63)

#: Longest metric name the store keys (PostgreSQL's B-tree keys hold at most about 2,700 bytes:
#: 512 characters of 4 UTF-8 bytes fit). A job with a longer metric name is refused at start
#: (`check_metric_names`); a dead letter's name or reason is cut to it.
MAX_NAME_CHARS = 512


def check_metric_names(names) -> None:
    """StoreError (field ``store``) naming the first metric name longer than the store keys."""
    for name in names:
        if len(name) > MAX_NAME_CHARS:
            raise StoreError(f"store: metric name {name[:40]!r}… has {len(name):,} characters; "
                             f"the store keys names of at most {MAX_NAME_CHARS}: shorten it in "
                             f"the registry", "store")


def dead_letter_origin(letter: dict) -> tuple[str, int | None]:
    """(metric, event time in ms) of a dead letter from its decoded report, when it has one.

    The metric is '' and the time None when the report could not be decoded; the time is None
    when it is missing or not a valid ISO-8601 or integer time.
    """
    text = letter.get("report")
    if not text:
        return "", None
    try:
        report = json.loads(text)
    except ValueError:
        return "", None
    if not isinstance(report, dict):
        return "", None
    metric = report.get("metric")
    metric = metric[:MAX_NAME_CHARS] if isinstance(metric, str) else ""
    moment = report.get("event_time")
    if is_int(moment):
        return metric, int(moment)
    if isinstance(moment, str):
        try:
            return metric, ms_from_iso(moment)
        except ValueError:
            return metric, None
    return metric, None


def reject_slice(letter: dict, slice_ms: int, slice_offset_ms: int = 0
                 ) -> tuple[str, str, int, int]:
    """(metric, reason, slice_start_ms, slice_end_ms) a dead letter is counted under.

    The slice is the job's time slice ([offset + k·slice, offset + (k+1)·slice)) holding the
    report's event time, so every window of the job holds it whole or not at all. A dead letter
    without a metric known to have windows of this job, or without an event time, or with one
    outside [1970, 2200) (a reason of `UNATTRIBUTED_REASONS`), gets UNATTRIBUTED_MS bounds.
    """
    metric, moment = dead_letter_origin(letter)
    reason = str(letter.get("reason", ""))[:MAX_NAME_CHARS]
    if moment is None or reason in UNATTRIBUTED_REASONS:
        return metric, reason, UNATTRIBUTED_MS, UNATTRIBUTED_MS
    start = slice_offset_ms + ((moment - slice_offset_ms) // slice_ms) * slice_ms
    return metric, reason, start, start + slice_ms
