"""Numeric 95% bands: calibrated by the bias-corrected bootstrap through EM, or declared absent
with a reason; records name their band method and old records still read."""
from __future__ import annotations

import io

import fastavro
import numpy as np
import pytest

from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.ldp.engine.finalize import finalize_window, numeric_bands
from ldp_telemetry.ldp.estimation.bin_quantiles import CONSERVATIVE_QUANTILE_REASON, WHOLE_BINS
from ldp_telemetry.ldp.estimation.histograms import QUANTILE_LEVELS
from ldp_telemetry.ldp.estimation.uncertainty import (BAND_BIAS_CORRECTED, BAND_EXACT, BAND_NONE,
                                                      BAND_STATISTICS, conservative_statistics,
                                                      uncalibrated_statistics)
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


def test_calibrated_bands_cover_a_data_shape_they_were_not_fitted_on():
    """80 windows of a gamma(2, 2) latency — a shape the margins were not fitted on (they were
    fitted on a lognormal latency and flight distances) — at a calibrated cell (n = 1,000,
    ε = 4, 128 buckets over [0, 32], R = 20): the windows whose band holds the truth are
    Binomial(80, c) per statistic. For a calibrated band (c ≥ 0.93) P(count ≤ 65) < 4.1e-4,
    so the at most 11 checks fail together with probability < 0.5%. A level whose band is
    given as conservative there (`conservative_statistics`) is checked on that band, which
    holds at least as often."""
    config = sw_config(epsilon=4.0, buckets=128, high=32.0)
    rng = np.random.default_rng(2031)
    declared = uncalibrated_statistics(4.0, 1000)
    conservative = conservative_statistics(4.0, 1000)
    checked = [key for key in BAND_STATISTICS if key not in declared]
    assert len(checked) >= 5  # the mean, the variance and the three quantiles kept there
    covered = dict.fromkeys(checked, 0)
    for _ in range(80):
        values = np.clip(rng.gamma(2.0, 2.0, 1000), 0, 32)
        method, bands, kept = numeric_bands(config, window(config, values, rng), 1000)
        # the band method names the quantiles' 95% bands: none where every banded one is
        # conservative
        assert method == (BAND_BIAS_CORRECTED if set(checked) - set(conservative)
                          - {"mean", "variance"} else BAND_NONE)
        truth = dict(zip(BAND_STATISTICS, [values.mean(), values.var(), *np.quantile(
            values, [float(key) for key in BAND_STATISTICS[2:]])], strict=True))
        for key in checked:
            band = kept[key] if key in conservative else bands[key]
            covered[key] += band.lower is not None and band.lower <= truth[key] <= band.upper
    assert all(count >= 66 for count in covered.values()), covered


def test_declared_statistics_and_other_estimators_have_no_band_and_say_why():
    rng = np.random.default_rng(7)
    config = sw_config(buckets=128)
    statistic = window(config, rng.uniform(2, 10, 3000), rng)
    _, bands, kept = numeric_bands(config, statistic, 3000)
    declared = uncalibrated_statistics(2.0, 3000)
    conservative = conservative_statistics(2.0, 3000)
    for key in BAND_STATISTICS:
        if key in declared:
            assert bands[key].lower is None and bands[key].reason == declared[key]
        elif key in conservative:  # no 95% band: given as the conservative band
            assert bands[key].lower is None and bands[key].reason == conservative[key]
            assert kept[key].lower < kept[key].upper
        else:
            assert bands[key].lower < bands[key].upper and bands[key].reason is None
    assert set(bands) == set(BAND_STATISTICS)
    method, _, _ = numeric_bands(config, statistic, 0)
    assert method == BAND_NONE
    cfo = parse_registry({"metrics": [{
        "name": "c", "protocol": "cfo-grr", "epsilon": 2.0,
        "domain": {"low": 0, "high": 16, "buckets": 16}, "estimator": "norm-sub"}]})["c"]
    method, bands, conservative = numeric_bands(cfo, window(cfo, rng.uniform(2, 10, 3000), rng),
                                                3000)
    assert method == BAND_NONE
    # CFO-binning: exact-variance mean and variance (ldp.estimation.cfo_moments); the quantiles
    # have no 95% band but a conservative one (ldp.estimation.bin_quantiles: whole bins of
    # width 1 here)
    assert all(bands[key].lower is None
               and bands[key].reason.startswith(CONSERVATIVE_QUANTILE_REASON)
               and band.method == WHOLE_BINS and band.lower < band.upper
               and band.lower == int(band.lower) and band.upper == int(band.upper)
               and "norm-sub" in band.reason for key, band in conservative.items())
    assert set(conservative) == set(QUANTILE_LEVELS)
    assert bands["mean"].method == BAND_EXACT and bands["mean"].lower < 6 < bands["mean"].upper
    # ε = 2, n = 3,000: a cell where the variance's band is declared (cfo_moments)
    assert bands["variance"].lower is None and "variance band held" in bands["variance"].reason


