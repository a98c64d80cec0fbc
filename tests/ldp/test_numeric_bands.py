"""Numeric 95% bands: calibrated by the bias-corrected bootstrap through EM, or declared absent
with a reason; records name their band method and old records still read."""
from __future__ import annotations

import io

import fastavro
import numpy as np
import pytest

from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.ldp.engine.finalize import finalize_window, numeric_bands
from ldp_telemetry.ldp.estimation.uncertainty import (BAND_BIAS_CORRECTED, BAND_EXACT, BAND_NONE,
                                                      BAND_STATISTICS, uncalibrated_statistics)
from ldp_telemetry.output.estimate import EstimateRecord
from ldp_telemetry.output.records import BATCH_PANE, window_estimate_record
from ldp_telemetry.output.text import format_numeric
from ldp_telemetry.schemas import load_schema

T0 = 1_709_251_200_000  # 2024-03-01T00:00:00Z
HOUR = 3_600_000


def sw_config(estimator: str = "ems", epsilon: float = 2.0, buckets: int = 32, high=16.0):
    return parse_registry({"metrics": [{
        "name": "latency", "protocol": "sw", "epsilon": epsilon,
        "domain": {"low": 0, "high": high, "buckets": buckets},
        "estimator": {"method": estimator, "bootstrap": 20, "seed": 5}}]})["latency"]


def window(config, values, rng):
    statistic = config.protocol.new_statistic()
    config.protocol.accumulate(statistic, config.protocol.perturb(config.to_unit(values), rng))
    return statistic


def test_bias_corrected_bands_cover_a_skewed_latency():
    """40 windows of a lognormal latency (n = 2,000, ε = 2, 32 buckets, R = 20): the number of
    windows whose band holds the truth is Binomial(40, c). For a calibrated band (c ≥ 0.93)
    P(count ≤ 29) < 6.8e-5 per statistic, so the 4 checks fail together with probability
    < 3e-4; the EMS bootstrap bands this replaces covered q0.25 in 0 of 24 windows. (q0.25 is
    declared without a band at ε = 2, n ≈ 10³ since its measured coverage there was 0.90.)"""
    config = sw_config()
    rng = np.random.default_rng(2031)
    assert "0.25" in uncalibrated_statistics(2.0, 2000)
    checked = ("mean", "0.5", "0.75", "0.9")
    covered = dict.fromkeys(checked, 0)
    for _ in range(40):
        values = np.clip(rng.lognormal(1.0, 0.6, 2000), 0, 16)
        method, bands = numeric_bands(config, window(config, values, rng), 2000)
        assert method == BAND_BIAS_CORRECTED
        truth = {"mean": values.mean(), **{k: np.quantile(values, float(k))
                                           for k in checked[1:]}}
        for key in checked:
            band = bands[key]
            covered[key] += band.lower is not None and band.lower <= truth[key] <= band.upper
    assert all(count >= 30 for count in covered.values()), covered


def test_extreme_levels_and_other_estimators_have_no_band_and_say_why():
    rng = np.random.default_rng(7)
    config = sw_config()
    statistic = window(config, rng.uniform(2, 10, 3000), rng)
    _, bands = numeric_bands(config, statistic, 3000)
    declared = uncalibrated_statistics(2.0, 3000)
    assert {"0.01", "0.99"} <= set(declared)
    for key in BAND_STATISTICS:
        if key in declared:
            assert bands[key].lower is None and bands[key].reason == declared[key]
        else:
            assert bands[key].lower < bands[key].upper and bands[key].reason is None
    assert set(bands) == set(BAND_STATISTICS)
    method, _ = numeric_bands(config, statistic, 0)
    assert method == BAND_NONE


def test_a_record_names_its_band_method_and_round_trips_through_avro():
    rng = np.random.default_rng(9)
    config = sw_config(estimator="em")
    statistic = window(config, rng.uniform(2, 10, 3000), rng)
    record = window_estimate_record(config, finalize_window(config, statistic, 3000),
                                    T0, T0 + HOUR, BATCH_PANE)
    assert record.band_method == BAND_BIAS_CORRECTED
    assert record.bands["0.01"] is None and "0.01" in record.band_reasons
    band = record.bands["0.5"]
    assert band["lower"] < band["upper"]
    schema = fastavro.parse_schema(load_schema("window_estimate"))
    buffer = io.BytesIO()
    fastavro.writer(buffer, schema, [record.to_avro()])
    buffer.seek(0)
    (read,) = list(fastavro.reader(buffer))
    assert read["bands"] == record.bands and read["band_method"] == BAND_BIAS_CORRECTED
    text = format_numeric(EstimateRecord.from_avro(read))
    assert "95% band: bias-corrected-bootstrap" in text
    assert f"[{band['lower']:.4g}, {band['upper']:.4g}]" in text


