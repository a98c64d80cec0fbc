"""The estimate store: window estimates and per-window accounting in SQL (SQLite or PostgreSQL).

    store = open_store("sqlite:///estimates.db")        # or "postgresql://user@host/db"
    store.write_panes(records)                           # upsert: each window keeps its latest pane
    store.write_rejects({(metric, reason, slice_start_ms, slice_end_ms): records, ...})

`write_panes` is the entry point for any sink that sees panes one by one (the batch job's
`WriteToStore`, a live run writing each pane as it fires): it is idempotent (a pane written twice,
or an older pane arriving after a newer one, changes nothing) and safe from several processes.
Each window of a metric is kept per configuration `version` (`output.layout.version_label`:
"v1", "v2", "combined"). The store keeps what each record says: its p*, q* and smallest
resolvable frequency as the record gives them (null when it has none), and each value's 95%
band (`ldp_telemetry.output.bands`).
Tables and example queries: docs/store.md.
"""
from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from ldp_telemetry.ldp.base.errors import StoreError
from ldp_telemetry.ldp.base.registration import Catalog
from ldp_telemetry.ldp.base.times import datetime_from_ms, iso_from_ms
from ldp_telemetry.ldp.config.budget import budget_text
from ldp_telemetry.ldp.estimation.bin_answers import BIN_PROTOCOLS
from ldp_telemetry.ldp.protocols import STRING_PROTOCOLS
from ldp_telemetry.output.coverage import RunInputs
from ldp_telemetry.output.estimate import EstimateRecord, records_of
from ldp_telemetry.output.bands import summary_bands
from ldp_telemetry.store.reads import create_read_indexes, missing_read_indexes
from ldp_telemetry.store.records import (MAX_NAME_CHARS, SUPPORT_COLUMNS, UNATTRIBUTED_MS,
                                         check_metric_names, number, pane_row, summary_rows,
                                         value_rows)
from ldp_telemetry.store.views import create_views, missing_views


_TABLES = """
CREATE TABLE IF NOT EXISTS ldp_windows (
  metric TEXT NOT NULL,
  version TEXT NOT NULL,
  window_start {time} NOT NULL,
  window_end {time} NOT NULL,
  window_start_ms BIGINT NOT NULL,
  window_end_ms BIGINT NOT NULL,
  n BIGINT NOT NULL,
  n_on_time BIGINT,
  late_reports BIGINT,
  protocol TEXT NOT NULL,
  epsilon DOUBLE PRECISION NOT NULL,
  p_star DOUBLE PRECISION,
  q_star DOUBLE PRECISION,
  smallest_resolvable DOUBLE PRECISION,
  estimator TEXT,
  postprocess TEXT,
  pane_timing TEXT NOT NULL,
  pane_index BIGINT NOT NULL,
  run_seq BIGINT NOT NULL DEFAULT 0,
  pane_is_last BOOLEAN NOT NULL,
  pane_seq BIGINT NOT NULL,
  record TEXT NOT NULL,
  PRIMARY KEY (metric, version, window_start_ms, window_end_ms));
CREATE TABLE IF NOT EXISTS ldp_window_values (
  metric TEXT NOT NULL,
  version TEXT NOT NULL,
  window_start {time} NOT NULL,
  window_end {time} NOT NULL,
  window_start_ms BIGINT NOT NULL,
  window_end_ms BIGINT NOT NULL,
  value_index INTEGER NOT NULL,
  label TEXT NOT NULL,
  estimate DOUBLE PRECISION NOT NULL,
  unbiased_estimate DOUBLE PRECISION,
  std_error DOUBLE PRECISION,
  lower95 DOUBLE PRECISION,
  upper95 DOUBLE PRECISION,
  pane_index BIGINT NOT NULL,
  run_seq BIGINT NOT NULL DEFAULT 0,
  PRIMARY KEY (metric, version, window_start_ms, window_end_ms, value_index));
CREATE TABLE IF NOT EXISTS ldp_window_summaries (
  metric TEXT NOT NULL,
  version TEXT NOT NULL,
  window_start {time} NOT NULL,
  window_end {time} NOT NULL,
  window_start_ms BIGINT NOT NULL,
  window_end_ms BIGINT NOT NULL,
  statistic TEXT NOT NULL,
  value DOUBLE PRECISION,
  std_error DOUBLE PRECISION,
  lower95 DOUBLE PRECISION,
  upper95 DOUBLE PRECISION,
  pane_index BIGINT NOT NULL,
  run_seq BIGINT NOT NULL DEFAULT 0,
  PRIMARY KEY (metric, version, window_start_ms, window_end_ms, statistic));
CREATE TABLE IF NOT EXISTS ldp_panes (
  seq {serial},
  metric TEXT NOT NULL,
  version TEXT NOT NULL,
  window_start_ms BIGINT NOT NULL,
  window_end_ms BIGINT NOT NULL,
  pane_index BIGINT NOT NULL,
  run_seq BIGINT NOT NULL DEFAULT 0,
  pane_timing TEXT NOT NULL,
  n BIGINT NOT NULL,
  written_at_ms BIGINT NOT NULL,
  UNIQUE (metric, version, window_start_ms, window_end_ms, run_seq, pane_index));
CREATE TABLE IF NOT EXISTS ldp_rejects (
  metric TEXT NOT NULL,
  reason TEXT NOT NULL,
  slice_start_ms BIGINT NOT NULL,
  slice_end_ms BIGINT NOT NULL,
  records BIGINT NOT NULL,
  run_seq BIGINT NOT NULL DEFAULT 0,
  PRIMARY KEY (metric, reason, slice_start_ms, slice_end_ms));
CREATE TABLE IF NOT EXISTS ldp_runs (
  run_seq {serial},
  run_id TEXT NOT NULL UNIQUE,
  kind TEXT NOT NULL,
  started_at_ms BIGINT NOT NULL,
  status TEXT NOT NULL,
  inputs TEXT NOT NULL,
  output TEXT NOT NULL,
  finished_at_ms BIGINT,
  detail TEXT);
CREATE TABLE IF NOT EXISTS ldp_run_inputs (
  run_seq BIGINT NOT NULL,
  metric TEXT NOT NULL,
  first_event_ms BIGINT,
  last_event_ms BIGINT,
  watermark_ms BIGINT,
  PRIMARY KEY (metric, run_seq));
CREATE TABLE IF NOT EXISTS ldp_value_bands (
  rule TEXT PRIMARY KEY);
CREATE TABLE IF NOT EXISTS ldp_summary_band_rules (
  rule TEXT PRIMARY KEY);
CREATE INDEX IF NOT EXISTS ldp_panes_by_metric ON ldp_panes (metric, seq);
CREATE INDEX IF NOT EXISTS ldp_rejects_by_slice ON ldp_rejects (metric, slice_start_ms);
"""

#: Every table the store keeps.
_TABLE_NAMES = ("ldp_windows", "ldp_window_values", "ldp_window_summaries", "ldp_panes",
                "ldp_rejects", "ldp_runs", "ldp_run_inputs", "ldp_metric_privacy",
                "ldp_value_bands", "ldp_summary_band_rules")

