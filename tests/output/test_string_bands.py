"""A string metric's heavy hitters have no 95% band in its records, as in `ldp query`: the
search chose them for their high estimates, and estimate ± 1.96 s.e. ([Wang20] eq. 2) is the
band of a string fixed in advance, never measured for the strings found. The writer states
`none` with the reason; every reader (output.bands.value_band_method: `ldp show`, the store,
the dashboard, `ldp query`) reads any string record so, an older one stating exact-variance
too. Deterministic: no randomness is drawn."""
from __future__ import annotations

import numpy as np
import pytest

from ldp_telemetry.ldp.engine.finalize import StringWindowResult
from ldp_telemetry.ldp.estimation.heavy_hitters import HEAVY_HITTER_BAND_REASON, HeavyHitters
from ldp_telemetry.output.bands import (declares_no_value_band, value_band_method,
                                        value_band_reason, value_bands)
from ldp_telemetry.output.estimate import EstimateRecord
from ldp_telemetry.output.records import window_estimate_record
from ldp_telemetry.output.text import format_top, no_band_notes
from ldp_telemetry.store import open_store
from ldp_telemetry.store.sql import VALUE_BAND_RULE
from tests.store.test_sql_store import postgres_url, record, store_url  # noqa: F401

START_MS = 1_709_251_200_000  # 2024-03-01T00:00:00Z


def written() -> EstimateRecord:
    """A string metric's record as its job writes it now: two heavy hitters."""
    from tests.pipelines.test_string_pipeline import CONFIG
    found = HeavyHitters(values=[b"mail", b"maps"], estimate=np.array([0.4, 0.3]),
                         std_error=np.array([0.01, 0.02]),
                         level_reports=np.array([100] * 10))
    return window_estimate_record(CONFIG, StringWindowResult(1_000, found), START_MS,
                                  START_MS + 3_600_000)


def older(band_method: str | None = "exact-variance") -> dict:
    """The same record as a job wrote it before string records declared no band: stating
    `band_method` exact-variance without `band_reasons` (or, older still, no `band_method`)."""
    value = written().json_value()
    del value["band_reasons"]
    if band_method is None:
        del value["band_method"]
    else:
        value["band_method"] = band_method
    return value


def test_the_writer_states_no_band_and_why():
    value = written().json_value()
    assert value["band_method"] == "none"
    assert value["band_reasons"] == {"estimate": HEAVY_HITTER_BAND_REASON}
    assert value["std_error"] == [0.01, 0.02]  # kept
    # read back from JSON and from Avro, it writes the same line
    again = EstimateRecord.from_json(written().to_json())
    assert again.to_json() == written().to_json()
    assert EstimateRecord.from_avro(written().to_avro()).to_json() == written().to_json()


@pytest.mark.parametrize("stated", ["exact-variance", None], ids=["exact-variance", "unstated"])
def test_an_older_string_record_is_read_as_todays(stated):
    """Whatever an older string record states, its readers give its values no band, and say
    why: the typed record and its decoded JSON alike."""
    for value in (older(stated), EstimateRecord.from_json(older(stated))):
        assert value_band_method(value) == "none" and declares_no_value_band(value)
        assert value_band_reason(value) == HEAVY_HITTER_BAND_REASON
        assert value_bands(value) == ([None, None], [None, None])


def test_a_frequency_record_keeps_its_band_and_states_no_reason():
    plain = record()
    assert value_band_method(plain) == "exact-variance" and value_band_reason(plain) is None


def test_ldp_show_prints_no_plus_minus_for_a_heavy_hitter_and_the_reason_once():
    shown = [EstimateRecord.from_json(older()), written()]
    for one in shown:
        text = format_top(one)
        assert "±" not in text and "95% band: none" in text
        assert "(s.e. 0.0100, no band)" in text and "(s.e. 0.0200, no band)" in text
    assert no_band_notes(shown) == [f"no band: {HEAVY_HITTER_BAND_REASON}"]
    assert no_band_notes([EstimateRecord.from_json(record())]) == []


def _string_rows(store) -> list[tuple]:
    return store._query("SELECT std_error, lower95, upper95 FROM ldp_window_values "
                        "WHERE metric = 'app.name' ORDER BY value_index")


def test_the_store_saves_no_band_for_a_heavy_hitter(store_url):  # noqa: F811
    """Value rows of a string metric: lower95/upper95 NULL, std_error kept, whether the record
    is today's or an older one stating exact-variance."""
    for value in (written().json_value(), older()):
        with open_store(store_url) as store:
            store.write_panes([value])
            assert _string_rows(store) == [(pytest.approx(0.01), None, None),
                                           (pytest.approx(0.02), None, None)]


def test_a_store_of_the_rule_before_drops_its_heavy_hitters_bands_on_open(store_url):  # noqa: F811
    """A store whose string rows were banded estimate ± 1.96 s.e. (rule "pool-corrected-band")
    gets them NULL when a writer opens it, the other protocols' rows left as they are."""
    with open_store(store_url) as store:
        store.write_panes([older(), record()])
        with store._transaction() as cursor:  # as the rule before wrote and recorded them
            cursor.execute("UPDATE ldp_value_bands SET rule = 'pool-corrected-band'")
            cursor.execute("UPDATE ldp_window_values SET lower95 = estimate - 1.96 * std_error, "
                           "upper95 = estimate + 1.96 * std_error WHERE metric = 'app.name'")
            cursor.execute("UPDATE ldp_window_values SET lower95 = -1 WHERE metric = 'm.grr'")
    with open_store(store_url, create=False) as store:  # a reader reads what is stored
        assert _string_rows(store)[0][1] == pytest.approx(0.4 - 1.96 * 0.01)
    with open_store(store_url) as store:  # a writer opens it
        assert [row[1:] for row in _string_rows(store)] == [(None, None), (None, None)]
        assert {row[0] for row in store._query(
            "SELECT lower95 FROM ldp_window_values WHERE metric = 'm.grr'")} == {-1}
        assert store._query("SELECT rule FROM ldp_value_bands") == [(VALUE_BAND_RULE,)]
