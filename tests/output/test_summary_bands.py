"""Every reader shows a numeric record's own 95% bands (output/bands.py): the store's summary
rows and view, its window reads, the dashboard's window view and chart rows, and `ldp show`.

The record comes from a real Square Wave window finalized with the bias-corrected bootstrap,
whose bands are not centred on the printed estimate and are null for the statistics the
record declares uncalibrated: a reader that drew estimate ± z · s.e. would differ from it.
"""
from __future__ import annotations

import sqlite3

import numpy as np
import pytest

from ldp_telemetry.dashboard.payload import unpack
from ldp_telemetry.dashboard.source import StoreSource
from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.ldp.engine.finalize import finalize_window
from ldp_telemetry.ldp.estimation.frequency_bands import score_bands
from ldp_telemetry.output.bands import (band95, statistic_band, summary_bands,
                                        summary_statistics, value_bands)
from ldp_telemetry.output.estimate import EstimateRecord
from ldp_telemetry.output.layout import version_label
from ldp_telemetry.output.records import BATCH_PANE, window_estimate_record
from ldp_telemetry.output.text import format_numeric
from ldp_telemetry.store import open_store
from ldp_telemetry.store.reads import window_rows

START_MS = 1_709_251_200_000  # 2024-03-01T00:00:00Z

#: 2024-03-01T00:00:00Z, the window the records are made for.
HOUR_START_MS = 1_709_251_200_000


def numeric_record(epsilon: float = 1.0) -> dict:
    """A finalized Square Wave window (EMS, 10 replicates, n = 3,000); at ε = 1 the 0.01, 0.9
    and 0.99 quantiles are declared without a band, and the 0.25 and 0.95 quantiles' bands are
    conservative (no 95% band)."""
    config, result = numeric_window(epsilon)
    return window_estimate_record(config, result, HOUR_START_MS,
                                  HOUR_START_MS + 3_600_000, BATCH_PANE).json_value()


def numeric_window(epsilon: float = 1.0):
    """(config, finalized result) of `numeric_record`'s window."""
    registry = parse_registry({"metrics": [{
        "name": "latency", "protocol": "sw", "epsilon": epsilon,
        "domain": {"low": 0, "high": 32, "buckets": 32},
        "estimator": {"method": "ems", "bootstrap": 10, "seed": 4}}]})
    config = registry["latency"]
    rng = np.random.default_rng(31)
    values = np.clip(rng.lognormal(1.0, 0.6, 3000), 0, 32)
    statistic = config.protocol.new_statistic()
    config.protocol.accumulate(statistic, config.protocol.perturb(config.to_unit(values), rng))
    return config, finalize_window(config, statistic, len(values))


@pytest.fixture(scope="module")
def record() -> dict:
    found = numeric_record()
    assert found["band_method"] == "bias-corrected-bootstrap"
    return found


def expected(record: dict) -> dict:
    """statistic -> the record's own (lower, upper), (None, None) where it has none."""
    out = {}
    for name, key, _, _ in summary_statistics(record):
        band = record["bands"].get(key)
        out[name] = (None, None) if band is None else (band["lower"], band["upper"])
    return out


def same(found: dict, bands: dict) -> bool:
    """Whether two statistic -> (lower, upper) maps agree (None where there is no band)."""
    return found.keys() == bands.keys() and all(
        (found[k][0] is None) == (bands[k][0] is None)
        and (bands[k][0] is None or found[k] == pytest.approx(bands[k])) for k in bands)


def test_the_records_bands_are_not_estimate_plus_minus_z_se(record):
    """The premise: a reader drawing estimate ± z · s.e. would be wrong for this record."""
    bands = expected(record)
    assert any(low is None for low, _ in bands.values())  # declared without a band
    mean_se = band95(record["mean"], record["mean_std_error"])
    assert bands["mean"] != pytest.approx(mean_se)
    assert summary_bands(record) == bands


