"""The exact-variance bands of a Square Wave metric's mean and variance
(ldp_telemetry.ldp.estimation.moments): the moment polynomials against the channel itself, the
bucketing error against a brute-force sum, unbiasedness exactly (the estimates are linear in the
report counts, so their expectation is the estimator applied to the expected counts), the
standard errors against the exact variance of the window's own values by simulation, coverage,
and the record fields that carry them."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.ldp.engine.finalize import finalize_window
from ldp_telemetry.ldp.estimation.moments import (DISCRETE_REASON, edge_errors, moment_bands,
                                                  protocol_model, square_wave_model)
from ldp_telemetry.ldp.estimation.uncertainty import BAND_BIAS_CORRECTED, BAND_EXACT, BAND_NONE
from ldp_telemetry.ldp.protocols.channels import discrete_sw_parameters
from ldp_telemetry.ldp.protocols.sw import DiscreteSquareWave, SquareWave
from ldp_telemetry.output.bands import statistic_band, statistic_band_method
from ldp_telemetry.output.estimate import EstimateRecord
from ldp_telemetry.output.records import numeric_estimate_record
from ldp_telemetry.output.text import format_numeric


def _bucket_probabilities(protocol: SquareWave, v: np.ndarray) -> np.ndarray:
    """P(report in output bucket j | v) for each v (rows), from [Li20] eq. 3 directly."""
    b, p, q, d_out = protocol.b, protocol.p, protocol.q, protocol.output_buckets
    edges = np.linspace(-b, 1.0 + b, d_out + 1)
    lo, hi = edges[:-1], edges[1:]
    overlap = np.clip(np.minimum(hi, v[:, None] + b) - np.maximum(lo, v[:, None] - b), 0, None)
    return q * (hi - lo) + (p - q) * overlap


def _expected_counts(protocol, values: np.ndarray) -> np.ndarray:
    """E[report histogram] of the unit values `values`: the sum of each report's
    probabilities."""
    if isinstance(protocol, DiscreteSquareWave):
        i = np.clip(np.floor(values * protocol.d), 0, protocol.d - 1).astype(np.int64)
        return protocol.probabilities()[:, i].sum(axis=1)
    return _bucket_probabilities(protocol, values).sum(axis=0)


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 2.0, 4.0])
def test_the_report_moments_are_the_channels_own(epsilon):
    """E[Y^k | v] of the model equals the integral of y^k against [Li20] eq. 3's density
    (`SquareWave.density`, by Gauss-Legendre on the three pieces it is constant on: exact for
    these polynomials), and k = 1, 2 are the closed forms q (1 + 2b)/2 + (p − q) 2b v and
    q ((1 + b)³ + b³)/3 + (p − q)(2b v² + 2b³/3)."""
    protocol = SquareWave(epsilon=epsilon, d=128)
    model = square_wave_model(epsilon, 128)
    b, p, q = protocol.b, protocol.p, protocol.q
    nodes, weights = np.polynomial.legendre.leggauss(8)
    for v in (0.0, 0.137, 0.5, 0.91, 1.0):
        pieces = [(-b, v - b), (v - b, v + b), (v + b, 1.0 + b)]
        for k in range(5):
            integral = 0.0
            for lo, hi in pieces:
                if hi <= lo:
                    continue
                y = 0.5 * (hi - lo) * nodes + 0.5 * (hi + lo)
                density = protocol.density(np.full_like(y, v), y)
                integral += 0.5 * (hi - lo) * float(np.sum(weights * density * y ** k))
            polynomial = float(np.polynomial.polynomial.polyval(v, model.conditional[k]))
            assert polynomial == pytest.approx(integral, rel=1e-12, abs=1e-14)
        first = q * (1 + 2 * b) / 2 + (p - q) * 2 * b * v
        second = q * ((1 + b) ** 3 + b ** 3) / 3 + (p - q) * (2 * b * v * v + 2 * b ** 3 / 3)
        assert np.polynomial.polynomial.polyval(v, model.conditional[1]) == pytest.approx(first)
        assert np.polynomial.polynomial.polyval(v, model.conditional[2]) == pytest.approx(second)


@pytest.mark.parametrize(("epsilon", "d"), [(0.5, 64), (2.0, 128), (4.0, 40)])
def test_the_discrete_report_moments_are_its_matrix(epsilon, d):
    """E[j^k | i] of the discrete model equals Σ_j M[j, i] j^k of its exact matrix."""
    protocol = DiscreteSquareWave(epsilon=epsilon, d=d)
    model = protocol_model(protocol)
    matrix = protocol.probabilities()
    j = np.arange(matrix.shape[0], dtype=np.float64)
    i = np.arange(d, dtype=np.float64)
    for k in range(5):
        exact = (j ** k) @ matrix
        polynomial = np.polynomial.polynomial.polyval(i, model.conditional[k])
        np.testing.assert_allclose(polynomial, exact, rtol=1e-10)


@pytest.mark.parametrize(("epsilon", "d_out"), [(0.5, 128), (4.0, 128), (4.0, 16), (1.0, 1000)])
def test_the_bucketing_error_is_the_two_edge_buckets(epsilon, d_out):
    """`edge_errors` (only the plateau's two edge buckets) equals the brute-force error of
    every bucket's uniform moment against the exact moment, also where the plateau lies in
    one bucket (ε = 4, 16 buckets); averaged over the edges' positions it is 0 for the first
    moment and, for the second, the shift the model subtracts: about β w̃²/6 where the plateau spans
    a whole bucket."""
    protocol = SquareWave(epsilon=epsilon, d=128, output_buckets=d_out)
    model = square_wave_model(epsilon, d_out)
    v = np.linspace(0.0, 1.0, 4_001)
    probabilities = _bucket_probabilities(protocol, v)
    exact = np.column_stack([np.polynomial.polynomial.polyval(v, model.conditional[k])
                             for k in (1, 2)])
    brute = probabilities @ model.bucket_powers[:, 1:3] - exact
    np.testing.assert_allclose(edge_errors(epsilon, d_out, v), brute, atol=1e-12)
    # the average over a fine uniform grid: the edges' phases are uniform
    fine = edge_errors(epsilon, d_out, np.linspace(0.0, 1.0, 400_001)).mean(axis=0)
    beta = 2 * protocol.b * (protocol.p - protocol.q)
    width = (1 + 2 * protocol.b) / d_out
    assert abs(fine[0]) < 1e-3 * beta * width * width
    assert model.shift[2] == pytest.approx(fine[1], rel=2e-2)
    if 2 * protocol.b >= width:  # the plateau spans a whole bucket
        assert model.shift[2] == pytest.approx(beta * width * width / 6, rel=1e-2)


def _population(name: str, rng: np.random.Generator, n: int, dataset) -> np.ndarray:
    """n unit values: a lognormal latency over [0, 32], or a flights3m column (skewed
    `distance` over [0, 5000]; spiky `delay` over [−60, 240], integer minutes and a spike
    at 0, kept unjittered), clipped to its domain."""
    if name == "lognormal":
        return np.clip(rng.lognormal(1.0, 0.6, n), 0, 32) / 32
    low, high = {"distance": (0.0, 5000.0), "delay": (-60.0, 240.0)}[name]
    column = np.load(dataset("flights3m_2001H1.npz"))[name].astype(np.float64)
    return (np.clip(column[rng.choice(len(column), n, replace=False)], low, high) - low) / (
        high - low)


@pytest.mark.parametrize("name", ["lognormal", "distance", "delay"])
@pytest.mark.parametrize(("epsilon", "d_out"), [(0.5, 128), (1.0, 1024), (4.0, 128)])
def test_the_estimates_are_unbiased_up_to_the_bucketing_bound(name, epsilon, d_out, dataset):
    """The estimates are linear in the report counts, so their expectation is the estimator at
    the expected counts — exactly, no simulation: within the bucketing bound of the truth
    (the mean; the variance's bias is that plus Var(m̂₁), which the estimate removes, so
    at the expected counts it is below the truth by Var(m̂₁) and the bound), and far
    closer for these real shapes."""
    rng = np.random.default_rng(311)
    values = _population(name, rng, 5_000, dataset)
    protocol = SquareWave(epsilon=epsilon, d=128, output_buckets=d_out)
    model = protocol_model(protocol)
    found = moment_bands(model, _expected_counts(protocol, values))
    bound_mean, bound_variance = found.bounds
    assert abs(found.mean - values.mean()) <= bound_mean + 1e-12
    # at the expected counts Var̂(m̂₁) is the exact variance of m̂₁, which the variance's
    # estimate adds (E[m̂₁²] = m₁² + Var(m̂₁)): without it the error is the bucketing bias
    assert abs(found.variance - found.mean_std_error ** 2 - values.var()) <= bound_variance
    assert abs(found.mean - values.mean()) <= 0.05 * found.mean_std_error


@pytest.mark.parametrize(("epsilon", "d"), [(0.5, 128), (4.0, 128), (2.0, 37)])
def test_the_discrete_estimates_are_the_bucketed_values_exactly(epsilon, d):
    """sw-discrete: at the expected counts the mean is the bucket centres' mean and the
    variance their variance plus w²/12 (+ Var(m̂₁), which the estimate adds), to 1e-9; the
    band says what it holds."""
    rng = np.random.default_rng(17)
    values = np.clip(rng.lognormal(1.0, 0.6, 4_000), 0, 32) / 32
    protocol = DiscreteSquareWave(epsilon=epsilon, d=d)
    found = moment_bands(protocol_model(protocol), _expected_counts(protocol, values))
    centres = (np.clip(np.floor(values * d), 0, d - 1) + 0.5) / d
    assert found.mean == pytest.approx(centres.mean(), abs=1e-9)
    assert found.variance - found.mean_std_error ** 2 == pytest.approx(
        centres.var() + 1 / (12 * d * d), abs=1e-9)
    assert found.bounds == (0.0, 0.0)
    assert protocol_model(protocol).reason == DISCRETE_REASON


def _exact_variances(protocol: SquareWave, values: np.ndarray) -> tuple[float, float]:
    """The exact variances of m̂₁ and of the first-order variance statistic m̂₂ − 2 m₁ m̂₁ over
    the reports of these values (each report independent given its value): Σ_i Var(h(T_i)|v_i)
    / n² with h the statistic's weights on the bucket moments, from the bucket
    probabilities."""
    model = protocol_model(protocol)
    inverse = np.linalg.inv(model.conditional)
    m1 = values.mean()
    probabilities = _bucket_probabilities(protocol, values)
    out = []
    for gradient in ([0, 1, 0, 0, 0], [0, -2 * m1, 1, 0, 0]):
        weights = model.bucket_powers @ (np.asarray(gradient, dtype=float) @ inverse)
        mean = probabilities @ weights
        second = probabilities @ (weights * weights)
        out.append(float((second - mean ** 2).sum()) / len(values) ** 2)
    return out[0], out[1]


@pytest.mark.parametrize("name", ["lognormal", "distance", "delay"])
@pytest.mark.parametrize(("epsilon", "d_out"), [(1.0, 128), (4.0, 1024)])
def test_the_standard_errors_are_the_exact_ones(name, epsilon, d_out, dataset):
    """Over W = 1,500 windows of the same 2,000 values (the truth is theirs): the estimates'
    spread equals the exact variance of the window's own reports, and so does the reported
    standard error on average. Tolerances: the sample variance of W draws has relative sd
    √(2/(W − 1)) = 0.037; 4 sd (0.15) leaves a false-failure rate of about 6e-5 per check
    (normal approximation). The reported variance is itself an estimate, its mean over W
    windows checked to 5%: its spread is ~ 1/√n of it, far smaller. The mean of the
    estimates lies within 4.5 sd / √W of the truth plus the bucketing bound (7e-6)."""
    rng = np.random.default_rng(404)
    values = _population(name, rng, 2_000, dataset)
    protocol = SquareWave(epsilon=epsilon, d=128, output_buckets=d_out)
    model = protocol_model(protocol)
    exact_mean, exact_variance = _exact_variances(protocol, values)
    windows = 1_500
    means, variances, mean_se2, variance_se2, bounds = [], [], [], [], []
    for _ in range(windows):
        counts = protocol.new_statistic()
        protocol.accumulate(counts, protocol.perturb(values, rng))
        found = moment_bands(model, counts)
        means.append(found.mean)
        variances.append(found.variance)
        mean_se2.append(found.mean_std_error ** 2)
        variance_se2.append(found.variance_std_error ** 2 - 2 * found.mean_std_error ** 4)
        bounds.append(found.bounds)
    means, variances = np.array(means), np.array(variances)
    assert np.var(means, ddof=1) / exact_mean == pytest.approx(1.0, abs=0.15)
    assert np.mean(mean_se2) / exact_mean == pytest.approx(1.0, rel=0.05)
    # the variance estimate's spread: first order, plus 2 Var(m̂₁)² (small here)
    assert np.var(variances, ddof=1) / (exact_variance + 2 * exact_mean ** 2) == pytest.approx(
        1.0, abs=0.15)
    assert np.mean(variance_se2) / exact_variance == pytest.approx(1.0, rel=0.05)
    bound = max(b[0] for b in bounds)
    assert abs(means.mean() - values.mean()) <= 4.5 * np.sqrt(exact_mean / windows) + bound
    bound = max(b[1] for b in bounds)
    assert abs(variances.mean() - values.var()) <= 4.5 * np.sqrt(
        (exact_variance + 2 * exact_mean ** 2) / windows) + bound


@pytest.mark.parametrize(("protocol", "truth"), [
    (SquareWave(epsilon=1.0, d=128), "values"),
    (SquareWave(epsilon=4.0, d=128, output_buckets=1024), "values"),
    (DiscreteSquareWave(epsilon=2.0, d=128), "bucketed")])
def test_the_bands_cover_95_percent_of_windows(protocol, truth):
    """W = 1,000 windows of 1,000 lognormal latencies each (new values per window): each
    band holds the window's truth (for sw-discrete, that of the values as the client bucketed
    them) in [0.93, 0.97] of windows. Coverage's sd at 0.95 is 0.0069, so the interval is
    ±2.9 sd: false-failure rate about 0.4% per check for calibrated bands (seed fixed)."""
    rng = np.random.default_rng(95)
    model = protocol_model(protocol)
    held = np.zeros(2)
    windows = 1_000
    for _ in range(windows):
        values = np.clip(rng.lognormal(1.0, 0.6, 1_000), 0, 32) / 32
        if truth == "bucketed":
            d = protocol.d
            centres = (np.clip(np.floor(values * d), 0, d - 1) + 0.5) / d
            true = (centres.mean(), centres.var() + 1 / (12 * d * d))
        else:
            true = (values.mean(), values.var())
        counts = protocol.new_statistic()
        protocol.accumulate(counts, protocol.perturb(values, rng))
        found = moment_bands(model, counts)
        held += [found.mean_band[0] <= true[0] <= found.mean_band[1],
                 found.variance_band[0] <= true[1] <= found.variance_band[1]]
    assert np.all((held / windows >= 0.93) & (held / windows <= 0.97)), held / windows


def _config(protocol: str, bootstrap: int = 20):
    return parse_registry({"metrics": [{
        "name": "latency", "protocol": protocol, "epsilon": 2.0,
        "domain": {"low": 0, "high": 32, "buckets": 128},
        "estimator": {"method": "ems", "bootstrap": bootstrap, "seed": 5}}]})["latency"]


def _window(config, rng, n: int = 10_000) -> np.ndarray:
    values = np.clip(rng.lognormal(1.0, 0.6, n), 0, 32)
    statistic = config.protocol.new_statistic()
    config.protocol.accumulate(statistic, config.protocol.perturb(config.to_unit(values), rng))
    return statistic


@pytest.mark.parametrize("bootstrap", [20, 0])
def test_a_square_wave_record_names_its_exact_mean_and_variance_bands(bootstrap):
    """finalize gives the mean and the variance the moment bands in metric units (mean:
    low + span · unit; variance: span² · unit), their method exact-variance, whatever the
    bootstrap (none: the quantiles have no band, the record's band_method says none); the
    record lists them in `band_methods`, the readers name them, `ldp show` prints
    "(exact-variance)" beside them; a record without the field reads as before."""
    config = _config("sw", bootstrap)
    counts = _window(config, np.random.default_rng(3))
    result = finalize_window(config, counts, 10_000)
    found = moment_bands(protocol_model(config.protocol), counts)
    assert result.band_method == (BAND_BIAS_CORRECTED if bootstrap else BAND_NONE)
    assert result.bands["mean"].method == result.bands["variance"].method == BAND_EXACT
    assert result.bands["mean"].lower == pytest.approx(32 * found.mean_band[0])
    assert result.bands["variance"].upper == pytest.approx(1024 * found.variance_band[1])
    assert result.band_methods == {"mean": BAND_EXACT, "variance": BAND_EXACT}
    record = EstimateRecord.from_json(
        numeric_estimate_record(config, result, 0, 3_600_000).to_json())
    assert record.band_methods == {"mean": BAND_EXACT, "variance": BAND_EXACT}
    assert statistic_band_method(record, "mean") == BAND_EXACT
    assert statistic_band_method(record, "0.5") == result.band_method
    assert statistic_band(record, "mean") == pytest.approx(
        (result.bands["mean"].lower, result.bands["mean"].upper))
    text = format_numeric(record)
    mean_line = next(line for line in text.splitlines() if line.strip().startswith("mean"))
    assert mean_line.endswith(f"({BAND_EXACT})")
    assert any(line.strip().startswith("variance") and line.endswith(f"({BAND_EXACT})")
               for line in text.splitlines())
    old = EstimateRecord.from_value({key: value for key, value in record.json_value().items()
                                     if key != "band_methods"})
    assert statistic_band_method(old, "mean") == result.band_method
    assert f"({BAND_EXACT})" not in format_numeric(old)


def test_a_discrete_record_says_what_its_mean_band_holds():
    """sw-discrete: the mean's and variance's band_reasons say they are the bucketed values',
    with the bucket width in the metric's units (32 / 128 = 0.25 over [0, 32]: the bands
    are, and so is the mean's largest gap w/2 to the values' own mean)."""
    config = _config("sw-discrete")
    result = finalize_window(config, _window(config, np.random.default_rng(4)), 10_000)
    assert result.bands["mean"].method == BAND_EXACT
    assert result.bands["mean"].reason == result.bands["variance"].reason == (
        DISCRETE_REASON.format(width=0.25))
    assert "w = 0.25)" in result.bands["mean"].reason


def test_a_window_without_reports_has_no_moment_band():
    config = _config("sw")
    result = finalize_window(config, config.protocol.new_statistic(), 0)
    assert result.bands["mean"].lower is None and result.band_methods == {}


@pytest.mark.parametrize(("epsilon", "d_out"), [(4.0, 128), (2.0, 128), (1.0, 1024), (4.0, 16)])
def test_the_bucketing_bound_holds_for_every_point_mass(epsilon, d_out):
    """Values all equal to one v (the worst case of the bucketing error): at the expected
    counts the mean's error is within the mean's bound and the variance's (the truth is 0)
    within the variance's, for 301 positions v; and the bound is nearly reached (it is a sup
    on a grid, not a loose inequality)."""
    protocol = SquareWave(epsilon=epsilon, d=128, output_buckets=d_out)
    model = protocol_model(protocol)
    worst = 0.0
    for v in np.linspace(0.0, 1.0, 301):
        counts = 1e6 * _bucket_probabilities(protocol, np.array([v]))[0]
        found = moment_bands(model, counts)
        mean_bound, variance_bound = found.bounds
        # 1e-12: the floating-point error of solving for the moments
        assert abs(found.mean - v) <= mean_bound + 1e-12
        assert abs(found.variance - found.mean_std_error ** 2) <= variance_bound + 1e-12
        worst = max(worst, abs(found.mean - v) / mean_bound)
    assert worst > 0.8


def test_a_band_widened_by_the_bucketing_bound_is_conservative():
    """Where allowing for the bucketing bound widens the half-width by more than a tenth of
    1.96 standard errors (the variance at 10⁶ reports, ε = 4, 128 output buckets) the band is
    no 95% band: it is the conservative band, unchanged, and the statistic's reason says it is
    widened, by how much, and conservative, its estimate and standard error kept; at 1,024
    output buckets, or 10⁴ reports, the 95% band stays and says nothing. The half-width is the
    bias-aware one, never Z95 · error + bound."""
    from ldp_telemetry.ldp.estimation.moments import (CONSERVATIVE_SHARE, bias_aware_half,
                                                      statistic_bands)
    rng = np.random.default_rng(12)
    values = np.clip(rng.lognormal(1.0, 0.6, 5_000), 0, 32) / 32
    reasons = {}
    for d_out, n in ((128, 10 ** 6), (1024, 10 ** 6), (128, 10 ** 4)):
        protocol = SquareWave(epsilon=4.0, d=128, output_buckets=d_out)
        counts = n / values.size * _expected_counts(protocol, values)
        model = protocol_model(protocol)
        found = moment_bands(model, counts)
        bands, conservative = statistic_bands(model, counts, 0.0, 32.0)
        for key, error, bound, band in (("mean", found.mean_std_error, found.bounds[0],
                                         found.mean_band),
                                        ("variance", found.variance_std_error, found.bounds[1],
                                         found.variance_band)):
            reasons[(d_out, n, key)] = bands[key].reason
            half = bias_aware_half(error, bound)
            assert half < 1.959963984540054 * error + bound or bound == 0.0
            widened = (half - 1.959963984540054 * error
                       > CONSERVATIVE_SHARE * 1.959963984540054 * error)
            assert (bands[key].reason is not None) == widened
            scale = 32.0 if key == "mean" else 32.0 ** 2
            made = (scale * band[0], scale * band[1])
            assert bands[key].std_error == pytest.approx(scale * error, rel=1e-15)
            if widened:
                assert (bands[key].lower, bands[key].upper) == (None, None)
                assert bands[key].method == "none"
                assert (conservative[key].lower, conservative[key].upper) == made
                assert conservative[key].method == BAND_EXACT
            else:
                assert (bands[key].lower, bands[key].upper) == made
                assert conservative[key].lower is None
    assert reasons[(128, 10 ** 6, "variance")].startswith("no 95% band: the band is widened by")
    assert "above 0.969: it is conservative" in reasons[(128, 10 ** 6, "variance")]
    assert all(reasons[(d_out, n, key)] is None for d_out, n in ((1024, 10 ** 6), (128, 10 ** 4))
               for key in ("mean", "variance"))


@pytest.mark.parametrize("protocol", [SquareWave(epsilon=1.0, d=128),
                                      SquareWave(epsilon=4.0, d=128, output_buckets=1024),
                                      DiscreteSquareWave(epsilon=2.0, d=64)])
@pytest.mark.parametrize("n", [1, 2, 3])
def test_a_few_reports_never_make_the_standard_error_smaller_than_any_value_allows(protocol, n):
    """With n = 1, 2, 3 reports the sample variance of the reports says next to nothing (one
    report: 0), but whatever the values, Var(m̂₁) is at least min_v Var(Y | v) / (β² n): the
    mean's standard error never falls below it (it fell to the within-bucket spread, a band
    of almost no width at one report). Var(Y | v) here from the channel's own probabilities."""
    model = protocol_model(protocol)
    if isinstance(protocol, DiscreteSquareWave):
        matrix = protocol.probabilities()  # P(j | i)
        j = np.arange(matrix.shape[0], dtype=np.float64)
        conditional = (j ** 2) @ matrix - (j @ matrix) ** 2
        b, p, q = discrete_sw_parameters(protocol.epsilon, protocol.d)
        beta, scale = (2 * b + 1) * (p - q), 1.0 / protocol.d
    else:
        v = np.linspace(0.0, 1.0, 2_001)
        probabilities = _bucket_probabilities(protocol, v)
        # the report's own variance, the bucket's spread included (centres² + w²/12)
        conditional = (probabilities @ model.bucket_powers[:, 2]
                       - (probabilities @ model.bucket_powers[:, 1]) ** 2)
        beta, scale = 2 * protocol.b * (protocol.p - protocol.q), 1.0
    smallest = scale * np.sqrt(conditional.min() / n) / beta
    rng = np.random.default_rng(n)
    for _ in range(20):
        counts = np.zeros(len(model.bucket_powers))
        np.add.at(counts, rng.integers(0, counts.size, n), 1.0)
        found = moment_bands(model, counts)
        assert found.mean_std_error >= 0.99 * smallest
        assert found.variance_std_error > 0.0


