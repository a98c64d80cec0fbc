"""Properties of the consistency post-processing methods ([Wang20] journal §3).

Realistic inputs: a true distribution f over d values (Zipf or a few heavy hitters over a flat
tail, shuffled), and f~ = f + Gaussian noise with the exact per-value variance of eq. 2 for OUE
at epsilon = 1 and n = 10^5. Every random draw uses a fixed seed.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from ldp_telemetry.ldp.estimation import postprocess as pp
from ldp_telemetry.ldp.protocols.noise import SupportNoise


def oue_noise(epsilon: float = 1.0, n: int = 100_000) -> SupportNoise:
    return SupportNoise(p_star=0.5, q_star=1.0 / (math.exp(epsilon) + 1.0), n=n)


def zipf(d: int, s: float) -> np.ndarray:
    f = np.arange(1, d + 1, dtype=np.float64) ** -s
    return f / f.sum()


def heavy_hitters(d: int) -> np.ndarray:
    f = np.full(d, 0.2 / (d - 5))
    f[:5] = [0.3, 0.2, 0.15, 0.1, 0.05]
    return f


def noisy(f: np.ndarray, noise: SupportNoise, rng: np.random.Generator) -> np.ndarray:
    return f + rng.normal(0.0, np.sqrt(noise.variance(f)))


def realistic_cases():
    """(truth, estimate, noise) triples: three shapes x d in {64, 256, 1024} x two seeds."""
    noise = oue_noise()
    cases = []
    for d in (64, 256, 1024):
        for shape, truth in (("zipf1.5", zipf(d, 1.5)), ("zipf1.1", zipf(d, 1.1)),
                             ("heavy", heavy_hitters(d))):
            for seed in (1, 2):
                rng = np.random.default_rng([d, seed, len(shape)])
                truth = rng.permutation(truth)
                cases.append(pytest.param(truth, noisy(truth, noise, rng), noise,
                                          id=f"{shape}-d{d}-seed{seed}"))
    return cases


CASES = realistic_cases()
FAST_METHODS = ["base", "base-pos", "base-cut", "norm", "norm-mul", "norm-sub", "norm-cut",
                "norm-hyb", "mle-apx", "ibu"]
NON_NEGATIVE = ["base-pos", "base-cut", "norm-mul", "norm-sub", "norm-cut", "norm-hyb", "mle-apx",
                "ibu"]
SUM_TO_ONE = ["norm", "norm-mul", "norm-sub", "norm-hyb", "mle-apx", "ibu"]


def run(method: str, estimate: np.ndarray, noise: SupportNoise, **params) -> np.ndarray:
    """Run a method by its name in the paper, through the public entry point."""
    return pp.apply(method, estimate, noise, **params)


def assert_order_preserved(estimate: np.ndarray, result: np.ndarray) -> None:
    """f~_a <= f~_b implies f'_a <= f'_b, including equal outputs for equal estimates."""
    order = np.lexsort((np.arange(estimate.size), estimate))
    steps = np.diff(result[order])
    assert np.all(steps >= 0), f"order broken at {np.flatnonzero(steps < 0)[:5]}"
    ties = np.diff(estimate[order]) == 0
    assert np.all(steps[ties] == 0), "equal estimates got different outputs"


# ---------------------------------------------------------------------------------------------
# Consistency and order (Table 1)


@pytest.mark.parametrize("method", FAST_METHODS)
@pytest.mark.parametrize("truth, estimate, noise", CASES)
def test_table_1_guarantees(method, truth, estimate, noise):
    original = estimate.copy()
    result = run(method, estimate, noise)
    np.testing.assert_array_equal(estimate, original)  # never mutates its input
    assert result.dtype == np.float64 and result.shape == estimate.shape
    if method in NON_NEGATIVE:
        assert result.min() >= 0.0
    if method in SUM_TO_ONE:
        assert result.sum() == pytest.approx(1.0, abs=1e-9)
    if method == "norm-cut":
        assert result.sum() <= 1.0 + 1e-12
    assert_order_preserved(estimate, result)


@pytest.mark.parametrize("method", FAST_METHODS)
def test_ties_get_equal_outputs(method):
    noise = oue_noise()
    estimate = np.array([0.3, 0.3, 0.3, 0.3, 0.05, 0.05, -0.01, -0.01, 0.0, 0.02])
    assert_order_preserved(estimate, run(method, estimate, noise))


def test_base_pos_is_never_worse_than_base_per_value():
    noise = oue_noise()
    for truth, estimate, _ in (case.values for case in CASES):
        base_error = (pp.base(estimate, noise) - truth) ** 2
        pos_error = (pp.base_pos(estimate, noise) - truth) ** 2
        assert np.all(pos_error <= base_error)
        assert np.any(pos_error < base_error)


def test_post_pos_clips_query_answers():
    assert pp.post_pos(-0.25) == 0.0 and pp.post_pos(0.25) == 0.25
    assert isinstance(pp.post_pos(-1), float)
    np.testing.assert_array_equal(pp.post_pos(np.array([-0.1, 0.0, 0.4])), [0.0, 0.0, 0.4])


# ---------------------------------------------------------------------------------------------
# Thresholds: Base-Cut, Norm-Cut, Norm-Hyb


def eq9_threshold(noise: SupportNoise, d: int, alpha: float = 2.0) -> float:
    p, q = noise.p_star, noise.q_star
    sigma = math.sqrt(q * (1 - q) / (noise.n * (p - q) ** 2))
    return stats.norm.ppf(1 - alpha / d) * sigma


@pytest.mark.parametrize("alpha", [0.05, 2.0, 10.0])
@pytest.mark.parametrize("truth, estimate, noise", CASES[:6])
def test_base_cut_zeroes_exactly_the_values_below_t(truth, estimate, noise, alpha):
    threshold = eq9_threshold(noise, estimate.size, alpha)
    result = run("base-cut", estimate, noise, alpha=alpha)
    below = estimate < threshold
    assert below.any() and (~below).any()
    assert np.all(result[below] == 0.0)
    np.testing.assert_array_equal(result[~below], estimate[~below])


def test_base_cut_threshold_is_clamped_at_zero_when_eq9_is_negative():
    noise = oue_noise()  # d = 3, alpha = 2: Phi^-1(1/3) < 0
    assert pp.significance_threshold(noise, 3) < 0
    estimate = np.array([0.7, 0.4, -0.1])
    np.testing.assert_array_equal(pp.base_cut(estimate, noise), [0.7, 0.4, 0.0])


@pytest.mark.parametrize("truth, estimate, noise", CASES)
def test_norm_cut_theta_is_the_smallest_that_keeps_the_sum_at_most_one(truth, estimate, noise):
    theta = pp.norm_cut_threshold(estimate)
    assert theta > 0 and estimate[estimate >= theta].sum() <= 1.0
    smaller = estimate[estimate < theta]
    if smaller.size and smaller.max() > 0:  # the next smaller candidate breaks the condition
        assert estimate[estimate >= smaller.max()].sum() > 1.0
    result = pp.norm_cut(estimate, noise)
    np.testing.assert_array_equal(result, np.where(estimate >= theta, estimate, 0.0))


def test_norm_cut_is_base_pos_when_positive_mass_is_at_most_one():
    noise = oue_noise()
    estimate = np.array([0.5, 0.2, 0.1, -0.05, 0.15, -0.2])
    np.testing.assert_array_equal(pp.norm_cut(estimate, noise), pp.base_pos(estimate, noise))


@pytest.mark.parametrize("truth, estimate, noise", CASES)
def test_norm_hyb_keeps_estimates_above_t_unchanged(truth, estimate, noise):
    threshold = eq9_threshold(noise, estimate.size)
    above = estimate > threshold
    assert estimate[above].sum() <= 1.0  # the usual case, covered here
    result = pp.norm_hyb(estimate, noise)
    np.testing.assert_array_equal(result[above], estimate[above])
    assert result[~above].max() <= threshold
    assert result.sum() == pytest.approx(1.0, abs=1e-9)


def test_norm_hyb_keeps_the_largest_k_summing_below_one():
    noise = oue_noise()
    estimate = np.array([0.5, 0.3, 0.25, 0.15, 0.01, -0.02, -0.03, 0.0] + [0.001] * 56)
    result = pp.norm_hyb(estimate, noise)
    np.testing.assert_array_equal(result[:2], [0.5, 0.3])  # 0.5 + 0.3 < 1 <= 0.5 + 0.3 + 0.25
    assert result[2] < 0.25 and result.sum() == pytest.approx(1.0, abs=1e-12)
    assert_order_preserved(estimate, result)


def paper_norm_hyb(estimate, noise):
    """§3.3 read literally, first case only: Norm-Sub the rest to 1 - (kept sum), no cap."""
    kept = estimate > max(pp.significance_threshold(noise, estimate.size), 0.0)
    result = estimate.copy()
    result[~kept] = pp.project_to_simplex(estimate[~kept], 1.0 - estimate[kept].sum())
    return result


def test_norm_hyb_caps_the_rest_at_t_where_the_literal_rule_breaks_order():
    noise = oue_noise()  # d = 64: T ~ 0.0113
    threshold = pp.significance_threshold(noise, 64)
    estimate = np.full(64, -0.002)
    estimate[:3] = [0.25, 0.24, threshold + 1e-4]  # kept, sum ~0.50
    estimate[3] = threshold - 1e-4  # not kept; Norm-Sub would add ~ 0.5 / 61 to it
    literal = paper_norm_hyb(estimate, noise)
    assert literal[3] > literal[2]  # the literal rule inverts the order of values 2 and 3
    result = pp.norm_hyb(estimate, noise)
    np.testing.assert_array_equal(result[:3], estimate[:3])
    assert result[3:].max() == pytest.approx(threshold, abs=1e-15)
    assert result.sum() == pytest.approx(1.0, abs=1e-12) and result.min() >= 0
    assert_order_preserved(estimate, result)


def test_capped_projection_is_the_least_squares_solution_on_the_box():
    rng = np.random.default_rng(7)
    values = rng.normal(0.0, 0.01, 40)
    cap, mass = 0.02, 0.5
    result = pp._project_to_capped_simplex(values, mass, cap)
    assert result.sum() == pytest.approx(mass, abs=1e-12)
    assert result.min() >= 0 and result.max() <= cap
    # KKT: result = clip(values - tau, 0, cap) with one tau for every value strictly inside the box
    inside = (result > 0) & (result < cap)
    taus = values[inside] - result[inside]
    assert inside.any() and np.ptp(taus) < 1e-15
    assert np.all(values[result == 0] <= taus[0] + 1e-15)
    assert np.all(values[result == cap] >= taus[0] + cap - 1e-15)


def test_norm_hyb_falls_back_to_norm_sub_when_the_rest_cannot_hold_the_mass():
    noise = oue_noise()
    every_value_above_t = np.array([0.3, 0.25, 0.2, 0.1] * 4) / 4  # d = 16, sum 0.85
    assert every_value_above_t.min() > pp.significance_threshold(noise, 16)
    np.testing.assert_array_equal(pp.norm_hyb(every_value_above_t, noise),
                                  pp.norm_sub(every_value_above_t, noise))


def test_norm_hyb_is_order_preserving_where_the_literal_rule_is_not():
    """Over a grid of realistic settings the literal rule breaks order sometimes; ours never."""
    literal_breaks = 0
    for d in (16, 64, 256):
        for n in (1_000, 10_000, 100_000):
            noise = oue_noise(1.0, n)
            for seed in range(10):
                rng = np.random.default_rng([d, n, seed])
                estimate = noisy(zipf(d, 1.1), noise, rng)
                result = pp.norm_hyb(estimate, noise)
                assert_order_preserved(estimate, result)
                assert result.min() >= 0 and result.sum() == pytest.approx(1.0, abs=1e-9)
                if estimate[estimate > pp.significance_threshold(noise, d)].sum() <= 1:
                    literal = paper_norm_hyb(estimate, noise)
                    literal_breaks += bool(np.any(np.diff(literal[np.argsort(estimate)]) < 0))
    assert literal_breaks > 0


# ---------------------------------------------------------------------------------------------
# Norm-Sub, Norm, Norm-Mul


@pytest.mark.parametrize("truth, estimate, noise", [c for c in CASES if c.values[1].size <= 256])
def test_norm_sub_equals_cls(truth, estimate, noise):
    np.testing.assert_allclose(pp.norm_sub(estimate, noise), pp.cls(estimate, noise), atol=1e-6)


def test_norm_sub_equals_cls_on_all_negative_estimates():
    noise = oue_noise()
    estimate = -np.abs(np.random.default_rng(3).normal(0.0, 0.1, 64))
    np.testing.assert_allclose(pp.norm_sub(estimate, noise), pp.cls(estimate, noise), atol=1e-6)


def test_norm_is_unbiased():
    # f'_v = f~_v + (1 - sum f~) / d, so its error is e_v - mean(e) for independent errors e with
    # variances V_v (eq. 2): Var f'_v = V_v (1 - 2/d) + sum(V) / d^2. The mean of R outputs is
    # within k = 5 standard errors of f_v for each of the d values except with probability
    # <= d * P(|Z| > 5) = 64 * 5.7e-7 ~ 4e-5 (union bound).
    noise, d, repetitions, k = oue_noise(), 64, 4000, 5.0
    truth = np.random.default_rng(11).permutation(zipf(d, 1.5))
    rng = np.random.default_rng(12)
    outputs = np.array([pp.norm(noisy(truth, noise, rng), noise) for _ in range(repetitions)])
    variance = noise.variance(truth)
    norm_variance = variance * (1 - 2 / d) + variance.sum() / d**2
    standard_error = np.sqrt(norm_variance / repetitions)
    assert np.all(np.abs(outputs.mean(axis=0) - truth) <= k * standard_error)


def test_norm_mul_scales_the_positive_part():
    noise = oue_noise()
    estimate = np.array([0.6, 0.3, 0.2, -0.1])
    np.testing.assert_allclose(pp.norm_mul(estimate, noise), [0.6 / 1.1, 0.3 / 1.1, 0.2 / 1.1, 0])


# ---------------------------------------------------------------------------------------------
# MLE-Apx


def mle_apx_gap(epsilon: float, seed: int):
    """Max |MLE-Apx - Norm-Sub|, and its first-order prediction r |delta| max f'.

    Writing MLE-Apx as gamma (f~ + delta'), 1/gamma - 1 = (1-p-q) x = r (S - 1) / (r + |D1|),
    r = (p-q)(1-p-q) / (q(1-q)) the ratio of the f-dependent to the f-independent variance term
    of eq. 2 (per unit f), and (S - 1)/|D1| = |delta| is Norm-Sub's shift. So the two methods
    differ by about r |delta| f'_v: nothing when r -> 0, a lot when r is large.
    """
    noise = oue_noise(epsilon)
    p, q = noise.p_star, noise.q_star
    ratio = (p - q) * (1 - p - q) / (q * (1 - q))
    estimate = noisy(zipf(256, 1.5), noise, np.random.default_rng(seed))
    subtracted = pp.norm_sub(estimate, noise)
    shift = abs((subtracted - estimate)[subtracted > 0][0])
    gap = np.abs(pp.mle_apx(estimate, noise) - subtracted).max()
    return gap / noise.sigma, ratio * shift * subtracted.max() / noise.sigma


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_mle_apx_matches_norm_sub_when_the_f_dependent_variance_is_small(seed):
    gaps = []
    for epsilon in (0.25, 0.5, 1.0, 2.0, 4.0):
        gap, predicted = mle_apx_gap(epsilon, seed)
        assert 0.5 * predicted <= gap <= 1.2 * predicted
        gaps.append(gap)
    assert gaps[0] < 0.01  # OUE at epsilon 0.25: r = 0.016, gap below 1% of sigma
    assert gaps[-1] > 0.5  # OUE at epsilon 4: r = 13, gap above half a sigma
    assert np.all(np.diff(gaps) > 0)


def test_mle_apx_solves_eq_14_on_its_support():
    noise = oue_noise(2.0)
    estimate = noisy(zipf(128, 1.1), noise, np.random.default_rng(5))
    result = pp.mle_apx(estimate, noise)
    support = result > 0
    p, q = noise.p_star, noise.q_star
    support_fraction = q + (p - q) * estimate  # c_v / n
    x = ((support_fraction[support].sum() - support.sum() * q - (p - q))
         / ((p - q) * (1 - p - q) + support.sum() * q * (1 - q)))
    eq14 = ((support_fraction - q - q * (1 - q) * x)
            / (p - q + (p * (1 - p) - q * (1 - q)) * x))
    np.testing.assert_allclose(result[support], eq14[support], rtol=1e-12, atol=1e-15)
    assert np.all(estimate[~support] <= estimate[support].min())


def test_mle_apx_is_norm_mul_when_the_noise_is_purely_multiplicative():
    # q* = 0: eq. 2 has no f-independent term, so eq. 14 scales f~ by 1 / sum f~
    noise = SupportNoise(p_star=0.6, q_star=0.0, n=1000)
    estimate = np.array([0.5, 0.3, 0.25, 0.05])
    np.testing.assert_allclose(pp.mle_apx(estimate, noise), pp.norm_mul(estimate, noise))


# ---------------------------------------------------------------------------------------------
# Power and PowerNS


def eq10_by_brute_force(estimate, noise, exponent):
    """Eq. 10 summed over every count i = 1..n, one value at a time."""
    n, spread = noise.n, noise.sigma * noise.n
    counts = np.arange(1, n + 1, dtype=np.float64)
    result = []
    for x in estimate * n:
        log_weights = -((counts - x) ** 2) / (2 * spread**2) - exponent * np.log(counts)
        weights = np.exp(log_weights - log_weights.max())
        result.append((counts * weights).sum() / weights.sum() / n)
    return np.array(result)


@pytest.mark.parametrize("exponent", [0.0, 1.0, 1.7, 3.0, 8.0])
def test_power_equals_eq_10_summed_over_every_count(exponent):
    noise = oue_noise(1.0, 3000)  # sigma n ~ 105: the window covers well under n
    estimate = noisy(zipf(32, 1.5), noise, np.random.default_rng(21))
    estimate[:3] = [-0.5, 1.3, 0.0]  # far below 0, above 1, at 0
    # 10.5 to 12 sigma: with s = 8 the prior's weight at count 1 outgrows a +-10 sigma window
    estimate[3:6] = np.array([10.5, 11.0, 12.0]) * noise.sigma
    np.testing.assert_allclose(pp.power(estimate, noise, exponent=exponent),
                               eq10_by_brute_force(estimate, noise, exponent), rtol=1e-10)


@pytest.mark.parametrize("truth, estimate, noise", CASES)
def test_power_is_positive_and_order_preserving_and_power_ns_consistent(truth, estimate, noise):
    result = pp.power(estimate, noise)
    assert result.min() > 0
    assert_order_preserved(estimate, result)
    consistent = pp.power_ns(estimate, noise)
    np.testing.assert_array_equal(consistent, pp.project_to_simplex(result))
    assert consistent.min() >= 0 and consistent.sum() == pytest.approx(1.0, abs=1e-9)
    assert_order_preserved(estimate, consistent)


def test_power_moves_large_estimates_by_about_s_sigma_squared_over_f():
    # Laplace approximation of eq. 10: the posterior mode of the count is x - s (sigma n)^2 / x.
    truth, estimate, noise = CASES[0].values
    exponent = pp.fit_power_law_exponent(estimate, noise)
    large = estimate > 10 * noise.sigma
    shift = estimate[large] - pp.power(estimate, noise)[large]
    predicted = exponent * noise.sigma**2 / estimate[large]
    np.testing.assert_allclose(shift, predicted, rtol=0.1)


def test_power_at_a_million_reports_and_a_thousand_values():
    # its speed is not asserted here (no test depends on wall-clock time)
    noise = oue_noise(1.0, 1_000_000)  # sigma n ~ 1900: 38k counts per value
    estimate = noisy(zipf(1024, 1.5), noise, np.random.default_rng(31))
    result = pp.power(estimate, noise)
    assert result.min() > 0
    assert_order_preserved(estimate, result)


def test_power_law_exponent_fit_recovers_the_exponent():
    # Counts drawn from the continuous power law s = 1.8 on [x_min, n] (inverse CDF). The MLE's
    # standard error is about (s - 1) / sqrt(m) = 0.018 for m = 2000 draws; k = 5 gives a
    # false-failure rate of 6e-7.
    noise, s, m = oue_noise(1.0, 1_000_000), 1.8, 2000
    x_min, n = 3 * noise.sigma * noise.n, noise.n
    u = np.random.default_rng(41).random(m)
    counts = (x_min ** (1 - s) + u * (n ** (1 - s) - x_min ** (1 - s))) ** (1 / (1 - s))
    estimate = np.concatenate([counts / n, np.full(100, -0.001)])  # noise below x_min is ignored
    assert pp.fit_power_law_exponent(estimate, noise) == pytest.approx(s, abs=5 * 0.018)


def test_power_law_exponent_is_zero_without_significant_counts():
    noise = oue_noise()
    assert pp.fit_power_law_exponent(np.full(10, noise.sigma), noise) == 0.0


# ---------------------------------------------------------------------------------------------
# Method table, apply and PostprocessSpec


def test_method_table_uses_the_papers_names():
    assert set(pp.METHODS) == {"base", "post-pos", "base-pos", "base-cut", "norm", "norm-mul",
                               "norm-sub", "norm-cut", "norm-hyb", "mle-apx", "power", "power-ns",
                               "ibu", "auto", "auto-top", "auto-sets"}
    assert pp.METHODS.aliases == {"none": "base"} and "cls" not in pp.METHODS


def test_none_is_base():
    truth, estimate, noise = CASES[0].values
    np.testing.assert_array_equal(pp.apply("none", estimate, noise), estimate)
    assert pp.PostprocessSpec.parse("none") == pp.PostprocessSpec.parse("base")
    assert pp.PostprocessSpec.parse("none").as_dict() == {"method": "base"}


def test_post_pos_leaves_the_distribution_to_the_queries():
    np.testing.assert_array_equal(pp.apply("post-pos", [0.5, -0.1], oue_noise()), [0.5, -0.1])


def test_spec_parses_names_and_objects_and_fills_defaults():
    default = pp.PostprocessSpec.parse(None)
    assert default == pp.PostprocessSpec() == pp.PostprocessSpec.parse("norm-hyb")
    assert default == pp.PostprocessSpec.parse({"method": "norm-hyb", "alpha": 2})
    assert default.as_dict() == {"method": "norm-hyb", "alpha": 2.0}
    spec = pp.PostprocessSpec.parse({"method": "base-cut", "alpha": 0.05})
    assert spec.params == (("alpha", 0.05),)
    assert pp.PostprocessSpec.parse(spec.as_dict()) == spec
    assert pp.PostprocessSpec.parse({"method": "power", "exponent": None}).as_dict() == {
        "method": "power", "exponent": None}
    hash(spec)


def test_spec_apply_runs_the_method_with_its_parameters():
    truth, estimate, noise = CASES[3].values
    spec = pp.PostprocessSpec.parse({"method": "base-cut", "alpha": 0.05})
    np.testing.assert_array_equal(spec.apply(estimate, noise),
                                  pp.base_cut(estimate, noise, alpha=0.05))
    np.testing.assert_array_equal(pp.apply("norm-hyb", estimate, noise, alpha=5),
                                  pp.norm_hyb(estimate, noise, alpha=5.0))


@pytest.mark.parametrize("config, named", [
    ("norm-hyd", "'norm-hyd'"),
    ("cls", "'cls'"),
    ({"method": "Norm-Sub"}, "'Norm-Sub'"),
    ({"method": 3}, "3"),
    ({"alpha": 2}, "'method'"),
    ({"method": "norm-hyb", "aplha": 2}, "'aplha'"),
    ({"method": "norm-sub", "alpha": 2}, "'alpha'"),
    ({"method": "norm-hyb", "alpha": 0}, "'alpha'"),
    ({"method": "norm-hyb", "alpha": "2"}, "'2'"),
    ({"method": "norm-hyb", "alpha": True}, "True"),
    ({"method": "base-cut", "alpha": float("nan")}, "nan"),
    ({"method": "power", "exponent": -1}, "'exponent'"),
    ({"method": "power", "exponent": 1000}, r"'exponent'.*\[0, 10\]"),
    (["norm-sub"], "list"),
])
def test_spec_rejects_bad_configs_naming_the_bad_field(config, named):
    with pytest.raises(ValueError, match=named.replace("(", r"\(")):
        pp.PostprocessSpec.parse(config)


def test_apply_rejects_unknown_methods_and_parameters():
    truth, estimate, noise = CASES[0].values
    with pytest.raises(ValueError, match="'bogus'"):
        pp.apply("bogus", estimate, noise)
    with pytest.raises(ValueError, match="'beta'"):
        pp.apply("norm-hyb", estimate, noise, beta=1.0)


# ---------------------------------------------------------------------------------------------
# Degenerate inputs


ALL_METHODS = sorted([*pp.METHODS, *pp.METHODS.aliases])


@pytest.mark.parametrize("method", ALL_METHODS)
def test_no_reports_returns_the_nan_estimate_unchanged(method):
    noise = oue_noise(1.0, 0)
    estimate = np.full(16, np.nan)
    result = run(method, estimate, noise)
    assert result.shape == (16,) and np.isnan(result).all() and result is not estimate


@pytest.mark.parametrize("method", ALL_METHODS)
def test_a_partly_nan_estimate_is_rejected(method):
    with pytest.raises(ValueError, match="non-finite"):
        pp.apply(method, np.array([0.5, np.nan]), oue_noise())


@pytest.mark.parametrize("value", [1.04, 0.97, -0.2])
def test_a_single_value_domain(value):
    noise, estimate = oue_noise(), np.array([value])
    expected = {
        "base": [value], "none": [value], "post-pos": [value], "base-pos": [max(value, 0)],
        "base-cut": [max(value, 0)],  # d <= alpha: the cut is 0, Base-Cut is Base-Pos
        "norm": [1.0], "norm-mul": [1.0], "norm-sub": [1.0], "norm-hyb": [1.0], "mle-apx": [1.0],
        "power-ns": [1.0], "ibu": [1.0],
        "norm-cut": [value] if 0 < value <= 1 else [0.0],  # above 1 no theta keeps anything
    }
    for method, want in expected.items():
        np.testing.assert_allclose(run(method, estimate, noise), want, err_msg=method)
    assert 0 < pp.power(estimate, noise)[0] <= 1


def test_a_two_value_domain_has_no_threshold():
    noise, estimate = oue_noise(), np.array([0.9, 0.3])
    assert pp.significance_threshold(noise, 2) == -math.inf  # the limit of eq. 9 as d -> alpha
    np.testing.assert_array_equal(pp.base_cut(estimate, noise), pp.base_pos(estimate, noise))
    np.testing.assert_allclose(pp.norm_hyb(estimate, noise), pp.norm_sub(estimate, noise))
    np.testing.assert_allclose(pp.norm_sub(estimate, noise), [0.8, 0.2])
    # with alpha < d the threshold is defined again
    np.testing.assert_array_equal(pp.base_cut(estimate, noise, alpha=0.5), [0.9, 0.3])


@pytest.mark.parametrize("method", ALL_METHODS)
def test_all_negative_estimates(method):
    noise = oue_noise()
    estimate = np.array([-0.01, -0.02, -0.005, -0.03, -0.015, -0.01])
    result = run(method, estimate, noise)
    assert_order_preserved(estimate, result)
    if method in ("norm-mul", "norm-sub", "norm-hyb", "mle-apx", "power-ns", "ibu"):
        assert result.min() >= 0 and result.sum() == pytest.approx(1.0, abs=1e-12)
    if method in ("base-pos", "base-cut", "norm-cut"):
        np.testing.assert_array_equal(result, np.zeros(6))
    if method == "power":
        assert result.min() > 0


@pytest.mark.parametrize("exponent", [0.0, 1.5, 8.0])
def test_power_over_a_window_wider_than_its_cap_sums_cells_close_to_eq_10(exponent):
    """A pooled-hash oracle's collision term puts a floor under sigma, so sigma n grows as n and
    eq. 10's window with it: beyond POWER_MAX_TERMS counts per value Power sums cells of counts
    (one count each near count 1, where the prior changes fast). Against eq. 10 over every count
    (n = 5·10⁶, sigma n ≈ 10⁵, a window of ~2·10⁶ counts, cells of 34) the answer moves by less
    than sigma/1,000, for values far from 0, near it and below it."""
    from ldp_telemetry.ldp.protocols.hash_pool import PoolNoise
    noise = PoolNoise(0.5, 0.119, 5_000_000, collision=1e-3).given(np.r_[0.5, 0.3, 0.2])
    sigma = noise.sigma
    assert sigma * noise.n * 20 > pp.POWER_MAX_TERMS
    estimate = np.array([0.5, 0.3, 0.2, 0.0, -0.02, 3 * sigma, 12 * sigma, 1e-6])
    np.testing.assert_allclose(pp.power(estimate, noise, exponent=exponent),
                               eq10_by_brute_force(estimate, noise, exponent),
                               rtol=0, atol=sigma / 1000)


@pytest.mark.parametrize("exponent", [0.9, 1.0, 1.2])
def test_power_over_cells_is_within_its_stated_error_for_s_near_1_and_values_near_0(exponent):
    """The cells' midpoint error on the prior's mass is a relative s(s + 1) / (24 share²) that
    moves the answer most for s near 1 and values a few sigma above 0: their posterior spreads
    over every scale of counts, through the cells that grow from count 1 to `step`. There the
    answer stays within the 2·10⁻⁵ sigma the docs state (it was 1.2·10⁻⁴ sigma with cells of
    c/8 counts). Deterministic: no noise is drawn."""
    from ldp_telemetry.ldp.protocols.hash_pool import PoolNoise
    noise = PoolNoise(0.5, 0.119, 5_000_000, collision=1e-3).given(np.r_[0.5, 0.3, 0.2])
    sigma = noise.sigma
    assert sigma * noise.n * 20 > pp.POWER_MAX_TERMS
    estimate = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]) * sigma
    np.testing.assert_allclose(pp.power(estimate, noise, exponent=exponent),
                               eq10_by_brute_force(estimate, noise, exponent),
                               rtol=0, atol=2e-5 * sigma)