def test_a_legacy_record_without_band_method_gets_estimate_plus_minus_z_se():
    legacy = {"mean": 2.0, "mean_std_error": 0.5, "variance": 1.0,
              "quantiles": {"0.5": 1.5}, "quantile_std_errors": {"0.5": float("nan")}}
    assert statistic_band(legacy, "mean", 2.0, 0.5) == band95(2.0, 0.5)
    assert summary_bands(legacy) == {"mean": band95(2.0, 0.5), "variance": (None, None),
                                     "q0.5": (None, None)}
    assert summary_bands({"estimate": [0.5, 0.5]}) == {}  # a frequency record has none


def test_store_view_reads_dashboard_and_text_show_the_records_bands(record, tmp_path):
    url = f"sqlite:///{tmp_path}/bands.db"
    with open_store(url) as store:
        store.write_panes([record])
    bands = expected(record)
    with open_store(url, create=False) as store:
        saved = {statistic: (low, high) for statistic, low, high in store._query(
            "SELECT statistic, lower95, upper95 FROM ldp_window_summaries")}
        view = {statistic: (low, high) for statistic, low, high in store._query(
            "SELECT statistic, lower95, upper95 FROM ldp_summary_bands")}
        [row] = window_rows(store, "latency")
    assert same(saved, bands) and same(view, bands)
    assert row["mean_band"] == pytest.approx(list(bands["mean"]))

    source = StoreSource(url)
    try:
        window = source.window("latency", START_MS, START_MS + 3_600_000,
                               version_label(record))
        payload = source.payload("latency", 5)
    finally:
        source.close()
    assert window["mean_band"] == pytest.approx(list(bands["mean"]))
    for level in record["quantiles"]:
        shown = window["quantile_bands"][level]
        assert (shown is None) == (bands[f"q{level}"][0] is None)
        if shown is not None:
            assert shown == pytest.approx(list(bands[f"q{level}"]))
    [packed] = unpack(payload)
    low, high = packed["mean_low"], packed["mean_high"]
    assert (low, high) == pytest.approx(bands["mean"], rel=1e-5)  # 6 significant digits

    text = format_numeric(EstimateRecord.from_value(record))
    assert f"[{bands['mean'][0]:.4g}, {bands['mean'][1]:.4g}]" in text
    assert "(no band)" in text  # q0.1 is declared without a band at ε = 0.5