def test_a_record_names_its_band_method_and_round_trips_through_avro():
    rng = np.random.default_rng(9)
    # ε = 1: the 0.75 quantile keeps its 95% band at n = 1,000 (the median is declared there,
    # set 4)
    config = sw_config(estimator="em", epsilon=1.0, buckets=128)
    statistic = window(config, rng.uniform(2, 10, 1000), rng)
    record = window_estimate_record(config, finalize_window(config, statistic, 1000),
                                    T0, T0 + HOUR, BATCH_PANE)
    assert record.band_method == BAND_BIAS_CORRECTED
    declared = uncalibrated_statistics(1.0, 1000)
    assert declared, "the calibration declares some statistic at ε = 1, n = 1,000"
    for key in declared:
        assert record.bands[key] is None and record.band_reasons[key] == declared[key]
    band = record.bands["0.75"]
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


@pytest.mark.parametrize(("epsilon", "n", "level", "says"), [
    (2.0, 10_000, "0.5", "covered 0.90 of 100 windows of flights3m delay (set 2)"),
    (0.5, 100_000, "0.75", "covered 0.90 of 100 windows of lognormal latency (set 2)"),
    (2.0, 100_000, "0.99", "covered 0.86 of 100 windows of flights3m delay (set 2)"),
    (4.0, 100_000, "0.75", "covered 0.83 of 100 windows of nycflights13 sched_dep_min (set 3)"),
    (2.0, 100_000, "0.1", "covered 0.941 of 800 windows pooled over 8 (data set, window set) runs"),
    (0.5, 10_000, "0.99", "covered 0.926 of 2700 windows pooled over the 11 calibrated"),
    (2.0, 10_000, "0.01", "covered 0.918 of 4600 windows pooled over the 6 calibrated"),
    (0.5, 1_000, "0.5", "covered 0.900 of 400 held-out windows of NYC taxi pickup minute (2 "
                        "runs of set 4")])
def test_a_band_that_missed_on_held_out_windows_is_null_in_the_record_with_why(
        epsilon, n, level, says):
    """Cells whose set-1 margin kept a band that a data set of set 2 or 3 measured more than two
    standard errors below 0.95, or all of them pooled more than one pooled standard error below
    (benchmarks/declare_bands.py): the record finalize_window makes there carries a null band
    and the measured miss as its reason; the 0.01 and 0.99 quantiles, whose coverage pooled
    over their calibrated cells lies below 0.93, are declared in every cell. A window within
    √10 of the cell's n falls in it (here n · 1.2)."""
    from ldp_telemetry.ldp.estimation.band_calibration import MARGIN_SCALES
    assert MARGIN_SCALES[(epsilon, n)][level] is not None, "set 1 kept this band"
    config = sw_config(epsilon=epsilon, buckets=128, high=32.0)
    rng = np.random.default_rng(41)
    size = int(n * 1.2)
    statistic = window(config, np.clip(rng.lognormal(1.0, 0.6, size), 0, 32), rng)
    record = window_estimate_record(config, finalize_window(config, statistic, size),
                                    T0, T0 + HOUR, BATCH_PANE)
    assert record.bands[level] is None
    assert record.band_reasons[level].startswith("no calibrated band") and says in \
        record.band_reasons[level]
    # the cell's other quantiles keep a band: a 95% band, or one given as conservative where
    # it over-covered (the record's band method then names the 95% bands, none if none is)
    kept = [key for key in BAND_STATISTICS[2:] if record.bands[key] is not None]
    conservative = [key for key in BAND_STATISTICS[2:]
                    if (record.conservative_bands or {}).get(key) is not None]
    assert kept or conservative
    assert record.band_method == (BAND_BIAS_CORRECTED if kept else BAND_NONE)
    assert all(key not in record.band_reasons for key in kept)


def test_old_records_without_band_fields_still_read():
    """A record written before the band fields reads with them null (Avro defaults)."""
    full = load_schema("window_estimate")
    old = {**full, "fields": [f for f in full["fields"]
                              if f["name"] not in ("band_method", "bands", "band_reasons",
                                                   "conservative_bands")]}
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


