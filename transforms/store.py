"""Beam sinks of the estimate store: window estimates and dead-letter counts into SQL or BigQuery.

`WritePanesToStoreFn(url)` is the per-pane sink: each window-estimate record it receives is
upserted with `EstimateStore.write_panes` at the end of its bundle, so a live run that applies it
to its estimate PCollection writes every pane as it fires (idempotent: a retried bundle or a
stale pane changes nothing). `WriteToStore` wires it and the dead-letter counts into a job.
"""
from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.options.pipeline_options import StandardOptions
from apache_beam.coders import VarIntCoder
from apache_beam.pvalue import PDone
from apache_beam.transforms.userstate import ReadModifyWriteStateSpec

from ldp_telemetry.ldp.base.errors import StoreError
from ldp_telemetry.ldp.base.registration import Catalog
from ldp_telemetry.ldp.config.budget import budget_text
from ldp_telemetry.output.bands import value_bands
from ldp_telemetry.output.layout import version_label
from ldp_telemetry.output.reader import pane_of
from ldp_telemetry.store.records import reject_slice
from ldp_telemetry.store.sql import (CONNECTORS, STORE_FIELD, SUPPORT_COLUMNS, EstimateStore,
                                     open_store)
from ldp_telemetry.transforms.read import COUNTER_NAMESPACE

BIGQUERY_SCHEME = "bigquery://"

log = logging.getLogger(__name__)


#: Estimate values (d per record) a store sink holds before it writes them: records are written
#: at the end of a bundle or once this many values wait, so a bundle of many large windows is
#: never held whole (2^18 values: about 40 MB of plain records).
STORE_FLUSH_VALUES = 1 << 18


#: Counters (namespace "ldp") of what a job's store sinks wrote and could not write: panes and
#: reject counts (one per (metric, reason, slice)). `pipelines.store_runs.store_line` reports them.
STORE_COUNTERS = ("store_panes_written", "store_panes_failed", "store_rejects_written",
                  "store_rejects_failed")


class _StoreWriterFn(beam.DoFn):
    """A sink into the store at `url` that never fails the job: when the store fails (a
    StoreError: full, read-only, locked, gone), what it was given is counted as not written
    (`<what>_failed`), the error is logged once, and this worker writes nothing more (every
    later element is counted as failed), so the job's files are still written. Emits nothing.
    The connection opens in `setup` (one per worker) and closes in `teardown`."""

    _what = ""  # "panes" or "rejects": the counters' names

    def __init__(self, url: str, run: int = 0):
        self._url = url
        self._run = run
        self._written = Metrics.counter(COUNTER_NAMESPACE, f"store_{self._what}_written")
        self._failed = Metrics.counter(COUNTER_NAMESPACE, f"store_{self._what}_failed")
        self._store, self._error = None, None

    def setup(self):
        self._store, self._error = None, None
        try:
            self._store = open_store(self._url)
        except StoreError as error:
            self._fail(error)

    def _write(self, count: int, write: Callable[[EstimateStore], object]) -> None:
        """`write(store)` of `count` items, or count them as not written."""
        if count == 0:
            return
        if self._error is None:
            try:
                write(self._store)
                self._written.inc(count)
                return
            except StoreError as error:
                self._fail(error)
        self._failed.inc(count)

    def _fail(self, error: StoreError) -> None:
        self._error = error
        log.error("%s; the store gets nothing more from this run (its files are complete)",
                  error)

    def teardown(self):
        store = getattr(self, "_store", None)
        if store is not None:
            store.close()


class WritePanesToStoreFn(_StoreWriterFn):
    """Window-estimate records -> `open_store(url).write_panes(..., run)`, once per bundle or
    once `STORE_FLUSH_VALUES` estimate values wait, whichever comes first. A store failure is
    counted, never raised (`_StoreWriterFn`)."""

    _what = "panes"

    def start_bundle(self):
        self._pending, self._values = [], 0

    def process(self, record):
        self._pending.append(record)
        self._values += len(record["estimate"])
        if self._values >= STORE_FLUSH_VALUES:
            self.finish_bundle()

    def finish_bundle(self):
        pending = self._pending
        self._write(len(pending), lambda store: store.write_panes(pending, self._run))
        self._pending, self._values = [], 0



