"""Where the dashboard reads windows from: an estimate store, or a job's output folder.

Both give the same view of a metric: the latest pane of each window (the window-estimate record)
with what a page draws added, computed here once so that the page's script computes nothing:

* `lower95`, `upper95`, `half95`: per value, the 95% band and its half width
  (`ldp_telemetry.output.bands`; a store source sends the bands the store saved);
* `p_star`, `q_star`, `smallest_resolvable`: as the record (or the store's columns) gives them,
  None when it has none;
* `late_reports` (reports counted after the ON_TIME pane, None before one) and `rejects`
  ({reason: records} of dead letters whose event time falls in the window);
* `series`: which series of the metric the window belongs to (`series_of`), the one choice a
  page offers between windows of one metric that must not be drawn together; the chart over a
  series draws its top-k values by value index, or, for a string metric whose heavy hitters
  change from window to window (`store.records.labels_per_window`), its top-k strings by label
  (`top_labels`; a window whose heavy hitters lack a string has no value for it);
* `mean_band` and `quantile_bands` of a numeric metric (the record's own 95% band of the mean
  and of each quantile, [lower, upper] or None where the record has none:
  `ldp_telemetry.output.bands.summary_bands`, as the store saves them) and
  `conservative_quantile_bands` (each quantile's conservative band, not a 95% band, where a
  record gives one — every quantile of CFO-binning and hierarchical histograms, a Square Wave
  quantile whose band over-covered in its setting — else None:
  `ldp_telemetry.output.bands.conservative_band`; the page draws it dashed, labelled
  "conservative"), `conservative_mean_band` (the mean's, likewise: a Square Wave mean whose
  band the bucketing bound widened past its share, `moments.statistic_bands`, or a CFO-binning
  or hierarchical-histogram mean whose band over-covered in its setting,
  `cfo_moments.bin_moment_bands`), and `warning`: why
  the window's reports are too few for its domain at its ε (`output.resolution`), or None;
* `integrity_flag`: the window's integrity flag as text (`output.integrity.flag_text`: the
  flagged statistics and the values they implicate), or None; the record's `integrity` section
  carries the jump test over the metric's earlier windows (`output.integrity.with_jump_tests`).

A `since` cursor: `windows(metric, since)` returns only the windows whose pane or rejects changed
after `since`, so a page that follows a live run never re-reads the whole history.
"""
from __future__ import annotations

import contextlib
import os
import threading
import time

from ldp_telemetry.dashboard.payload import Series, pack
from ldp_telemetry.ldp.base.errors import ConfigError, InputError, StoreError
from ldp_telemetry.ldp.base.times import iso_from_ms
from ldp_telemetry.ldp.base.validation import is_int
from ldp_telemetry.ldp.engine.reasons import UNATTRIBUTED_REASONS, Reason
from ldp_telemetry.output.coverage import MetricInputs, partial_code, read_inputs
from ldp_telemetry.output.estimate import EstimateRecord
from ldp_telemetry.output.bands import conservative_band, summary_bands
from ldp_telemetry.output.integrity import flag_text, with_jump_tests
from ldp_telemetry.output.layout import (DEAD_LETTERS, ESTIMATES, PANE_LOG, WindowKey,
                                         shard_pattern, window_key)
from ldp_telemetry.output.resolution import resolution, series_resolution, warning_text
from ldp_telemetry.output.tail import OutputTail
from ldp_telemetry.output.names import printable
from ldp_telemetry.store.records import dead_letter_origin, labels_per_window, value_rows

#: A page shows at most this many windows of a metric (the latest ones).
MAX_WINDOWS_PER_PAGE = 2000
#: Connections to a store the server's threads share.
POOL_SIZE = 8
#: Seconds a metric's series (top-k values, resolution) are kept while the store changes.
SERIES_REFRESH_S = 30.0
#: Facts of the metric's protocol a record may carry (None when it does not).
SUPPORT_FIELDS = ("p_star", "q_star", "smallest_resolvable")


def series_of(record: dict) -> str:
    """The series a window belongs to: its length (`1 h`, `7 d`, `90 min`), so that a store or
    folder holding an hourly and a daily run of one metric shows them apart, and the
    configuration version its estimate is from (`1 d, v2`, `1 d, combined`;
    `output.layout.version_label`). The one place that decides it."""
    _, start, end, version = window_key(record)
    return series_name(end - start, version)


def series_name(length: int, version: str) -> str:
    """The name of the series of windows `length` ms long from configuration `version`."""
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", 1000)):
        if length >= size and length % size == 0:
            text = f"{length // size} {unit}"
            break
    else:
        text = f"{length} ms"
    return f"{text}, {version}" if version else text