@pytest.mark.parametrize(("epsilon", "d_out", "mean_range"), [
    (4.0, 128, (0.05, 0.2)), (4.0, 128, (0.6, 0.95)), (2.0, 128, (0.0, 1.0)),
    (1.0, 1024, (0.3, 0.31))])
def test_the_variance_bound_is_the_largest_over_the_mean_band(epsilon, d_out, mean_range):
    """`bucketing_bounds`' variance bound is at least max |r₂(v) − 2 m₁ r₁(v)| over the values
    v and over every m₁ in the mean's range, brute force on a finer grid than the model's
    (and within 1% of it: interpolated between BOUND_MEANS from above, not a loose bound);
    the mean's bound is max |r₁(v)|. r_k: the bucketing error left after the shift, over β."""
    from ldp_telemetry.ldp.estimation.moments import bucketing_bounds
    protocol = SquareWave(epsilon=epsilon, d=128, output_buckets=d_out)
    model = protocol_model(protocol)
    beta = 2 * protocol.b * (protocol.p - protocol.q)
    v = np.linspace(0.0, 1.0, 256 * d_out + 1)
    residuals = (edge_errors(epsilon, d_out, v) - model.shift[1:3]) / beta
    m1 = np.linspace(*mean_range, 41)
    brute = np.abs(residuals[None, :, 1] - 2 * m1[:, None] * residuals[None, :, 0]).max()
    mean_bound, variance_bound = bucketing_bounds(model, mean_range)
    assert mean_bound == pytest.approx(np.abs(residuals[:, 0]).max(), rel=1e-4)
    assert brute * (1 - 1e-4) <= variance_bound <= 1.01 * brute


