"""The store's SQL views (store/views.py) on SQLite and a real PostgreSQL server, and the example
Grafana dashboard's queries run against them."""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from ldp_telemetry.ldp.base.times import iso_from_ms
from ldp_telemetry.ldp.estimation.frequency_bands import score_bands
from ldp_telemetry.output.bands import Z95
from ldp_telemetry.store import open_store
from ldp_telemetry.store.views import VIEWS, missing_views

from tests.store.test_sql_store import (HOUR, P_STAR, Q_STAR, postgres_url,  # noqa: F401
                                        record, store_url)

START = 1_709_251_200_000
GRAFANA = Path(__file__).resolve().parents[2] / "docs" / "grafana" / "ldp-dashboard.json"


@pytest.fixture()
def filled(store_url):  # noqa: F811 - the fixture imported above
    with open_store(store_url) as store:
        store.write_panes([record(start=iso_from_ms(START + k * HOUR),
                                  end=iso_from_ms(START + (k + 1) * HOUR), n=100 + k,
                                  estimate=(0.5 - 0.1 * k, 0.3 + 0.1 * k, 0.2))
                           for k in range(3)])
        store.write_panes([record(metric="m.num", start=iso_from_ms(START),
                                  end=iso_from_ms(START + HOUR), mean=3.5, mean_std_error=0.25,
                                  quantiles={"0.5": 3.0}, quantile_std_errors={"0.5": 0.5})])
        store.write_rejects({("m.grr", "invalid_payload", START + 10, START + 11): 2})
    store = open_store(store_url, create=False)
    yield store
    store.close()


def rows(store, sql: str, params: tuple = ()) -> list[tuple]:
    return [tuple(row) for row in store._query(sql, params)]


def test_the_views_exist_with_the_tables(filled):
    assert missing_views(filled) == []
    assert len(VIEWS) == 5


def test_latest_estimates_with_bands_and_resolution(filled):
    found = rows(filled, "SELECT window_start_ms, label, estimate, lower95, upper95, n, resolved "
                         "FROM ldp_estimates WHERE metric = ? ORDER BY window_start_ms, "
                         "value_index", ("m.grr",))
    assert len(found) == 9
    start, label, estimate, lower, upper, n, resolved = found[3]  # the second window's a
    assert (start, label, n) == (START + HOUR, "a", 101)
    # the score band of the unbiased estimate (0.41), around the post-processed 0.4
    band = score_bands(np.array([0.41]), P_STAR, Q_STAR, 101)
    assert (estimate, lower, upper) == pytest.approx((0.4, band[0][0], band[1][0]))
    assert resolved == 1  # 0.4 is above the floor of 101 reports (about 0.13)
    clipped = rows(filled, "SELECT MIN(lower95_clipped) FROM ldp_estimates")[0][0]
    assert clipped >= 0


def test_top_series_rank_values_by_their_mean_over_windows(filled):
    ranks = rows(filled, "SELECT label, rank, mean_estimate, windows FROM ldp_value_ranks "
                         "WHERE metric = ? ORDER BY rank", ("m.grr",))
    # means: a 0.4, b 0.4, c 0.2 -> a and b tie, the lower index first
    assert [(label, int(rank)) for label, rank, _, _ in ranks] == [("a", 1), ("b", 2), ("c", 3)]
    assert ranks[0][2] == pytest.approx(0.4) and int(ranks[0][3]) == 3
    top = rows(filled, "SELECT label, COUNT(*) FROM ldp_top_series WHERE metric = ? AND "
                       "rank <= 2 GROUP BY label ORDER BY label", ("m.grr",))
    assert [(label, int(count)) for label, count in top] == [("a", 3), ("b", 3)]


def test_accounting_and_numeric_bands(filled):
    accounting = rows(filled, "SELECT window_start_ms, n, rejected FROM ldp_window_accounting "
                              "WHERE metric = ? ORDER BY window_start_ms", ("m.grr",))
    assert [(s, int(n), int(r)) for s, n, r in accounting] == [
        (START, 100, 2), (START + HOUR, 101, 0), (START + 2 * HOUR, 102, 0)]
    [(value, lower, upper)] = rows(filled, "SELECT value, lower95, upper95 FROM "
                                           "ldp_summary_bands WHERE metric = ? AND statistic = "
                                           "'q0.5'", ("m.num",))
    assert (value, lower, upper) == pytest.approx((3.0, 3.0 - Z95 * 0.5, 3.0 + Z95 * 0.5))


def grafana_queries() -> list[str]:
    board = json.loads(GRAFANA.read_text(encoding="utf-8"))
    queries = [target["rawSql"] for panel in board["panels"] for target in panel["targets"]]
    queries += [variable["query"] for variable in board["templating"]["list"]]
    return queries


def test_the_example_grafana_dashboard_queries_the_views(filled):
    """Each panel's and variable's SQL, with Grafana's macros and variables filled in as Grafana
    would, runs and returns rows."""
    version = rows(filled, "SELECT version FROM ldp_windows LIMIT 1")[0][0]
    for sql in grafana_queries():
        text = (sql.replace("$__timeFilter(time)", "1 = 1").replace("$metric", "m.grr")
                .replace("$version", version).replace("$value", "a"))
        assert "$" not in text, text
        found = filled._query(text)
        if "ldp_summary_bands" not in text:  # m.grr has no numeric summaries
            assert found, text
        assert not re.search(r"\bldp_window_values\b|\brecord\b", text), text  # views only