def test_old_records_without_band_fields_still_read():
    """A record written before the band fields reads with them null (Avro defaults)."""
    full = load_schema("window_estimate")
    old = {**full, "fields": [f for f in full["fields"]
                              if f["name"] not in ("band_method", "bands", "band_reasons")]}
    rng = np.random.default_rng(11)
    config = sw_config()
    record = window_estimate_record(config, finalize_window(
        config, window(config, rng.uniform(2, 10, 500), rng), 500), T0, T0 + HOUR, BATCH_PANE)
    buffer = io.BytesIO()
    fastavro.writer(buffer, fastavro.parse_schema(old), [record.to_avro()])
    buffer.seek(0)
    (read,) = list(fastavro.reader(buffer, reader_schema=fastavro.parse_schema(full)))
    assert (read["band_method"], read["bands"], read["band_reasons"]) == (None, None, None)
    assert " ± " in format_numeric(EstimateRecord.from_avro(read))  # the old bootstrap band


@pytest.mark.parametrize("protocol", ["sr", "pm"])
def test_mean_only_protocols_give_an_exact_mean_band_and_nothing_else(protocol):
    config = parse_registry({"metrics": [{
        "name": "m", "protocol": protocol, "epsilon": 1.0,
        "domain": {"low": 0, "high": 1, "buckets": 4}}]})["m"]
    rng = np.random.default_rng(3)
    statistic = window(config, rng.uniform(0, 1, 500), rng)
    result = finalize_window(config, statistic, 500)
    assert result.band_method == BAND_EXACT
    assert result.bands["mean"].lower < result.mean < result.bands["mean"].upper
    assert result.bands["0.5"].lower is None


def test_band_limits_margin_rules_and_clipping():
    """The record's margin is the part of |b| its noise t·s/√R does not explain; bands are
    clipped to what a statistic can take (domain [0, 100]: variance ≤ 2,500)."""
    from scipy.stats import t as student_t

    from ldp_telemetry.ldp.estimation.uncertainty import band_limits, feasible_ranges
    edges = np.linspace(0.0, 100.0, 11)
    size = len(BAND_STATISTICS)
    replicated = 50.0 + np.tile(np.array([[-1.0], [1.0]]), (10, size))  # R = 20, mean 50
    s, t = replicated.std(axis=0, ddof=1)[0], student_t.ppf(0.975, 19)
    spread = t * s * np.sqrt(1 + 1 / 20)
    for bias in (0.1, 2.0):
        theta = np.full(size, 50.0 - bias)  # b = mean(θ*) − θ̂ = bias
        lower, upper = band_limits(theta, replicated, edges, "significant")
        extra = max(bias - t * s / np.sqrt(20), 0.0)
        assert np.allclose(upper - lower, 2 * (spread + extra)), bias
        whole = band_limits(theta, replicated, edges, "whole")
        assert np.allclose(whole[1] - whole[0], 2 * (spread + bias))
        assert np.allclose((lower + upper) / 2, theta - bias)  # centred on θ̂ − b
    lowest, highest = feasible_ranges(edges)
    far = band_limits(np.full(size, -300.0), 200 * replicated - 10300.0, edges, "none")
    assert np.all(far[0] >= lowest) and np.all(far[1] <= highest)
    assert highest[BAND_STATISTICS.index("variance")] == 2500.0
    with pytest.raises(ValueError, match="margin"):
        band_limits(theta, replicated, edges, "half")


def test_declarations_follow_the_measured_grid_cell():
    """A window falls in the grid cell of the largest measured ε at or below its own and the
    measured n nearest in log scale; what is declared there is declared for it."""
    from ldp_telemetry.ldp.estimation.uncertainty import UNCALIBRATED_CELLS, coverage_cell
    assert coverage_cell(3.0, 40_000) == (2.0, 100_000)
    assert coverage_cell(0.3, 10 ** 6) == (0.5, 100_000)
    assert coverage_cell(8.0, 1) == (4.0, 1_000)
    assert set(uncalibrated_statistics(4.0, 1_500)) == {"0.99"}
    assert "0.01" not in uncalibrated_statistics(4.0, 50_000)
    assert set(uncalibrated_statistics(0.5)) == {key for key, cells in UNCALIBRATED_CELLS.items()
                                                 if any(e == 0.5 for e, _ in cells)}