#: The rule the store's value rows' lower95/upper95 are made by (`store.records.value_rows`:
#: the band of the unbiased estimate, output.bands.value_band; a CMS or HCMS window past the
#: pool-bias share: its pool-corrected band; a string metric's heavy hitters: none,
#: output.bands.value_band_method), kept in ldp_value_bands. A writer opening a store whose
#: rows were made by another rule re-bands them from the stored records, once
#: (`_reband_values`): a store without the table has the rows of estimate ± z · std_error,
#: every window re-banded; one of EARLIER_VALUE_BAND_RULES only the windows of the protocols
#: that rule banded otherwise.
VALUE_BAND_RULE = "heavy-hitters-no-band"
#: Earlier rules a store may record, each with the protocols whose rows today's rule bands
#: otherwise: under "unbiased-estimate-band" a pooled-hash window past the pool-bias share had
#: none, where a CMS or HCMS one now has its pool-corrected band; under both it and
#: "pool-corrected-band" a string metric's heavy hitters had estimate ± z · std_error, where
#: they now have none.
EARLIER_VALUE_BAND_RULES = {"unbiased-estimate-band": ("cms", "hcms", *STRING_PROTOCOLS.names()),
                            "pool-corrected-band": tuple(STRING_PROTOCOLS.names())}

#: The rule the store's summary rows' lower95/upper95 are made by (`store.records.summary_rows`:
#: output.bands.summary_bands, which gives a quantile of a CFO-binning or hierarchical-histogram
#: record no 95% band, its band of whole bins being conservative), kept in
#: ldp_summary_band_rules. A store without it saved those quantiles' band of whole bins as their
#: 95% band: a writer opening it bands the summary rows of those windows again from the stored
#: records, once (`_reband_summaries`).
SUMMARY_BAND_RULE = "no-conservative-band"

#: What each metric configuration promises a device (ldp_telemetry.ldp.config.budget), from the
#: records' `privacy` field: one row per (metric, version), the newest record's. `lifetime_epsilon`
#: is NULL when the lifetime cost grows without bound (one-stage reports); `value_epsilon` is ε∞,
#: the cost of any number of reports of one distinct value (memoized reports only).
_PRIVACY_TABLE = """
CREATE TABLE IF NOT EXISTS ldp_metric_privacy (
  metric TEXT NOT NULL,
  version TEXT NOT NULL,
  per_report_epsilon DOUBLE PRECISION NOT NULL,
  memoized BOOLEAN NOT NULL,
  reports_per_day DOUBLE PRECISION,
  per_day_epsilon DOUBLE PRECISION,
  lifetime_epsilon DOUBLE PRECISION,
  value_epsilon DOUBLE PRECISION,
  distinct_values BIGINT,
  composition TEXT NOT NULL,
  promise TEXT NOT NULL,
  PRIMARY KEY (metric, version))
"""

_UPSERT_PRIVACY = """
INSERT INTO ldp_metric_privacy (metric, version, per_report_epsilon, memoized, reports_per_day,
  per_day_epsilon, lifetime_epsilon, value_epsilon, distinct_values, composition, promise)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (metric, version) DO UPDATE SET
  per_report_epsilon = excluded.per_report_epsilon, memoized = excluded.memoized,
  reports_per_day = excluded.reports_per_day, per_day_epsilon = excluded.per_day_epsilon,
  lifetime_epsilon = excluded.lifetime_epsilon, value_epsilon = excluded.value_epsilon,
  distinct_values = excluded.distinct_values, composition = excluded.composition,
  promise = excluded.promise
"""

_UPSERT_WINDOW = """
INSERT INTO ldp_windows (metric, version, window_start, window_end, window_start_ms,
  window_end_ms, n, n_on_time, late_reports, protocol, epsilon, p_star, q_star,
  smallest_resolvable, estimator, postprocess, pane_timing, pane_index, pane_is_last, pane_seq,
  record, run_seq)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (metric, version, window_start_ms, window_end_ms) DO UPDATE SET
  n = excluded.n,
  n_on_time = CASE WHEN ldp_windows.run_seq = excluded.run_seq
    THEN COALESCE(excluded.n_on_time, ldp_windows.n_on_time) ELSE excluded.n_on_time END,
  late_reports = excluded.n - CASE WHEN ldp_windows.run_seq = excluded.run_seq
    THEN COALESCE(excluded.n_on_time, ldp_windows.n_on_time) ELSE excluded.n_on_time END,
  protocol = excluded.protocol, epsilon = excluded.epsilon, p_star = excluded.p_star,
  q_star = excluded.q_star, smallest_resolvable = excluded.smallest_resolvable,
  estimator = excluded.estimator, postprocess = excluded.postprocess,
  pane_timing = excluded.pane_timing, pane_index = excluded.pane_index,
  pane_is_last = excluded.pane_is_last, pane_seq = excluded.pane_seq, record = excluded.record,
  run_seq = excluded.run_seq
WHERE ldp_windows.run_seq < excluded.run_seq
  OR (ldp_windows.run_seq = excluded.run_seq AND ldp_windows.pane_index < excluded.pane_index)
"""

_KEEP_ON_TIME = """
UPDATE ldp_windows SET n_on_time = ?, late_reports = n - ?
WHERE metric = ? AND version = ? AND window_start_ms = ? AND window_end_ms = ?
  AND n_on_time IS NULL AND run_seq = ?
"""

_INSERT_VALUE = """
INSERT INTO ldp_window_values (metric, version, window_start, window_end, window_start_ms,
  window_end_ms, value_index, label, estimate, unbiased_estimate, std_error, lower95, upper95,
  pane_index, run_seq)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
"""

_INSERT_SUMMARY = """
INSERT INTO ldp_window_summaries (metric, version, window_start, window_end, window_start_ms,
  window_end_ms, statistic, value, std_error, lower95, upper95, pane_index, run_seq)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
"""

#: A window's rows in a table of one row per value or statistic: dropped when a pane replaces it.
_DROP_WINDOW_ROWS = """
DELETE FROM {table}
WHERE metric = ? AND version = ? AND window_start_ms = ? AND window_end_ms = ?
"""

#: Rejects of earlier runs in a window a later run has written: its rejects replace them.
_DROP_OLDER_REJECTS = """
DELETE FROM ldp_rejects
WHERE metric = ? AND slice_start_ms >= ? AND slice_end_ms <= ? AND run_seq < ?
"""

_LOG_PANE = """
INSERT INTO ldp_panes (metric, version, window_start_ms, window_end_ms, pane_index,
  pane_timing, n, written_at_ms, run_seq)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (metric, version, window_start_ms, window_end_ms, run_seq, pane_index) DO NOTHING
"""

_REGISTER_RUN = """
INSERT INTO ldp_runs (run_id, kind, started_at_ms, status, inputs, output, finished_at_ms)
VALUES (?, ?, ?, ?, ?, ?, ?)
"""

#: A run's inputs of one metric (`output.coverage.RunInputs`); a resumed run widens its range.
_SET_RUN_INPUTS = """
INSERT INTO ldp_run_inputs (run_seq, metric, first_event_ms, last_event_ms, watermark_ms)
VALUES (?, ?, ?, ?, ?)
ON CONFLICT (metric, run_seq) DO UPDATE SET
  first_event_ms = {least}(ldp_run_inputs.first_event_ms, excluded.first_event_ms),
  last_event_ms = {greatest}(ldp_run_inputs.last_event_ms, excluded.last_event_ms),
  watermark_ms = excluded.watermark_ms
"""