def test_a_band_below_the_measured_window_sizes_says_so():
    """Below 10³/√10 reports (the coverage was measured at 10³–10⁶, as the bootstrap's: its
    normal approximation covered 0.87–0.94 at 10–100 reports, ε = 4) the mean's and the
    variance's band reasons say the band is extrapolated, after what an sw-discrete band holds;
    from 317 reports on they say nothing of it."""
    from ldp_telemetry.ldp.estimation.moments import SMALL_WINDOW_REASON, statistic_bands
    rng = np.random.default_rng(8)
    for protocol in (SquareWave(epsilon=4.0, d=128, output_buckets=1024),
                     DiscreteSquareWave(epsilon=4.0, d=128)):
        model = protocol_model(protocol)
        for n in (1, 100, 316, 317, 10_000):
            values = np.clip(rng.lognormal(1.0, 0.6, n), 0, 32) / 32
            counts = protocol.new_statistic()
            protocol.accumulate(counts, protocol.perturb(values, rng))
            bands, _ = statistic_bands(model, counts, 0.0, 32.0)
            for key in ("mean", "variance"):
                reason = bands[key].reason or ""
                assert (SMALL_WINDOW_REASON.format(n=f"{n:,}") in reason) == (n <= 316), (n, key)
                assert bands[key].lower is not None
                if isinstance(protocol, DiscreteSquareWave):
                    assert reason.startswith(DISCRETE_REASON.format(width=0.25))