def _view(record: EstimateRecord, late_reports, rejects: dict, seq: int, lower: list,
          upper: list) -> dict:
    """The JSON view of a window a page is sent: the record's JSON (`json_value`) with what
    the page draws added (see the module)."""
    view = record.json_value()
    for name in SUPPORT_FIELDS:
        view.setdefault(name, None)
    view["late_reports"] = late_reports
    view["rejects"] = dict(sorted(rejects.items()))
    view["pane_seq"] = seq
    view["lower95"], view["upper95"] = lower, upper
    view["half95"] = _halves(lower, upper)
    view["series"] = series_name(record.end_ms - record.start_ms, record.version)
    view["version"] = record.version
    # the record's own bands of its summaries (output/bands.py, as the store saves them)
    bands = summary_bands(record)
    view["mean_band"] = _pair(bands.get("mean"))
    view["quantile_bands"] = {level: _pair(bands.get(f"q{level}"))
                              for level in record.quantiles or {}}
    view["conservative_quantile_bands"] = {level: _pair(conservative_band(record, level))
                                           for level in record.quantiles or {}}
    view["conservative_mean_band"] = _pair(conservative_band(record, "mean"))
    found = resolution(record)
    view["warning"] = (warning_text(record, found)
                       if found is not None and found.under_resolved else None)
    view["integrity_flag"] = flag_text(record)
    return view


#: What the store adds to a window's record (`EstimateStore.windows`, `store.reads.window_record`).
STORE_FACTS = ("late_reports", "pane_seq", "lower95", "upper95")


def _stored(window: dict) -> tuple[EstimateRecord, dict]:
    """A stored window as its record and what the store adds to it (`STORE_FACTS`; None where
    a read leaves one out)."""
    added = {name: window.pop(name, None) for name in STORE_FACTS}
    return EstimateRecord.from_json(window), added


def _with_jumps(records: list[EstimateRecord], every: list[EstimateRecord]
                ) -> list[EstimateRecord]:
    """`records` with the jump test of their integrity sections, computed over `every` record of
    the metric (which holds them): the jump test needs the earlier windows too."""
    if not any(r.integrity is not None for r in records):
        return records
    tested = {id(original): new for original, new in zip(every, with_jump_tests(every),
                                                           strict=True)}
    return [tested.get(id(r), r) for r in records]


def _pair(band: tuple | None) -> list | None:
    """[lower, upper] of a summary band; None where there is none."""
    return None if band is None or band[0] is None or band[1] is None else list(band)


def _halves(lower: list, upper: list) -> list:
    """The half width of each value's band; None where it has none."""
    return [None if low is None or high is None else (high - low) / 2
            for low, high in zip(lower or (), upper or (), strict=False)]


def _bands(record: EstimateRecord) -> tuple[list, list]:
    """The 95% band of each value of a record: (lower bounds, upper bounds), as the store saves
    them (`store.records.value_rows`, with `output.bands`)."""
    rows = list(value_rows(record))
    return [row.lower95 for row in rows], [row.upper95 for row in rows]


class _Pool:
    """Connections to one store, each used by one thread at a time: at most `size` open; a
    thread that finds none free waits for one. SQLite and psycopg connections are not safe to
    share between threads at once; a pool lets the server's threads read in parallel."""

    def __init__(self, url: str, first, size: int):
        self._url = url
        self._free = [first]
        self._open = 1
        self._size = size
        self._closed = False
        self._ready = threading.Condition()

    @contextlib.contextmanager
    def store(self):
        with self._ready:
            while not self._free and self._open >= self._size and not self._closed:
                self._ready.wait()
            if self._closed:
                raise StoreError("the dashboard's store connections are closed", "store")
            store = self._free.pop() if self._free else None
            if store is None:
                self._open += 1
        if store is None:
            try:
                store = _connect(self._url)
            except BaseException:
                with self._ready:
                    self._open -= 1
                    self._ready.notify()
                raise
        try:
            yield store
        finally:
            with self._ready:
                if self._closed:
                    store.close()
                else:
                    self._free.append(store)
                self._ready.notify()

    def close(self) -> None:
        """Close the idle connections now and the others as their threads give them back (closing
        an SQLite connection while another thread runs a query on it crashes the interpreter)."""
        with self._ready:
            self._closed = True
            for store in self._free:
                store.close()
            self._free = []
            self._ready.notify_all()


def _connect(url: str):
    """Another connection to a store already opened (and checked) once."""
    from urllib.parse import urlsplit

    from ldp_telemetry.store.sql import CONNECTORS
    return CONNECTORS.lookup(urlsplit(url).scheme)(url)