class RejectTotals:
    """The reject totals of a live run over a directory, written by its follower (not by Beam):
    `totals({(metric, reason, slice start ms, slice end ms): records})` sets each total in the
    SQL store at `url` (an upsert: writing a total again changes nothing, so a restarted run
    that writes its checkpoint's totals again neither loses nor doubles a reject), as rows of
    the store run `run` (its `run_seq`, set once the run is registered).

    Like the Beam store sinks (`_StoreWriterFn`) it never fails the run: when the store fails,
    the error is logged once, nothing more is written, and `counters()` says how many totals
    were and were not written (`store_rejects_written`, `store_rejects_failed`)."""

    def __init__(self, url: str, run: int = 0):
        self._store = open_store(url)
        self.run = run
        self._written = self._failed = 0
        self._error: StoreError | None = None

    def __call__(self, totals) -> None:
        if self._error is None:
            try:
                self._store.write_rejects(totals, add=False, run=self.run)
                self._written += len(totals)
                return
            except StoreError as error:
                self._error = error
                log.error("%s; the store gets no more reject totals from this run (its files "
                          "are complete)", error)
        self._failed += len(totals)

    def counters(self) -> dict[str, int]:
        return {"store_rejects_written": self._written, "store_rejects_failed": self._failed}

    def close(self) -> None:
        self._store.close()


def follower_writes_rejects(url: str | None) -> bool:
    """True when a followed directory's run keeps the store's reject totals itself: a SQL store
    (BigQuery, append-only, is given the dead letters through Beam)."""
    return url is not None and urlsplit(url).scheme != "bigquery"


#: The running total of one (metric, reason, slice) key of a streaming job's rejects.
REJECT_TOTAL = ReadModifyWriteStateSpec("records", VarIntCoder())
_REJECT_TOTAL_PARAM = beam.DoFn.StateParam(REJECT_TOTAL)


class RunningRejectTotalsFn(beam.DoFn):
    """((metric, reason, slice_start_ms, slice_end_ms), records) -> (key, the key's total so
    far), a stateful step: the runner keeps each total in its state, so a bundle it retries
    re-reads the committed total and emits the same totals again, and the store, which sets
    them (`write_rejects(add=False)`), counts each dead letter once."""

    def process(self, element, total=_REJECT_TOTAL_PARAM):
        key, count = element
        running = (total.read() or 0) + int(count)
        total.write(running)
        yield key, running


class WriteRejectsToStoreFn(_StoreWriterFn):
    """((metric, reason, slice_start_ms, slice_end_ms), records) -> `write_rejects`.

    `add=False` sets each total (the batch job's combined, final counts, or a streaming job's
    running totals, `RunningRejectTotalsFn`: idempotent; the bundle's last total of a key is
    the one set); `add=True` adds increments. A store failure is counted, never raised
    (`_StoreWriterFn`).
    """

    _what = "rejects"

    def __init__(self, url: str, add: bool, run: int = 0):
        super().__init__(url, run)
        self._add = add

    def start_bundle(self):
        self._pending = {}

    def process(self, element):
        key, count = element
        self._pending[key] = self._pending.get(key, 0) + count if self._add else count

    def finish_bundle(self):
        pending = self._pending
        self._write(len(pending), lambda store: store.write_rejects(pending, add=self._add,
                                                                    run=self._run))
        self._pending = {}


class WriteToStore(beam.PTransform):
    """(estimate records, dead-letter records) -> the store at `url`.

    `url` is a SQL store (`sqlite:///…`, `postgresql://…`, see `ldp_telemetry.store.open_store`)
    or `bigquery://PROJECT/DATASET`, where the same rows are appended to the tables `ldp_panes`
    and `ldp_rejects` with `WriteToBigQuery` (BigQuery has no upsert: a query takes each window's
    row with the highest pane_index, docs/store.md). Dead letters are counted per (metric,
    reason, job slice) with `slice_ms`/`slice_offset_ms` (the job's `WindowSpec`). `run` is the
    run's `run_seq` in a SQL store (`EstimateStore.begin_run`; 0: none registered).
    """

    def __init__(self, url: str, slice_ms: int, slice_offset_ms: int = 0, rejects: bool = True,
                 run: int = 0):
        super().__init__()
        self._url = url
        self._run = run
        self._slice_ms = slice_ms
        self._slice_offset_ms = slice_offset_ms
        self._rejects = rejects

    def expand(self, estimates_and_dead_letters):
        estimates, dead_letters = estimates_and_dead_letters
        if not self._rejects:  # someone else keeps the reject totals (`RejectTotals`)
            store_kind(self._url).write(self._url, estimates, None, False, self._run)
            return PDone(estimates.pipeline)
        streaming = estimates.pipeline.options.view_as(StandardOptions).streaming
        slice_ms, offset_ms = self._slice_ms, self._slice_offset_ms
        # A tuple of dead-letter PCollections (a batch run's parts) is counted part by part
        # where each is made, then the counts are added: no part is flattened whole first.
        parts = dead_letters if isinstance(dead_letters, tuple) else (dead_letters,)
        suffixes = [""] + [str(i) for i in range(1, len(parts))]  # the first keeps its labels
        counted = [part
                   | f"RejectSlices{suffix}" >> beam.Map(
                       lambda letter: (reject_slice(letter, slice_ms, offset_ms),
                                       int(letter.get("records", 1))))
                   for part, suffix in zip(parts, suffixes, strict=True)]
        if streaming:
            keyed = counted[0] if len(counted) == 1 else counted | "Rejects" >> beam.Flatten()
        else:  # final totals, set once: idempotent
            counted = [keyed | f"CountRejects{suffix}" >> beam.CombinePerKey(sum)
                       for keyed, suffix in zip(counted, suffixes, strict=True)]
            keyed = (counted[0] if len(counted) == 1 else
                     counted | "Rejects" >> beam.Flatten()
                     | "CountAllRejects" >> beam.CombinePerKey(sum))
        store_kind(self._url).write(self._url, estimates, keyed, streaming, self._run)
        return PDone(estimates.pipeline)