@pytest.mark.parametrize("ratio", [0.0, 0.05, 0.3, 0.6, 1.0, 2.0, 8.0])
def test_the_bias_aware_half_width_is_the_smallest_that_holds_the_bound(ratio):
    """c = bias_aware_z(t) covers a normal error shifted by t exactly 95% of the time (so no
    smaller c does, and any smaller shift is covered more often), lies between t + 1.645 and
    t + 1.96 (linear addition), and is Z95 without a bias."""
    from scipy.stats import norm

    from ldp_telemetry.ldp.estimation.moments import bias_aware_z
    c = bias_aware_z(ratio)
    assert norm.cdf(c - ratio) - norm.cdf(-c - ratio) == pytest.approx(0.95, abs=1e-12)
    assert norm.ppf(0.95) + ratio - 1e-12 <= c <= norm.ppf(0.975) + ratio + 1e-12
    smaller = 0.5 * ratio
    assert norm.cdf(c - smaller) - norm.cdf(-c - smaller) >= 0.95
    if ratio == 0.0:
        assert c == pytest.approx(1.959963984540054, abs=1e-12)


def test_the_mean_band_holds_95_percent_at_the_worst_point_mass():
    """Calibration at the bound: 10⁶ values all at the position v inside [0.1, 0.9] where the
    report histogram's 128 buckets bias m̂₁ most (ε = 4: about 0.55 standard errors), W = 4,000
    report histograms (Multinomial, seed 3): the bias-aware band holds m₁ = v 95% of the time,
    where adding the bound to 1.96 standard errors holds it 97.4% (P(|Z + 0.55| < 2.51)). A
    coverage's standard error is 0.0034 at W = 4,000: an exact band leaves [0.94, 0.96]
    (2.9 s.e.) with probability 0.4%; the linear band falls to 0.965 (3.6 of its s.e. below
    0.974) with probability 0.02%."""
    protocol = SquareWave(epsilon=4.0, d=128, output_buckets=128)
    model = protocol_model(protocol)
    positions = np.linspace(0.1, 0.9, 3201)
    probabilities = _bucket_probabilities(protocol, positions)
    errors = [abs(moment_bands(model, 1e6 * row).mean - v)
              for v, row in zip(positions, probabilities, strict=True)]
    worst = int(np.argmax(errors))
    v, chances = positions[worst], probabilities[worst] / probabilities[worst].sum()
    assert errors[worst] > 0.95 * model.mean_bound  # the grid finds the bound's position
    rng = np.random.default_rng(3)
    windows = 4_000
    held, held_linear = 0, 0
    for counts in rng.multinomial(10 ** 6, chances, size=windows):
        found = moment_bands(model, counts)
        held += found.mean_band[0] <= v <= found.mean_band[1]
        linear = 1.959963984540054 * found.mean_std_error + found.bounds[0]
        held_linear += abs(found.mean - v) <= linear
    assert 0.94 <= held / windows <= 0.96
    assert held_linear / windows > 0.965



