"""The estimate store on SQLite (a file) and on a real PostgreSQL server started by the test."""
from __future__ import annotations

import math
import uuid

import numpy as np
import pytest

from ldp_telemetry.ldp.base.errors import StoreError
from ldp_telemetry.ldp.base.times import ms_from_iso
from ldp_telemetry.ldp.estimation.frequency_bands import score_bands
from ldp_telemetry.store import open_store
from ldp_telemetry.store.records import UNATTRIBUTED_MS, reject_slice

from tests.store.postgres_server import Unavailable, start_server

HOUR = 3_600_000
E2 = math.exp(2.0)
P_STAR, Q_STAR = E2 / (E2 + 2), 1 / (E2 + 2)  # GRR at ε = 2, d = 3


def record(metric="m.grr", start="2024-03-01T00:00:00Z", end="2024-03-01T01:00:00Z", n=100,
           timing="ON_TIME", index=0, estimate=(0.5, 0.3, 0.2), **extra):
    doc = {"metric": metric, "window_start": start, "window_end": end, "n": n,
           "protocol": "grr", "epsilon": 2.0, "p_star": P_STAR, "q_star": Q_STAR,
           "smallest_resolvable": 2 * math.sqrt(Q_STAR * (1 - Q_STAR) / n) / (P_STAR - Q_STAR),
           "estimator": {"method": "unbiased", "params": {}, "iterations": None,
                         "last_change": None},
           "postprocess": {"method": "norm-hyb", "params": {"alpha": 2.0}},
           "labels": ["a", "b", "c"], "estimate": list(estimate),
           "unbiased_estimate": [e + 0.01 for e in estimate],
           "std_error": [0.02, 0.03, 0.04],
           "pane": {"timing": timing, "index": index, "is_last": False}}
    doc.update(extra)
    return doc


