"""The dashboards' reads (store/reads.py) on SQLite and a real PostgreSQL server: what each
returns, and that each is answered from an index (the query plans are read)."""
from __future__ import annotations

import numpy as np
import pytest

from ldp_telemetry.ldp.base.times import iso_from_ms
from ldp_telemetry.ldp.estimation.frequency_bands import score_bands
from ldp_telemetry.store import open_store, reads
from ldp_telemetry.store.records import UNATTRIBUTED_MS

from tests.store.test_sql_store import (HOUR, P_STAR, Q_STAR, postgres_url,  # noqa: F401
                                        record, store_url)

START = 1_709_251_200_000  # 2024-03-01T00:00:00Z


def hour(k: int, **extra) -> dict:
    """The k-th hourly window of m.grr; values a, b, c with `b` rising with k."""
    estimate = (0.5 - 0.01 * k, 0.3 + 0.01 * k, 0.2)
    return record(start=iso_from_ms(START + k * HOUR), end=iso_from_ms(START + (k + 1) * HOUR),
                  n=100 + k, estimate=estimate, **extra)


@pytest.fixture()
def filled(store_url):  # noqa: F811 - the fixture imported above
    with open_store(store_url) as store:
        store.write_panes([hour(k) for k in range(6)])
        store.write_panes([record(metric="m.num", start=iso_from_ms(START),
                                  end=iso_from_ms(START + HOUR), mean=3.5, mean_std_error=0.25,
                                  variance=1.0, quantiles={"0.5": 3.0},
                                  quantile_std_errors={"0.5": 0.5})])
        store.write_rejects({("m.grr", "invalid_payload", START + 10, START + 11): 2,
                             ("m.grr", "invalid_payload", START + 2 * HOUR,
                              START + 2 * HOUR + 1): 3,
                             ("m.grr", "undecodable", UNATTRIBUTED_MS, UNATTRIBUTED_MS): 7})
    store = open_store(store_url, create=False)
    yield store
    store.close()


def test_a_metric_summary_is_one_row_of_counts_and_its_latest_window(filled):
    summaries = {s["metric"]: s for s in reads.metric_summaries(filled)}
    grr = summaries["m.grr"]
    assert (grr["windows"], grr["first_start_ms"], grr["last_end_ms"]) == (6, START,
                                                                            START + 6 * HOUR)
    assert (grr["latest_start_ms"], grr["latest_n"], grr["latest_timing"]) == (
        START + 5 * HOUR, 105, "ON_TIME")
    assert grr["reports"] == sum(100 + k for k in range(6))
    assert grr["rejects"] == 5  # the unattributed 7 are not the metric's windows'
    assert (grr["protocol"], grr["epsilon"]) == ("grr", 2.0)
    assert summaries["m.num"]["windows"] == 1


def test_window_rows_are_paged_by_time_and_cursor(filled):
    rows = reads.window_rows(filled, "m.grr")
    assert [r["window_start_ms"] for r in rows] == [START + k * HOUR for k in range(6)]
    assert [r["n"] for r in rows] == [100 + k for k in range(6)]
    assert "record" not in rows[0] and rows[0]["pane_timing"] == "ON_TIME"
    page = reads.window_rows(filled, "m.grr", 0, START + HOUR, START + 4 * HOUR, limit=2)
    assert [r["window_start_ms"] for r in page] == [START + 2 * HOUR, START + 3 * HOUR]
    forward = reads.window_rows(filled, "m.grr", 0, START + HOUR, limit=2, oldest=True)
    assert [r["window_start_ms"] for r in forward] == [START + HOUR, START + 2 * HOUR]
    assert reads.metric_span(filled, "m.grr") == {
        "windows": 6, "first_start_ms": START, "last_start_ms": START + 5 * HOUR}
    assert reads.metric_span(filled, "absent")["windows"] == 0
    newest = max(r["pane_seq"] for r in rows)
    assert reads.window_rows(filled, "m.grr", since=newest) == []
    [numeric] = reads.window_rows(filled, "m.num")
    assert (numeric["mean"], numeric["mean_std_error"]) == (3.5, 0.25)


