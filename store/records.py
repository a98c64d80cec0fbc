"""What the store keeps of a record, for every kind of store (no Beam, no SQL).

A window estimate (`ldp_telemetry.output.estimate.EstimateRecord`) becomes one pane row
(`pane_row`: the window, its pane and the facts a query filters on, with the whole record as
JSON), one row per value (`value_rows`: with its 95% band, `output.bands`) and, for a
numeric metric, one row per summary statistic (`summary_rows`). The SQL store
(`store.sql.EstimateStore.write_panes`) and the BigQuery sink
(`transforms.store.bigquery_pane_row`) both build their rows with these.

A dead letter is a dict in the `schemas/dead_letter.avsc` layout; its `report` (JSON text, when
the report could be decoded) names the metric and the event time it is counted under.
"""
from __future__ import annotations

import json
import math
from collections.abc import Iterator
from itertools import repeat
from typing import NamedTuple

import numpy as np

from ldp_telemetry.ldp.base.errors import StoreError
from ldp_telemetry.ldp.base.times import ms_from_iso
from ldp_telemetry.ldp.base.validation import is_int
from ldp_telemetry.ldp.config.budget import budget_text
from ldp_telemetry.ldp.engine.reasons import UNATTRIBUTED_REASONS
from ldp_telemetry.ldp.estimation.uncertainty import BAND_NONE, BAND_POOL_CORRECTED
from ldp_telemetry.ldp.protocols import STRING_PROTOCOLS
from ldp_telemetry.output.bands import (band_errors, score_facts, summary_bands,
                                        summary_statistics, value_band, value_band_method,
                                        value_bands)
from ldp_telemetry.output.compact import FloatChunks
from ldp_telemetry.output.estimate import EstimateRecord

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


# -- window estimates ---------------------------------------------------------------------------

#: The support facts of a frequency oracle a pane row carries (null for a numeric metric).
SUPPORT_COLUMNS = ("p_star", "q_star", "smallest_resolvable")


def number(value) -> float | None:
    """A number for a store column: None for null and NaN (no reports)."""
    return None if value is None or math.isnan(float(value)) else float(value)


def pane_row(record: EstimateRecord) -> dict:
    """The columns of one pane of a window, by name: `metric`, `version`
    (`EstimateRecord.version`), `window_start_ms`, `window_end_ms`, `n`, `protocol`, `epsilon`,
    the SUPPORT_COLUMNS, the `estimator` and `postprocess` methods, `pane_timing`,
    `pane_index`, `pane_is_last`, `record` (the record's JSON text, `EstimateRecord.to_json`),
    and the promise to a device: `per_day_epsilon`, `lifetime_epsilon`, `privacy` (its
    sentence; null in records written before it)."""
    privacy = record.privacy or {}
    return {"metric": record.metric, "version": record.version,
            "window_start_ms": record.start_ms, "window_end_ms": record.end_ms,
            "n": int(record.n), "protocol": record.protocol, "epsilon": float(record.epsilon),
            **{name: number(getattr(record, name)) for name in SUPPORT_COLUMNS},
            "estimator": (record.estimator or {}).get("method"),
            "postprocess": (record.postprocess or {}).get("method"),
            "pane_timing": record.pane.timing, "pane_index": record.pane.index,
            "pane_is_last": record.pane.is_last, "record": record.to_json(),
            "per_day_epsilon": number(privacy.get("per_day")),
            "lifetime_epsilon": number(privacy.get("lifetime")),
            "privacy": budget_text(record.privacy)}


class ValueRow(NamedTuple):
    """One value of a window: its index, label, estimate, unbiased estimate and standard error
    (null where the record has none) and its 95% band (null without a standard error)."""

    value_index: int
    label: str
    estimate: float
    unbiased_estimate: float | None
    std_error: float | None
    lower95: float | None
    upper95: float | None


def labels_per_window(protocol) -> bool:
    """Whether the values of a window of `protocol` are found anew in each window: a string
    metric's heavy hitters (`ldp.protocols.STRING_PROTOCOLS`). Their `value_index` is the rank
    of the value in its window, not an identity, so a reader over windows keys them by `label`.
    Decided by the protocol every window row and record carries (so a store written before
    this function is read the same way)."""
    return protocol in STRING_PROTOCOLS


def value_rows(record: EstimateRecord) -> Iterator[ValueRow]:
    """The record's values one row at a time (numbers made as they are taken: a large
    domain's rows are never held as a list), lower95/upper95 as output.bands makes them
    (None where `value_band_method` is none: a string metric's heavy hitters, whatever an
    older record states)."""
    size = len(record.estimate)
    labels = record.labels if len(record.labels) else map(str, range(size))
    columns = (_floats(record.estimate), _floats(record.unbiased_estimate, size),
               _floats(record.std_error, size), _floats(band_errors(record), size))
    method = value_band_method(record)
    facts = score_facts(record)
    # a pool-corrected window's bands come from the whole window at once (output.bands)
    corrected = value_bands(record) if method == BAND_POOL_CORRECTED else None
    for index, (label, value, raw, error, band_error) in enumerate(zip(labels, *columns,
                                                                      strict=False)):
        # the band of the unbiased estimate (output.bands.value_band), whatever the estimate
        if corrected is not None:
            low, high = corrected[0][index], corrected[1][index]
        else:
            low, high = ((None, None) if method == BAND_NONE
                         else value_band(facts, value if raw is None else raw, band_error))
        yield ValueRow(index, str(label), value, raw, error, low, high)


def summary_rows(record: EstimateRecord
                 ) -> Iterator[tuple[str, float | None, float | None, float | None, float | None]]:
    """A numeric record's summaries as (statistic, value, standard error, lower95, upper95):
    `mean` (with its standard error), `variance`, and `q<level>` per quantile (with its
    bootstrap standard error), each with the record's own 95% band (`output.bands.summary_bands`:
    null where the record has none); nothing for a frequency record (no `mean`, no quantiles)."""
    bands = summary_bands(record)
    for statistic, _, value, error in summary_statistics(record):
        yield (statistic, value, error, *bands[statistic])


def _floats(array: np.ndarray | None, size: int = 0) -> Iterator[float | None]:
    """Python floats of `array`, converted a chunk at a time; `size` Nones when it is None."""
    return repeat(None, size) if array is None else iter(FloatChunks(array))
