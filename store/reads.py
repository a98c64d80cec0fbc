"""The store's reads for dashboards, each answered from an index (docs/store.md#reads-and-indexes).

    metric_summaries(store)                      one row per metric: windows, first and last
                                                 window, the latest window's n, pane, protocol
    window_rows(store, metric, since, start_ms, end_ms, limit, oldest)
                                                 the windows of a metric in a time range, newest
                                                 (or oldest) `limit`, as the ldp_windows columns
                                                 (no record)
    metric_span(store, metric)                   how many windows a metric has, first and last
    top_values(store, metric, version, indices, start_ms, end_ms)
                                                 values `indices` of each window in the range
    value_totals(store, metric, version, length_ms)
                                                 per value: the sum of its estimates over windows
    label_totals(store, metric, version, length_ms)
                                                 per label of a string metric (values keyed by
                                                 label, `records.labels_per_window`): the sum of
                                                 its estimates over windows
    label_values(store, metric, version, length_ms, labels, start_ms, end_ms)
                                                 labels `labels` of each window in the range
    window_record(store, metric, version, start_ms, end_ms)
                                                 one window's latest record, read by its key
    window_rejects(store, metric, start_ms, end_ms)
                                                 dead letters per window in a time range
    run_inputs(store, metric)                    per run: the metric's event-time range and
                                                 the run's last watermark (output.coverage)

None of them reads a stored record except `window_record`: a list of windows costs what its
columns cost, whatever the size of the domain. `READ_INDEXES` are the indexes these reads use;
`create_read_indexes` makes them (a new store gets them with its tables), and
tests/store/test_store_reads.py reads the query plans of both databases to see them used.
"""
from __future__ import annotations

import json

from ldp_telemetry.output.coverage import MetricInputs
from ldp_telemetry.store.records import UNATTRIBUTED_MS

#: The indexes of the dashboards' reads (name, table, key columns, covered columns). SQLite
#: has no INCLUDE: its covered columns are appended to the key.
READ_INDEXES = (
    ("ldp_windows_by_start", "ldp_windows",
     ("metric", "window_start_ms", "window_end_ms", "version"),
     ("pane_seq", "n", "pane_timing")),
    # value_index before version, and the bands not covered: a read of one window by its key
    # then matches more columns of the table's key than of this index and is not tempted by a
    # covering scan, whatever the planner's statistics (SQLite has none until ANALYZE);
    # top_values finds its rows here and reads their saved bands from the table
    ("ldp_window_values_by_value", "ldp_window_values",
     ("metric", "value_index", "version", "window_start_ms"),
     ("window_end_ms", "estimate", "std_error")),
    ("ldp_window_summary_bands_by_statistic", "ldp_window_summaries",
     ("metric", "statistic", "window_start_ms"), ("window_end_ms", "version", "value",
                                                  "std_error", "lower95", "upper95")),
)

#: Largest number of values a top-k request may name.
MAX_TOP_VALUES = 100
#: Most distinct labels the top-k of a string metric's series is chosen from: those seen most
#: recently (by the latest window holding each). A series with more says so (`label_totals`).
MAX_SERIES_LABELS = 10_000

_WINDOW_COLUMNS = ("window_start_ms", "window_end_ms", "version", "n", "late_reports",
                   "pane_timing", "pane_index", "pane_is_last", "pane_seq", "protocol",
                   "epsilon", "p_star", "q_star", "smallest_resolvable", "estimator",
                   "postprocess", "run_seq")

_METRIC_TOTALS = """
SELECT metric, COUNT(*), MIN(window_start_ms), MAX(window_end_ms), SUM(n)
FROM ldp_windows GROUP BY metric ORDER BY metric
"""

_LATEST_WINDOW = """
SELECT window_start_ms, window_end_ms, version, n, pane_timing, protocol, epsilon
FROM ldp_windows WHERE metric = ?
ORDER BY window_start_ms DESC, window_end_ms DESC, version DESC LIMIT 1
"""

_REJECT_TOTALS = """
SELECT metric, SUM(records) FROM ldp_rejects WHERE slice_start_ms > ? GROUP BY metric
"""

_WINDOW_ROWS = f"""
SELECT {", ".join(_WINDOW_COLUMNS)} FROM ldp_windows
WHERE metric = ? AND window_start_ms >= ? AND window_start_ms < ? AND pane_seq > ?
ORDER BY window_start_ms DESC, window_end_ms DESC, version DESC LIMIT ?
"""