class StoreSource:
    """Windows from an estimate store (`ldp_telemetry.store.open_store(url)`), read through a
    pool of `POOL_SIZE` connections with the reads of `store.reads`, each answered from an index.
    The series of a metric (their top-k values and resolution, from sums over every value of
    every window) are computed once and again only when the store has changed and
    `SERIES_REFRESH_S` have passed."""

    def __init__(self, url: str, pool_size: int = POOL_SIZE):
        from ldp_telemetry.store import open_store
        from ldp_telemetry.store.reads import missing_read_indexes
        from ldp_telemetry.store.views import missing_views
        self.description = url
        first = open_store(url, create=False)  # a misspelt URL is an error
        self.notes: list[str] = []  # what the command prints at start
        missing = missing_read_indexes(first) + missing_views(first)
        if missing:
            self.notes.append(_make_indexes(first, missing))
        self._pool = _Pool(url, first, pool_size)
        self._cache_lock = threading.Lock()
        self._series: dict[tuple[str, int], tuple[float, int, list]] = {}
        self._flags: dict[str, tuple[int, float, dict]] = {}

    def metrics(self) -> list[str]:
        with self._pool.store() as store:
            return store.metrics()

    def summaries(self) -> list[dict]:
        """One row per metric for the index (`store.reads.metric_summaries`)."""
        from ldp_telemetry.store.reads import metric_summaries
        with self._pool.store() as store:
            return metric_summaries(store)

    def payload(self, metric: str, top_k: int, since: int = 0, start_ms: int = -(2**62),
                end_ms: int = 2**62, limit: int = MAX_WINDOWS_PER_PAGE,
                oldest: bool = False) -> dict:
        """The latest (`oldest`: the earliest) `limit` windows of `metric` starting in
        [start_ms, end_ms) whose pane changed after `since`, as `payload.pack` rows (what the
        charts over windows draw), with the metric's `span` (`store.reads.metric_span`)."""
        from ldp_telemetry.store import reads
        with self._pool.store() as store:
            cursor = store.latest_seq()
            series = self._series_of(store, metric, top_k, cursor)
            rows = reads.window_rows(store, metric, since, start_ms, end_ms, limit, oldest)
            span = reads.metric_span(store, metric)
            if rows:
                low = rows[0]["window_start_ms"]
                high = rows[-1]["window_start_ms"] + 1
                rejects = reads.window_rejects(store, metric, low, high)
                tops = {}  # by series: {window bounds: {value index or label: values}}
                for s in series:
                    if s.by_label and s.labels:
                        tops[(s.version, s.length_ms)] = reads.label_values(
                            store, metric, s.version, s.length_ms, s.labels, low, high)
                    elif s.indices:
                        tops[(s.version, s.length_ms)] = reads.top_values(
                            store, metric, s.version, s.indices, low, high)
            flags = self._integrity_flags(store, metric, cursor, rows)
            facts = reads.run_inputs(store, metric) if rows else {}
        for row in rows:
            bounds = (row["window_start_ms"], row["window_end_ms"])
            row["partial"] = partial_code(*bounds, row["n"], row["pane_timing"],
                                          facts.get(row["run_seq"]))
            row["rejects"] = rejects.get(bounds)
            row["top"] = tops.get((row["version"], bounds[1] - bounds[0]), {}).get(bounds)
            row["integrity_flag"] = flags.get((*bounds, row["version"]))
        return {**pack(rows, series, cursor), "span": span}

    def windows(self, metric: str, since: int = 0) -> tuple[int, list[dict]]:
        """(cursor, the latest pane of each window of `metric` changed after `since`), whole:
        every record is read (`ldp show`-like uses; the pages use `payload` and `window`)."""
        with self._pool.store() as store:
            cursor = store.latest_seq()
            stored = [_stored(w) for w in store.windows(metric, since)[-MAX_WINDOWS_PER_PAGE:]]
            records = [record for record, _ in stored]
            facts = {record.key: added for record, added in stored}
            rejects = store.rejects(metric, [r.key[1:3] for r in records])
            if since and any(r.integrity is not None for r in records):
                every = [_stored(w)[0] for w in store.windows(metric, 0)]
                records = [r for r in _with_jumps(every, every) if r.key in facts]
            else:
                records = _with_jumps(records, records)
        views = []
        for record in records:
            added = facts[record.key]
            views.append(_view(record, added["late_reports"], rejects.get(record.key[1:3], {}),
                               added["pane_seq"], added["lower95"], added["upper95"]))
        return cursor, views

    def window(self, metric: str, start_ms: int, end_ms: int, version: str = "") -> dict | None:
        """The latest pane of one window of `metric` from configuration `version`
        (`output.layout.version_label`), read by its key, or None. An integrity section gets
        its jump test from the `history` windows before it."""
        from ldp_telemetry.store import reads
        with self._pool.store() as store:
            found = reads.window_record(store, metric, version, start_ms, end_ms)
            if found is None:
                return None
            record, added = _stored(found)
            rejects = reads.window_rejects(store, metric, start_ms, start_ms + 1)
            section = record.integrity
            if section is not None:
                earlier = [row for row in reads.window_rows(
                    store, metric, 0, end_ms=start_ms, limit=4 * int(section["history"]) + 4)
                    if row["version"] == version
                    and row["window_end_ms"] - row["window_start_ms"] == end_ms - start_ms]
                history = [_stored(reads.window_record(store, metric, version,
                                                       row["window_start_ms"],
                                                       row["window_end_ms"]))[0]
                           for row in earlier]
                record = _with_jumps([record], [*history, record])[0]
        return _view(record, added["late_reports"], rejects.get((start_ms, end_ms), {}),
                     added["pane_seq"], added["lower95"], added["upper95"])

    def export_windows(self, metric: str, top_k: int, keep_all: int) -> list[dict]:
        """The window views of `metric` a page shows (its latest `MAX_WINDOWS_PER_PAGE`) for an
        export's data files: whole for a series of at most `keep_all` values; otherwise read
        from the columns, with the values of the series' top-k only (`values_total` says how
        many there are), so that an export costs windows × top-k, not windows × domain."""
        from ldp_telemetry.store import reads
        with self._pool.store() as store:
            cursor = store.latest_seq()
            series = self._series_of(store, metric, top_k, cursor)
            large = {(s.version, s.length_ms): s for s in series  # a string metric's windows
                     if s.values > keep_all and not s.by_label}  # hold its heavy hitters only
            rows = reads.window_rows(store, metric, 0, limit=MAX_WINDOWS_PER_PAGE)
            if not rows:
                return []
            low, high = rows[0]["window_start_ms"], rows[-1]["window_start_ms"] + 1
            values = {key: reads.value_rows(store, metric, s.version, s.indices, low, high)
                      for key, s in large.items()}  # by series: a version's lengths differ
            rejects = reads.window_rejects(store, metric, low, high)
            flags = self._integrity_flags(store, metric, cursor, rows)
            whole = {}  # the small domains' windows, read one by one by their keys
            for row in rows:
                bounds = (row["window_start_ms"], row["window_end_ms"])
                if (row["version"], bounds[1] - bounds[0]) not in large:
                    whole[(*bounds, row["version"])] = reads.window_record(
                        store, metric, row["version"], *bounds)
        views = []
        for row in rows:
            bounds = (row["window_start_ms"], row["window_end_ms"])
            chosen = large.get((row["version"], bounds[1] - bounds[0]))
            if chosen is None:
                found = whole.get((*bounds, row["version"]))
                if found is not None:
                    record, added = _stored(found)
                    view = _view(record, added["late_reports"], rejects.get(bounds, {}),
                                 added["pane_seq"], added["lower95"], added["upper95"])
                    if (*bounds, row["version"]) in flags:  # with the jump test
                        view["integrity_flag"] = flags[(*bounds, row["version"])]
                    views.append(view)
                continue
            views.append(_lean_view(metric, row, chosen,
                                    values[(row["version"], bounds[1] - bounds[0])].get(bounds, {}),
                                    rejects.get(bounds, {}),
                                    flags.get((*bounds, row["version"]))))
        return views

    def header(self, metric: str, start_ms: int, end_ms: int, version: str) -> dict | None:
        """The record of one window without its bands (a page's header: protocol, ε, domain,
        p*, q*, estimator, post-processing, privacy), read by its key."""
        from ldp_telemetry.store import reads
        with self._pool.store() as store:
            return reads.window_record(store, metric, version, start_ms, end_ms, bands=False)

    def unattributed_rejects(self) -> dict[tuple[str, str], int]:
        with self._pool.store() as store:
            return store.unattributed_rejects()

    def close(self) -> None:
        self._pool.close()

    # -- internals ----------------------------------------------------------------------------
    def _series_of(self, store, metric: str, top_k: int, cursor: int) -> list[Series]:
        """The series of `metric` with their top-k values and resolution, cached."""
        now = time.monotonic()
        with self._cache_lock:
            cached = self._series.get((metric, top_k))
        if cached is not None and (cached[1] == cursor or now - cached[0] < SERIES_REFRESH_S):
            return cached[2]
        from ldp_telemetry.store import reads
        rows = reads.window_rows(store, metric, 0, limit=2**62)
        found: dict[tuple[str, int], Series] = {}
        members: dict[tuple[str, int], list[dict]] = {}
        for row in rows:
            length = row["window_end_ms"] - row["window_start_ms"]
            members.setdefault((row["version"], length), []).append(row)
        for (version, length), windows in members.items():
            latest = windows[-1]
            one = Series(series_name(length, version), version, length, windows=len(windows))
            if latest.get("mean") is None and labels_per_window(latest["protocol"]):
                found_labels, one.labels_cut = reads.label_totals(store, metric, version, length)
                one.by_label, one.values = True, len(found_labels)
                one.labels = top_labels(found_labels, top_k)
            elif latest.get("mean") is None:
                totals, count = reads.value_totals(store, metric, version, length)
                one.values = len(totals)
                if totals:
                    one.indices = sorted(range(len(totals)),
                                         key=lambda i: (-totals[i], i))[:top_k]
                    labels = reads.labels_of(store, metric, version, latest["window_start_ms"],
                                             latest["window_end_ms"], one.indices)
                    one.labels = [labels.get(i, str(i)) for i in one.indices]
                    one.resolution = series_resolution(
                        [t / count for t in totals],
                        [(w["n"], w["smallest_resolvable"]) for w in windows],
                        float(latest["epsilon"]), length)
            found[(version, length)] = one
        series = sorted(found.values(), key=lambda s: (-s.windows, s.name))
        with self._cache_lock:
            self._series[(metric, top_k)] = (now, cursor, series)
        return series

    def _integrity_flags(self, store, metric: str, cursor: int, rows: list[dict]
                         ) -> dict[tuple[int, int, str], str]:
        """{(start ms, end ms, version): flag text} of the flagged windows of `metric`, only for
        a metric whose latest record has an integrity section. The jump test needs every
        record: it is computed for all windows at most once per `SERIES_REFRESH_S` while the
        store changes; between, a window changed since then shows its own section's flag
        (without the jump test), read by its key."""
        if not rows:
            return {}
        from ldp_telemetry.store import reads
        latest = rows[-1]
        record = reads.window_record(store, metric, latest["version"], latest["window_start_ms"],
                                     latest["window_end_ms"], bands=False)
        if record is None or record.get("integrity") is None:
            return {}
        now = time.monotonic()
        with self._cache_lock:
            cached = self._flags.get(metric)
        if cached is not None and cached[0] == cursor:
            return cached[2]
        if cached is not None and now - cached[1] < SERIES_REFRESH_S:
            flags = dict(cached[2])
            for row in rows:
                if row["pane_seq"] > cached[0]:  # changed since the jump tests were made
                    key = (row["window_start_ms"], row["window_end_ms"], row["version"])
                    changed = reads.window_record(store, metric, row["version"], *key[:2],
                                                  bands=False)
                    text = None if changed is None else flag_text(_stored(changed)[0])
                    if text is None:
                        flags.pop(key, None)
                    else:
                        flags[key] = text
            return flags
        flags = {}
        for tested in with_jump_tests(_stored(w)[0] for w in store.windows(metric)):
            text = flag_text(tested)
            if text is not None:
                flags[(tested.start_ms, tested.end_ms, tested.version)] = text
        with self._cache_lock:
            self._flags[metric] = (cursor, now, flags)
        return flags