@pytest.mark.parametrize("ratio", [0.0, 0.6, 3.0, 1e6, 1e15, 1e300, float("inf")])
def test_the_bias_aware_half_width_holds_however_small_the_error(ratio):
    """c − t falls from Z95 to the one-sided 1.645 as t grows (the far tail vanishes):
    `bias_aware_excess` finds it exactly for every t, where bisecting c over [Z95, Z95 + t]
    loses every digit of c − t once t passes 10¹⁵; and a standard error that is a vanishing
    share of the bound (B / s overflowing to infinity) leaves a half-width of the bound
    itself, not an infinite one."""
    from scipy.stats import norm

    from ldp_telemetry.ldp.estimation.moments import bias_aware_excess, bias_aware_half
    excess = bias_aware_excess(ratio)
    assert norm.ppf(0.95) - 1e-12 <= excess <= 1.959963984540054
    coverage = norm.cdf(excess) - norm.cdf(-excess - 2.0 * ratio)
    assert coverage == pytest.approx(0.95, abs=1e-12)
    assert bias_aware_half(1e-320, 1e-3) == pytest.approx(1e-3, rel=1e-12)
    assert bias_aware_half(2.0, 2.0 * ratio) == pytest.approx(2.0 * (ratio + excess), rel=1e-15)