_SET_REJECTS = """
INSERT INTO ldp_rejects (metric, reason, slice_start_ms, slice_end_ms, records, run_seq)
VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (metric, reason, slice_start_ms, slice_end_ms) DO UPDATE SET records = {value},
  run_seq = excluded.run_seq
"""

#: Whether a later run than the one writing owns a slice: it wrote a window holding the slice,
#: or rejects of the slice. An earlier run's rejects of that slice are then not written.
_LATER_OWNER = """
SELECT 1 FROM ldp_windows WHERE metric = ? AND window_start_ms <= ? AND window_end_ms >= ?
  AND run_seq > ?
UNION ALL
SELECT 1 FROM ldp_rejects WHERE metric = ? AND slice_start_ms = ? AND slice_end_ms = ?
  AND run_seq > ?
"""

#: An earlier run's rejects of a slice the writing run replaces (every reason).
_DROP_SLICE_REJECTS = """
DELETE FROM ldp_rejects
WHERE metric = ? AND slice_start_ms = ? AND slice_end_ms = ? AND run_seq < ?
"""

_RESUMABLE_RUN = """
SELECT run_seq, run_id, started_at_ms FROM ldp_runs
WHERE kind = ? AND output = ? ORDER BY run_seq DESC LIMIT 1
"""

_REJECTS_PER_WINDOW = """
SELECT w.window_start_ms, w.window_end_ms, r.reason, SUM(r.records)
FROM (SELECT DISTINCT metric, window_start_ms, window_end_ms FROM ldp_windows
      WHERE metric = ?{extra}) w
  JOIN ldp_rejects r
  ON r.metric = w.metric AND r.slice_start_ms >= w.window_start_ms
  AND r.slice_end_ms <= w.window_end_ms
GROUP BY w.window_start_ms, w.window_end_ms, r.reason
"""

_LATEST_WINDOWS = """
SELECT record, late_reports, pane_seq, p_star, q_star, smallest_resolvable, window_start_ms,
  window_end_ms, version
FROM ldp_windows WHERE metric = ? AND pane_seq > ?
ORDER BY window_start_ms, window_end_ms, version
"""

_LATEST_BANDS = """
SELECT v.window_start_ms, v.window_end_ms, v.version, v.lower95, v.upper95
FROM ldp_window_values v JOIN ldp_windows w
  ON w.metric = v.metric AND w.version = v.version AND w.window_start_ms = v.window_start_ms
  AND w.window_end_ms = v.window_end_ms
WHERE v.metric = ? AND w.pane_seq > ?
ORDER BY v.window_start_ms, v.window_end_ms, v.version, v.value_index
"""

#: The field of a job's or a command's settings that names the store.
STORE_FIELD = "store"


#: The forms of an SQLite store URL: a file (an in-memory database writes nowhere: refused).
SQLITE_FORMS = "sqlite:///relative/path.db or sqlite:////absolute/path.db"

#: How long the start-up check (`EstimateStore.check_writable`) waits for a store another
#: writer holds before it calls the store locked (a run's own writes wait `WRITE_LOCK_WAIT_S`).
CHECK_LOCK_WAIT_S = 10.0

#: How long one write waits for a store another writer holds.
WRITE_LOCK_WAIT_S = 30.0


def open_store(url: str, create: bool = True) -> EstimateStore:
    """The store at `url`: `sqlite:///relative.db`, `sqlite:////absolute.db` or
    `postgresql://user:password@host:port/database` (`?host=/socket/dir` for a Unix socket).

    Creates the tables when they are missing (and adds what a store made by an older release
    lacks); with `create=False` a URL that names no existing store (no such SQLite file, or a
    database without the store's tables) is a StoreError instead, and nothing is created.
    StoreError for a malformed URL (an SQLite URL not of `SQLITE_FORMS`, `:memory:`, a NUL
    character), a scheme no connector serves (`CONNECTORS`), a file that is not a database, or
    when PostgreSQL is asked for without psycopg installed
    (`pip install 'ldp-telemetry[postgres]'`).
    """
    if "\x00" in url or "\x00" in unquote(url):
        raise StoreError(f"store {shown_url(url)}: a store URL cannot hold a NUL character (%00)",
                         STORE_FIELD)
    scheme = urlsplit(url).scheme
    connector = CONNECTORS.lookup(scheme)
    if not create and CONNECTORS.canonical(scheme) == "sqlite" \
            and not os.path.isfile(_sqlite_path(url)):
        raise StoreError(f"no estimate store at {url!r}: {_sqlite_path(url)!r} does not exist",
                         STORE_FIELD)
    store = connector(url)  # connected; its tables are made (or checked) here
    if create:
        try:
            store.create_tables()
        except StoreError:
            store.close()
            raise
        return store
    return store.require_tables(url)


def shown_url(url: str) -> str:
    """`url` as messages show it: quoted, its password (if any) hidden."""
    parts = urlsplit(url.replace("\x00", "%00"))
    if parts.password is None:
        return repr(url)
    return repr(parts._replace(netloc=parts.netloc.replace(f":{parts.password}@", ":***@"))
                .geturl())


def _sqlite_path(url: str) -> str:
    """The file an SQLite URL names; StoreError naming `SQLITE_FORMS` for any other form."""
    rest = url.split(":", 1)[1]
    if not rest.startswith("///"):
        raise StoreError(f"store {url!r} is not an SQLite URL of the form {SQLITE_FORMS} "
                         f"(three slashes, then the file's path)", STORE_FIELD)
    path = unquote(rest[3:])
    if not path or path.endswith("/"):
        raise StoreError(f"store {url!r}: an SQLite URL names a file: {SQLITE_FORMS}",
                         STORE_FIELD)
    if path == ":memory:" or path.startswith("file:"):
        raise StoreError(f"store {url!r}: an in-memory or URI-named SQLite database writes "
                         f"nowhere another process can read; name a file: {SQLITE_FORMS}",
                         STORE_FIELD)
    return path  # sqlite:////abs.db keeps one '/'


def _open_sqlite(url: str) -> EstimateStore:
    return EstimateStore(_connect_sqlite(_sqlite_path(url)), "sqlite", shown_url(url))


def _open_postgresql(url: str) -> EstimateStore:
    try:
        import psycopg
    except ImportError:
        raise StoreError(f"store {shown_url(url)} needs psycopg: pip install "
                         f"'ldp-telemetry[postgres]'", STORE_FIELD) from None
    try:
        connection = psycopg.connect(url)
    except psycopg.Error as error:
        raise StoreError(f"cannot connect to the store {shown_url(url)}: {error}",
                         STORE_FIELD) from None
    return EstimateStore(connection, "postgresql", shown_url(url))


#: The SQL stores by URL scheme: a new database is one connector registered here (it returns a
#: connected `EstimateStore`; `open_store` creates or checks its tables).
CONNECTORS: Catalog[Callable[[str], EstimateStore]] = Catalog(
    "store URL scheme", STORE_FIELD, aliases={"postgres": "postgresql"}, error=StoreError)