def _lean_view(metric: str, row: dict, series: Series, values: dict[int, tuple],
               rejects: dict, integrity_flag: str | None) -> dict:
    """A window's view from its columns and the values of its series' top-k: what an exported
    page shows of a window of a large domain."""
    start, end = row["window_start_ms"], row["window_end_ms"]
    kept = [i for i in series.indices if i in values]
    columns = list(zip(*(values[i] for i in kept), strict=True)) or [()] * 6
    labels, estimate, unbiased, errors, lower, upper = (list(column) for column in columns)
    return {"metric": metric, "window_start": iso_from_ms(start), "window_end": iso_from_ms(end),
            "version": row["version"], "series": series.name, "n": row["n"],
            "late_reports": row["late_reports"],
            "pane": {"timing": row["pane_timing"], "index": row["pane_index"],
                     "is_last": row["pane_is_last"]}, "pane_seq": row["pane_seq"],
            "rejects": dict(sorted(rejects.items())), "protocol": row["protocol"],
            "epsilon": row["epsilon"], "p_star": row["p_star"], "q_star": row["q_star"],
            "smallest_resolvable": row["smallest_resolvable"],
            "estimator": {"method": row["estimator"]},
            "postprocess": {"method": row["postprocess"]}, "labels": labels,
            "estimate": estimate, "unbiased_estimate": unbiased, "std_error": errors,
            "lower95": lower, "upper95": upper,
            "half95": _halves(lower, upper), "value_indices": kept,
            "values_total": series.values, "integrity_flag": integrity_flag}


