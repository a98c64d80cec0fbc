"""How the store counts dead letters: the metric and time slice of each (no Beam, no SQL).

A dead letter is a dict in the `schemas/dead_letter.avsc` layout; its `report` (JSON text, when
the report could be decoded) names the metric and the event time it is counted under. Window
estimates are stored as their records give them (`ldp_telemetry.output.records`).
"""
from __future__ import annotations

import json

from ldp_telemetry.ldp.times import ms_from_iso
from ldp_telemetry.ldp.validation import is_int
from ldp_telemetry.output.reasons import UNATTRIBUTED_REASONS

#: Slice bounds of a dead letter that names no known metric or no valid event time.
UNATTRIBUTED_MS = -(2 ** 63)

#: Longest metric name or dead-letter reason the store keeps (longer ones are cut).
MAX_NAME_CHARS = 512


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