CONNECTORS.register(_open_sqlite, "sqlite")
CONNECTORS.register(_open_postgresql, "postgresql")


#: How long opening a SQLite store waits for another connection's lock.
SQLITE_LOCK_WAIT_S = 30.0


def _connect_sqlite(path: str) -> sqlite3.Connection:
    deadline = time.monotonic() + SQLITE_LOCK_WAIT_S
    while True:
        try:
            return _sqlite_connection(path)
        except sqlite3.OperationalError as error:
            # two writers opening one new store: setting up WAL can answer "database is
            # locked" at once, without SQLite's busy handler waiting (seen under load)
            if "locked" in str(error) and time.monotonic() < deadline:
                time.sleep(0.05)
                continue
            raise StoreError(f"cannot open the SQLite store {path!r}: {error}",
                             STORE_FIELD) from None
        except sqlite3.Error as error:
            raise StoreError(f"cannot open the SQLite store {path!r}: {error}",
                             STORE_FIELD) from None


def _sqlite_connection(path: str) -> sqlite3.Connection:
    """A connection to the SQLite store at `path`, in WAL mode (closed again if its set-up
    fails)."""
    connection = sqlite3.connect(path, timeout=SQLITE_LOCK_WAIT_S, isolation_level=None,
                                 check_same_thread=False)
    try:
        connection.execute("PRAGMA journal_mode=WAL")  # readers (a dashboard) never block a writer
        # WAL + NORMAL: no fsync per commit, never a corrupt file; a power cut may lose the last
        # panes, which the job writes again (the store is a view of its output, not the record)
        connection.execute("PRAGMA synchronous=NORMAL")
        connection.execute(f"PRAGMA busy_timeout={int(SQLITE_LOCK_WAIT_S * 1000)}")
    except sqlite3.Error:
        connection.close()
        raise
    return connection


@dataclass(frozen=True)
class StoreRun:
    """A run's identity in the store (`EstimateStore.begin_run`)."""

    seq: int  # order of beginning: a later run's windows win
    run_id: str
    started_at_ms: int


