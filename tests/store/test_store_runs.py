"""Runs in the store: each run has an identity, the later run's windows replace an earlier one's
whole (estimate, values, summaries and rejects from one run), and two runs writing one metric at
once never interleave a window's rows. SQLite and a real PostgreSQL server."""
from __future__ import annotations

import multiprocessing
import sqlite3
import threading
import uuid

import pytest

from ldp_telemetry.store import open_store
from ldp_telemetry.store.sql import _TABLES
from tests.store.test_sql_store import HOUR, postgres_url, record, store_url  # noqa: F401

T0 = 1_709_251_200_000  # 2024-03-01T00:00:00Z
W0 = ("2024-03-01T00:00:00Z", "2024-03-01T01:00:00Z")


def numeric(run_tag: float, index: int = 0, **extra):
    """A numeric window record whose every number says which run made it."""
    return record(start=W0[0], end=W0[1], n=int(run_tag * 1000), index=index,
                  estimate=(run_tag, run_tag, run_tag), mean=run_tag, mean_std_error=0.1,
                  variance=run_tag, quantiles={"0.5": run_tag}, **extra)


def rows_of(store, table: str, run_column: str = "run_seq") -> set:
    return {row[0] for row in store._query(f"SELECT DISTINCT {run_column} FROM {table}")}


def test_a_run_has_an_identity_kept_in_the_store(store_url):  # noqa: F811
    with open_store(store_url) as store:
        first = store.begin_run("batch", ["b.avro", "a.avro"], "/out")
        second = store.begin_run("batch", ["c.avro"], "/out2")
        assert second.seq > first.seq and len(first.run_id) == 32
        store.finish_run(first.seq, "finished")
        runs = store.runs()
    assert [(r["run_seq"], r["run_id"], r["kind"], r["inputs"], r["output"], r["status"])
            for r in runs] == [
        (first.seq, first.run_id, "batch", ["a.avro", "b.avro"], "/out", "finished"),
        (second.seq, second.run_id, "batch", ["c.avro"], "/out2", "running")]
    assert runs[0]["started_at_ms"] == first.started_at_ms <= runs[0]["finished_at_ms"]


def test_the_later_run_replaces_a_window_whole_and_its_rejects(store_url):  # noqa: F811
    """Run A: 80,000 reports and two kinds of rejects; run B: 20,000 and one kind. The store
    says B everywhere (before, it kept A's n and values and took B's rejects)."""
    start, end = T0, T0 + HOUR
    with open_store(store_url) as store:
        a = store.begin_run("batch", ["a.avro"], "/a").seq
        b = store.begin_run("batch", ["b.avro"], "/b").seq
        store.write_panes([numeric(80.0)], run=a)
        store.write_rejects({("m.grr", "duplicate", start, end): 5,
                             ("m.grr", "invalid_payload", start, end): 3}, run=a)
        store.write_panes([numeric(20.0)], run=b)
        store.write_rejects({("m.grr", "invalid_payload", start, end): 1}, run=b)
        [window] = store.windows("m.grr")
        assert window["n"] == 20_000 and window["estimate"] == [20.0] * 3
        assert store.rejects("m.grr") == {(start, end): {"invalid_payload": 1}}
        for table in ("ldp_windows", "ldp_window_values", "ldp_window_summaries",
                      "ldp_rejects"):
            assert rows_of(store, table) == {b}, table
        summaries = store._query("SELECT statistic, value FROM ldp_window_summaries")
        assert sorted(summaries) == [("mean", 20.0), ("q0.5", 20.0), ("variance", 20.0)]


def test_an_earlier_run_arriving_late_changes_nothing(store_url):  # noqa: F811
    """Two runs at once: B began later, so B's window stands even when A writes after it, and
    A's rejects of B's slices are not written (A's pane index is higher: it does not matter)."""
    start, end = T0, T0 + HOUR
    with open_store(store_url) as store:
        a = store.begin_run("batch", ["a.avro"], "/a").seq
        b = store.begin_run("batch", ["b.avro"], "/b").seq
        store.write_panes([numeric(20.0)], run=b)
        store.write_panes([numeric(80.0, index=7)], run=a)
        store.write_rejects({("m.grr", "duplicate", start, end): 5}, run=a)
        [window] = store.windows("m.grr")
        assert window["n"] == 20_000 and store.rejects("m.grr") == {}
        assert rows_of(store, "ldp_window_values") == {b}
        # an earlier run's rejects of a slice the later run already counted: also kept out
        other = (T0 + 5 * HOUR, T0 + 6 * HOUR)
        store.write_rejects({("m.grr", "invalid_payload", *other): 2}, run=b)
        store.write_rejects({("m.grr", "duplicate", *other): 9}, run=a)
        assert store._query("SELECT reason, records, run_seq FROM ldp_rejects") == [
            ("invalid_payload", 2, b)]


