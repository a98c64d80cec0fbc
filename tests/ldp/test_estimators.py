"""The support-set estimator with the real perturbation code: unbiasedness and eq. 2 variance.

Each protocol perturbs a fixed population (exact counts n·f_v) R times with fresh randomness;
the R estimates of every value must have mean f_v and variance eq. 2. Tolerances:

* mean of R estimates: standard error sqrt(Var_v / R); we allow K = 4.5 standard errors.
* sample variance s² of R near-normal estimates: (R-1) s²/Var ~ χ²(R-1), whose relative standard
  deviation is sqrt(2/(R-1)) (the excess kurtosis of a sum of n Bernoullis is O(1/n), negligible);
  we allow K = 4.5 of those.

3 protocols × 8 values × 2 checks = 48 checks at 4.5 s.d. (two-sided 6.8e-6 each, a little more
for the χ² tail): family-wise false-failure rate ≈ 5e-4 for a random seed; seeds are fixed.
R = 3000 repetitions give a relative variance tolerance of 4.5·sqrt(2/2999) = 11.6%.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from ldp_telemetry.ldp.protocols import make_protocol
from ldp_telemetry.ldp.protocols.noise import SupportNoise, standard_error, unbiased_estimate
from ldp_telemetry.ldp.protocols.olh import OLH

K = 4.5
R = 3000
N = 2000
# A heavy value (0.4) makes the f-dependent term of eq. 2 large at ε = 2, so the variance test
# can tell eq. 2 from the uniform approximation eq. 7 (checked below, not assumed).
TRUTH = np.array([0.4, 0.2, 0.1, 0.1, 0.1, 0.05, 0.05, 0.0])


def population(f: np.ndarray, n: int) -> np.ndarray:
    counts = np.round(f * n).astype(int)
    assert counts.sum() == n
    return np.repeat(np.arange(len(f)), counts)


def repeated_estimates(protocol, values, reps, seed):
    rng = np.random.default_rng(seed)
    out = np.empty((reps, protocol.d))
    noise = protocol.noise(len(values))
    for r in range(reps):
        statistic = protocol.new_statistic()
        protocol.accumulate(statistic, protocol.perturb(values, rng))
        out[r] = unbiased_estimate(protocol.support_counts(statistic), noise)
    return out


@pytest.mark.parametrize("name, seed", [("grr", 11), ("oue", 12), ("olh", 13)])
def test_unbiased_with_eq2_variance(name, seed):
    protocol = make_protocol(name, 2.0, len(TRUTH))
    estimates = repeated_estimates(protocol, population(TRUTH, N), R, seed)
    noise = protocol.noise(N)
    var = noise.variance(TRUTH)

    mean_err = np.abs(estimates.mean(axis=0) - TRUTH)
    assert np.all(mean_err <= K * np.sqrt(var / R)), (mean_err, np.sqrt(var / R))

    ratio = estimates.var(axis=0, ddof=1) / var
    tolerance = K * math.sqrt(2 / (R - 1))
    assert np.all(np.abs(ratio - 1) <= tolerance), ratio

    # Power check: at the heavy value eq. 7 is off by more than twice the tolerance, so the
    # assertion above really pins eq. 2 and not merely "some variance of the right size".
    eq7 = noise.sigma ** 2
    assert abs(eq7 / var[0] - 1) > 2 * tolerance


def eq3_grr(epsilon, d, f, n):
    e = math.exp(epsilon)
    return ((d - 2 + e) / (e - 1) ** 2 + f * (d - 2) / (e - 1)) / n


def eq6_oue(epsilon, f, n):
    e = math.exp(epsilon)
    return (4 * e / (e - 1) ** 2 + f) / n


@pytest.mark.parametrize("epsilon", [0.1, 0.5, 1.0, 2.0, 4.0, 8.0])
@pytest.mark.parametrize("d", [2, 3, 24, 1000])
def test_eq2_equals_the_closed_forms_eq3_and_eq6(epsilon, d):
    f = np.array([0.0, 0.01, 0.3, 0.77, 1.0])
    n = 1234
    grr = make_protocol("grr", epsilon, d).noise(n)
    np.testing.assert_allclose(grr.variance(f), eq3_grr(epsilon, d, f, n), rtol=1e-10)
    oue = make_protocol("oue", epsilon, d).noise(n)
    np.testing.assert_allclose(oue.variance(f), eq6_oue(epsilon, f, n), rtol=1e-10)


@pytest.mark.parametrize("epsilon", [0.05, 0.5, 0.7, 1.0, 1.5, 2.0, 3.0, 5.0])
def test_olh_support_probabilities(epsilon):
    olh = make_protocol("olh", epsilon, 100)
    e = math.exp(epsilon)
    assert olh.q_star == 1 / olh.g
    assert olh.p_star == pytest.approx(e / (e + olh.g - 1), rel=1e-12)


def olh_n_mse(epsilon, d, g):
    e = math.exp(epsilon)
    p, q = e / (e + g - 1), 1 / g
    return q * (1 - q) / (p - q) ** 2 + (1 - p - q) / (d * (p - q))


@pytest.mark.parametrize("epsilon", [0.01, 0.3, 0.69, 1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 6.0])
@pytest.mark.parametrize("d", [2, 24, 5000])
def test_olh_g_is_e_eps_plus_1_rounded(epsilon, d):
    # Rounded to the nearest integer (at least 2): the rounding that reproduces [Fang25]
    # Table 3. Off tiny domains its n·MSE is within 2% of the better of
    # floor/ceil (RLH is the protocol tuned by eq. 4 for small d).
    olh = OLH(epsilon=epsilon, d=d)
    target = math.exp(epsilon) + 1
    assert olh.g == max(2, round(target))
    best = min(olh_n_mse(epsilon, d, max(2, g)) for g in (math.floor(target), math.ceil(target)))
    if d >= 24:
        assert olh_n_mse(epsilon, d, olh.g) <= 1.02 * best


def test_olh_g_examples():
    # e^1 + 1 = 3.72 -> 4 ; e^2 + 1 = 8.39 -> 8 ; small ε -> 2.
    assert OLH(epsilon=1.0, d=100).g == 4
    assert OLH(epsilon=2.0, d=100).g == 8
    assert OLH(epsilon=0.1, d=100).g == 2


def test_standard_error_clips_the_estimate_to_0_1():
    noise = SupportNoise(p_star=0.6, q_star=0.1, n=500)
    se = standard_error(np.array([-0.4, 0.0, 0.25, 1.0, 1.6]), noise)

    def at(f):
        return math.sqrt(noise.variance(np.array([f]))[0])

    expected = [at(0.0), at(0.0), at(0.25), at(1.0), at(1.0)]
    np.testing.assert_allclose(se, expected, rtol=1e-12)
    # At f = 0 the standard error is eq. 7's sigma; eq. 2 differs from it when f > 0.
    assert se[0] == pytest.approx(noise.sigma, rel=1e-12)
    assert se[2] != pytest.approx(noise.sigma, rel=1e-3)
    assert eq3_like(0.6, 0.1, 500, 0.25) == pytest.approx(se[2] ** 2, rel=1e-12)


def eq3_like(p, q, n, f):
    return (q * (1 - q) + f * (p - q) * (1 - p - q)) / (n * (p - q) ** 2)


def test_unbiased_estimate_formula():
    noise = SupportNoise(p_star=0.5, q_star=0.2, n=1000)
    counts = np.array([200, 500, 350, 0])
    np.testing.assert_allclose(unbiased_estimate(counts, noise),
                               [0.0, 1.0, 0.5, -0.2 / 0.3], rtol=1e-12)


def test_zero_reports_give_nan_estimate_and_infinite_error():
    noise = make_protocol("grr", 1.0, 4).noise(0)
    est = unbiased_estimate(np.zeros(4), noise)
    assert est.shape == (4,) and np.isnan(est).all()
    assert noise.sigma == math.inf
    assert np.isinf(standard_error(est, noise)).all()


@pytest.mark.parametrize("p, q, n", [(0.3, 0.3, 10), (0.2, 0.5, 10), (1.1, 0.1, 10),
                                     (0.5, -0.1, 10), (0.5, 0.1, -1)])
def test_support_noise_rejects_impossible_parameters(p, q, n):
    with pytest.raises(ValueError):
        SupportNoise(p, q, n)