def test_top_values_totals_labels_and_one_window_by_its_key(filled):
    version = reads.window_rows(filled, "m.grr")[0]["version"]
    totals, count = reads.value_totals(filled, "m.grr", version, HOUR)
    assert count == 6
    assert totals == pytest.approx([sum(0.5 - 0.01 * k for k in range(6)),
                                    sum(0.3 + 0.01 * k for k in range(6)), 1.2])
    top = reads.top_values(filled, "m.grr", version, [1, 0], START + 4 * HOUR, START + 9 * HOUR)
    assert sorted(top) == [(START + 4 * HOUR, START + 5 * HOUR),
                           (START + 5 * HOUR, START + 6 * HOUR)]
    estimate, low, high = top[(START + 5 * HOUR, START + 6 * HOUR)][1]
    # the score band of the unbiased estimate (0.36), around the post-processed 0.35
    band = score_bands(np.array([0.36]), P_STAR, Q_STAR, 105)
    assert (estimate, low, high) == pytest.approx((0.35, band[0][0], band[1][0]))
    assert reads.labels_of(filled, "m.grr", version, START, START + HOUR, [2, 0]) == {
        0: "a", 2: "c"}
    one = reads.window_record(filled, "m.grr", version, START + 3 * HOUR, START + 4 * HOUR)
    assert one["n"] == 103 and one["estimate"] == pytest.approx([0.47, 0.33, 0.2])
    assert one["upper95"] == pytest.approx(  # the score band of the unbiased estimates
        score_bands(np.array([0.48, 0.34, 0.21]), P_STAR, Q_STAR, 103)[1].tolist())
    assert reads.window_record(filled, "m.grr", version, START, START + 1) is None
    assert reads.window_rejects(filled, "m.grr") == {
        (START, START + HOUR): {"invalid_payload": 2},
        (START + 2 * HOUR, START + 3 * HOUR): {"invalid_payload": 3}}
    assert reads.window_rejects(filled, "m.grr", START + HOUR, START + 2 * HOUR) == {}


def plan(store, text: str, params: tuple) -> list[str]:
    """The query plan of one read, one line per step."""
    connection = store._connection
    if store.dialect == "sqlite":
        rows = connection.execute("EXPLAIN QUERY PLAN " + text, params).fetchall()
        return [row[-1] for row in rows]
    with connection.cursor() as cursor:
        cursor.execute("SET enable_seqscan = off")  # a table this small is scanned otherwise:
        try:  # with scans priced out, a plan without an index has to scan anyway
            cursor.execute("EXPLAIN " + store._sql(text), params)
            return [row[0] for row in cursor.fetchall()]
        finally:
            connection.rollback()


def test_every_read_is_answered_from_an_index(filled):
    assert reads.missing_read_indexes(filled) == []
    for name, (text, params) in reads.QUERIES.items():
        steps = plan(filled, text, params)
        if filled.dialect == "sqlite" and name in ("record", "bands", "labels"):
            assert "window_start_ms=? AND window_end_ms=?" in steps[0], (name, steps)  # by key
        if filled.dialect == "sqlite":
            # every table is searched by an index or scanned through a covering one; nothing is
            # sorted in a temporary tree but the groups of the reject slices found in a range
            # and a string series' labels (grouped by label, the most recent first: its rows
            # are found by the table's key, windows × heavy hitters of one series)
            for step in steps:
                if step.startswith(("SCAN", "SEARCH")) and "ldp_" in step:
                    assert "INDEX" in step, (name, steps)
                if name == "label_totals":
                    continue
                if name != "rejects_in_range" or "GROUP BY" not in step:
                    assert "TEMP B-TREE" not in step, (name, steps)
        else:
            assert not any("Seq Scan" in step for step in steps), (name, steps)
            assert any("Index" in step for step in steps), (name, steps)


def test_a_store_made_before_the_read_indexes_gets_them(tmp_path):
    url = f"sqlite:///{tmp_path}/old.db"
    with open_store(url) as store:
        store.write_panes([hour(0)])
        for name, *_ in reads.READ_INDEXES:
            store._connection.execute(f"DROP INDEX {name}")
        assert len(reads.missing_read_indexes(store)) == len(reads.READ_INDEXES)
    from ldp_telemetry.dashboard.source import StoreSource
    source = StoreSource(url)
    try:
        assert source.notes and "made the store's read indexes and views" in source.notes[0]
    finally:
        source.close()
    with open_store(url, create=False) as store:
        assert reads.missing_read_indexes(store) == []