def test_half_widths_and_band_limits_follow_the_margin_scale_and_clip():
    """half = t·s·√(1 + 1/R)·min(1, 1 + c) + max(c, 0)·|b|, increasing in c; bands are centred
    on θ̂ − b and clipped to what a statistic can take (domain [0, 100]: variance ≤ 2,500)."""
    from scipy.stats import t as student_t

    from ldp_telemetry.ldp.estimation.uncertainty import (band_limits, feasible_ranges,
                                                          half_widths)
    edges = np.linspace(0.0, 100.0, 11)
    size = len(BAND_STATISTICS)
    replicated = 50.0 + np.tile(np.array([[-1.0], [1.0]]), (10, size))  # R = 20, mean 50
    s, t = replicated.std(axis=0, ddof=1)[0], student_t.ppf(0.975, 19)
    spread = t * s * np.sqrt(1 + 1 / 20)
    for bias in (0.1, 2.0):
        theta = np.full(size, 50.0 - bias)  # b = mean(θ*) − θ̂ = bias
        for c, half in ((0.0, spread), (1.0, spread + bias), (2.5, spread + 2.5 * bias),
                        (-0.4, 0.6 * spread)):
            lower, upper = band_limits(theta, replicated, edges, c)
            assert np.allclose(upper - lower, 2 * half), (bias, c)
            assert np.allclose((lower + upper) / 2, theta - bias)  # centred on θ̂ − b
    scales = np.linspace(-1.0, 4.0, 51)
    widths = half_widths(np.full(51, 3.0), np.full(51, 2.0), 20, scales)
    assert np.all(np.diff(widths) > 0)
    lowest, highest = feasible_ranges(edges)
    far = band_limits(np.full(size, -300.0), 200 * replicated - 10300.0, edges, 1.0)
    assert np.all(far[0] >= lowest) and np.all(far[1] <= highest)
    assert highest[BAND_STATISTICS.index("variance")] == 2500.0
    with pytest.raises(ValueError, match="margin scale"):
        band_limits(theta, replicated, edges, -1.5)


def test_margin_scales_cover_the_whole_grid_and_windows_find_their_cell():
    """Every (ε, n) cell of the grid has a scale or a declaration for every statistic; a window
    falls in the cell of the largest grid ε at or below its own and the grid n nearest in log
    scale, and what is declared there — no margin fitted, or a band that missed on held-out
    windows — is declared for it."""
    from ldp_telemetry.ldp.estimation.band_calibration import MARGIN_SCALES
    from ldp_telemetry.ldp.estimation.band_declarations import (DECLARED_LEVELS,
                                                                HELD_OUT_MISSES, POOLED_MISSES,
                                                                SET4_MISSES)
    from ldp_telemetry.ldp.estimation.uncertainty import (COVERAGE_EPSILONS, COVERAGE_SIZES,
                                                          band_scales, coverage_cell)
    assert set(MARGIN_SCALES) == {(e, n) for e in COVERAGE_EPSILONS for n in COVERAGE_SIZES}
    assert set(HELD_OUT_MISSES) | set(POOLED_MISSES) | set(SET4_MISSES) <= set(MARGIN_SCALES)
    for scales in MARGIN_SCALES.values():
        assert set(scales) == set(BAND_STATISTICS)
        assert all(c is None or -1.0 <= c <= 4.0 for c in scales.values())
    assert coverage_cell(3.0, 40_000) == (2.0, 100_000)
    assert coverage_cell(0.3, 4 * 10 ** 6) == (0.5, 1_000_000)
    assert coverage_cell(8.0, 1) == (4.0, 1_000)
    for (epsilon, n), table in MARGIN_SCALES.items():
        declared = {key for key, c in table.items() if c is None
                    or key in HELD_OUT_MISSES.get((epsilon, n), {})
                    or key in POOLED_MISSES.get((epsilon, n), {})
                    or key in SET4_MISSES.get((epsilon, n), {}) or key in DECLARED_LEVELS}
        scales, reasons = band_scales(min(epsilon * 1.1, 4.0), int(n * 1.2))
        for key, c in zip(BAND_STATISTICS, scales, strict=True):
            if key in declared:
                assert np.isnan(c) and "no calibrated band" in reasons[key]
            else:
                assert c == table[key] and key not in reasons
        assert set(uncalibrated_statistics(epsilon, n)) == declared