def test_a_record_prints_the_centre_of_its_mean_and_variance_bands():
    """printed_moments: each statistic's Band.estimate and Band.std_error, kept where it is
    declared without a band; the histogram's value and no standard error where no estimate was
    made (no reports, or a hierarchy without leaf reports)."""
    from ldp_telemetry.ldp.estimation.moments import printed_moments
    from ldp_telemetry.ldp.estimation.uncertainty import Band
    histogram = {"mean": 2.5, "variance": 0.6}
    bands = {"mean": Band(1.0, 2.0, "widened", BAND_EXACT, 1.5, 0.25),
             "variance": Band(None, None, "declared", estimate=0.4, std_error=0.1)}
    assert printed_moments(bands, histogram) == {"mean": (1.5, 0.25), "variance": (0.4, 0.1)}
    assert printed_moments({"mean": Band(None, None, "no reports")}, histogram) == {
        "mean": (2.5, None), "variance": (0.6, None)}


#: What a record written before its printed mean was its band's centre said where the
#: histogram's mean lay outside the band (the text records then carried).
OLD_OUTSIDE_REASON = ("the printed mean ({value:.4g}, the estimated histogram's) lies outside "
                      "this band, which is centred on the unbiased estimate from the reports: "
                      "the histogram's smoothing or projection moved it by more than the band's "
                      "half-width; the band, not the printed value, holds the mean 95% of the "
                      "time")