@dataclass(frozen=True)
class StoreKind:
    """How a job writes to one kind of store: `check(url)` before any report is read (StoreError
    naming the problem), `write(url, estimates, rejects, streaming, run)` adds the steps that
    write the estimate records and the ((metric, reason, slice), records) reject counts of the
    run `run` (SQL stores; BigQuery appends rows and keeps no runs)."""

    check: Callable[[str], None]
    write: Callable


def _check_sql(url: str) -> None:
    with open_store(url) as store:  # connects and creates the tables
        store.check_writable()  # damaged, read-only or locked: found now


def _write_sql(url: str, estimates, rejects, streaming: bool, run: int) -> None:
    estimates | "WritePanes" >> beam.ParDo(WritePanesToStoreFn(url, run))
    if rejects is None:
        return
    if streaming:  # running totals kept in the runner's state, set: idempotent
        rejects = rejects | "TotalRejects" >> beam.ParDo(RunningRejectTotalsFn())
    rejects | "WriteRejects" >> beam.ParDo(WriteRejectsToStoreFn(url, add=False, run=run))


def _write_bigquery(url: str, estimates, rejects, streaming: bool, run: int) -> None:
    table_prefix = _bigquery_table_prefix(url)
    estimates | "PaneRows" >> beam.Map(bigquery_pane_row) \
        | "WritePanesToBigQuery" >> beam.io.WriteToBigQuery(
            table_prefix + "ldp_panes", schema=BIGQUERY_PANES_SCHEMA,
            create_disposition=beam.io.BigQueryDisposition.CREATE_IF_NEEDED,
            write_disposition=beam.io.BigQueryDisposition.WRITE_APPEND)
    if rejects is None:
        return
    rejects | "RejectRows" >> beam.Map(bigquery_reject_row) \
        | "WriteRejectsToBigQuery" >> beam.io.WriteToBigQuery(
            table_prefix + "ldp_rejects", schema=BIGQUERY_REJECTS_SCHEMA,
            create_disposition=beam.io.BigQueryDisposition.CREATE_IF_NEEDED,
            write_disposition=beam.io.BigQueryDisposition.WRITE_APPEND)


def _bigquery_table_prefix(url: str) -> str:
    """`bigquery://PROJECT/DATASET` -> 'PROJECT:DATASET.'; StoreError when malformed."""
    parts = url[len(BIGQUERY_SCHEME):].strip("/").split("/")
    if len(parts) != 2 or not all(parts):
        raise StoreError(f"store {url!r}: expected bigquery://PROJECT/DATASET", STORE_FIELD)
    return f"{parts[0]}:{parts[1]}."