@pytest.fixture(scope="session")
def postgres_url():
    try:
        url, stop = start_server()
    except Unavailable as reason:
        pytest.skip(f"PostgreSQL store test skipped: {reason}")
    yield url
    stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request, tmp_path):
    """A fresh, empty store: a new SQLite file, or a new database on the test's server."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/estimates.db"
    import psycopg
    base = request.getfixturevalue("postgres_url")
    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(base, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    return base.replace("/postgres?", f"/{name}?")


def test_a_pane_reads_back_as_written_with_its_accounting(store_url):
    with open_store(store_url) as store:
        written = record(extra_field_kept=True)
        store.write_panes([written])
        [window] = store.windows("m.grr")
        seq = window.pop("pane_seq")
        assert window.pop("late_reports") == 0
        # the band of the unbiased estimate, whatever the post-processing (output.bands)
        lower, upper = score_bands(np.array(written["unbiased_estimate"]), P_STAR, Q_STAR, 100)
        assert window.pop("lower95") == pytest.approx(lower.tolist())
        assert window.pop("upper95") == pytest.approx(upper.tolist())
        assert window == written
        assert seq == store.latest_seq() >= 1
        assert store.metrics() == ["m.grr"]


def test_the_latest_pane_wins_whatever_order_panes_arrive_in(store_url):
    early = record(n=40, timing="EARLY", index=0, estimate=(0.6, 0.3, 0.1))
    on_time = record(n=100, timing="ON_TIME", index=1, estimate=(0.5, 0.3, 0.2))
    late = record(n=130, timing="LATE", index=2, estimate=(0.4, 0.4, 0.2))
    for order in ([early, on_time, late], [late, early, on_time], [on_time, late, early]):
        url = store_url
        with open_store(url) as store:
            for pane in order:
                store.write_panes([pane])
            [window] = store.windows("m.grr")
            assert window["pane"]["index"] == 2 and window["n"] == 130
            assert window["late_reports"] == 30  # 130 counted, 100 of them on time
            rows = store._query("SELECT value_index, label, estimate, lower95, upper95, "
                                "pane_index FROM ldp_window_values ORDER BY value_index")
            assert [(r[0], r[1], r[5]) for r in rows] == [(0, "a", 2), (1, "b", 2), (2, "c", 2)]
            assert [r[2] for r in rows] == pytest.approx([0.4, 0.4, 0.2])
            # the score band of the unbiased estimates 0.41 and 0.21 (output.bands)
            lower, upper = score_bands(np.array([0.41, 0.21]), P_STAR, Q_STAR, 130)
            assert (rows[0][3], rows[2][4]) == pytest.approx((lower[0], upper[1]))
            logged = store._query("SELECT pane_index, pane_timing, n FROM ldp_panes "
                                  "ORDER BY pane_index")
            assert logged == [(0, "EARLY", 40), (1, "ON_TIME", 100), (2, "LATE", 130)]
            store._connection.cursor().execute("DELETE FROM ldp_windows")
            store._connection.cursor().execute("DELETE FROM ldp_panes")
            store._connection.cursor().execute("DELETE FROM ldp_window_values")
            if store.dialect == "postgresql":
                store._connection.commit()


def test_writing_a_pane_again_changes_nothing(store_url):
    with open_store(store_url) as store:
        store.write_panes([record()])
        seq = store.latest_seq()
        store.write_panes([record()])
        assert store.latest_seq() == seq
        assert len(store.windows("m.grr")) == 1
        assert store._query("SELECT COUNT(*) FROM ldp_window_values")[0][0] == 3


def test_a_since_cursor_returns_only_windows_with_new_panes(store_url):
    with open_store(store_url) as store:
        first = record(start="2024-03-01T00:00:00Z", end="2024-03-01T01:00:00Z")
        second = record(start="2024-03-01T01:00:00Z", end="2024-03-01T02:00:00Z")
        store.write_panes([first, second])
        cursor = store.latest_seq()
        assert store.windows("m.grr", since=cursor) == []
        store.write_panes([record(start=second["window_start"], end=second["window_end"],
                                  n=150, timing="LATE", index=1)])
        [changed] = store.windows("m.grr", since=cursor)
        assert (changed["window_start"], changed["n"]) == (second["window_start"], 150)
        assert [w["n"] for w in store.windows("m.grr")] == [100, 150]


def test_rejects_are_counted_per_window_and_unattributed_ones_apart(store_url):
    start = ms_from_iso("2024-03-01T00:00:00Z")
    with open_store(store_url) as store:
        store.write_panes([record(end="2024-03-01T02:00:00Z")])  # a two-hour window
        store.write_rejects({("m.grr", "invalid_payload", start, start + HOUR): 3,
                             ("m.grr", "invalid_payload", start + HOUR, start + 2 * HOUR): 2,
                             ("m.grr", "protocol_mismatch", start, start + HOUR): 1,
                             ("m.grr", "invalid_payload", start + 2 * HOUR, start + 3 * HOUR): 9,
                             ("", "undecodable", UNATTRIBUTED_MS, UNATTRIBUTED_MS): 7})
        window = (start, start + 2 * HOUR)
        assert store.rejects("m.grr") == {window: {"invalid_payload": 5, "protocol_mismatch": 1}}
        # set (a batch job's totals) is idempotent; add accumulates (a live run's increments)
        store.write_rejects({("m.grr", "protocol_mismatch", start, start + HOUR): 1})
        store.write_rejects({("m.grr", "protocol_mismatch", start, start + HOUR): 2}, add=True)
        assert store.rejects("m.grr")[window]["protocol_mismatch"] == 3
        assert store.unattributed_rejects() == {("", "undecodable"): 7}


def test_optional_fields_of_numeric_metrics_and_iterative_estimators_survive(store_url):
    numeric = record(metric="m.sw", bucket_edges=[0.0, 0.25, 0.5, 0.75],
                     mean=0.41, variance=0.02, quantiles={"0.5": 0.4, "0.9": 0.66},
                     estimator={"method": "ems", "params": {"smoothing": True},
                                "iterations": 37, "last_change": 1e-7})
    numeric.update(protocol="sw", p_star=None, q_star=None,
                   smallest_resolvable=None)  # not a frequency oracle: no p*, q*
    with open_store(store_url) as store:
        store.write_panes([numeric])
        [window] = store.windows("m.sw")
        assert window["bucket_edges"] == numeric["bucket_edges"]
        assert window["estimator"]["iterations"] == 37
        row = store._query("SELECT p_star, q_star, smallest_resolvable, estimator "
                           "FROM ldp_windows")[0]
        assert row == (None, None, None, "ems")
        assert (window["p_star"], window["q_star"], window["smallest_resolvable"]) == \
            (None, None, None)


def test_numeric_summaries_are_rows_of_their_own_and_the_latest_pane_wins(store_url):
    """A numeric record's summaries are rows of their own (the variance's standard error its
    `variance_std_error`, NULL in a record written before the field), the latest pane's."""
    def numeric(index, mean, **extra):
        return record(metric="m.hh", index=index, timing="LATE" if index else "ON_TIME",
                      bucket_edges=[0.0, 0.25, 0.5, 0.75], mean=mean, variance=0.02,
                      mean_std_error=0.01, quantiles={"0.5": 0.4, "0.9": 0.66},
                      quantile_std_errors={"0.5": 0.03, "0.9": float("nan")}, **extra)
    with open_store(store_url) as store:
        store.write_panes([numeric(1, 0.45), numeric(0, 0.41)])
        store.write_panes([record()])  # a frequency record has no summaries
        rows = store._query("SELECT metric, statistic, value, std_error, pane_index FROM "
                            "ldp_window_summaries ORDER BY statistic")
        store.write_panes([numeric(2, 0.44, variance_std_error=0.004)])
        variance = store._query("SELECT value, std_error, pane_index FROM "
                                "ldp_window_summaries WHERE statistic = 'variance'")
    assert rows == [("m.hh", "mean", 0.45, 0.01, 1), ("m.hh", "q0.5", 0.4, 0.03, 1),
                    ("m.hh", "q0.9", 0.66, None, 1), ("m.hh", "variance", 0.02, None, 1)]
    assert variance == [(0.02, 0.004, 2)]


