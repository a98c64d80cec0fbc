"""Quantile bands by profile-likelihood test inversion: the optimiser's certified precision,
the test's χ²₁ law where no positivity constraint is active, the band search, and coverage on a
small fixed grid."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.optimize import minimize

from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.ldp.estimation.quantile_bands import (CHI2_1_95, GAP_TOLERANCE,
                                                         MAX_EDGE_TESTS, ProfileLikelihood,
                                                         _first_rejected, maximise)
from ldp_telemetry.ldp.protocols.channels import square_wave_channel


def log_likelihood(matrix, counts, x):
    return float(counts @ np.log(matrix @ x))


def histogram(epsilon, d, d_out, x, n, seed):
    matrix = square_wave_channel(epsilon, d, d_out).dense()
    counts = np.random.default_rng(seed).multinomial(n, matrix @ x).astype(float)
    return matrix, counts


def test_chi2_critical_value():
    from scipy.stats import chi2
    assert pytest.approx(chi2.ppf(0.95, 1), abs=1e-12) == CHI2_1_95


@pytest.mark.parametrize("split", [None, 1, 2])
def test_maximum_matches_a_grid_search_of_a_small_case(split):
    """d = 3: the simplex (or its constrained segment) searched on a grid of step 10⁻³, refined;
    the maximum found is no lower than the grid's best, and no grid point beats ℓ + gap."""
    matrix, counts = histogram(1.0, 3, 5, np.array([0.5, 0.1, 0.4]), 2000, 7)
    level = 0.3
    found = maximise(matrix, counts, np.full(3, 1 / 3), split=split, level=level)
    assert found.gap <= GAP_TOLERANCE
    grid = np.linspace(0.0, 1.0, 1001)
    if split is None:
        points = np.array([(a, b, 1 - a - b) for a in grid for b in grid if a + b <= 1])
    elif split == 1:  # x0 = level, x1 + x2 = 1 − level
        points = np.array([(level, t * (1 - level), (1 - t) * (1 - level)) for t in grid])
    else:  # x0 + x1 = level, x2 = 1 − level
        points = np.array([(t * level, (1 - t) * level, 1 - level) for t in grid])
    values = np.log(points @ matrix.T) @ counts
    best = values.max()
    assert found.log_likelihood >= best - 1e-9
    assert best <= found.log_likelihood + found.gap + 1e-9
    if split is not None:
        assert found.x[:split].sum() == pytest.approx(level, abs=1e-12)
        assert found.x.sum() == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize("epsilon,n", [(0.5, 1_000), (2.0, 100_000), (4.0, 1_000_000)])
def test_maximum_meets_the_kkt_conditions_and_beats_slsqp(epsilon, n):
    """d = 16 of a skewed distribution with empty buckets (positivity active): at the maximum
    every bucket's gradient g_i = (Mᵀ(c / M x))_i is at most its block's multiplier and equal to
    it where x_i > 0 (to the gap's precision), and SLSQP from the same start finds no higher
    likelihood than ℓ + gap."""
    x_true = np.zeros(16)
    x_true[[1, 2, 3, 6, 10]] = [0.3, 0.3, 0.2, 0.15, 0.05]
    matrix, counts = histogram(epsilon, 16, 16, x_true, n, 11)
    for split, level in ((None, 0.0), (3, 0.6), (7, 0.95)):
        found = maximise(matrix, counts, np.full(16, 1 / 16), split=split, level=level)
        assert found.gap <= GAP_TOLERANCE
        gradient = matrix.T @ (counts / (matrix @ found.x))
        blocks = [slice(0, 16)] if split is None else [slice(0, split), slice(split, 16)]
        for block in blocks:
            g, x = gradient[block], found.x[block]
            multiplier = g.max()
            # the gap bounds mass · (max g − g_i) summed over the support
            assert float(x @ (multiplier - g)) <= found.gap + 1e-9
        constraints = [{"type": "eq", "fun": lambda x: x.sum() - 1.0}]
        if split is not None:
            constraints.append({"type": "eq", "fun": lambda x, s=split, p=level: x[:s].sum() - p})
        other = minimize(lambda x: -log_likelihood(matrix, counts, np.clip(x, 1e-300, None)),
                         np.full(16, 1 / 16), method="SLSQP", bounds=[(0, 1)] * 16,
                         constraints=constraints, options={"maxiter": 1000, "ftol": 1e-12})
        feasible = np.clip(other.x, 0, None)
        feasible /= feasible.sum()
        if split is None or abs(feasible[:split].sum() - level) < 1e-9:
            assert (log_likelihood(matrix, counts, feasible)
                    <= found.log_likelihood + found.gap + 1e-6)