BIGQUERY_PANES_SCHEMA = {"fields": [
    {"name": "metric", "type": "STRING", "mode": "REQUIRED"},
    {"name": "version", "type": "STRING", "mode": "REQUIRED"},
    {"name": "window_start", "type": "TIMESTAMP", "mode": "REQUIRED"},
    {"name": "window_end", "type": "TIMESTAMP", "mode": "REQUIRED"},
    {"name": "n", "type": "INT64", "mode": "REQUIRED"},
    {"name": "protocol", "type": "STRING", "mode": "REQUIRED"},
    {"name": "epsilon", "type": "FLOAT64", "mode": "REQUIRED"},
    {"name": "p_star", "type": "FLOAT64", "mode": "NULLABLE"},
    {"name": "q_star", "type": "FLOAT64", "mode": "NULLABLE"},
    {"name": "smallest_resolvable", "type": "FLOAT64", "mode": "NULLABLE"},
    {"name": "estimator", "type": "STRING", "mode": "NULLABLE"},
    {"name": "postprocess", "type": "STRING", "mode": "NULLABLE"},
    {"name": "pane_timing", "type": "STRING", "mode": "REQUIRED"},
    {"name": "pane_index", "type": "INT64", "mode": "REQUIRED"},
    {"name": "pane_is_last", "type": "BOOL", "mode": "REQUIRED"},
    {"name": "record", "type": "STRING", "mode": "REQUIRED"},
    # the configuration's promise to a device (ldp_telemetry.ldp.config.budget; null in older
    # records)
    {"name": "per_day_epsilon", "type": "FLOAT64", "mode": "NULLABLE"},
    {"name": "lifetime_epsilon", "type": "FLOAT64", "mode": "NULLABLE"},
    {"name": "privacy", "type": "STRING", "mode": "NULLABLE"},
    {"name": "values", "type": "RECORD", "mode": "REPEATED", "fields": [
        {"name": "value_index", "type": "INT64", "mode": "REQUIRED"},
        {"name": "label", "type": "STRING", "mode": "REQUIRED"},
        {"name": "estimate", "type": "FLOAT64", "mode": "REQUIRED"},
        {"name": "unbiased_estimate", "type": "FLOAT64", "mode": "NULLABLE"},
        {"name": "std_error", "type": "FLOAT64", "mode": "NULLABLE"},
        {"name": "lower95", "type": "FLOAT64", "mode": "NULLABLE"},
        {"name": "upper95", "type": "FLOAT64", "mode": "NULLABLE"}]},
]}

BIGQUERY_REJECTS_SCHEMA = {"fields": [
    {"name": "metric", "type": "STRING", "mode": "REQUIRED"},
    {"name": "reason", "type": "STRING", "mode": "REQUIRED"},
    {"name": "slice_start_ms", "type": "INT64", "mode": "REQUIRED"},
    {"name": "slice_end_ms", "type": "INT64", "mode": "REQUIRED"},
    {"name": "records", "type": "INT64", "mode": "REQUIRED"},
]}


def bigquery_pane_row(record: dict) -> dict:
    """One BigQuery row of `ldp_panes` per pane: the SQL store's ldp_windows columns, with the
    value rows nested as the repeated field `values`."""
    pane = pane_of(record)
    labels = record.get("labels") or [str(i) for i in range(len(record["estimate"]))]
    errors = record.get("std_error") or [None] * len(record["estimate"])
    unbiased = record.get("unbiased_estimate") or [None] * len(record["estimate"])
    lower, upper = value_bands(record)
    values = [{"value_index": i, "label": str(label), "estimate": value,
               "unbiased_estimate": raw, "std_error": error, "lower95": low, "upper95": high}
              for i, (label, value, raw, error, low, high)
              in enumerate(zip(labels, record["estimate"], unbiased, errors, lower, upper,
                               strict=False))]
    return {"metric": record["metric"], "version": version_label(record),
            "window_start": record["window_start"],
            "window_end": record["window_end"], "n": int(record["n"]),
            "protocol": record["protocol"], "epsilon": float(record["epsilon"]),
            **{name: record.get(name) for name in SUPPORT_COLUMNS},
            "estimator": (record.get("estimator") or {}).get("method"),
            "postprocess": (record.get("postprocess") or {}).get("method"),
            "pane_timing": pane["timing"], "pane_index": pane["index"],
            "pane_is_last": pane["is_last"], "record": json.dumps(record, sort_keys=True),
            "per_day_epsilon": (record.get("privacy") or {}).get("per_day"),
            "lifetime_epsilon": (record.get("privacy") or {}).get("lifetime"),
            "privacy": budget_text(record.get("privacy")),
            "values": values}


def bigquery_reject_row(element) -> dict:
    (metric, reason, start, end), count = element
    return {"metric": metric, "reason": reason, "slice_start_ms": start, "slice_end_ms": end,
            "records": count}


#: Every kind of store a job writes to, by URL scheme: the SQL stores of
#: `ldp_telemetry.store.sql.CONNECTORS`, and BigQuery (appended rows, no upsert).
STORE_KINDS: Catalog[StoreKind] = Catalog("store URL scheme", STORE_FIELD, error=StoreError)
for _scheme in [*CONNECTORS, *CONNECTORS.aliases]:
    STORE_KINDS.register(StoreKind(_check_sql, _write_sql), _scheme)
STORE_KINDS.register(StoreKind(_bigquery_table_prefix, _write_bigquery), "bigquery")


def store_kind(url: str) -> StoreKind:
    """The kind of store `url` names by its scheme; StoreError listing the known schemes."""
    return STORE_KINDS.lookup(urlsplit(url).scheme)


def check_store_url(url: str) -> None:
    """Fail before any report is read when the store cannot be used: a SQL store is opened (its
    tables created) and checked (`EstimateStore.check_writable`: damaged, read-only, locked), a
    BigQuery URL parsed. StoreError (field ``store``) naming the problem."""
    store_kind(url).check(url)