def _make_indexes(store, missing: list[str]) -> str:
    """Create the read indexes a store made before them lacks; a note on what happened."""
    import sqlite3
    errors: tuple = (sqlite3.Error,)
    if store.dialect == "postgresql":
        import psycopg
        errors = (psycopg.Error,)
    try:
        store.create_read_indexes()
    except errors as error:
        return (f"note: the store lacks the read indexes and views {', '.join(missing)} and "
                f"they could not be made ({error}); pages of large metrics will be slow")
    return f"note: made the store's read indexes and views {', '.join(missing)}"


class FolderSource:
    """Windows from a job's output folder, followed while a job writes it (what it reads:
    `ldp_telemetry.output.tail`). A live run's too-late counts per window are shown as the
    reject reason `too_late`. The cursor counts the changes seen.
    """

    def __init__(self, output_dir: str):
        if not os.path.isdir(output_dir):
            raise InputError(f"output folder {output_dir!r} does not exist", "output")
        self.description = output_dir
        self._tail = OutputTail(output_dir)
        self._lock = threading.Lock()
        self._seq = 0
        self._latest: dict[WindowKey, EstimateRecord] = {}  # window -> latest record
        self._changed: dict[WindowKey, int] = {}  # window -> seq of its last change
        self._n_on_time: dict[WindowKey, int] = {}
        self._too_late: dict[WindowKey, int] = {}
        # metric -> {(reason, event time ms or None): records}
        self._dead: dict[str, dict[tuple[str, int | None], int]] = {}
        self._windows_of: dict[str, set[WindowKey]] = {}  # metric -> its windows
        self.refresh()
        if not self._tail.found:
            raise InputError(f"no {shard_pattern(ESTIMATES)}, {shard_pattern(DEAD_LETTERS)} or "
                             f"{PANE_LOG} in {output_dir!r}", "output")

    def refresh(self) -> None:
        """Read what was appended to the output files since the last refresh."""
        with self._lock:
            appended = self._tail.read()
            for record in appended.estimates:
                self._add_estimate(record)
            for letter in appended.dead_letters:
                self._add_dead_letter(letter)
            for key, count in appended.too_late:
                self._add_too_late(key, count)

    def metrics(self) -> list[str]:
        self.refresh()
        with self._lock:
            return sorted({key.metric for key in self._latest})

    def windows(self, metric: str, since: int = 0, limit: int | None = MAX_WINDOWS_PER_PAGE
                ) -> tuple[int, list[dict]]:
        """(cursor, the views of the latest `limit` windows of `metric` (None: every window)
        changed after `since`)."""
        self.refresh()
        with self._lock:
            keys = sorted((key for key in self._latest
                           if key.metric == metric and self._changed[key] > since),
                          key=lambda key: key[1:])
            keys = keys if limit is None else keys[-limit:]
            every = [record for key, record in self._latest.items() if key.metric == metric]
            tested = {r.key: r for r in _with_jumps(every, every)}
            views = []
            for key in keys:
                n_on_time = self._n_on_time.get(key)
                record = tested[key]
                late = None if n_on_time is None else record.n - n_on_time
                views.append(_view(record, late, self._rejects_in(key), self._changed[key],
                                   *_bands(record)))
            return self._seq, views

    def window(self, metric: str, start_ms: int, end_ms: int, version: str = "") -> dict | None:
        """The latest pane of one window of `metric` from configuration `version`
        (`output.layout.version_label`), or None."""
        _, views = self.windows(metric)
        return next((v for v in views if window_key(v)[1:] == (start_ms, end_ms, version)),
                    None)

    def summaries(self) -> list[dict]:
        """One row per metric for the index, as `store.reads.metric_summaries`."""
        summaries = []
        for metric in self.metrics():
            _, views = self.windows(metric)
            if views:
                summaries.append(summary_of(metric, views))
        return summaries

    def payload(self, metric: str, top_k: int, since: int = 0, start_ms: int = -(2**62),
                end_ms: int = 2**62, limit: int = MAX_WINDOWS_PER_PAGE,
                oldest: bool = False) -> dict:
        """As `StoreSource.payload`, from the records read so far."""
        cursor, every = self.windows(metric, limit=None)
        series = series_of_views(every, top_k)
        chosen = [v for v in every if v["pane_seq"] > since
                  and start_ms <= window_key(v).start_ms < end_ms]
        chosen = chosen[:limit] if oldest else chosen[-limit:]
        inputs = read_inputs(self.description)
        facts = None
        if inputs is not None:
            first, last = inputs.ranges.get(metric, (None, None))
            facts = MetricInputs(first, last, inputs.watermark_ms)
        rows = []
        for view in chosen:
            row = row_of_view(view, series)
            row["partial"] = partial_code(row["window_start_ms"], row["window_end_ms"],
                                          row["n"], row["pane_timing"], facts)
            rows.append(row)
        starts = [window_key(v).start_ms for v in every]
        span = {"windows": len(starts), "first_start_ms": min(starts, default=None),
                "last_start_ms": max(starts, default=None)}
        return {**pack(rows, series, cursor), "span": span}

    def export_windows(self, metric: str, top_k: int, keep_all: int) -> list[dict]:
        """Every window view of `metric` a page shows, whole (an output folder's records are
        read whole anyway; the export cuts them)."""
        return self.windows(metric)[1]

    def header(self, metric: str, start_ms: int, end_ms: int, version: str) -> dict | None:
        """As `StoreSource.header`."""
        return self.window(metric, start_ms, end_ms, version)

    def unattributed_rejects(self) -> dict[tuple[str, str], int]:
        self.refresh()
        with self._lock:
            totals: dict[tuple[str, str], int] = {}
            for metric, letters in self._dead.items():
                windows = self._windows_of.get(metric, ())
                for (reason, moment), count in letters.items():
                    inside = moment is not None and any(
                        key.start_ms <= moment < key.end_ms for key in windows)
                    if not inside:
                        totals[(metric, reason)] = totals.get((metric, reason), 0) + count
            return totals

    def close(self) -> None:
        pass

    # -- internals ----------------------------------------------------------------------------
    def _add_too_late(self, key: WindowKey, count: int) -> None:
        """Too-late counts are per window, whatever the version of its estimates."""
        self._too_late[key.window] = count  # cumulative: the last line is the count
        self._seq += 1
        for estimate in self._windows_of.get(key.metric, ()):
            if estimate.window == key.window:
                self._changed[estimate] = self._seq

    def _add_estimate(self, record: EstimateRecord) -> None:
        key = record.key
        if record.pane.timing == "ON_TIME":
            self._n_on_time.setdefault(key, record.n)
        current = self._latest.get(key)
        self._windows_of.setdefault(key.metric, set()).add(key)
        if current is None or current.pane.index < record.pane.index:
            self._latest[key] = record
        self._seq += 1
        self._changed[key] = self._seq

    def _add_dead_letter(self, letter: dict) -> None:
        records = letter.get("records", 1)
        if not is_int(records):
            return  # not a dead letter: the page shows what it can read
        metric, moment = dead_letter_origin(letter)
        reason = str(letter.get("reason", ""))
        if reason in UNATTRIBUTED_REASONS:
            moment = None
        letters = self._dead.setdefault(metric, {})
        letters[(reason, moment)] = letters.get((reason, moment), 0) + records
        self._seq += 1
        if moment is not None:
            for key in self._windows_of.get(metric, ()):
                if key.start_ms <= moment < key.end_ms:
                    self._changed[key] = self._seq

    def _rejects_in(self, key: WindowKey) -> dict[str, int]:
        rejects: dict[str, int] = {}
        for (reason, moment), count in self._dead.get(key.metric, {}).items():
            if moment is not None and key.start_ms <= moment < key.end_ms:
                rejects[reason] = rejects.get(reason, 0) + count
        if self._too_late.get(key.window):
            rejects[Reason.TOO_LATE.value] = (rejects.get(Reason.TOO_LATE.value, 0)
                                              + self._too_late[key.window])
        return rejects