#: As _WINDOW_ROWS, the oldest `limit` windows of the range (a page reading forward in time).
_OLDEST_WINDOW_ROWS = _WINDOW_ROWS.replace("DESC", "ASC")

#: A metric's windows: how many, the first and the last start (the index's first and last keys).
_METRIC_SPAN = """
SELECT COUNT(*), MIN(window_start_ms), MAX(window_start_ms) FROM ldp_windows WHERE metric = ?
"""

_TOP_VALUES = """
SELECT window_start_ms, window_end_ms, value_index, estimate, lower95, upper95
FROM ldp_window_values
WHERE metric = ? AND version = ? AND value_index IN ({marks})
  AND window_start_ms >= ? AND window_start_ms < ?
"""

_VALUE_ROWS = """
SELECT window_start_ms, window_end_ms, value_index, label, estimate, unbiased_estimate,
  std_error, lower95, upper95
FROM ldp_window_values
WHERE metric = ? AND version = ? AND value_index IN ({marks})
  AND window_start_ms >= ? AND window_start_ms < ?
"""

_VALUE_TOTALS = """
SELECT value_index, SUM(estimate), COUNT(*) FROM ldp_window_values
WHERE metric = ? AND version = ? AND window_end_ms - window_start_ms = ?
GROUP BY value_index ORDER BY value_index
"""

#: Per label of a series: its sum and its latest window; the labels seen most recently first
#: (ties: the best rank a label had, then the label by code point, whatever the database's
#: collation: `{binary}` is `_BINARY` of the dialect), at most a limit of them.
_LABEL_TOTALS = """
SELECT label, SUM(estimate), MAX(window_start_ms), MIN(value_index) FROM ldp_window_values
WHERE metric = ? AND version = ? AND window_end_ms - window_start_ms = ?
GROUP BY label ORDER BY MAX(window_start_ms) DESC, MIN(value_index), label{binary} LIMIT ?
"""
#: The collation ordering UTF-8 text by code point, as Python orders str (SQLite's default).
_BINARY = {"sqlite": "", "postgresql": ' COLLATE "C"'}

_LABEL_VALUES = """
SELECT window_start_ms, window_end_ms, label, estimate, lower95, upper95
FROM ldp_window_values
WHERE metric = ? AND version = ? AND window_start_ms >= ? AND window_start_ms < ?
  AND window_end_ms - window_start_ms = ? AND label IN ({marks})
"""

_LABELS = """
SELECT value_index, label FROM ldp_window_values
WHERE metric = ? AND version = ? AND window_start_ms = ? AND window_end_ms = ?
  AND value_index IN ({marks})
"""

_MEANS = """
SELECT window_start_ms, window_end_ms, version, value, std_error, lower95, upper95
FROM ldp_window_summaries
WHERE metric = ? AND statistic = 'mean' AND window_start_ms >= ? AND window_start_ms < ?
"""

_RECORD = """
SELECT record, late_reports, pane_seq, p_star, q_star, smallest_resolvable FROM ldp_windows
WHERE metric = ? AND version = ? AND window_start_ms = ? AND window_end_ms = ?
"""

_BANDS = """
SELECT value_index, lower95, upper95 FROM ldp_window_values
WHERE metric = ? AND version = ? AND window_start_ms = ? AND window_end_ms = ?
"""

_REJECTS_IN_RANGE = """
SELECT w.window_start_ms, w.window_end_ms, r.reason, SUM(r.records)
FROM (SELECT DISTINCT metric, window_start_ms, window_end_ms FROM ldp_windows
      WHERE metric = ? AND window_start_ms >= ? AND window_start_ms < ?) w
  JOIN ldp_rejects r
  ON r.metric = w.metric AND r.slice_start_ms >= w.window_start_ms
  AND r.slice_start_ms < w.window_end_ms AND r.slice_end_ms <= w.window_end_ms
GROUP BY w.window_start_ms, w.window_end_ms, r.reason
"""

_RUN_INPUTS = """
SELECT run_seq, first_event_ms, last_event_ms, watermark_ms FROM ldp_run_inputs
WHERE metric = ?
"""