def test_statistic_is_chi2_1_where_no_positivity_constraint_is_active():
    """d = 4 buckets, every one holding at least 0.2 of the mass, n = 10⁵ at ε = 2: the MLE
    stays inside the simplex and Λ at the true F(e₂) = 0.5 is χ²₁ (Wilks). Over 2,000 fixed
    windows the rejection rate at 3.841 is Binomial(2000, 0.05)/2000 (s.d. 0.0049): checked
    within 0.02 (4.1 s.d., false failure < 10⁻⁴); the mean of Λ (1, s.d. √(2/2000) = 0.032)
    within 0.13 (4.1 s.d., < 10⁻⁴)."""
    x_true = np.array([0.2, 0.3, 0.3, 0.2])
    matrix = square_wave_channel(2.0, 4, 8).dense()
    rng = np.random.default_rng(2024)
    statistics = []
    for counts in rng.multinomial(100_000, matrix @ x_true, size=2000).astype(float):
        profile = ProfileLikelihood(matrix, counts, np.full(4, 0.25))
        assert profile.best.x.min() > 0.05  # positivity inactive
        test = profile.test(2, 0.5, exact=True)
        assert test.certified
        statistics.append(test.statistic)
    statistics = np.array(statistics)
    assert abs((statistics > CHI2_1_95).mean() - 0.05) <= 0.02
    assert abs(statistics.mean() - 1.0) <= 0.13


def test_interval_columns_are_the_channel_columns_and_add_up():
    """The column of a value uniform on [low, high] (SquareWaveChannel.interval_column) is M's
    column for a whole bucket, sums to 1, and mixes linearly: the column of [a, c] is the
    length-weighted mixture of those of [a, b] and [b, c]."""
    for epsilon, d, d_out in ((0.5, 16, 16), (4.0, 128, 128), (2.0, 32, 100)):
        channel = square_wave_channel(epsilon, d, d_out)
        edges = channel.in_edges
        columns = np.column_stack([channel.interval_column(edges[i], edges[i + 1])
                                   for i in range(d)])
        np.testing.assert_allclose(columns, channel.dense(), rtol=0, atol=1e-13)
        left, right = channel.interval_column(0.3, 0.31), channel.interval_column(0.31, 0.35)
        np.testing.assert_allclose(0.2 * left + 0.8 * right, channel.interval_column(0.3, 0.35),
                                   rtol=0, atol=1e-15)
        assert channel.interval_column(0.123, 0.1231).sum() == pytest.approx(1.0, abs=1e-8)


def test_split_statistic_is_chi2_1_inside_a_bucket():
    """x = (0.2, 0.3, 0.3, 0.2) uniform within buckets, level 0.35: the true quantile is half
    way into bucket 1, where the split model (bucket 1 as two halves of mass 0.15) holds H0
    inside the simplex; n = 10⁵ at ε = 2, 1,000 fixed windows: the rejection rate at 3.841 is
    checked within 0.028 of 0.05 (s.d. 0.0069, 4.1 s.d.: false failure < 10⁻⁴)."""
    x_true = np.array([0.2, 0.3, 0.3, 0.2])
    channel = square_wave_channel(2.0, 4, 8)
    matrix = channel.dense()
    rng = np.random.default_rng(77)
    statistics = []
    for counts in rng.multinomial(100_000, matrix @ x_true, size=1000).astype(float):
        profile = ProfileLikelihood(matrix, counts, np.full(4, 0.25),
                                    column=channel.interval_column)
        statistics.append(profile.split_test(1, 0.5, 0.35, exact=True).statistic)
    statistics = np.array(statistics)
    assert abs((statistics > CHI2_1_95).mean() - 0.05) <= 0.028
    # the mean (1, s.d. √(2/1000) = 0.045) within 0.18 (4 s.d., false failure < 10⁻⁴)
    assert abs(statistics.mean() - 1.0) <= 0.18


def test_search_finds_the_first_rejected_edge_within_its_budget():
    """Against every threshold of a monotone rejection on up to 200 edges, both directions:
    the first rejecting edge (None when none), in at most 2 log₂(span + 1) + 1 tests."""
    for first, last, direction in ((5, 200, 1), (120, 1, -1), (7, 7, 1), (3, 2, 1)):
        span = abs(last - first) + 1 if (last - first) * direction >= 0 else 0
        for threshold in range(0, 202):
            asked: list[int] = []

            def rejects(edge, t=threshold, d=direction, f=first, asked=asked):
                asked.append(edge)
                return (edge - f) * d >= t

            found = _first_rejected(rejects, first, last, direction)
            expected = first + direction * threshold if threshold < span else None
            assert found == expected
            assert len(asked) <= 2 * np.log2(span + 1) + 1
    assert 2 * np.log2(4096) + 1 <= MAX_EDGE_TESTS


