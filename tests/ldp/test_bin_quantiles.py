"""Quantile bands of CFO-binning and hierarchical histograms by inverting the exact CDF bands
(ldp.estimation.bin_quantiles), and the batched exact variances they are made from
(LinearBins.variances).

Coverage checks: W windows with fixed seeds; a coverage is asserted at least 0.95 − 3 of its
standard errors √(0.95 · 0.05 / W) (one-sided false-failure rate 0.13% per check for a band that
holds 95%, less for the whole-bins band, which holds at least that; the seeds are fixed, so a run
that passes always passes)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from ldp_telemetry.ldp.estimation.bin_answers import (NO_LEAF_REPORTS_REASON, LinearBins,
                                                      cfo_linear, cfo_statistic_linear,
                                                      hh_statistic_linear, range_weights,
                                                      symmetric_form, tree_adjoint,
                                                      tree_adjoints)
from ldp_telemetry.ldp.estimation.bin_quantiles import (INTERPOLATED, QUANTILE_BAND_REASON,
                                                        WHOLE_BINS, bin_quantile_bands,
                                                        bin_quantile_statistic_bands, edge_cdf,
                                                        quantile_bands)
from ldp_telemetry.ldp.estimation.histograms import QUANTILE_LEVELS
from ldp_telemetry.ldp.estimation.moments import SMALL_WINDOW_REASON
from ldp_telemetry.ldp.estimation.uncertainty import BAND_EXACT, NO_REPORTS_REASON, Z95
from ldp_telemetry.ldp.protocols import make_numeric_protocol
from ldp_telemetry.ldp.protocols.cfo_binning import CfoGrr
from ldp_telemetry.ldp.protocols.grr import GRR
from ldp_telemetry.ldp.protocols.olh import OLH
from ldp_telemetry.ldp.protocols.oue import OUE

LEVELS = [float(key) for key in QUANTILE_LEVELS]


def _window(protocol, values, rng) -> np.ndarray:
    statistic = protocol.new_statistic()
    protocol.accumulate(statistic, protocol.perturb(values, rng))
    return statistic


def _model(name: str, bins: int, n: int, rng, epsilon: float = 2.0, values=None) -> LinearBins:
    protocol = make_numeric_protocol(name, epsilon, bins)
    values = np.clip(rng.beta(2.0, 5.0, n), 0.0, 1.0) if values is None else values
    statistic = _window(protocol, values, rng)
    model = (cfo_statistic_linear(protocol, statistic, len(values)) if name.startswith("cfo")
             else hh_statistic_linear(protocol, statistic))
    assert model is not None
    return model


@pytest.mark.parametrize("oracle", [GRR(epsilon=1.0, d=16), OLH(epsilon=1.0, d=16),
                                    OUE(epsilon=1.0, d=16)])
def test_the_symmetric_form_gives_the_oracles_report_variance(oracle):
    """(α, β, γ, δ) reproduce report_variance for random weights at every true value."""
    form = symmetric_form(oracle)
    assert form is not None
    alpha, beta, gamma, delta = form
    w = np.random.default_rng(3).normal(size=16)
    total, square = w.sum(), w @ w
    expected = (alpha * w ** 2 + beta * (square - w ** 2) + 2 * gamma * w * (total - w)
                + delta * ((total - w) ** 2 - (square - w ** 2)))
    assert oracle.report_variance(w) == pytest.approx(expected, rel=1e-9, abs=1e-12)


def test_batched_adjoints_are_the_adjoint_of_every_row():
    rng = np.random.default_rng(4)
    rows = rng.normal(size=(5, 64))
    weights = np.array([0.0, 3.0, 1.5, 0.7])
    adjoint, constant = tree_adjoints(rows, weights)
    for row, leaf in enumerate(rows):
        one, c = tree_adjoint(leaf, weights)
        assert constant[row] == pytest.approx(c)
        for depth in range(1, 4):
            assert adjoint[depth][row] == pytest.approx(one[depth])


@pytest.mark.parametrize("name,bins", [("cfo-grr", 64), ("cfo-olh", 64), ("hh", 64),
                                       ("hh", 256)])
def test_batched_variances_are_the_exact_variance_of_every_answer(name, bins):
    """LinearBins.variances (and the CFO prefix shortcut of edge_cdf) equal `variance` row by
    row: prefixes, single bins and random weights."""
    rng = np.random.default_rng(5)
    model = _model(name, bins, 4000, rng)
    rows = np.vstack([np.tri(bins + 1, bins, -1), np.eye(bins), rng.normal(size=(4, bins))])
    exact = np.array([model.variance(row) for row in rows])
    assert model.variances(rows) == pytest.approx(exact, rel=1e-9, abs=1e-15)
    cdf, variance, slope, single = edge_cdf(model)
    assert variance[1:-1] == pytest.approx(exact[1:bins], rel=1e-9, abs=1e-15)
    assert single[:-1] == pytest.approx(exact[bins + 1: 2 * bins], rel=1e-9, abs=1e-15)
    assert cdf[0] == 0.0 and cdf[-1] == 1.0 and variance[0] == variance[-1] == 0.0


def test_a_hierarchys_prefix_variances_without_its_adjoints():
    """LinearBins.prefix_variances of a hierarchy (the segment sums of
    _tree_prefix_functionals) equals `variance` of every prefix, 1,024 leaves, and with a
    depth that holds no report."""
    rng = np.random.default_rng(11)
    model = _model("hh", 1024, 20_000, rng, epsilon=1.0)
    found = model.prefix_variances()
    assert found is not None
    for k in (0, 1, 3, 4, 5, 17, 64, 255, 256, 257, 511, 700, 1023, 1024):
        assert found[k] == pytest.approx(model.variance(np.arange(1024) < k), rel=1e-9,
                                         abs=1e-15)
    protocol = make_numeric_protocol("hh", 2.0, 64)
    columns = protocol.perturb(rng.random(3000), rng)
    keep = columns["level"] != 2
    statistic = protocol.new_statistic()
    protocol.accumulate(statistic, {key: value[keep] for key, value in columns.items()})
    model = hh_statistic_linear(protocol, statistic)
    assert model is not None and model.reports[1] == 0
    exact = [model.variance((np.arange(64) < k).astype(float)) for k in range(65)]
    assert model.prefix_variances() == pytest.approx(exact, rel=1e-9, abs=1e-15)


@pytest.mark.parametrize("name", ["cfo-grr", "hh"])
def test_the_inversion_is_the_brute_force_test_at_every_edge(name):
    """On 16 bins: the whole-bins band is the hull of the bins kept by the two edge tests,
    evaluated by direct range answers [0, e_k] (value and exact variance); the interpolated
    band is the hull of the points of a fine grid kept by the test at t with the range answer
    [0, t]'s exact variance (up to the grid's spacing). GRR and the hierarchy estimate
    Σ x~ = 1 exactly, so the known end F(1) = 1 is their range answer too."""
    rng = np.random.default_rng(6)
    bins = 16
    model = _model(name, bins, 3000, rng, epsilon=1.0)
    edges = np.linspace(0.0, 1.0, bins + 1)
    answers = [range_weights(edges, 0.0, edge) for edge in edges]
    value = np.array([model.value(w) for w in answers])
    error = np.sqrt([max(model.variance(w), 0.0) for w in answers])
    assert value[-1] == pytest.approx(1.0) and error[-1] < 1e-6
    grid = np.linspace(0.0, 1.0, 16 * 400 + 1)
    grid_weights = [range_weights(edges, 0.0, t) for t in grid]
    grid_value = np.array([model.value(w) for w in grid_weights])
    grid_error = np.sqrt([max(model.variance(w), 0.0) for w in grid_weights])
    whole = quantile_bands(model, LEVELS, WHOLE_BINS)
    interpolated = quantile_bands(model, LEVELS, INTERPOLATED)
    for row, level in enumerate(LEVELS):
        kept = [k for k in range(bins) if value[k] - Z95 * error[k] <= level
                and value[k + 1] + Z95 * error[k + 1] >= level]
        assert whole[row] == pytest.approx([kept[0] / bins, (kept[-1] + 1) / bins])
        inside = grid[np.abs(grid_value - level) <= Z95 * grid_error]
        assert interpolated[row][0] <= inside.min() + 1e-9
        assert interpolated[row][1] >= inside.max() - 1e-9
        assert interpolated[row] == pytest.approx([inside.min(), inside.max()], abs=2 / 6400)


@pytest.mark.parametrize("name", ["cfo-grr", "cfo-olh", "hh"])
def test_the_whole_bins_band_holds_the_values_quantile(name):
    """W = 300 windows of 2,000 beta(2, 5) values at ε = 2 over 16 bins: every level's band
    holds the values' own quantile (numpy's inverted_cdf) in at least 0.95 − 3 s.e. of them
    (0.912; module docstring)."""
    rng = np.random.default_rng(7)
    protocol = make_numeric_protocol(name, 2.0, 16)
    windows, covered = 300, np.zeros(len(LEVELS))
    for _ in range(windows):
        values = rng.beta(2.0, 5.0, 2000)
        model = _model(name, 16, 2000, rng, values=values)
        bands = quantile_bands(model, LEVELS)
        truth = np.quantile(values, LEVELS, method="inverted_cdf")
        covered += (bands[:, 0] <= truth) & (truth <= bands[:, 1])
    assert protocol.epsilon == 2.0
    floor = 0.95 - 3 * math.sqrt(0.95 * 0.05 / windows)
    assert (covered / windows >= floor).all(), covered / windows


@pytest.mark.parametrize("name", ["cfo-grr", "hh"])
def test_heaped_values_and_a_point_mass_on_an_edge_are_still_held(name):
    """Half the values at 0.25 (a bin edge of 16 bins: the point mass opens bin 4), a fifth
    heaped on multiples of 0.1, the rest uniform: the quantile jumps at the point mass, and the
    whole-bins band still holds it in at least 0.95 − 3 s.e. of W = 300 windows (the bin that
    holds a quantile always has F(e_k) ≤ α ≤ F(e_{k+1}), module docstring of bin_quantiles)."""
    rng = np.random.default_rng(8)
    windows, covered = 300, np.zeros(len(LEVELS))
    n = 2000
    for _ in range(windows):
        kind = rng.random(n)
        values = np.where(kind < 0.5, 0.25,
                          np.where(kind < 0.7, rng.integers(0, 11, n) / 10.0, rng.random(n)))
        model = _model(name, 16, n, rng, values=values)
        bands = quantile_bands(model, LEVELS)
        truth = np.quantile(values, LEVELS, method="inverted_cdf")
        covered += (bands[:, 0] <= truth) & (truth <= bands[:, 1])
    floor = 0.95 - 3 * math.sqrt(0.95 * 0.05 / windows)
    assert (covered / windows >= floor).all(), covered / windows


def test_where_the_cdf_never_reaches_the_level_the_band_is_the_last_bin():
    """All of x~'s mass in the last bin and a huge n (standard errors near 0): F̂ stays 0 at
    every inner edge, so no inner bin passes the upper test and the band of every level is the
    bin at the domain's end (never empty, never null); the interpolated one is the point where
    the CDF, linear in that bin, reaches 0.5: its middle."""
    protocol = CfoGrr(epsilon=4.0, d=8)
    unbiased = np.zeros(8)
    unbiased[-1] = 1.0
    model = cfo_linear(protocol, unbiased, 10 ** 12)
    assert model is not None
    assert quantile_bands(model, [0.5, 0.99]).ravel() == pytest.approx([7 / 8, 1.0] * 2)
    interpolated = quantile_bands(model, [0.5], INTERPOLATED)
    assert interpolated[0] == pytest.approx([15 / 16, 15 / 16], abs=1e-6)


def test_an_empty_window_and_a_hierarchy_without_leaf_reports_have_no_band():
    protocol = make_numeric_protocol("hh", 2.0, 16)
    empty = bin_quantile_statistic_bands(protocol, protocol.new_statistic(), 0, 0.0, 1.0, "admm")
    assert all(band.lower is None and band.reason == NO_REPORTS_REASON
               for band in empty.values())
    rng = np.random.default_rng(9)
    statistic = protocol.new_statistic()
    columns = protocol.perturb(rng.random(500), rng)
    keep = columns["level"] < protocol.h  # no report at the bucket depth
    protocol.accumulate(statistic, {key: value[keep] for key, value in columns.items()})
    bands = bin_quantile_statistic_bands(protocol, statistic, int(keep.sum()), 0.0, 1.0, "admm")
    assert all(band.lower is None and band.reason == NO_LEAF_REPORTS_REASON
               for band in bands.values())


def test_record_bands_are_in_metric_units_and_say_what_they_hold():
    """bin_quantile_bands scales the unit bands to [low, high] and names what they hold, the
    estimator, and the extrapolation below 316 reports."""
    rng = np.random.default_rng(10)
    model = _model("cfo-grr", 16, 200, rng)
    unit = quantile_bands(model, LEVELS)
    bands = bin_quantile_bands(model, 200, 10.0, 42.0, {"0.99": "declared"}, "norm-sub")
    assert bands["0.99"].lower is None and bands["0.99"].reason == "declared"
    band = bands["0.5"]
    assert (band.lower, band.upper) == pytest.approx(tuple(10.0 + 32.0 * unit[4]))
    assert band.method == BAND_EXACT
    assert band.reason.startswith(QUANTILE_BAND_REASON.split("{")[0]) and "norm-sub" in band.reason
    assert SMALL_WINDOW_REASON.split("{")[0] in band.reason