#: Every read above by name, with example parameters: what the query-plan test explains.
QUERIES = {"metric_totals": (_METRIC_TOTALS, ()),
           "latest_window": (_LATEST_WINDOW, ("m",)),
           "reject_totals": (_REJECT_TOTALS, (UNATTRIBUTED_MS,)),
           "window_rows": (_WINDOW_ROWS, ("m", 0, 2**62, 0, 100)),
           "oldest_window_rows": (_OLDEST_WINDOW_ROWS, ("m", 0, 2**62, 0, 100)),
           "metric_span": (_METRIC_SPAN, ("m",)),
           "top_values": (_TOP_VALUES.format(marks="?, ?"), ("m", "v1", 0, 1, 0, 2**62)),
           "value_rows": (_VALUE_ROWS.format(marks="?, ?"), ("m", "v1", 0, 1, 0, 2**62)),
           "value_totals": (_VALUE_TOTALS, ("m", "v1", 3_600_000)),
           "labels": (_LABELS.format(marks="?, ?"), ("m", "v1", 0, 1, 0, 1)),
           "label_totals": (_LABEL_TOTALS.format(binary=""),
                            ("m", "v1", 3_600_000, MAX_SERIES_LABELS + 1)),
           "label_values": (_LABEL_VALUES.format(marks="?, ?"),
                            ("m", "v1", 0, 2**62, 3_600_000, "a", "b")),
           "means": (_MEANS, ("m", 0, 2**62)),
           "record": (_RECORD, ("m", "v1", 0, 1)),
           "bands": (_BANDS, ("m", "v1", 0, 1)),
           "rejects_in_range": (_REJECTS_IN_RANGE, ("m", 0, 2**62)),
           "run_inputs": (_RUN_INPUTS, ("m",))}


def index_statements(dialect: str) -> list[str]:
    """CREATE INDEX IF NOT EXISTS statements of `READ_INDEXES` for `dialect`."""
    statements = []
    for name, table, key, covered in READ_INDEXES:
        if dialect == "postgresql":
            statements.append(f"CREATE INDEX IF NOT EXISTS {name} ON {table} "
                              f"({', '.join(key)}) INCLUDE ({', '.join(covered)})")
        else:
            statements.append(f"CREATE INDEX IF NOT EXISTS {name} ON {table} "
                              f"({', '.join(key + covered)})")
    return statements


def create_read_indexes(cursor, dialect: str) -> None:
    """Make the read indexes where missing (inside the caller's transaction)."""
    for statement in index_statements(dialect):
        cursor.execute(statement)


def missing_read_indexes(store) -> list[str]:
    """The names of `READ_INDEXES` the store lacks (a store made before them)."""
    names = [name for name, *_ in READ_INDEXES]
    if store.dialect == "sqlite":
        rows = store._query("SELECT name FROM sqlite_master WHERE type = 'index'")
    else:
        rows = store._query("SELECT indexname FROM pg_indexes WHERE schemaname = "
                            "current_schema()")
    found = {row[0] for row in rows}
    return [name for name in names if name not in found]


def metric_summaries(store) -> list[dict]:
    """Per metric, sorted: `windows`, `first_start_ms`, `last_end_ms`, `reports` (the sum of
    n), the latest window's `latest_start_ms`, `latest_end_ms`, `latest_n`, `latest_timing`,
    `protocol`, `epsilon`, and `rejects` (dead letters of the metric attributed to a time)."""
    summaries = []
    with store._snapshot() as cursor:
        cursor.execute(store._sql(_METRIC_TOTALS))
        totals = cursor.fetchall()
        cursor.execute(store._sql(_REJECT_TOTALS), (UNATTRIBUTED_MS,))
        rejects = {metric: int(count) for metric, count in cursor.fetchall()}
        for metric, windows, first, last, reports in totals:
            cursor.execute(store._sql(_LATEST_WINDOW), (metric,))
            start, end, version, n, timing, protocol, epsilon = cursor.fetchone()
            summaries.append({
                "metric": metric, "windows": int(windows), "first_start_ms": int(first),
                "last_end_ms": int(last), "reports": int(reports),
                "latest_start_ms": int(start), "latest_end_ms": int(end),
                "latest_version": version, "latest_n": int(n), "latest_timing": timing,
                "protocol": protocol, "epsilon": float(epsilon),
                "rejects": rejects.get(metric, 0)})
    return summaries


def metric_span(store, metric: str) -> dict:
    """`windows` (how many `metric` has, of every series), `first_start_ms` and
    `last_start_ms` (None without windows), from the windows index."""
    count, first, last = store._query(_METRIC_SPAN, (metric,))[0]
    return {"windows": int(count), "first_start_ms": None if first is None else int(first),
            "last_start_ms": None if last is None else int(last)}