def test_band_is_the_inversion_of_every_edge_test():
    """The band found by galloping and bisection equals the one read off testing every edge:
    from the first rejecting edge left of the estimate's bucket to the first on its right."""
    rng = np.random.default_rng(5)
    values = np.clip(rng.lognormal(-1.5, 0.6, 5000), 0, 1)
    x_true = np.histogram(values, bins=32, range=(0, 1))[0] / 5000
    matrix, counts = histogram(1.0, 32, 32, x_true, 5000, 6)
    edges = np.linspace(0.0, 1.0, 33)
    for level in (0.05, 0.5, 0.95):
        profile = ProfileLikelihood(matrix, counts, np.full(32, 1 / 32))
        band = profile.band(level, edges)
        k_hat = int(np.searchsorted(profile.cdf, level, side="right") - 1)
        fresh = ProfileLikelihood(matrix, counts, np.full(32, 1 / 32))
        rejected = {k: fresh.test(k, level).rejects for k in range(1, 32)}
        right = [k for k in range(k_hat + 1, 32) if rejected[k]]
        left = [k for k in range(k_hat, 0, -1) if rejected[k]]
        assert band.upper == edges[right[0] if right else 32]
        assert band.lower == edges[left[0] if left else 0]
        assert band.certified
        # monotone on each side: accepted edges form one run around the estimate
        accepted = [k for k in range(1, 32) if not rejected[k]]
        assert accepted == list(range(accepted[0], accepted[-1] + 1)) if accepted else True


def test_bands_cover_the_truth_on_a_small_fixed_grid():
    """A lognormal latency over [0, 16] in 32 buckets, perturbed by the client's Square Wave,
    ε ∈ {1, 4}, n ∈ {10³, 10⁴}, 60 windows each, the 0.1, 0.5 and 0.9 quantiles: each
    (cell, level) count of covering windows is Binomial(60, c), for the whole-bucket band and
    the split-bucket one (`refine`), which lies inside it. For c ≥ 0.95 (both are conservative
    at central levels: benchmarks/quantile_lr.py) P(count ≤ 50) < 7.4e-4, so the 24 checks
    fail together with probability < 1.8%; a band covering 0.90 fails each check with
    probability 0.07."""
    levels = (0.1, 0.5, 0.9)
    for epsilon, n in itertools.product((1.0, 4.0), (1_000, 10_000)):
        config = parse_registry({"metrics": [{
            "name": "latency", "protocol": "sw", "epsilon": epsilon,
            "domain": {"low": 0, "high": 16, "buckets": 32}}]})["latency"]
        protocol = config.protocol
        matrix = protocol.channel().dense()
        rng = np.random.default_rng([31, int(epsilon), n])
        covered = np.zeros((2, len(levels)), dtype=int)
        for _ in range(60):
            values = np.clip(rng.lognormal(1.0, 0.6, n), 0, 16)
            counts = protocol.new_statistic()
            protocol.accumulate(counts, protocol.perturb(config.to_unit(values), rng))
            profile = ProfileLikelihood(matrix, counts, np.full(32, 1 / 32),
                                        column=protocol.channel().interval_column)
            truth = np.quantile(values, levels)
            for at, level in enumerate(levels):
                whole = profile.band(level, config.bucket_edges)
                split = profile.band(level, config.bucket_edges, refine=6)
                assert whole.lower <= split.lower <= split.upper <= whole.upper
                covered[0, at] += whole.lower <= truth[at] <= whole.upper
                covered[1, at] += split.lower <= truth[at] <= split.upper
        assert (covered >= 51).all(), (epsilon, n, covered)


def test_record_bands_are_none_where_a_test_is_not_certified():
    """`profile_likelihood_bands` gives every level a band inside the domain; with no Newton
    step allowed nothing is certified, and every level says so instead of printing a band."""
    from ldp_telemetry.ldp.estimation.em import expectation_maximisation
    from ldp_telemetry.ldp.estimation.histograms import QUANTILE_LEVELS
    from ldp_telemetry.ldp.estimation.quantile_bands import (UNCERTIFIED_REASON,
                                                             profile_likelihood_bands)
    channel = square_wave_channel(2.0, 32, 32)
    rng = np.random.default_rng(3)
    x = np.histogram(np.clip(rng.lognormal(-1.2, 0.5, 5000), 0, 1), bins=32, range=(0, 1))[0]
    counts = rng.multinomial(5000, channel.dense() @ (x / x.sum()))
    edges = np.linspace(0.0, 8.0, 33)
    start = expectation_maximisation(channel, counts, smoothing=False, tolerance=1e-3).estimate
    bands = profile_likelihood_bands(channel, counts, edges, start, QUANTILE_LEVELS)
    assert list(bands) == list(QUANTILE_LEVELS)
    for band in bands.values():
        assert band.reason is None and 0.0 <= band.lower < band.upper <= 8.0
    none = profile_likelihood_bands(channel, counts, edges, start, QUANTILE_LEVELS,
                                    max_steps=0)
    assert all(b.lower is None and b.reason == UNCERTIFIED_REASON for b in none.values())