class EstimateStore:
    """One connection to the store; `write_*` calls are each one transaction."""

    def __init__(self, connection, dialect: str, name: str = "the store"):
        self._connection = connection
        self.dialect = dialect
        self.name = name  # as messages show it (`shown_url`: the URL without its password)
        if dialect == "sqlite":
            self._errors: tuple[type[BaseException], ...] = (sqlite3.Error,)
        else:
            import psycopg
            self._errors = (psycopg.Error,)

    def check_writable(self, lock_wait_s: float = CHECK_LOCK_WAIT_S) -> None:
        """StoreError naming the store unless a run can write to it now: an SQLite file that
        fails its quick check (damaged), a store that cannot be written (read-only file or
        folder, a PostgreSQL user without the rights) or that another writer holds for longer
        than `lock_wait_s` (locked). Writes a row of ldp_runs and rolls it back."""
        try:
            self._set_lock_wait(lock_wait_s)
            if self.dialect == "sqlite":
                found = self._connection.execute("PRAGMA quick_check(1)").fetchall()
                if found != [("ok",)]:
                    raise StoreError(f"store {self.name} is damaged: SQLite's quick check "
                                     f"says {found[0][0]!r}", STORE_FIELD)
            with self._transaction() as cursor:
                cursor.execute(self._sql(_REGISTER_RUN),
                               ("probe", "check", 0, "probe", "[]", "", None))
                raise _Probed
        except _Probed:
            pass
        finally:
            with contextlib.suppress(*self._errors):  # unusable: the error above says why
                self._set_lock_wait(WRITE_LOCK_WAIT_S)

    def _set_lock_wait(self, seconds: float) -> None:
        """How long this connection's writes wait for another writer's lock."""
        if self.dialect == "sqlite":
            self._connection.execute(f"PRAGMA busy_timeout={int(seconds * 1000)}")
        else:
            self._connection.execute(f"SET lock_timeout = {int(seconds * 1000)}")
            self._connection.commit()

    def require_tables(self, url: str) -> EstimateStore:
        """This store, if it has the store's tables; else closed, and a StoreError."""
        probe = ("SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'ldp_windows'"
                 if self.dialect == "sqlite" else "SELECT to_regclass('ldp_windows')")
        with self._snapshot() as cursor:  # a read: a store another writer holds is no matter
            cursor.execute(probe)
            row = cursor.fetchone()
        if row is None or row[0] is None:
            self.close()
            raise StoreError(f"no estimate store at {url!r}: it has no ldp_windows table",
                             STORE_FIELD)
        return self

    # -- writing ------------------------------------------------------------------------------
    def write_panes(self, records: Iterable[EstimateRecord | dict], run: int = 0) -> int:
        """Upsert window-estimate records (`EstimateRecord`s, or decoded JSON records, read with
        `EstimateRecord.from_json`) of the run `run`
        (`begin_run`; 0: no registered run, older than every registered one). A window is
        replaced by a pane of a later run, or of the same run with a higher `pane.index`; when it
        is, its value and summary rows are replaced with it and the earlier runs' rejects of its
        slices are dropped (the run's own replace them), so a window's rows always come from one
        run and one pane. Every new pane is also logged in ldp_panes (whose `seq` a dashboard
        follows). Returns the records given. One transaction; writers of one metric take turns
        (SQLite's write lock; a per-metric advisory lock in PostgreSQL).

        The rows are `store.records`' (`pane_row`, `value_rows`, `summary_rows`: the row
        builder BigQuery's sink uses too): p_star, q_star and smallest_resolvable are the
        record's (null when it has none); each value's lower95/upper95 is its band
        (`output.bands`: null without a standard error, or when the record declares no band).

        An ON_TIME pane's n is kept as n_on_time; a later pane's n − n_on_time is the window's
        late_reports (panes accumulate: each covers every report counted so far).
        StoreError for a metric name longer than the store keys, or when the database fails.
        """
        records = sorted(records_of(records), key=lambda r: r.key)  # one lock order for all
        if not records:
            return 0
        check_metric_names({record.metric for record in records})
        now_ms = int(time.time() * 1000)
        with self._transaction() as cursor:
            self._lock_metrics(cursor, {record.metric for record in records})
            for record in records:
                columns = pane_row(record)
                metric, version = record.metric, columns["version"]
                start_ms, end_ms = record.start_ms, record.end_ms
                window = (metric, version, start_ms, end_ms)
                index, timing, n = columns["pane_index"], columns["pane_timing"], columns["n"]
                cursor.execute(self._sql(_LOG_PANE), (*window, index, timing, n, now_ms, run))
                seq = self._pane_seq(cursor, window, run, index)
                start, end = self._time(start_ms), self._time(end_ms)
                n_on_time = n if timing == "ON_TIME" else None
                cursor.execute(self._sql(_UPSERT_WINDOW), (
                    metric, version, start, end, start_ms, end_ms, n, n_on_time,
                    None if n_on_time is None else 0,
                    columns["protocol"], columns["epsilon"],
                    *(columns[name] for name in SUPPORT_COLUMNS),
                    columns["estimator"], columns["postprocess"],
                    timing, index, columns["pane_is_last"], seq, columns["record"], run))
                replaced = cursor.rowcount > 0  # 0: a later run or pane holds the window
                if n_on_time is not None:  # also when a later pane of this run got here first
                    cursor.execute(self._sql(_KEEP_ON_TIME), (n_on_time, n_on_time, *window, run))
                if not replaced:
                    continue
                row = (metric, version, start, end, start_ms, end_ms)
                for table in ("ldp_window_values", "ldp_window_summaries"):
                    cursor.execute(self._sql(_DROP_WINDOW_ROWS.format(table=table)), window)
                # Rows are made as the driver takes them (psycopg pipelines them), never held
                # as a list: about 300 bytes per value of a large domain.
                cursor.executemany(self._sql(_INSERT_VALUE),
                                   ((*row, *values, index, run) for values in value_rows(record)))
                summaries = [(*row, *summary, index, run) for summary in summary_rows(record)]
                if summaries:
                    cursor.executemany(self._sql(_INSERT_SUMMARY), summaries)
                cursor.execute(self._sql(_DROP_OLDER_REJECTS), (metric, start_ms, end_ms, run))
                self._write_privacy(cursor, metric, version, record.privacy)
        return len(records)

    def _write_privacy(self, cursor, metric: str, version: str, privacy) -> None:
        """The record's `privacy` (a budget; absent in older records) into ldp_metric_privacy,
        created here when a store made before it lacks the table."""
        if not isinstance(privacy, dict):
            return
        if not getattr(self, "_privacy_table", False):
            cursor.execute(_PRIVACY_TABLE)
            self._privacy_table = True
        cursor.execute(self._sql(_UPSERT_PRIVACY), (
            metric, version, float(privacy["per_report"]), bool(privacy["memoized"]),
            *(number(privacy.get(name)) for name in ("reports_per_day", "per_day", "lifetime",
                                                      "lifetime_epsilon")),
            None if privacy.get("distinct_values") is None else int(privacy["distinct_values"]),
            str(privacy.get("rule", "")), budget_text(privacy) or ""))

    def privacy(self, metric: str) -> dict[str, dict]:
        """What each version of `metric` promises a device, by version label (empty when the
        store has no such rows, or no ldp_metric_privacy table yet)."""
        probe = ("SELECT name FROM sqlite_master WHERE type = 'table' AND "
                 "name = 'ldp_metric_privacy'" if self.dialect == "sqlite"
                 else "SELECT to_regclass('ldp_metric_privacy')")
        found = self._query(probe)
        if not found or found[0][0] is None:
            return {}
        rows = self._query(
            "SELECT version, per_report_epsilon, memoized, reports_per_day, per_day_epsilon, "
            "lifetime_epsilon, value_epsilon, distinct_values, composition, promise "
            "FROM ldp_metric_privacy WHERE metric = ? ORDER BY version", (metric,))
        names = ("per_report", "memoized", "reports_per_day", "per_day", "lifetime",
                 "lifetime_epsilon", "distinct_values", "rule", "promise")
        return {version: {**dict(zip(names, values, strict=True)),
                          "memoized": bool(values[1])} for version, *values in rows}

    def write_rejects(self, totals: Mapping[tuple[str, str, int, int], int],
                      add: bool = False, run: int = 0) -> None:
        """Dead-letter counts per (metric, reason, slice_start_ms, slice_end_ms) (see
        `records.reject_slice`) of the run `run`: `add=False` sets each total, an upsert
        (idempotent: a batch job's final counts, a followed directory's totals from its
        checkpoint, written again after a restart, and a stream's running totals kept in the
        runner's state); `add=True` adds to it.

        A total set twice within one run keeps the larger (a run's totals only grow; two
        bundles of running totals may be written out of order).

        A slice's rejects come from one run: the run's counts replace an earlier run's rows of
        the slice (every reason), and are not written where a later run already wrote a window
        holding the slice or rejects of it. One transaction, as `write_panes`."""
        # within a run a total only grows: the larger of two set totals wins, so two bundles of
        # running totals written out of order never step a total back
        greatest = "MAX" if self.dialect == "sqlite" else "GREATEST"
        value = ("ldp_rejects.records + excluded.records" if add
                 else f"{greatest}(ldp_rejects.records, excluded.records)")
        rows = sorted((metric[:MAX_NAME_CHARS], reason[:MAX_NAME_CHARS], int(start), int(end),
                       int(count)) for (metric, reason, start, end), count in totals.items())
        if not rows:
            return
        with self._transaction() as cursor:
            self._lock_metrics(cursor, {row[0] for row in rows})
            for metric, reason, start, end, count in rows:
                cursor.execute(self._sql(_LATER_OWNER),
                               (metric, start, end, run, metric, start, end, run))
                if cursor.fetchall():
                    continue
                cursor.execute(self._sql(_DROP_SLICE_REJECTS), (metric, start, end, run))
                cursor.execute(self._sql(_SET_REJECTS.format(value=value)),
                               (metric, reason, start, end, count, run))

    # -- runs ---------------------------------------------------------------------------------
    def begin_run(self, kind: str, inputs: Iterable[str], output: str,
                  resume: bool = False) -> StoreRun:
        """Register a run (`kind` "batch" or "live"; the input files or followed location; the
        output folder) and return its identity. Runs are ordered by `run_seq`, the order they
        began in: the later run's windows win. `resume`: continue the latest run of this kind
        and output (a live run restarted from its checkpoint) when there is one."""
        started_ms = int(time.time() * 1000)
        with self._transaction() as cursor:
            if resume:
                cursor.execute(self._sql(_RESUMABLE_RUN), (kind, output))
                found = cursor.fetchone()
                if found is not None:
                    cursor.execute(self._sql("UPDATE ldp_runs SET status = 'running', "
                                             "finished_at_ms = NULL WHERE run_seq = ?"),
                                   (found[0],))
                    return StoreRun(int(found[0]), found[1], int(found[2]))
            run_id = uuid.uuid4().hex
            cursor.execute(self._sql(_REGISTER_RUN),
                           (run_id, kind, started_ms, "running", json.dumps(sorted(inputs)),
                            output, None))
            cursor.execute(self._sql("SELECT run_seq FROM ldp_runs WHERE run_id = ?"),
                           (run_id,))
            return StoreRun(int(cursor.fetchone()[0]), run_id, started_ms)

    def finish_run(self, run: int, status: str, detail: str | None = None,
                   lock_wait_s: float | None = None) -> None:
        """Record how run `run` ended: `status` "finished", "incomplete", "interrupted" or
        "failed". `lock_wait_s`: wait at most this long for another writer (else
        `WRITE_LOCK_WAIT_S`), a StoreError past it."""
        if lock_wait_s is not None:
            self._set_lock_wait(lock_wait_s)
        with self._transaction() as cursor:
            cursor.execute(self._sql("UPDATE ldp_runs SET status = ?, finished_at_ms = ?, "
                                     "detail = ? WHERE run_seq = ?"),
                           (status, int(time.time() * 1000), detail, run))

    def record_inputs(self, run: int, inputs: RunInputs) -> None:
        """Record what run `run` read (`output.coverage.RunInputs`: per metric its reports'
        event-time range, and a live run's watermark when it stopped), one row per metric of
        `ldp_run_inputs`; a resumed run's range is widened, its watermark replaced. The
        dashboards decide from them which windows are partial."""
        least, greatest = (("MIN", "MAX") if self.dialect == "sqlite"
                           else ("LEAST", "GREATEST"))
        statement = self._sql(_SET_RUN_INPUTS.format(least=least, greatest=greatest))
        with self._transaction() as cursor:
            for metric, (first, last) in sorted(inputs.ranges.items()):
                cursor.execute(statement, (run, metric[:MAX_NAME_CHARS], int(first), int(last),
                                           inputs.watermark_ms))

    def runs(self) -> list[dict]:
        """Every registered run, oldest first: run_seq, run_id, kind, started_at_ms, status,
        inputs (a list), output, finished_at_ms, detail."""
        names = ("run_seq", "run_id", "kind", "started_at_ms", "status", "inputs", "output",
                 "finished_at_ms", "detail")
        rows = self._query(f"SELECT {', '.join(names)} FROM ldp_runs ORDER BY run_seq")
        return [{**dict(zip(names, row, strict=True)), "inputs": json.loads(row[5])}
                for row in rows]

    def run_panes(self, run: int) -> int:
        """Panes of run `run` logged in ldp_panes."""
        return int(self._query("SELECT COUNT(*) FROM ldp_panes WHERE run_seq = ?", (run,))[0][0])

    # -- reading ------------------------------------------------------------------------------
    def metrics(self) -> list[str]:
        """The metrics that have at least one window, sorted."""
        return [row[0] for row in self._query(
            "SELECT DISTINCT metric FROM ldp_windows ORDER BY metric")]

    def latest_seq(self) -> int:
        """The newest pane's sequence number (0 for an empty store): a `since` cursor."""
        return int(self._query("SELECT COALESCE(MAX(seq), 0) FROM ldp_panes")[0][0])

    def windows(self, metric: str, since: int = 0) -> list[dict]:
        """The latest pane of each window of `metric` whose pane was logged after `since`, sorted
        by window start: the record with what the store adds or saved from it — `late_reports`
        (None before an ON_TIME pane), `pane_seq`, the `p_star`, `q_star` and
        `smallest_resolvable` columns, and `lower95`/`upper95` (one per value) — read in one
        consistent snapshot."""
        with self._snapshot() as cursor:
            cursor.execute(self._sql(_LATEST_WINDOWS), (metric, since))
            rows = cursor.fetchall()
            cursor.execute(self._sql(_LATEST_BANDS), (metric, since))
            bands: dict[tuple[int, int, str], tuple[list, list]] = {}
            for start_ms, end_ms, version, lower, upper in cursor.fetchall():
                low, high = bands.setdefault((int(start_ms), int(end_ms), version), ([], []))
                low.append(lower)
                high.append(upper)
        windows = []
        for record, late, seq, p_star, q_star, resolvable, start_ms, end_ms, version in rows:
            window = json.loads(record)
            window["late_reports"] = None if late is None else int(late)
            window["pane_seq"] = int(seq)
            window.update(p_star=p_star, q_star=q_star, smallest_resolvable=resolvable)
            window["lower95"], window["upper95"] = bands.get(
                (int(start_ms), int(end_ms), version), ([], []))
            windows.append(window)
        return windows

    def integrity_flags(self, metric: str) -> list[dict]:
        """The windows of `metric` whose integrity section is flagged, sorted by window start:
        {"window_start", "window_end", "version", "implicated", "flag"} with the jump test over
        the stored windows (`output.integrity.with_jump_tests`). In SQL, the stored record
        holds the section: `json_extract(record, '$.integrity.flagged')` (SQLite) or
        `(record::jsonb -> 'integrity' ->> 'flagged')` (PostgreSQL), without the jump test."""
        from ldp_telemetry.output.integrity import flag_text, with_jump_tests
        flagged = []
        for record in with_jump_tests(records_of(self.windows(metric))):
            text = flag_text(record)
            if text is not None:
                flagged.append({"window_start": record.window_start,
                                "window_end": record.window_end, "version": record.version,
                                "implicated": record.integrity["implicated"], "flag": text})
        return flagged

    def rejects(self, metric: str, windows: Iterable[tuple[int, int]] | None = None
                ) -> dict[tuple[int, int], dict[str, int]]:
        """Dead letters of `metric` per window (start_ms, end_ms) and reason; only `windows`
        when given."""
        wanted = None if windows is None else set(windows)
        per_window: dict[tuple[int, int], dict[str, int]] = {}
        for start, end, reason, count in self._query(
                _REJECTS_PER_WINDOW.format(extra=""), (metric,)):
            if wanted is None or (start, end) in wanted:
                per_window.setdefault((int(start), int(end)), {})[reason] = int(count)
        return per_window

    def unattributed_rejects(self) -> dict[tuple[str, str], int]:
        """Dead letters that belong to no window: (metric or '', reason) -> records."""
        rows = self._query("SELECT metric, reason, SUM(records) FROM ldp_rejects "
                           "WHERE slice_start_ms = ? GROUP BY metric, reason",
                           (UNATTRIBUTED_MS,))
        return {(metric, reason): int(count) for metric, reason, count in rows}

    def close(self) -> None:
        self._connection.close()

    def __enter__(self) -> EstimateStore:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- internals ----------------------------------------------------------------------------
    def create_tables(self) -> None:
        """Create the store's tables where they are missing. A store that has them all is only
        read (so opening a store another writer holds does not wait for it), unless it lacks
        the dashboards' read indexes or views (a store made before them): those are added."""
        if self._has_every_table():
            if missing_read_indexes(self) or missing_views(self):
                self.create_read_indexes()
            return
        if self.dialect == "sqlite":
            ddl = _TABLES.format(time="TEXT", serial="INTEGER PRIMARY KEY AUTOINCREMENT")
        else:
            ddl = _TABLES.format(time="TIMESTAMPTZ", serial="BIGSERIAL PRIMARY KEY")
        with self._transaction() as cursor:
            if self.dialect == "postgresql":  # several writers may create the tables at once
                cursor.execute("SELECT pg_advisory_xact_lock(7411235)")
            before: set[str] = set()
            if self._has_table(cursor, "ldp_windows"):
                cursor.execute("SELECT * FROM ldp_windows WHERE 1 = 0")
                before = {description[0] for description in cursor.description}
            if before and "version" not in before:
                raise StoreError("the store was made before estimates named their "
                                 "configuration version (its tables have no 'version' column): "
                                 "write to a new store, or drop its ldp_* tables to rebuild it",
                                 STORE_FIELD)
            if before and "run_seq" not in before:
                self._add_runs(cursor)
            banded = before and self._add_summary_bands(cursor)
            if before:
                self._reband_by_rule(cursor)
                self._reband_summaries(cursor)
            for statement in filter(str.strip, ddl.split(";")):
                cursor.execute(statement)
            cursor.execute(self._sql("DELETE FROM ldp_value_bands WHERE rule <> ?"),
                           (VALUE_BAND_RULE,))
            cursor.execute(self._sql("INSERT INTO ldp_value_bands (rule) VALUES (?) "
                                     "ON CONFLICT DO NOTHING"), (VALUE_BAND_RULE,))
            cursor.execute(self._sql("DELETE FROM ldp_summary_band_rules WHERE rule <> ?"),
                           (SUMMARY_BAND_RULE,))
            cursor.execute(self._sql("INSERT INTO ldp_summary_band_rules (rule) VALUES (?) "
                                     "ON CONFLICT DO NOTHING"), (SUMMARY_BAND_RULE,))
            cursor.execute(_PRIVACY_TABLE)
            self._privacy_table = True
            if banded:  # the summary view reads the new columns
                create_views(cursor, self.dialect)
        self.create_read_indexes()

    def create_read_indexes(self) -> None:
        """The indexes of the dashboards' reads (store/reads.py) and the views for SQL
        dashboards (store/views.py), where missing."""
        views = bool(missing_views(self))
        with self._transaction() as cursor:
            if self.dialect == "postgresql":
                cursor.execute("SELECT pg_advisory_xact_lock(7411235)")
            create_read_indexes(cursor, self.dialect)
            if views:
                create_views(cursor, self.dialect)

    def _has_table(self, cursor, name: str) -> bool:
        cursor.execute(self._sql("SELECT name FROM sqlite_master WHERE type = 'table' AND "
                                 "name = ?") if self.dialect == "sqlite"
                       else "SELECT to_regclass(%s)::text", (name,))
        row = cursor.fetchone()
        return row is not None and row[0] is not None

    def _add_runs(self, cursor) -> None:
        """Give a store made before runs were kept its run columns, in the caller's transaction:
        every row it holds belongs to run 0 (older than any registered run), and a pane is
        logged once per (window, run, pane index)."""
        for table in ("ldp_windows", "ldp_window_values", "ldp_window_summaries", "ldp_rejects",
                      "ldp_panes"):
            cursor.execute(f"ALTER TABLE {table} ADD COLUMN run_seq BIGINT NOT NULL DEFAULT 0")
        key = "metric, version, window_start_ms, window_end_ms, run_seq, pane_index"
        if self.dialect == "postgresql":
            cursor.execute("SELECT conname FROM pg_constraint WHERE conrelid = "
                           "'ldp_panes'::regclass AND contype = 'u'")
            for (name,) in cursor.fetchall():
                cursor.execute(f'ALTER TABLE ldp_panes DROP CONSTRAINT "{name}"')
            cursor.execute(f"ALTER TABLE ldp_panes ADD CONSTRAINT ldp_panes_run_pane "
                           f"UNIQUE ({key})")
            return
        # SQLite cannot drop a constraint: copy the log into a table with the new key
        columns = ("seq, metric, version, window_start_ms, window_end_ms, pane_index, "
                   "pane_timing, n, written_at_ms, run_seq")
        panes = _TABLES[_TABLES.index("CREATE TABLE IF NOT EXISTS ldp_panes"):]
        panes = panes[:panes.index(";")].replace("ldp_panes (", "ldp_panes_with_runs (", 1)
        cursor.execute(panes.format(serial="INTEGER PRIMARY KEY AUTOINCREMENT"))
        cursor.execute(f"INSERT INTO ldp_panes_with_runs ({columns}) "
                       f"SELECT {columns} FROM ldp_panes")
        cursor.execute("DROP TABLE ldp_panes")
        cursor.execute("PRAGMA legacy_alter_table = ON")  # views naming ldp_panes stay as they are
        cursor.execute("ALTER TABLE ldp_panes_with_runs RENAME TO ldp_panes")
        cursor.execute("PRAGMA legacy_alter_table = OFF")

    def _add_summary_bands(self, cursor) -> bool:
        """Give a store's ldp_window_summaries made before it kept bands their lower95/upper95,
        filled from each window's stored record (`output.bands.summary_bands`), in the caller's
        transaction. False when the table already has them (or does not exist yet)."""
        if not self._has_table(cursor, "ldp_window_summaries"):
            return False
        cursor.execute("SELECT * FROM ldp_window_summaries WHERE 1 = 0")
        if "lower95" in {description[0] for description in cursor.description}:
            return False
        for column in ("lower95", "upper95"):
            cursor.execute(f"ALTER TABLE ldp_window_summaries ADD COLUMN {column} "
                           "DOUBLE PRECISION")
        # the read index covering the summaries without their bands (store/reads.py has its
        # successor, made by create_read_indexes)
        cursor.execute("DROP INDEX IF EXISTS ldp_window_summaries_by_statistic")
        cursor.execute("SELECT DISTINCT w.metric, w.version, w.window_start_ms, "
                       "w.window_end_ms, w.record FROM ldp_windows w JOIN ldp_window_summaries s "
                       "ON s.metric = w.metric AND s.version = w.version "
                       "AND s.window_start_ms = w.window_start_ms "
                       "AND s.window_end_ms = w.window_end_ms")
        updates = [(*band, statistic, *window)
                   for *window, text in cursor.fetchall()
                   for statistic, band in summary_bands(json.loads(text)).items()]
        cursor.executemany(self._sql(
            "UPDATE ldp_window_summaries SET lower95 = ?, upper95 = ? WHERE statistic = ? AND "
            "metric = ? AND version = ? AND window_start_ms = ? AND window_end_ms = ?"), updates)
        return True

    def _reband_summaries(self, cursor) -> None:
        """Give the summary rows of a store whose summary rule is not SUMMARY_BAND_RULE (see
        there) the bands its writer saves now, from each stored record of BIN_PROTOCOLS
        (`output.bands.summary_bands`), in the caller's transaction: one window's record in
        memory at a time."""
        if not self._has_table(cursor, "ldp_window_summaries"):
            return
        if self._has_table(cursor, "ldp_summary_band_rules"):
            cursor.execute("SELECT rule FROM ldp_summary_band_rules")
            if SUMMARY_BAND_RULE in {row[0] for row in cursor.fetchall()}:
                return
        marks = ", ".join("?" * len(BIN_PROTOCOLS))
        cursor.execute(self._sql(f"SELECT metric, version, window_start_ms, window_end_ms "
                                 f"FROM ldp_windows WHERE protocol IN ({marks})"),
                       BIN_PROTOCOLS)
        for window in cursor.fetchall():
            cursor.execute(self._sql("SELECT record FROM ldp_windows WHERE metric = ? AND "
                                     "version = ? AND window_start_ms = ? AND "
                                     "window_end_ms = ?"), window)
            (text,) = cursor.fetchone()
            cursor.executemany(self._sql(
                "UPDATE ldp_window_summaries SET lower95 = ?, upper95 = ? WHERE statistic = ? "
                "AND metric = ? AND version = ? AND window_start_ms = ? AND window_end_ms = ?"),
                [(*band, statistic, *window)
                 for statistic, band in summary_bands(json.loads(text)).items()])

    def _reband_by_rule(self, cursor) -> None:
        """Re-band the value rows of a store whose recorded rule is not VALUE_BAND_RULE (see
        there), in the caller's transaction."""
        if not self._has_table(cursor, "ldp_value_bands"):
            self._reband_values(cursor)
            return
        cursor.execute("SELECT rule FROM ldp_value_bands")
        rules = {row[0] for row in cursor.fetchall()}
        if VALUE_BAND_RULE in rules:
            return
        known = [EARLIER_VALUE_BAND_RULES.get(rule) for rule in rules]
        if not known or None in known:  # an unknown (or no) rule: every window
            self._reband_values(cursor)
            return
        self._reband_values(cursor, sorted({name for names in known if names
                                            for name in names}))

    def _reband_values(self, cursor, protocols: list[str] | None = None) -> None:
        """Give the value rows of a store made before VALUE_BAND_RULE the bands its writer
        saves now, from each window's stored record (`store.records.value_rows`), in the
        caller's transaction: one window's record in memory at a time. `protocols`: only the
        windows of these (None: every window)."""
        if protocols is None:
            cursor.execute("SELECT metric, version, window_start_ms, window_end_ms "
                           "FROM ldp_windows")
        else:
            marks = ", ".join("?" * len(protocols))
            cursor.execute(self._sql(f"SELECT metric, version, window_start_ms, window_end_ms "
                                     f"FROM ldp_windows WHERE protocol IN ({marks})"),
                           tuple(protocols))
        windows = cursor.fetchall()
        for window in windows:
            cursor.execute(self._sql("SELECT record FROM ldp_windows WHERE metric = ? AND "
                                     "version = ? AND window_start_ms = ? AND "
                                     "window_end_ms = ?"), window)
            (text,) = cursor.fetchone()
            record = EstimateRecord.from_json(text)
            cursor.executemany(self._sql(
                "UPDATE ldp_window_values SET lower95 = ?, upper95 = ? WHERE metric = ? AND "
                "version = ? AND window_start_ms = ? AND window_end_ms = ? AND value_index = ?"),
                [(row.lower95, row.upper95, *window, row.value_index)
                 for row in value_rows(record)])

    def _has_every_table(self) -> bool:
        """Whether the store has every table `create_tables` makes, its value rows are of
        VALUE_BAND_RULE and its summary rows of SUMMARY_BAND_RULE (read in a snapshot)."""
        listing = ("SELECT name FROM sqlite_master WHERE type = 'table'" if self.dialect == "sqlite"
                   else "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")
        with self._snapshot() as cursor:
            cursor.execute(listing)
            tables = {row[0] for row in cursor.fetchall()}
            if "ldp_windows" not in tables:
                return False
            cursor.execute("SELECT * FROM ldp_windows WHERE 1 = 0")
            columns = {description[0] for description in cursor.description}
            summary_columns: set[str] = set()
            if "ldp_window_summaries" in tables:
                cursor.execute("SELECT * FROM ldp_window_summaries WHERE 1 = 0")
                summary_columns = {description[0] for description in cursor.description}
            rules: set[str] = set()
            if "ldp_value_bands" in tables:
                cursor.execute("SELECT rule FROM ldp_value_bands")
                rules = {row[0] for row in cursor.fetchall()}
            summary_rules: set[str] = set()
            if "ldp_summary_band_rules" in tables:
                cursor.execute("SELECT rule FROM ldp_summary_band_rules")
                summary_rules = {row[0] for row in cursor.fetchall()}
        self._privacy_table = "ldp_metric_privacy" in tables
        return (set(_TABLE_NAMES) <= tables and {"version", "run_seq"} <= columns
                and "lower95" in summary_columns and VALUE_BAND_RULE in rules
                and SUMMARY_BAND_RULE in summary_rules)

    def _sql(self, text: str) -> str:
        return text if self.dialect == "sqlite" else text.replace("?", "%s")

    def _time(self, ms: int):
        """A window bound as the dialect's time value: ISO text with milliseconds in SQLite,
        timestamptz in PG."""
        if self.dialect == "sqlite":
            return iso_from_ms(ms, milliseconds=True)
        return datetime_from_ms(ms)

    def _pane_seq(self, cursor, window: tuple[str, str, int, int], run: int, index: int) -> int:
        """The seq of a pane of `window` (metric, version, start ms, end ms) of run `run`."""
        cursor.execute(self._sql("SELECT seq FROM ldp_panes WHERE metric = ? AND version = ? AND "
                                 "window_start_ms = ? AND window_end_ms = ? AND run_seq = ? "
                                 "AND pane_index = ?"), (*window, run, index))
        return int(cursor.fetchone()[0])

    def _lock_metrics(self, cursor, metrics) -> None:
        """PostgreSQL: take each metric's advisory transaction lock, in sorted order (SQLite's
        BEGIN IMMEDIATE already lets one writer in at a time)."""
        if self.dialect == "postgresql":
            for metric in sorted(metrics):
                cursor.execute("SELECT pg_advisory_xact_lock(7411236, hashtext(%s))", (metric,))

    def _query(self, text: str, params: tuple = ()) -> list[tuple]:
        cursor = self._connection.cursor()
        try:
            cursor.execute(self._sql(text), params)
            rows = cursor.fetchall()
        finally:
            cursor.close()
        if self.dialect == "postgresql":
            self._connection.rollback()  # end the read transaction: the next read sees new panes
        return rows

    def _transaction(self):
        return _Transaction(self)

    def _snapshot(self):
        return _Snapshot(self._connection, self.dialect)