@pytest.mark.parametrize(("setting", "named"), [
    ({"epsilon": 8.0}, "ε = 8"), ({"n": 10 ** 8}, "n = 100,000,000"),
    ({"buckets": 4096}, "4096 buckets"), ({"buckets": 512}, "512 buckets"),
    ({"replicates": 50}, "50 bootstrap replicates")])
def test_a_band_outside_the_measured_range_says_it_is_extrapolated(setting, named):
    from ldp_telemetry.ldp.estimation.uncertainty import band_scales
    args = {"epsilon": 2.0, "n": 10_000, "buckets": 128, "replicates": 20, **setting}
    scales, reasons = band_scales(**args)
    kept = [key for key, c in zip(BAND_STATISTICS, scales, strict=True) if not np.isnan(c)]
    assert kept, "some statistic keeps its band"
    for key in kept:
        assert reasons[key].startswith("band extrapolated") and named in reasons[key]
    inside = band_scales(2.0, 10_000, 128, 20)[1]
    assert not any(reason.startswith("band extrapolated") for reason in inside.values())


@pytest.mark.parametrize(("protocol", "domain", "estimator", "named"), [
    ("sw-discrete", {}, {}, "sw-discrete"),
    ("sw", {"output_buckets": 256}, {}, "256 output buckets"),
    ("sw", {}, {"max_iterations": 50}, "EM settings"),
    ("sw", {}, {"method": "em", "tolerance": 1e-3}, "EM settings")])
def test_a_channel_or_fit_the_margins_never_saw_says_it_is_extrapolated(protocol, domain,
                                                                          estimator, named):
    """The margins were fitted on Square Wave (`sw`) with as many output buckets as buckets and
    EM at its default tolerance and iteration cap: a discrete Square Wave, other output
    buckets or another EM setting changes the channel or the interval fit, so every band says
    it is extrapolated (they said nothing: calibrated in appearance only). The calibrated
    setting itself (ε 2, n 10⁴, 128 buckets, R 20) says nothing. The mean's and the
    variance's exact-variance bands (their own `method`) need no calibration and are not
    extrapolated."""
    def reasons(protocol, domain, estimator):
        config = parse_registry({"metrics": [{
            "name": "latency", "protocol": protocol, "epsilon": 2.0,
            "domain": {"low": 0, "high": 32, "buckets": 128, **domain},
            "estimator": {"method": "ems", "bootstrap": 20, "seed": 5, **estimator}}]})["latency"]
        rng = np.random.default_rng(8)
        values = rng.lognormal(1.0, 0.6, 10_000)
        result = finalize_window(config, window(config, values, rng), 10_000)
        return {key: band.reason for key, band in result.bands.items()
                if band.lower is not None and band.method is None}
    for reason in reasons("sw", {}, {}).values():
        assert reason is None
    outside = reasons(protocol, domain, estimator)
    assert outside and all(reason.startswith("band extrapolated") and named in reason
                           for reason in outside.values())


def test_the_top_k_grid_and_the_numeric_grid_place_a_window_by_one_rule():
    """top_k_cell and coverage_cell are `grid_cell` over their own grids: the largest grid ε at
    or below the window's (the smallest when none is), the grid n nearest in log scale."""
    from ldp_telemetry.ldp.estimation.frequency_bands import (TOP_K_EPSILONS, TOP_K_SIZES,
                                                              top_k_cell)
    from ldp_telemetry.ldp.estimation.uncertainty import (COVERAGE_EPSILONS, COVERAGE_SIZES,
                                                          coverage_cell, grid_cell)
    for epsilon in (0.1, 0.5, 0.99, 1.0, 3.0, 4.0, 9.0):
        for n in (0, 1, 2_000, 3_163, 40_000, 4 * 10 ** 6):
            assert top_k_cell(epsilon, n) == grid_cell(epsilon, n, TOP_K_EPSILONS, TOP_K_SIZES)
            assert coverage_cell(epsilon, n) == grid_cell(epsilon, n, COVERAGE_EPSILONS,
                                                          COVERAGE_SIZES)
    assert top_k_cell(3.0, 40_000) == (2.0, 100_000)
    assert top_k_cell(0.3, 4 * 10 ** 6) == (0.5, 1_000_000)
    assert top_k_cell(1.0, 3_000) == (1.0, 1_000)  # log-nearest: 3,000 is below √10 · 10³
    assert grid_cell(2.5, 10, (1.0, 2.0), (100,)) == (2.0, 100)
