"""Plain-Python helpers shared by the store, its Beam sinks and the dashboard (no Beam, no SQL).

A window-estimate record is a dict in the `schemas/window_estimate.avsc` layout; a dead letter a
dict in `schemas/dead_letter.avsc`. Optional fields written by other estimators (`bucket_edges`,
`mean`, `variance`, `quantiles`, estimator `iterations`/`last_change`) pass through untouched.
"""
from __future__ import annotations

import datetime as dt
import json
import math

from ldp_telemetry.ldp.protocols import PROTOCOLS, make_protocol

#: Slice bounds of a dead letter that names no known metric or no valid event time.
UNATTRIBUTED_MS = -(2 ** 63)

#: z of a two-sided 95% normal interval: bands are estimate ± Z95 · std_error.
Z95 = 1.959963984540054

#: The smallest frequency a window resolves is this many standard errors of a value of
#: frequency 0 ([Wang20] journal eq. 2 at f_v = 0).
RESOLVABLE_STD_ERRORS = 2.0

#: Longest metric name or dead-letter reason the store keeps (longer ones are cut).
MAX_NAME_CHARS = 512


def iso_to_ms(text: str) -> int:
    """ISO-8601 (UTC when naive; a trailing Z allowed) -> integer milliseconds since the epoch."""
    moment = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.timezone.utc)
    delta = moment - dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


def ms_to_datetime(ms: int) -> dt.datetime:
    """Integer milliseconds since the epoch -> an aware UTC datetime."""
    return dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(milliseconds=ms)


def window_key(record: dict) -> tuple[str, int, int]:
    """(metric, window_start_ms, window_end_ms): the identity of a window in the store."""
    return record["metric"], iso_to_ms(record["window_start"]), iso_to_ms(record["window_end"])


def pane_of(record: dict) -> dict:
    """The record's pane, defaulting to one ON_TIME pane (a record without one is a batch one)."""
    pane = record.get("pane") or {}
    return {"timing": pane.get("timing", "ON_TIME"), "index": int(pane.get("index", 0)),
            "is_last": bool(pane.get("is_last", False))}


def support_probabilities(protocol: str, epsilon: float, d: int) -> tuple[float, float] | None:
    """(p*, q*) of a frequency oracle by registry name, ε and domain size; None when the
    protocol is not a pure frequency oracle this package knows (e.g. a numeric mechanism)."""
    if protocol not in PROTOCOLS or d < 2:
        return None
    oracle = make_protocol(protocol, float(epsilon), int(d))
    return oracle.p_star, oracle.q_star


def smallest_resolvable(p_star: float, q_star: float, n: int) -> float | None:
    """RESOLVABLE_STD_ERRORS standard errors of the unbiased estimate of a value of frequency 0
    at n reports: 2·sqrt(q*(1 − q*) / n) / (p* − q*)  ([Wang20] journal eq. 2 with f_v = 0).

    A true frequency below it is indistinguishable from 0 in this window; None when n = 0.
    """
    if n <= 0:
        return None
    return RESOLVABLE_STD_ERRORS * math.sqrt(q_star * (1 - q_star) / n) / (p_star - q_star)


def describe_window(record: dict) -> dict:
    """The scalar facts of a window a dashboard header shows: p*, q*, the smallest resolvable
    frequency, the estimator and post-processing names."""
    d = len(record.get("labels") or record.get("estimate") or ())
    probabilities = support_probabilities(record.get("protocol", ""), record.get("epsilon", 0), d)
    p_star, q_star = probabilities if probabilities else (None, None)
    resolvable = (smallest_resolvable(p_star, q_star, int(record.get("n", 0)))
                  if probabilities else None)
    estimator = record.get("estimator") or {}
    postprocess = record.get("postprocess") or {}
    return {"d": d, "p_star": p_star, "q_star": q_star, "smallest_resolvable": resolvable,
            "estimator": estimator.get("method"), "postprocess": postprocess.get("method")}


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
    if isinstance(moment, bool):
        return metric, None
    if isinstance(moment, int):
        return metric, moment
    if isinstance(moment, str):
        try:
            return metric, iso_to_ms(moment)
        except ValueError:
            return metric, None
    return metric, None


def reject_slice(letter: dict, slice_ms: int, slice_offset_ms: int = 0
                 ) -> tuple[str, str, int, int]:
    """(metric, reason, slice_start_ms, slice_end_ms) a dead letter is counted under.

    The slice is the job's time slice ([offset + k·slice, offset + (k+1)·slice)) holding the
    report's event time, so every window of the job holds it whole or not at all. A dead letter
    without a metric known to have windows of this job, or without an event time, or with one
    outside [1970, 2200) (reason `invalid_event_time`), gets UNATTRIBUTED_MS bounds.
    """
    metric, moment = dead_letter_origin(letter)
    reason = str(letter.get("reason", ""))[:MAX_NAME_CHARS]
    if moment is None or letter.get("reason") in ("invalid_event_time", "unknown_metric"):
        return metric, reason, UNATTRIBUTED_MS, UNATTRIBUTED_MS
    start = slice_offset_ms + ((moment - slice_offset_ms) // slice_ms) * slice_ms
    return metric, reason, start, start + slice_ms