def window_rows(store, metric: str, since: int = 0, start_ms: int = -(2**62),
                end_ms: int = 2**62, limit: int = 2000, oldest: bool = False) -> list[dict]:
    """The windows of `metric` starting in [start_ms, end_ms) whose pane was logged after
    `since`: the newest `limit` of them (`oldest`: the oldest), oldest first, as dicts of the
    ldp_windows columns (`_WINDOW_COLUMNS`, `estimator` and `postprocess` being the method
    names) and, for a numeric metric, `mean`, `mean_std_error` and `mean_band` (the record's 95%
    band of the mean, [lower, upper], as the store saved it: both None where the record has
    none)."""
    with store._snapshot() as cursor:
        cursor.execute(store._sql(_OLDEST_WINDOW_ROWS if oldest else _WINDOW_ROWS),
                       (metric, start_ms, end_ms, since, limit))
        rows = [dict(zip(_WINDOW_COLUMNS, row, strict=True)) for row in cursor.fetchall()]
        if rows:
            low = min(row["window_start_ms"] for row in rows)
            high = max(row["window_start_ms"] for row in rows) + 1
            cursor.execute(store._sql(_MEANS), (metric, low, high))
            means = {(int(s), int(e), v): found for s, e, v, *found in cursor.fetchall()}
    if not oldest:
        rows.reverse()
    for row in rows:
        for name in ("window_start_ms", "window_end_ms", "n", "pane_index", "pane_seq",
                     "run_seq"):
            row[name] = int(row[name])
        row["late_reports"] = None if row["late_reports"] is None else int(row["late_reports"])
        row["pane_is_last"] = bool(row["pane_is_last"])
        found = means.get((row["window_start_ms"], row["window_end_ms"], row["version"]))
        if found is not None:
            row["mean"], row["mean_std_error"], *row["mean_band"] = found
    return rows


def top_values(store, metric: str, version: str, indices: list[int], start_ms: int,
               end_ms: int) -> dict[tuple[int, int], dict[int, tuple]]:
    """{(window start ms, end ms): {value index: (estimate, lower95, upper95)}} of the values
    `indices` (at most MAX_TOP_VALUES) of the windows of (`metric`, `version`) starting in
    [start_ms, end_ms); the band is the one the store saved (`store.records.value_rows`: null
    where the record declares none, `output.bands.declares_no_value_band`), found through the
    values index."""
    indices = [int(i) for i in indices][:MAX_TOP_VALUES]
    if not indices:
        return {}
    found: dict[tuple[int, int], dict[int, tuple]] = {}
    rows = store._query(_TOP_VALUES.format(marks=", ".join("?" * len(indices))),
                        (metric, version, *indices, start_ms, end_ms))
    for start, end, index, estimate, low, high in rows:
        found.setdefault((int(start), int(end)), {})[int(index)] = (estimate, low, high)
    return found


def value_rows(store, metric: str, version: str, indices: list[int], start_ms: int,
               end_ms: int) -> dict[tuple[int, int], dict[int, tuple]]:
    """As `top_values`, with every column of each value: {(start ms, end ms): {value index:
    (label, estimate, unbiased_estimate, std_error, lower95, upper95)}}."""
    indices = [int(i) for i in indices][:MAX_TOP_VALUES]
    if not indices:
        return {}
    found: dict[tuple[int, int], dict[int, tuple]] = {}
    rows = store._query(_VALUE_ROWS.format(marks=", ".join("?" * len(indices))),
                        (metric, version, *indices, start_ms, end_ms))
    for start, end, index, *values in rows:
        found.setdefault((int(start), int(end)), {})[int(index)] = tuple(values)
    return found


def value_totals(store, metric: str, version: str, length_ms: int) -> tuple[list[float], int]:
    """(per value index, the sum of its estimates over the windows of (`metric`, `version`) of
    length `length_ms`; the number of windows summed). Values missing from some windows count
    0 there."""
    rows = store._query(_VALUE_TOTALS, (metric, version, length_ms))
    if not rows:
        return [], 0
    totals = [0.0] * (max(int(row[0]) for row in rows) + 1)
    for index, total, _ in rows:
        totals[int(index)] = float(total or 0.0)
    return totals, max(int(row[2]) for row in rows)


def label_totals(store, metric: str, version: str, length_ms: int
                 ) -> tuple[dict[str, float], bool]:
    """({label: the sum of its estimates over the windows of (`metric`, `version`) of length
    `length_ms`}, whether labels were left out): for a series whose values are keyed by label
    (`records.labels_per_window`), a window where a label is absent counts 0. At most
    `MAX_SERIES_LABELS` labels, those seen most recently (the database groups the rest and
    sends none of them); the second item says whether there were more."""
    rows = store._query(_LABEL_TOTALS.format(binary=_BINARY[store.dialect]),
                        (metric, version, length_ms, MAX_SERIES_LABELS + 1))
    return ({str(label): float(total or 0.0) for label, total, *_ in rows[:MAX_SERIES_LABELS]},
            len(rows) > MAX_SERIES_LABELS)


