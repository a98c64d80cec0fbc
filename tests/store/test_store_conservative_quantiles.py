"""A store whose summary rows were saved when a CFO-binning or hierarchical-histogram record's
quantiles gave their band of whole bins as a 95% band (lower95/upper95) has those rows' 95% bands
removed from each window's stored record when a writer opens it, once: the band is
conservative, not a 95% band (`output.bands.conservative_band`). SQLite and PostgreSQL."""
from __future__ import annotations

from ldp_telemetry.ldp.estimation.histograms import QUANTILE_LEVELS
from ldp_telemetry.output.bands import conservative_band, statistic_band
from ldp_telemetry.store import open_store
from ldp_telemetry.store.sql import SUMMARY_BAND_RULE
from tests.ldp.test_conservative_quantiles import _record
from tests.store.test_sql_store import postgres_url, store_url  # noqa: F401


def _saved(store) -> dict[str, tuple]:
    return {statistic: (low, high) for statistic, low, high in store._query(
        "SELECT statistic, lower95, upper95 FROM ldp_window_summaries")}


def test_a_store_of_conservative_quantile_rows_loses_them_when_a_writer_opens_it(
        store_url):  # noqa: F811
    record = _record("hh")
    with open_store(store_url) as store:
        store.write_panes([record])
        with store._transaction() as cursor:  # the rows as saved before conservative_bands
            cursor.execute("DROP TABLE IF EXISTS ldp_summary_band_rules")
            for key in QUANTILE_LEVELS:
                cursor.execute(store._sql("UPDATE ldp_window_summaries SET lower95 = ?, "
                                          "upper95 = ? WHERE statistic = ?"),
                               (*conservative_band(record, key), f"q{key}"))
        assert _saved(store)["q0.5"] == conservative_band(record, "0.5")
    with open_store(store_url) as store:  # a writer opens it
        saved = _saved(store)
        assert all(saved[f"q{key}"] == (None, None) for key in QUANTILE_LEVELS)
        assert saved["mean"] == statistic_band(record, "mean") != (None, None)
        assert store._query("SELECT rule FROM ldp_summary_band_rules") == [(SUMMARY_BAND_RULE,)]


def test_a_new_store_records_the_summary_rule_once(store_url):  # noqa: F811
    for _ in range(2):
        with open_store(store_url) as store:
            assert store._query("SELECT rule FROM ldp_summary_band_rules") == [(SUMMARY_BAND_RULE,)]


def test_a_store_made_before_both_rules_is_rebanded_by_one_writer_opening_it(
        store_url):  # noqa: F811
    """A store made before a string metric's heavy hitters lost their band (value rule
    "pool-corrected-band") and before CFO-binning and HH quantiles lost theirs (no summary rule),
    holding records written then: one writer opening it makes both rules' rows today's, and
    records both rules; the mean's summary band and a plain frequency window's value bands stay."""
    from tests.ldp.test_conservative_quantiles import _written_before
    from tests.output.test_string_bands import _string_rows, older
    from tests.store.test_sql_store import record as frequency_record
    from ldp_telemetry.store.sql import VALUE_BAND_RULE
    quantiles = _written_before(_record("hh"))
    with open_store(store_url) as store:
        store.write_panes([quantiles.to_json(), older(), frequency_record()])
        plain = store._query("SELECT lower95, upper95 FROM ldp_window_values "
                             "WHERE metric = 'm.grr' ORDER BY value_index")
        with store._transaction() as cursor:  # the tables and rows as saved before both rules
            cursor.execute("UPDATE ldp_value_bands SET rule = 'pool-corrected-band'")
            cursor.execute("DROP TABLE ldp_summary_band_rules")
            cursor.execute("UPDATE ldp_window_values SET lower95 = estimate - 1.96 * std_error, "
                           "upper95 = estimate + 1.96 * std_error WHERE metric = 'app.name'")
            for key in QUANTILE_LEVELS:
                cursor.execute(store._sql("UPDATE ldp_window_summaries SET lower95 = ?, "
                                          "upper95 = ? WHERE statistic = ?"),
                               (*conservative_band(quantiles, key), f"q{key}"))
    with open_store(store_url, create=False) as store:  # a reader reads what is stored
        assert _saved(store)["q0.5"] == conservative_band(quantiles, "0.5") != (None, None)
        assert _string_rows(store)[0][1] is not None
    with open_store(store_url) as store:  # a writer opens it
        saved = _saved(store)
        assert all(saved[f"q{key}"] == (None, None) for key in QUANTILE_LEVELS)
        assert saved["mean"] == statistic_band(quantiles, "mean") != (None, None)
        assert [row[1:] for row in _string_rows(store)] == [(None, None), (None, None)]
        assert store._query("SELECT lower95, upper95 FROM ldp_window_values "
                            "WHERE metric = 'm.grr' ORDER BY value_index") == plain
        assert store._query("SELECT rule FROM ldp_value_bands") == [(VALUE_BAND_RULE,)]
        assert store._query("SELECT rule FROM ldp_summary_band_rules") == [(SUMMARY_BAND_RULE,)]