def test_within_a_run_panes_keep_their_index_order_and_late_counts(store_url):  # noqa: F811
    with open_store(store_url) as store:
        run = store.begin_run("live", ["/in"], "/out").seq
        store.write_panes([numeric(3.0, index=2, pane={"timing": "LATE", "index": 2,
                                                         "is_last": False})], run=run)
        store.write_panes([numeric(2.0, index=1, pane={"timing": "ON_TIME", "index": 1,
                                                         "is_last": False})], run=run)
        [window] = store.windows("m.grr")
        assert window["n"] == 3000 and window["late_reports"] == 1000  # 3000 - ON_TIME's 2000
        later = store.begin_run("live", ["/in"], "/out2").seq
        store.write_panes([numeric(1.0, index=0, pane={"timing": "EARLY", "index": 0,
                                                         "is_last": False})], run=later)
        [window] = store.windows("m.grr")
        # a new run's window: its own panes, not the earlier run's on-time count
        assert window["n"] == 1000 and window["late_reports"] is None
        assert store.run_panes(run) == 2 and store.run_panes(later) == 1


def test_a_restarted_live_run_resumes_its_run(store_url):  # noqa: F811
    with open_store(store_url) as store:
        first = store.begin_run("live", ["/in"], "/out")
        store.finish_run(first.seq, "interrupted")
        again = store.begin_run("live", ["/in"], "/out", resume=True)
        other = store.begin_run("live", ["/in"], "/elsewhere", resume=True)
        assert again == first and other.seq > first.seq
        assert [r["status"] for r in store.runs()] == ["running", "running"]


def old_store(path):
    """An SQLite store as releases before runs made it, with a view over its pane log."""
    connection = sqlite3.connect(path)
    connection.executescript(old_ddl("sqlite"))
    connection.execute("CREATE VIEW pane_counts AS SELECT metric, COUNT(*) AS panes "
                       "FROM ldp_panes GROUP BY metric")
    connection.commit()
    connection.close()


def old_ddl(dialect: str) -> str:
    """The tables as releases before runs made them: no run columns, no ldp_runs, panes keyed
    without a run."""
    ddl = (_TABLES.replace("  run_seq BIGINT NOT NULL DEFAULT 0,\n", "")
           .replace("run_seq, pane_index)", "pane_index)"))
    ddl = ddl[:ddl.index("CREATE TABLE IF NOT EXISTS ldp_runs")] \
        + ddl[ddl.index("CREATE INDEX IF NOT EXISTS ldp_panes_by_metric"):]
    if dialect == "sqlite":
        return ddl.format(time="TEXT", serial="INTEGER PRIMARY KEY AUTOINCREMENT")
    return ddl.format(time="TIMESTAMPTZ", serial="BIGSERIAL PRIMARY KEY")


def test_a_postgresql_store_made_before_runs_gets_them(postgres_url):  # noqa: F811
    import psycopg
    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    url = postgres_url.replace("/postgres?", f"/{name}?")
    with psycopg.connect(url, autocommit=True) as connection:
        for statement in filter(str.strip, old_ddl("postgresql").split(";")):
            connection.execute(statement)
        connection.execute("INSERT INTO ldp_panes (metric, version, window_start_ms, "
                           "window_end_ms, pane_index, pane_timing, n, written_at_ms) "
                           "VALUES ('m.grr', '', 1, 2, 0, 'ON_TIME', 5, 0)")
    with open_store(url) as store:
        assert store._query("SELECT seq, run_seq, n FROM ldp_panes") == [(1, 0, 5)]
        store.write_panes([numeric(80.0)])
        run = store.begin_run("batch", ["b.avro"], "/b").seq
        store.write_panes([numeric(20.0)], run=run)  # pane index 0 again: its own run's
        assert store.windows("m.grr")[0]["n"] == 20_000
        assert store._query("SELECT COUNT(*) FROM ldp_panes") == [(3,)]
        assert store._has_every_table()