@pytest.mark.parametrize("seed", [0, 1])
def test_the_smoothed_mean_case_prints_the_centre_of_its_band(seed):
    """EMS at ε = 0.5 over a million lognormal values (seeds 0 and 1): EMS's histogram puts
    the mean at 3.59 (3.57) where the values' mean is 3.26, beyond the end of the exact band of
    the unbiased moment estimate (which holds the values' mean); the record now prints that
    estimate, the band's centre, with its exact standard error, and `ldp show` marks nothing.
    A record written before (the histogram's mean printed, the outside note in its reason)
    still reads as it was written, and `ldp show` marks its mean's line."""
    from ldp_telemetry.ldp.estimation.histograms import summary
    from ldp_telemetry.output.text import OUTSIDE_NOTE
    config = parse_registry({"metrics": [{
        "name": "latency", "protocol": "sw", "epsilon": 0.5,
        "domain": {"low": 0, "high": 32, "buckets": 128},
        "estimator": {"method": "ems", "bootstrap": 0, "seed": 5}}]})["latency"]
    rng = np.random.default_rng(seed)
    values = np.clip(rng.lognormal(1.0, 0.6, 1_000_000), 0, 32)
    statistic = config.protocol.new_statistic()
    config.protocol.accumulate(statistic, config.protocol.perturb(config.to_unit(values), rng))
    result = finalize_window(config, statistic, values.size)
    band = result.bands["mean"]
    assert band.lower <= values.mean() <= band.upper
    smoothed = summary(result.estimate, result.bucket_edges)["mean"]
    assert smoothed > band.upper  # the case: EMS's histogram mean beyond the band's end
    assert result.mean == band.estimate and band.lower <= result.mean <= band.upper
    assert result.mean == pytest.approx((band.lower + band.upper) / 2, rel=1e-12)
    assert result.errors.mean_std_error == band.std_error > 0
    assert band.reason is None or "outside" not in band.reason
    record = EstimateRecord.from_json(
        numeric_estimate_record(config, result, 0, 3_600_000).to_json())
    assert record.mean == result.mean and record.mean_std_error == result.errors.mean_std_error
    mean_line = next(line for line in format_numeric(record).splitlines()
                     if line.strip().startswith("mean"))
    assert not mean_line.endswith(OUTSIDE_NOTE)
    note = OLD_OUTSIDE_REASON.format(value=smoothed)
    old = EstimateRecord.from_json(dataclasses.replace(
        record, mean=smoothed, band_reasons={**(record.band_reasons or {}), "mean": note})
        .to_json())
    assert old.mean == smoothed and old.band_reasons["mean"] == note
    old_line = next(line for line in format_numeric(old).splitlines()
                    if line.strip().startswith("mean"))
    assert old_line.endswith(OUTSIDE_NOTE)