def summary_of(metric: str, views: list[dict]) -> dict:
    """The index row of a metric from its window views (sorted by start), as
    `store.reads.metric_summaries` gives it."""
    latest = views[-1]
    _, start, end, version = window_key(latest)
    return {"metric": metric, "windows": len(views),
            "first_start_ms": min(window_key(v).start_ms for v in views),
            "last_end_ms": max(window_key(v).end_ms for v in views),
            "reports": sum(int(v["n"]) for v in views), "latest_start_ms": start,
            "latest_end_ms": end, "latest_version": version, "latest_n": int(latest["n"]),
            "latest_timing": (latest.get("pane") or {}).get("timing", "ON_TIME"),
            "protocol": latest.get("protocol", "—"), "epsilon": float(latest.get("epsilon", 0)),
            "rejects": sum(sum(v["rejects"].values()) for v in views)}


def top_labels(totals: dict[str, float], top_k: int) -> list[str]:
    """The `top_k` labels of a series keyed by label: the largest sums of their estimates over
    the series' windows (a window lacking a label counts 0: the largest mean estimate); ties by
    the label as a page shows it (`output.text.printable`). The one rule of both sources,
    whose views and series hold the raw labels (escaped once, when sent: `shown_view`)."""
    return sorted(totals, key=lambda label: (-totals[label], printable(label)))[:top_k]