def test_a_store_made_before_summary_bands_gets_them_from_its_records(record, tmp_path):
    path = tmp_path / "old.db"
    with open_store(f"sqlite:///{path}") as store:
        store.write_panes([record])
    with sqlite3.connect(path) as connection:  # the layout of a store made before the bands
        connection.execute("DROP VIEW ldp_summary_bands")
        connection.execute("DROP INDEX ldp_window_summary_bands_by_statistic")
        connection.execute("CREATE INDEX ldp_window_summaries_by_statistic ON "
                           "ldp_window_summaries (metric, statistic, window_start_ms, "
                           "window_end_ms, version, value, std_error)")
        for column in ("lower95", "upper95"):
            connection.execute(f"ALTER TABLE ldp_window_summaries DROP COLUMN {column}")
    with open_store(f"sqlite:///{path}") as store:  # a writer opens it
        saved = {statistic: (low, high) for statistic, low, high in store._query(
            "SELECT statistic, lower95, upper95 FROM ldp_summary_bands")}
        indexes = {name for (name,) in store._query(
            "SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert same(saved, expected(record))
    assert "ldp_window_summary_bands_by_statistic" in indexes
    assert "ldp_window_summaries_by_statistic" not in indexes


def test_the_variance_keeps_its_bands_standard_error_in_the_record_and_the_store(record,
                                                                              tmp_path):
    """The printed variance is the centre of its exact-variance band, whose maker gives its
    standard error: the record keeps it (`variance_std_error`) and the store's variance row
    holds it, as the mean's row holds `mean_std_error`. A record written before the field
    still loads, writes its line back unchanged and leaves the store's cell NULL."""
    _, result = numeric_window()
    band = result.bands["variance"]
    assert band.estimate == record["variance"] and band.std_error > 0
    assert record["variance_std_error"] == band.std_error
    rows = {name: error for name, _, _, error in summary_statistics(record)}
    assert rows["variance"] == band.std_error and rows["mean"] == record["mean_std_error"]
    written = EstimateRecord.from_value(record)
    assert EstimateRecord.from_avro(written.to_avro()).to_json() == written.to_json()

    old = {key: value for key, value in record.items() if key != "variance_std_error"}
    loaded = EstimateRecord.from_value(old)
    assert loaded.variance_std_error is None and loaded.json_value() == old
    assert EstimateRecord.from_avro(loaded.to_avro()).json_value() == old
    url = f"sqlite:///{tmp_path}/variance.db"
    with open_store(url) as store:
        store.write_panes([record])
    with open_store(url, create=False) as store:
        [(error,)] = store._query("SELECT std_error FROM ldp_window_summaries "
                                  "WHERE statistic = 'variance'")
    assert error == pytest.approx(band.std_error, rel=1e-12)
    with open_store(url) as store:
        store.write_panes([{**old, "pane": {**old["pane"], "index": 1}}])
    with open_store(url, create=False) as store:
        [(error,)] = store._query("SELECT std_error FROM ldp_window_summaries "
                                  "WHERE statistic = 'variance'")
    assert error is None


def wiener_record(protocol: str) -> dict:
    """A window of a 32-value metric estimated by IIW, as a job writes it."""
    config = parse_registry({"metrics": [{"name": "dep", "protocol": protocol, "epsilon": 2.0,
                                          "domain": {"size": 32}, "estimator": "iiw"}]})["dep"]
    rng = np.random.default_rng(5)
    statistic = config.protocol.new_statistic()
    config.protocol.accumulate(statistic, config.protocol.perturb(rng.integers(0, 32, 2000),
                                                                  rng))
    return window_estimate_record(config, finalize_window(config, statistic, 2000),
                                  HOUR_START_MS, HOUR_START_MS + 3_600_000,
                                  BATCH_PANE).json_value()


@pytest.mark.parametrize("protocol", ["oue", "cms"])
def test_a_wiener_record_written_before_bands_were_declared_is_read_with_a_valid_band(protocol):
    """A Wiener record of an earlier release (`band_method` "fixed-gain", no reasons): a pure
    oracle's values get the score band of their unbiased estimate, as today's records; a
    pooled-hash oracle's get none (its std_error is the filter's, without the collision term:
    f~ ± z · it is no 95% band of anything)."""
    record = wiener_record(protocol)
    record = {**record, "band_method": "fixed-gain"}
    record.pop("band_reasons", None)
    lower, upper = value_bands(record)
    if protocol == "cms":
        assert lower == upper == [None] * 32
        return
    expected = score_bands(np.asarray(record["unbiased_estimate"]), record["p_star"],
                           record["q_star"], record["n"])
    np.testing.assert_allclose(lower, expected[0], rtol=1e-12)
    np.testing.assert_allclose(upper, expected[1], rtol=1e-12)


def test_a_wiener_records_values_carry_their_unbiased_estimates_band_in_every_reader(tmp_path):
    """A Wiener filter's fixed-gain standard error leaves out its bias (coverage 72-98%), so
    no band is made from it: the record keeps it as `std_error`, and its values' band is the
    score band of their unbiased estimate, as every post-processing's (exact-variance); the
    store, the dashboard's view and chart and the text show that band."""
    record = wiener_record("oue")
    assert record["band_method"] == "exact-variance" and "band_reasons" not in record
    assert all(error > 0 for error in record["std_error"])
    lower, upper = value_bands(record)
    p, q, n = record["p_star"], record["q_star"], record["n"]
    expected = score_bands(np.asarray(record["unbiased_estimate"]), p, q, n)
    np.testing.assert_allclose(lower, expected[0], rtol=1e-12)
    np.testing.assert_allclose(upper, expected[1], rtol=1e-12)
    url = f"sqlite:///{tmp_path}/wiener.db"
    with open_store(url) as store:
        store.write_panes([record])
        rows = store._query("SELECT value_index, lower95, upper95 FROM ldp_window_values")
    assert len(rows) == 32
    for index, low, high in rows:
        assert (low, high) == pytest.approx((lower[index], upper[index]), rel=1e-9)
    source = StoreSource(url)
    try:
        window = source.window("dep", START_MS, START_MS + 3_600_000, version_label(record))
        payload = source.payload("dep", 5)
    finally:
        source.close()
    assert window["lower95"] == pytest.approx(lower, rel=1e-9)
    [packed] = unpack(payload)
    assert len(packed["top"]) == 5 and None not in packed["low"] + packed["high"]
    from ldp_telemetry.output.text import format_pane, format_top
    typed = EstimateRecord.from_value(record)
    assert "no band" not in format_top(typed) and "no band" not in format_pane(typed)
    assert "95% band: exact-variance" in format_top(typed)


def pooled_records(protocol: str, estimator: str, seed: int, users: np.ndarray, d: int = 256
                   ) -> tuple:
    """(Wiener record, unbiased record, window result) of one window of `users` (value
    indices) under `protocol` at ε = 2, the two records made from the same reports."""
    records = []
    for method in (estimator, "unbiased"):
        config = parse_registry({"metrics": [{"name": "w", "protocol": protocol, "epsilon": 2.0,
                                              "domain": {"size": d},
                                              "estimator": method}]})["w"]
        rng = np.random.default_rng(seed)
        statistic = config.protocol.new_statistic()
        config.protocol.accumulate(statistic, config.protocol.perturb(users, rng))
        result = finalize_window(config, statistic, users.size)
        records.append(window_estimate_record(config, result, HOUR_START_MS,
                                              HOUR_START_MS + 3_600_000))
    return records[0], records[1], result


def test_a_pooled_oracles_wiener_record_keeps_its_unbiased_estimates_band(tmp_path):
    """A pooled-hash oracle's band is f~ ± z · f~'s standard error with the collision term (the
    score band leaves it out); a Wiener record keeps that error as `unbiased_std_error` beside
    the filter's `std_error`, so its values carry exactly the band the same window's unbiased
    record carries, in every reader (value_bands, the store, the text)."""
    record = wiener_record("flh")
    assert record["band_method"] == "exact-variance" and "band_reasons" not in record
    assert len(record["unbiased_std_error"]) == 32
    assert record["unbiased_std_error"] != record["std_error"]
    lower, upper = value_bands(record)
    centre, error = (np.asarray(record[name]) for name in ("unbiased_estimate",
                                                            "unbiased_std_error"))
    np.testing.assert_allclose(lower, centre - 1.959963984540054 * error, rtol=1e-12)
    np.testing.assert_allclose(upper, centre + 1.959963984540054 * error, rtol=1e-12)
    with open_store(f"sqlite:///{tmp_path}/pooled.db") as store:
        store.write_panes([record])
        rows = store._query("SELECT value_index, std_error, lower95, upper95 "
                            "FROM ldp_window_values")
    for index, error_kept, low, high in rows:  # the filter's error kept, f~'s band drawn
        assert error_kept == pytest.approx(record["std_error"][index], rel=1e-12)
        assert (low, high) == pytest.approx((lower[index], upper[index]), rel=1e-9)
    from ldp_telemetry.output.text import format_top
    typed = EstimateRecord.from_value(record)
    assert typed.to_json() == EstimateRecord.from_json(typed.to_json()).to_json()
    assert "no band" not in format_top(typed)


def test_a_pooled_wiener_record_from_before_unbiased_std_error_keeps_no_band():
    """A pooled-hash Wiener record an earlier release wrote (`band_method` "none", its reason,
    no `unbiased_std_error`) is read as it says: no reader draws a band, and `ldp query`'s
    answers (a value, a set, the top k) have none, with the reason."""
    from ldp_telemetry.ldp.estimation.queries import WindowEstimate
    from ldp_telemetry.ldp.estimation.uncertainty import WIENER_NO_BAND
    from ldp_telemetry.output.text import format_top
    record = wiener_record("flh")
    old_reason = ("no band: a pooled-hash oracle's band is its unbiased estimate ± 1.96 of its "
                  "standard errors, and a Wiener record keeps the filter's fixed-gain one")
    record = {**record, "band_method": "none", "band_reasons": {"estimate": old_reason}}
    record.pop("unbiased_std_error")
    assert value_bands(record) == ([None] * 32, [None] * 32)
    assert "no band" in format_top(EstimateRecord.from_value(record))
    window = WindowEstimate.from_record(EstimateRecord.from_value(record))
    answers = [window.point(0), window.set_sum([0, 1]), *window.top_k(3)]
    assert all(a.band_method == "none" and a.band_reason == WIENER_NO_BAND and a.lower95 is None
               for a in answers)


@pytest.mark.parametrize("protocol", ["flh", "hcms", "cms"])
def test_a_pooled_wiener_records_band_is_the_unbiased_records_whatever_its_collision_term(
        protocol):
    """Whatever the window's estimated collision term — here 100 devices holding 100 distinct
    values of 256, so the estimate of Σ f² lies near 1/n and is often 0 (each protocol meets
    such a window in the six seeds: checked, so the check cannot pass by missing the case) —
    a pooled-hash Wiener record's value bands are those of the unbiased record of the same
    reports (never f~ ± z · the filter's fixed-gain error), and `ldp query` gives a value the
    same band."""
    from ldp_telemetry.ldp.estimation.queries import WindowEstimate
    zero_term = 0
    for seed in range(6):
        record, unbiased, result = pooled_records(protocol, "dw", seed, np.arange(100))
        zero_term += result.noise.extra_variance == 0.0
        assert record.band_method == "exact-variance" and record.band_reasons is None
        np.testing.assert_allclose(record.unbiased_std_error, unbiased.std_error, rtol=1e-12)
        expected = value_bands(unbiased)
        got = value_bands(record)
        np.testing.assert_allclose(got[0], expected[0], rtol=1e-12)
        np.testing.assert_allclose(got[1], expected[1], rtol=1e-12)
        answer = WindowEstimate.from_record(record).point(7)
        assert answer.band_method == "exact-variance" and answer.std_error_kind == "fixed-gain"
        assert (answer.lower95, answer.upper95) == pytest.approx((got[0][7], got[1][7]),
                                                                 rel=1e-9)
    assert zero_term > 0


def test_a_pooled_wiener_record_from_before_unbiased_std_error_names_its_error_fixed_gain():
    """An answer on a pooled-hash Wiener record written before `unbiased_std_error` has no
    band, and its standard error is still the filter's fixed-gain one (A's weights on f~), as
    on every other Wiener record: not called "exact"."""
    from ldp_telemetry.ldp.estimation.queries import WindowEstimate
    record = wiener_record("flh")
    record = {**record, "band_method": "none",
              "band_reasons": {"estimate": "an earlier release's reason"}}
    record.pop("unbiased_std_error")
    old = WindowEstimate.from_record(EstimateRecord.from_value(record))
    current = WindowEstimate.from_record(EstimateRecord.from_value(wiener_record("flh")))
    for make in (lambda w: w.point(0), lambda w: w.set_sum([0, 1]), lambda w: w.top_k(3)[0]):
        answer, banded = make(old), make(current)
        assert answer.band_method == "none"
        assert answer.std_error_kind == banded.std_error_kind == "fixed-gain"
        assert answer.std_error == pytest.approx(banded.std_error, rel=1e-12)