def test_the_printed_mean_and_variance_are_unbiased_over_repeated_windows():
    """One population of n = 10⁴ lognormal values, W = 300 windows of its EMS reports at
    ε = 1 (128 buckets and output buckets): the printed mean's average lies within
    B₁ + Z · √(mean s²/W) of the values' mean (s the record's exact standard error of each
    window, B₁ the bucketing bound the band allows for) and the printed variance's within
    B₂ + Z · √(mean s²/W) of their variance (plus the delta method's O(1/n²), far below);
    Z = 4: a false failure about 6 · 10⁻⁵ per statistic. Clipping to what the statistics
    can take does not bind here (the mean near a tenth of the range). EMS's own histogram
    mean, which records printed before, lies beyond that tolerance (its smoothing: 0.16
    above the values' mean against a tolerance of 0.08 at this seed), so the test tells the
    two apart."""
    from ldp_telemetry.ldp.estimation.histograms import summary
    config = parse_registry({"metrics": [{
        "name": "latency", "protocol": "sw", "epsilon": 1.0,
        "domain": {"low": 0, "high": 32, "buckets": 128},
        "estimator": {"method": "ems", "bootstrap": 0}}]})["latency"]
    protocol = config.protocol
    rng = np.random.default_rng(83)
    values = np.clip(rng.lognormal(1.0, 0.6, 10_000), 0, 32)
    unit = config.to_unit(values)
    windows, found = 300, []
    for _ in range(windows):
        statistic = protocol.new_statistic()
        protocol.accumulate(statistic, protocol.perturb(unit, rng))
        result = finalize_window(config, statistic, values.size)
        bounds = moment_bands(protocol_model(protocol), statistic).bounds
        found.append((result.mean, result.bands["mean"].std_error, result.variance,
                      result.bands["variance"].std_error,
                      summary(result.estimate, result.bucket_edges)["mean"],
                      32 * bounds[0], 32 * 32 * bounds[1]))
    mean, mean_se, variance, variance_se, smoothed, mean_bound, variance_bound = (
        np.array(found).T)
    tolerance = mean_bound.max() + 4.0 * np.sqrt(np.mean(mean_se ** 2) / windows)
    assert abs(mean.mean() - values.mean()) < tolerance
    assert abs(variance.mean() - values.var()) < (
        variance_bound.max() + 4.0 * np.sqrt(np.mean(variance_se ** 2) / windows))
    assert abs(smoothed.mean() - values.mean()) > tolerance