def label_totals_of_views(views: list[dict]) -> tuple[dict[str, float], bool]:
    """As `store.reads.label_totals`, from a series' window views (oldest first): {label: the
    sum of its estimates}, at most `store.reads.MAX_SERIES_LABELS` labels, those seen most
    recently (by the latest window holding each; ties: the best rank a label had in any
    window, then the label: the store's order), and whether one was left out."""
    from ldp_telemetry.store import reads
    totals: dict[str, float] = {}
    seen: dict[str, tuple[int, int]] = {}  # label: (-its latest window's start, best rank)
    for view in views:
        start = -window_key(view).start_ms
        for rank, (label, value) in enumerate(zip(view.get("labels") or (),
                                                  view.get("estimate") or (), strict=False)):
            label = str(label)
            totals[label] = totals.get(label, 0.0) + float(value or 0.0)
            latest, best = seen.get(label, (start, rank))
            seen[label] = (min(latest, start), min(best, rank))
    kept = sorted(seen, key=lambda label: (*seen[label], label))[:reads.MAX_SERIES_LABELS]
    return {label: totals[label] for label in kept}, len(seen) > len(kept)


def series_of_views(views: list[dict], top_k: int) -> list[Series]:
    """The series of a metric's window views, with their top-k values (largest mean estimate
    over the series' windows; ties: the lower index; by label for a string metric,
    `top_labels`) and resolution; most windows first."""
    members: dict[tuple[str, int], list[dict]] = {}
    for view in views:
        _, start, end, version = window_key(view)
        members.setdefault((version, end - start), []).append(view)
    found = []
    for (version, length), windows in members.items():
        latest = windows[-1]
        one = Series(series_name(length, version), version, length, windows=len(windows))
        if latest.get("bucket_edges") is None and labels_per_window(latest.get("protocol")):
            ranked, one.labels_cut = label_totals_of_views(windows)
            one.by_label, one.values = True, len(ranked)
            one.labels = top_labels(ranked, top_k)
        elif latest.get("bucket_edges") is None and latest.get("estimate"):
            size = len(latest["estimate"])
            one.values = size
            totals = [0.0] * size
            for view in windows:
                if len(view.get("estimate") or ()) == size:
                    for i, value in enumerate(view["estimate"]):
                        totals[i] += value or 0.0
            one.indices = sorted(range(size), key=lambda i: (-totals[i], i))[:top_k]
            labels = latest.get("labels") or [str(i) for i in range(size)]
            one.labels = [str(labels[i]) for i in one.indices]
            one.resolution = series_resolution(
                [t / len(windows) for t in totals],
                [(int(v["n"]), v.get("smallest_resolvable")) for v in windows],
                float(latest["epsilon"]), length)
        found.append(one)
    return sorted(found, key=lambda s: (-s.windows, s.name))