def test_p_star_q_star_and_the_smallest_resolvable_frequency_are_stored(store_url):
    with open_store(store_url) as store:
        store.write_panes([record(n=400)])
        p, q, resolvable = store._query(
            "SELECT p_star, q_star, smallest_resolvable FROM ldp_windows")[0]
        [window] = store.windows("m.grr")
    e = math.exp(2.0)
    assert p == pytest.approx(e / (e + 2)) and q == pytest.approx(1 / (e + 2))
    assert resolvable == pytest.approx(2 * math.sqrt(q * (1 - q) / 400) / (p - q))
    assert (window["p_star"], window["q_star"], window["smallest_resolvable"]) == \
        (p, q, resolvable)


def test_a_record_written_before_p_star_existed_stores_nulls_and_recomputes_nothing(store_url):
    old = record()
    for name in ("p_star", "q_star", "smallest_resolvable"):
        del old[name]
    with open_store(store_url) as store:
        store.write_panes([old])
        row = store._query("SELECT p_star, q_star, smallest_resolvable FROM ldp_windows")[0]
        [window] = store.windows("m.grr")
    assert row == (None, None, None)
    assert (window["p_star"], window["q_star"], window["smallest_resolvable"]) == \
        (None, None, None)


def test_names_that_look_like_markup_or_sql_are_plain_data(store_url):
    hostile = "<script>alert(1)</script>'; DROP TABLE ldp_windows; --"
    with open_store(store_url) as store:
        store.write_panes([record(metric=hostile, labels=[hostile, "b", "c"])])
        assert store.metrics() == [hostile]
        assert store.windows(hostile)[0]["labels"][0] == hostile


def test_a_dead_letter_is_counted_in_the_slice_of_its_event_time():
    letter = {"reason": "invalid_payload", "records": 1,
              "report": '{"metric": "m", "event_time": "2024-03-01T00:40:00+00:00"}'}
    start = ms_from_iso("2024-03-01T00:00:00Z")
    assert reject_slice(letter, HOUR) == ("m", "invalid_payload", start, start + HOUR)
    assert reject_slice(letter, HOUR, 30 * 60_000) == (
        "m", "invalid_payload", start + 30 * 60_000, start + 90 * 60_000)
    undecodable = {"reason": "undecodable", "records": 12, "report": None}
    assert reject_slice(undecodable, HOUR) == ("", "undecodable", UNATTRIBUTED_MS,
                                               UNATTRIBUTED_MS)
    bad_time = dict(letter, reason="invalid_event_time")
    assert reject_slice(bad_time, HOUR)[2] == UNATTRIBUTED_MS


def test_unusable_urls_fail_with_a_message(tmp_path):
    with pytest.raises(StoreError, match="^unknown store URL scheme 'mysql'; known: postgres, "
                                         "postgresql, sqlite$") as caught:
        open_store("mysql://x/y")
    assert caught.value.field == "store"
    with pytest.raises(StoreError, match="cannot open the SQLite store") as caught:
        open_store(f"sqlite:///{tmp_path}/missing-folder/x.db")
    assert caught.value.field == "store"