def test_a_store_made_before_runs_gets_them_and_keeps_its_windows(tmp_path):
    path = tmp_path / "old.db"
    old_store(path)
    connection = sqlite3.connect(path)
    connection.execute("INSERT INTO ldp_panes (metric, version, window_start_ms, window_end_ms, "
                       "pane_index, pane_timing, n, written_at_ms) "
                       "VALUES ('m.grr', '', 1, 2, 0, 'ON_TIME', 5, 0)")
    connection.commit()
    connection.close()
    url = f"sqlite:///{path}"
    with open_store(url) as store:
        assert store._query("SELECT seq, run_seq, n FROM ldp_panes") == [(1, 0, 5)]
        store.write_panes([numeric(80.0)])  # run 0: what an unregistered writer is
        run = store.begin_run("batch", ["b.avro"], "/b").seq
        store.write_panes([numeric(20.0)], run=run)
        assert store.windows("m.grr")[0]["n"] == 20_000
        assert store._query("SELECT metric, panes FROM pane_counts") == [("m.grr", 3)]
        assert store._query("SELECT MAX(seq) FROM ldp_panes") == [(3,)]
    with open_store(url, create=False) as store:  # migrated once: a complete store is read
        assert store._has_every_table()


#: Longest wait at the writers' barrier: a writer that fails before it fails the test instead
#: of leaving the others waiting.
BARRIER_S = 300.0


def write_windows(url: str, tag: float, windows: int, ready, go) -> int:
    """One run writing `windows` windows of one metric, a transaction each; every number it
    writes is `tag`. Returns its run_seq."""
    with open_store(url) as store:
        run = store.begin_run("batch", [f"{tag}.avro"], f"/out{tag}").seq
        ready.wait(timeout=BARRIER_S)
        go.wait(timeout=BARRIER_S)
        for k in range(windows):
            start, end = T0 + k * HOUR, T0 + (k + 1) * HOUR
            window = record(start=f"2024-03-01T{k:02d}:00:00Z",
                            end=f"2024-03-01T{k + 1:02d}:00:00Z", n=int(tag * 1000),
                            estimate=[tag] * 300, labels=[str(i) for i in range(300)],
                            unbiased_estimate=[tag] * 300, std_error=[0.1] * 300)
            store.write_panes([window], run=run)
            store.write_rejects({("m.grr", f"reason{int(tag)}", start, end): int(tag)}, run=run)
    return run


@pytest.mark.slow
def test_two_runs_writing_one_metric_at_once_never_interleave_a_window(store_url):  # noqa: F811
    windows = 20
    context = multiprocessing.get_context("spawn")
    with context.Manager() as manager:
        ready, go = manager.Barrier(3), manager.Event()
        with context.Pool(2) as pool:
            results = [pool.apply_async(write_windows, (store_url, tag, windows, ready, go))
                       for tag in (1.0, 2.0)]
            try:  # both registered: their order is fixed, their writes are not
                ready.wait(timeout=BARRIER_S)
            except threading.BrokenBarrierError:  # a writer failed first: say why, not hang
                for result in results:
                    if result.ready():
                        result.get()
                raise
            go.set()
            runs = {tag: result.get(timeout=600) for tag, result in zip((1.0, 2.0), results,
                                                                         strict=True)}
    later = max(runs.values())
    tag = next(t for t, run in runs.items() if run == later)
    with open_store(store_url) as store:
        stored = store.windows("m.grr")
        assert len(stored) == windows
        for window in stored:  # the later run's, whole
            assert window["n"] == int(tag * 1000) and set(window["estimate"]) == {tag}
        values = store._query("SELECT run_seq, estimate, COUNT(*) FROM ldp_window_values "
                              "GROUP BY run_seq, estimate")
        assert values == [(later, tag, windows * 300)]
        rejects = store._query("SELECT reason, records, run_seq, COUNT(*) FROM ldp_rejects "
                               "GROUP BY reason, records, run_seq")
        assert rejects == [(f"reason{int(tag)}", int(tag), later, windows)]