def row_of_view(view: dict, series: list[Series]) -> dict:
    """A window view as the row `payload.pack` takes."""
    _, start, end, version = window_key(view)
    pane = view.get("pane") or {}
    top = None
    chosen = next((s for s in series if (s.version, s.length_ms) == (version, end - start)),
                  None)
    estimate = view.get("estimate")
    lower, upper = view.get("lower95") or [], view.get("upper95") or []

    def values(i: int) -> tuple:
        return (estimate[i], lower[i] if i < len(lower) else None,
                upper[i] if i < len(upper) else None)
    if chosen is not None and chosen.by_label:  # the series' strings this window holds
        wanted = set(chosen.labels)
        top = {}
        for i, label in enumerate((view.get("labels") or [])[:len(estimate or ())]):
            if label in wanted:
                top.setdefault(label, values(i))
    elif chosen is not None and estimate and chosen.indices \
            and len(estimate) > max(chosen.indices):
        top = {i: values(i) for i in chosen.indices}
    return {"window_start_ms": start, "window_end_ms": end, "version": version,
            "n": int(view["n"]), "late_reports": view.get("late_reports"),
            "pane_timing": pane.get("timing", "ON_TIME"), "pane_index": pane.get("index", 0),
            "pane_is_last": bool(pane.get("is_last")), "pane_seq": view["pane_seq"],
            "smallest_resolvable": view.get("smallest_resolvable"),
            "rejects": view.get("rejects") or None, "top": top, "mean": view.get("mean"),
            "mean_std_error": view.get("mean_std_error"), "mean_band": view.get("mean_band"),
            "integrity_flag": view.get("integrity_flag")}


def open_source(store: str | None = None, output: str | None = None):
    """A StoreSource for a store URL or a FolderSource for an output folder (exactly one)."""
    if (store is None) == (output is None):
        raise ConfigError("give exactly one of a store URL or an output folder", "store")
    return StoreSource(store) if store is not None else FolderSource(output)
