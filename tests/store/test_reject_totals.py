"""Reject totals are upserts (issue 28, item 3): a live run over a directory sets each (metric,
reason, slice) total from its checkpoint after every poll and again whole after a restart, so
writing the same totals again — a replay after a SIGKILL — changes nothing, and a larger total
replaces the smaller one. SQLite and PostgreSQL."""
from __future__ import annotations

from ldp_telemetry.ldp.base.times import ms_from_iso
from ldp_telemetry.store import open_store
from ldp_telemetry.store.records import UNATTRIBUTED_MS
from ldp_telemetry.transforms.store import RejectTotals, follower_writes_rejects
from tests.store.test_sql_store import HOUR, postgres_url, record, store_url  # noqa: F401 (fixtures)


def test_totals_written_again_are_not_added(store_url):  # noqa: F811 (the fixture)
    start = ms_from_iso("2024-03-01T00:00:00Z")
    totals = {("m.grr", "too_late", start, start + HOUR): 4,
              ("", "duplicate", UNATTRIBUTED_MS, UNATTRIBUTED_MS): 150}
    writer = RejectTotals(store_url)
    try:
        for _ in range(3):  # a first run, then two restarts writing their checkpoint's totals
            writer(totals)
        writer({("m.grr", "too_late", start, start + HOUR): 6})  # more of them later
    finally:
        writer.close()
    with open_store(store_url) as store:
        store.write_panes([record(end="2024-03-01T01:00:00Z")])
        assert store.rejects("m.grr") == {(start, start + HOUR): {"too_late": 6}}
        assert store.unattributed_rejects() == {("", "duplicate"): 150}


def test_a_smaller_total_of_the_same_run_never_steps_a_total_back(store_url):  # noqa: F811
    # two bundles of a stream's running totals (RunningRejectTotalsFn) written out of order
    start = ms_from_iso("2024-03-01T00:00:00Z")
    key = ("m.grr", "undecodable", start, start + HOUR)
    with open_store(store_url) as store:
        run = store.begin_run("live", ["inbox/"], "out").seq
        store.write_rejects({key: 9}, run=run)
        store.write_rejects({key: 4}, run=run)  # the earlier bundle's total, written last
        store.write_panes([record(end="2024-03-01T01:00:00Z")], run=run)
        assert store.rejects("m.grr") == {(start, start + HOUR): {"undecodable": 9}}
        later = store.begin_run("batch", ["f.avro"], "out2").seq
        store.write_rejects({key: 2}, run=later)  # a later run's total replaces it whole
        assert store.rejects("m.grr") == {(start, start + HOUR): {"undecodable": 2}}


def test_only_sql_stores_take_totals_from_the_follower():
    assert follower_writes_rejects("sqlite:///x.db")
    assert follower_writes_rejects("postgresql://u@h/db")
    assert not follower_writes_rejects("bigquery://p/d")
    assert not follower_writes_rejects(None)


def test_a_failing_store_counts_the_totals_it_could_not_take_and_never_fails_the_run(tmp_path):
    import sqlite3
    url = f"sqlite:///{tmp_path / 'store.db'}"
    start = ms_from_iso("2024-03-01T00:00:00Z")
    writer = RejectTotals(url)
    try:
        writer({("m.grr", "too_late", start, start + HOUR): 1})
        with sqlite3.connect(tmp_path / "store.db") as db:  # the store breaks under the run
            db.execute("DROP TABLE ldp_rejects")
        writer({("m.grr", "too_late", start, start + HOUR): 2,
                ("m.grr", "duplicate", start, start + HOUR): 5})
        writer({("m.grr", "too_late", start, start + HOUR): 3})  # nothing more is tried
        assert writer.counters() == {"store_rejects_written": 1, "store_rejects_failed": 3}
    finally:
        writer.close()