def label_values(store, metric: str, version: str, length_ms: int, labels: list[str],
                 start_ms: int, end_ms: int) -> dict[tuple[int, int], dict[str, tuple]]:
    """{(window start ms, end ms): {label: (estimate, lower95, upper95)}} of the labels `labels`
    (at most MAX_TOP_VALUES) in the windows of (`metric`, `version`) of length `length_ms`
    starting in [start_ms, end_ms): `top_values` by label, for a series keyed by label. A label
    a window does not hold (not one of its heavy hitters) is absent from its dict."""
    labels = [str(label) for label in labels][:MAX_TOP_VALUES]
    if not labels:
        return {}
    found: dict[tuple[int, int], dict[str, tuple]] = {}
    rows = store._query(_LABEL_VALUES.format(marks=", ".join("?" * len(labels))),
                        (metric, version, start_ms, end_ms, length_ms, *labels))
    for start, end, label, estimate, low, high in rows:
        found.setdefault((int(start), int(end)), {})[str(label)] = (estimate, low, high)
    return found


def labels_of(store, metric: str, version: str, start_ms: int, end_ms: int,
              indices: list[int]) -> dict[int, str]:
    """The labels of values `indices` in one window (read by its key)."""
    indices = [int(i) for i in indices][:MAX_TOP_VALUES]
    if not indices:
        return {}
    rows = store._query(_LABELS.format(marks=", ".join("?" * len(indices))),
                        (metric, version, start_ms, end_ms, *indices))
    return {int(index): label for index, label in rows}


def window_record(store, metric: str, version: str, start_ms: int, end_ms: int,
                  bands: bool = True) -> dict | None:
    """One window's latest record with what the store adds (`late_reports`, `pane_seq`, the
    p*, q*, smallest resolvable columns, and with `bands` `lower95`/`upper95`), read by its key;
    None when the store has no such window."""
    with store._snapshot() as cursor:
        cursor.execute(store._sql(_RECORD), (metric, version, start_ms, end_ms))
        row = cursor.fetchone()
        if row is None:
            return None
        found = []
        if bands:
            cursor.execute(store._sql(_BANDS), (metric, version, start_ms, end_ms))
            found = sorted(cursor.fetchall())  # by value index (sorted here: an ORDER BY would
            # tempt SQLite, without statistics, into the values index, which has that order)
    text, late, seq, p_star, q_star, resolvable = row
    record = json.loads(text)
    record["late_reports"] = None if late is None else int(late)
    record["pane_seq"] = int(seq)
    record.update(p_star=p_star, q_star=q_star, smallest_resolvable=resolvable)
    if bands:
        record["lower95"] = [low for _, low, _ in found]
        record["upper95"] = [high for _, _, high in found]
    return record


def window_rejects(store, metric: str, start_ms: int = -(2**62), end_ms: int = 2**62
                   ) -> dict[tuple[int, int], dict[str, int]]:
    """Dead letters of `metric` per window (start ms, end ms) starting in [start_ms, end_ms),
    by reason."""
    found: dict[tuple[int, int], dict[str, int]] = {}
    for start, end, reason, count in store._query(_REJECTS_IN_RANGE,
                                                   (metric, start_ms, end_ms)):
        found.setdefault((int(start), int(end)), {})[reason] = int(count)
    return found


def run_inputs(store, metric: str) -> dict[int, MetricInputs]:
    """{run_seq: the inputs of `metric` that run recorded at its end} (`output.coverage`; read
    by the table's key); empty for a store made before runs recorded them."""
    exists = ("SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'ldp_run_inputs'"
              if store.dialect == "sqlite" else "SELECT to_regclass('ldp_run_inputs')::text")
    with store._snapshot() as cursor:
        cursor.execute(exists)
        found = cursor.fetchone()
        if found is None or found[0] is None:
            return {}
        cursor.execute(store._sql(_RUN_INPUTS), (metric,))
        rows = cursor.fetchall()
    return {int(run): MetricInputs(None if first is None else int(first),
                                   None if last is None else int(last),
                                   None if watermark is None else int(watermark))
            for run, first, last, watermark in rows}