class _Probed(Exception):
    """Ends a probe transaction: rolled back, nothing written."""


class _Transaction:
    """A cursor inside BEGIN … COMMIT (ROLLBACK when the block raises). An error of the
    database driver (read-only, locked, damaged, full, gone) becomes a StoreError naming the
    store; any other exception propagates as it is."""

    def __init__(self, store: EstimateStore):
        self._connection = store._connection
        self._dialect = store.dialect
        self._store = store

    def __enter__(self):
        self._cursor = self._connection.cursor()
        if self._dialect == "sqlite":
            try:
                self._cursor.execute("BEGIN IMMEDIATE")  # take the write lock now, not mid-way
            except sqlite3.Error as error:
                self._cursor.close()
                raise self._failed(error) from None
        return self._cursor

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            if self._dialect == "sqlite":
                self._cursor.execute("COMMIT" if exc_type is None else "ROLLBACK")
            elif exc_type is None:
                self._connection.commit()
            else:
                self._connection.rollback()
        except self._store._errors as error:
            if exc is None or not isinstance(exc, self._store._errors):
                raise self._failed(error) from None
        finally:
            self._cursor.close()
        if exc is not None and isinstance(exc, self._store._errors):
            raise self._failed(exc) from None

    def _failed(self, error: BaseException) -> StoreError:
        text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        return StoreError(f"store {self._store.name}: {text}", STORE_FIELD)


class _Snapshot:
    """A cursor inside a read-only transaction that sees one consistent state of the store."""

    def __init__(self, connection, dialect: str):
        self._connection = connection
        self._dialect = dialect

    def __enter__(self):
        self._cursor = self._connection.cursor()
        if self._dialect == "sqlite":
            self._cursor.execute("BEGIN")  # in WAL mode the first read fixes the snapshot
        else:
            self._cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        return self._cursor

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            if self._dialect == "sqlite":
                self._cursor.execute("COMMIT")
            else:
                self._connection.rollback()  # end the read: the next one sees new panes
        finally:
            self._cursor.close()
