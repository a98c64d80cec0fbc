"""Consistency post-processing of frequency-oracle estimates ([Wang20] journal §3).

Every method takes the unbiased estimate f~ (length d, may be negative, sums to about 1) and its
SupportNoise, and returns a new float64 array; the input is never modified. What this
implementation guarantees (Table 1 of the paper, corrected):

    method     non-negative  sums to 1  order-preserving  time
    base       no            no         yes               O(d)
    base-pos   yes           no         yes               O(d)
    base-cut   yes           no         yes               O(d)
    norm       no            yes        yes               O(d)
    norm-mul   yes           yes        yes               O(d)
    norm-sub   yes           yes        yes               O(d log d)
    norm-cut   yes           <= 1       yes               O(d log d)
    norm-hyb   yes           yes        yes (see below)   O(d log d)
    mle-apx    yes           yes        yes               O(d) per pass, at most d passes
    ibu        yes           yes        yes               O(d) per root-search step
    power      yes (> 0)     no         yes               O(d min(sigma n, 2^16)) (*)
    power-ns   yes           yes        yes               O(d min(sigma n, 2^16)) (*)

"Sums to 1" holds up to floating-point rounding. "Order-preserving" means f~_a <= f~_b implies
f'_a <= f'_b, so equal estimates get equal outputs. Where this differs from the paper's table:
Base-Cut is non-negative only because T is clamped at 0 (eq. 9 is negative when alpha/d > 1/2);
Norm-Hyb preserves order only because of a cap the paper does not state (see `norm_hyb`); the
sort-based methods are O(d log d) rather than O(d); MLE-Apx needs a few passes in practice.
(*) sigma n = O(sqrt(n)) for a pure protocol, O(n) for a pooled-hash oracle (its collision
term puts a floor under sigma): `power` sums a wider window over cells (POWER_MAX_TERMS).

"post-pos" clips query answers (`post_pos`); as a distribution method it is the identity, like
"base" and its alias "none". `cls` solves §3.5 numerically and is kept out of METHODS: it exists
to check that Norm-Sub is the CLS solution.

When n = 0 the estimate is all NaN (see estimation.unbiased_estimate) and every method returns
it unchanged.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, overload

import numpy as np

from ldp_telemetry.ldp.base.registration import Catalog, MethodChoice, Parameter
from ldp_telemetry.ldp.base.validation import is_finite_number, is_positive_number
from ldp_telemetry.ldp.protocols.noise import SupportNoise

Postprocessor = Callable[..., np.ndarray]


def _postprocessor(method: Postprocessor) -> Postprocessor:
    """Shared contract: copy the estimate to a 1-D float64 array; pass NaN input (n = 0) through."""

    @functools.wraps(method)
    def checked(estimate: np.ndarray, noise: SupportNoise, **params: Any) -> np.ndarray:
        estimate = np.array(estimate, dtype=np.float64)
        if estimate.ndim != 1:
            raise ValueError(f"estimate must be 1-D, got shape {estimate.shape}")
        if estimate.size == 0 or noise.n == 0 or np.isnan(estimate).all():
            return estimate
        if not np.isfinite(estimate).all():
            raise ValueError("estimate mixes finite and non-finite values")
        return method(estimate, noise, **params)

    return checked


# ---------------------------------------------------------------------------------------------
# Building blocks


def significance_threshold(noise: SupportNoise, d: int, alpha: float = 2.0) -> float:
    """T = Phi^-1(1 - alpha/d) * sigma (eq. 9, sigma of eq. 7, in frequency units).

    T is negative when alpha/d > 1/2 and falls to -inf as alpha/d rises to 1, so for alpha/d >= 1
    (where the quantile is undefined) T = -inf. Callers that promise non-negative output use
    max(T, 0); Norm-Hyb treats d <= alpha on its own (see norm_hyb).
    """
    from scipy import stats  # here, not at the top: the client library loads no scipy

    if alpha / d >= 1.0:
        return -math.inf
    return float(stats.norm.ppf(1.0 - alpha / d) * noise.sigma)


def project_to_simplex(values: np.ndarray, mass: float = 1.0) -> np.ndarray:
    """Euclidean projection of values onto {x >= 0, sum x = mass}, exact, O(d log d).

    x_v = max(values_v - tau, 0), with tau read off the sorted cumulative sums (the CLS / KKT
    solution of Appendix B, computed by sorting instead of iterating).
    """
    values = np.asarray(values, dtype=np.float64)
    if mass < 0:
        raise ValueError(f"mass must be >= 0, got {mass}")
    if values.size == 0 or mass == 0:
        return np.zeros_like(values)
    descending = np.sort(values)[::-1]
    shifts = (np.cumsum(descending) - mass) / np.arange(1, values.size + 1)
    support = np.flatnonzero(descending > shifts)[-1]  # index 0 always qualifies when mass > 0
    return np.maximum(values - shifts[support], 0.0)


def error_plug_in(unbiased: np.ndarray) -> np.ndarray:
    """The estimate of f that variances are evaluated at: the Norm-Sub projection of f~.

    NaN (no reports) stays NaN. ldp_telemetry.ldp.engine.finalize.finalize_window says why this
    plug-in.
    """
    unbiased = np.asarray(unbiased, dtype=np.float64)
    return unbiased if np.isnan(unbiased).any() else project_to_simplex(unbiased)


def _project_to_capped_simplex(values: np.ndarray, mass: float, cap: float) -> np.ndarray:
    """Euclidean projection onto {0 <= x <= cap, sum x = mass}; needs 0 <= mass <= cap * d.

    x_v = clip(values_v - tau, 0, cap). The sum is continuous, piecewise linear and
    non-increasing in tau with breakpoints at values and values - cap, so tau is interpolated
    exactly between the two sorted breakpoints that bracket the target mass.
    """
    if not 0.0 <= mass <= cap * values.size:
        raise ValueError(f"mass {mass} cannot be spread over {values.size} values capped at {cap}")
    ascending = np.sort(values)
    prefix = np.concatenate(([0.0], np.cumsum(ascending)))
    taus = np.sort(np.concatenate((values, values - cap)))
    below = np.searchsorted(ascending, taus, side="right")  # values <= tau map to 0
    uncapped = np.searchsorted(ascending, taus + cap, side="right")  # values > tau + cap map to cap
    totals = (cap * (values.size - uncapped) + prefix[uncapped] - prefix[below]
              - (uncapped - below) * taus)
    j = np.flatnonzero(totals >= mass)[-1]
    if j + 1 == taus.size:
        tau = taus[j]
    else:
        tau = taus[j] + (totals[j] - mass) / (totals[j] - totals[j + 1]) * (taus[j + 1] - taus[j])
    return np.clip(values - tau, 0.0, cap)


def norm_cut_threshold(estimate: np.ndarray) -> float:
    """Smallest positive estimate theta with sum of {f~_v : f~_v >= theta} <= 1 (§3.3).

    Candidates are the estimates themselves (the kept sum only changes there); restricting to
    positive theta keeps negative estimates out. +inf when no positive theta qualifies (no
    positive estimate, or the largest one exceeds 1).
    """
    ascending = np.sort(np.asarray(estimate, dtype=np.float64))
    sum_from = np.cumsum(ascending[::-1])[::-1]  # sum_from[i] = sum(ascending[i:])
    kept_sum = sum_from[np.searchsorted(ascending, ascending, side="left")]  # ties kept together
    valid = (ascending > 0) & (kept_sum <= 1.0)
    return float(ascending[valid][0]) if valid.any() else math.inf


@overload
def post_pos(answers: float) -> float: ...
@overload
def post_pos(answers: np.ndarray) -> float | np.ndarray: ...
def post_pos(answers: float | np.ndarray) -> float | np.ndarray:
    """Post-Pos (§3.1): max(answer, 0) for a query answer or an array of answers."""
    clipped = np.maximum(np.asarray(answers, dtype=np.float64), 0.0)
    return float(clipped) if clipped.ndim == 0 else clipped


# ---------------------------------------------------------------------------------------------
# Methods of §3.1-§3.3


@_postprocessor
def base(estimate: np.ndarray, noise: SupportNoise) -> np.ndarray:
    """Base (§3.1): the unbiased estimate unchanged."""
    return estimate


@_postprocessor
def base_pos(estimate: np.ndarray, noise: SupportNoise) -> np.ndarray:
    """Base-Pos (§3.1): max(f~_v, 0)."""
    return np.maximum(estimate, 0.0)


@_postprocessor
def base_cut(estimate: np.ndarray, noise: SupportNoise, *, alpha: float = 2.0) -> np.ndarray:
    """Base-Cut (§3.1, eq. 9): keep f~_v >= max(T, 0), set the rest to 0.

    With d <= 2 alpha the cut is 0 and Base-Cut equals Base-Pos: the union bound of eq. 9
    gives no threshold above 0 on so few values.
    """
    cut = max(significance_threshold(noise, estimate.size, alpha), 0.0)
    return np.where(estimate >= cut, estimate, 0.0)


@_postprocessor
def norm(estimate: np.ndarray, noise: SupportNoise) -> np.ndarray:
    """Norm (§3.2): f~_v + delta with delta = (1 - sum f~) / d; unbiased, may be negative."""
    return estimate + (1.0 - estimate.sum()) / estimate.size


@_postprocessor
def norm_mul(estimate: np.ndarray, noise: SupportNoise) -> np.ndarray:
    """Norm-Mul (§3.3): gamma * max(f~_v, 0) with gamma making the sum 1.

    With no positive estimate no gamma exists; the result is then Norm-Sub's.
    """
    positive = np.maximum(estimate, 0.0)
    total = positive.sum()
    return positive / total if total > 0 else project_to_simplex(estimate)


@_postprocessor
def norm_sub(estimate: np.ndarray, noise: SupportNoise) -> np.ndarray:
    """Norm-Sub (§3.3): max(f~_v + delta, 0) summing to 1, i.e. the CLS solution (§3.5)."""
    return project_to_simplex(estimate, 1.0)


@_postprocessor
def norm_cut(estimate: np.ndarray, noise: SupportNoise) -> np.ndarray:
    """Norm-Cut (§3.3): keep f~_v >= theta (`norm_cut_threshold`), set the rest to 0; sum <= 1.

    When sum max(f~, 0) <= 1, theta is the smallest positive estimate, which is Base-Pos.
    """
    return np.where(estimate >= norm_cut_threshold(estimate), estimate, 0.0)


@_postprocessor
def norm_hyb(estimate: np.ndarray, noise: SupportNoise, *, alpha: float = 2.0) -> np.ndarray:
    """Norm-Hyb (§3.3): keep the estimates above T = max(eq. 9, 0), Norm-Sub the rest to 1 - kept.

    If the kept estimates sum to more than 1, keep instead the largest k whose top-k sum is
    below 1 (a tie at the boundary is left out as a whole) and Norm-Sub the rest.
    Additions to the paper, so that the output stays non-negative, sums to 1 and keeps order:
    - the rest is capped at T (it may only exceed T when Norm-Sub adds a positive delta, which
      would lift it over kept values); the capped projection is the CLS solution on [0, T];
    - if the rest cannot hold the missing mass even at the cap (for instance every estimate is
      above T and they sum to less than 1), the result is Norm-Sub over all values;
    - d <= alpha, where eq. 9 names no threshold, is Norm-Sub: no value is trusted as signal.
    """
    if alpha >= estimate.size:
        return project_to_simplex(estimate)
    threshold = max(significance_threshold(noise, estimate.size, alpha), 0.0)
    kept = estimate > threshold
    cap = threshold
    if estimate[kept].sum() > 1.0:
        descending = np.sort(estimate)[::-1]
        first_left_out = np.argmax(np.cumsum(descending) >= 1.0)
        kept = estimate > descending[first_left_out]
        cap = math.inf  # the rest then has mass to remove, never to add
    rest = ~kept
    mass = 1.0 - estimate[kept].sum()
    if not rest.any():
        return estimate if mass == 0 else project_to_simplex(estimate)
    adjusted = project_to_simplex(estimate[rest], mass)
    if adjusted.max() > cap:
        if cap * np.count_nonzero(rest) < mass:
            return project_to_simplex(estimate)
        adjusted = _project_to_capped_simplex(estimate[rest], mass, cap)
    result = estimate.copy()
    result[rest] = adjusted
    return result


# ---------------------------------------------------------------------------------------------
# §3.4-§3.5: MLE-Apx and the CLS reference solver


@_postprocessor
def mle_apx(estimate: np.ndarray, noise: SupportNoise) -> np.ndarray:
    """MLE-Apx (§3.4, Appendix A): eq. 14 on D1, 0 on D0, summing to 1.

    With c_v/n - q* = (p* - q*) f~_v, eq. 14 reads
        f'_v = (f~_v - q*(1-q*) x / (p*-q*)) / (1 + (1-p*-q*) x),
        x = (p*-q*)(sum_{D1} f~ - 1) / ((p*-q*)(1-p*-q*) + |D1| q*(1-q*)).
    D1 starts as the whole domain; every pass moves the values with f'_v < 0 to D0, until none is
    left. If the formula degenerates (a non-positive denominator: no noise at all, or an input
    far from a distribution) the result is Norm-Sub's.
    """
    gap = noise.p_star - noise.q_star
    curvature = 1.0 - noise.p_star - noise.q_star
    base_variance = noise.q_star * (1.0 - noise.q_star)
    support = np.ones(estimate.size, dtype=bool)
    while True:
        denominator = gap * curvature + np.count_nonzero(support) * base_variance
        if denominator <= 0:
            return project_to_simplex(estimate)
        x = gap * (estimate[support].sum() - 1.0) / denominator
        scale = 1.0 + curvature * x
        if scale <= 0:
            return project_to_simplex(estimate)
        result = np.where(support, (estimate - base_variance * x / gap) / scale, 0.0)
        negative = result < 0
        if not negative.any():
            return result
        support &= ~negative


#: IBU's named limits: the iteration cap of the literal update (`iterative_bayesian_update`,
#: each iteration O(d)) and of the root search that finds its fixed point in `ibu`, and their
#: stopping tolerances.
IBU_DEFAULT_MAX_ITERATIONS = 10_000
IBU_DEFAULT_TOLERANCE = 1e-9
IBU_ROOT_MAX_ITERATIONS = 200
IBU_BRACKET_DOUBLINGS = 200
_SINGLE_SUPPORT_SLACK = 1e-9  # |p* + (d-1) q* - 1| below this: every report supports one value


@dataclass(frozen=True)
class IbuResult:
    """IBU's distribution, how many iterations ran and the last max_v |pi_new - pi_v|."""

    estimate: np.ndarray
    iterations: int
    last_change: float


def support_counts_of(estimate: np.ndarray, noise: SupportNoise) -> np.ndarray:
    """The support counts c_v = n (q* + (p* - q*) f~_v) behind an unbiased estimate, in [0, n]."""
    counts = noise.n * (noise.q_star + (noise.p_star - noise.q_star) * np.asarray(estimate))
    return np.clip(counts, 0.0, float(noise.n))


def is_single_support(noise: SupportNoise, d: int) -> bool:
    """True when every report supports exactly one value (p* + (d-1) q* = 1: GRR and memoized
    GRR); their support counts are then multinomial."""
    return abs(noise.p_star + (d - 1) * noise.q_star - 1.0) <= _SINGLE_SUPPORT_SLACK


def log_likelihood(pi: np.ndarray, counts: np.ndarray, noise: SupportNoise,
                   single: bool) -> float:
    """IBU's objective: sum_v c_v log m_v, plus (n - c_v) log(1 - m_v) unless single support,
    with m_v = q* + (p* - q*) pi_v (terms with a zero count count as 0)."""
    m = noise.q_star + (noise.p_star - noise.q_star) * np.asarray(pi)
    total = float(np.sum(counts * np.log(np.where(counts > 0, m, 1.0))))
    if not single:
        missing = noise.n - counts
        total += float(np.sum(missing * np.log(np.where(missing > 0, 1.0 - m, 1.0))))
    return total


def _ratio(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """numerator / denominator, 0 where the denominator is 0 (a value that cannot be observed)."""
    return np.divide(numerator, denominator, out=np.zeros_like(numerator),
                     where=denominator > 0)


def iterative_bayesian_update(estimate: np.ndarray, noise: SupportNoise, *,
                              tolerance: float = IBU_DEFAULT_TOLERANCE,
                              max_iterations: int = IBU_DEFAULT_MAX_ITERATIONS) -> IbuResult:
    """The literal IBU iteration ([Agrawal01]), EM for the likelihood of `log_likelihood`.

    With A = q* J + (p* - q*) I, (A pi)_v = m_v:
    - single support (GRR, memoized GRR): c ~ Multinomial(n, m) and
      pi <- normalise(pi * A^T (c / A pi));
    - otherwise every value's count is binomial, c_v ~ Binomial(n, m_v) (the counts of
      different values are dependent through each report; the project's channel model gives
      these marginals exactly). The non-supports are observations too, through
      B = (1 - q*) J - (p* - q*) I with (B pi)_v = 1 - m_v; [A; B] has equal column sums, so
      pi <- normalise(pi * (A^T (c / A pi) + B^T ((n - c) / B pi))) is EM for it.
    From the uniform start; stops when max_v |pi_new - pi_v| <= tolerance or after
    max_iterations. EM converges linearly and slowly when q* is large against p* - q* (OUE at
    d = 1024 needs far more than 10^4 iterations), so the registry's `ibu` computes the same
    fixed point directly (`ibu`); this iteration is the reference it is tested against.
    """
    d = estimate.size
    p, q = noise.p_star, noise.q_star
    gap = p - q
    counts = support_counts_of(estimate, noise)
    missing = noise.n - counts
    single = is_single_support(noise, d)
    pi = np.full(d, 1.0 / d)
    change = math.inf
    iterations = 0
    while iterations < max_iterations and change > tolerance:
        supported = q + gap * pi
        observed = _ratio(counts, supported)
        weights = q * observed.sum() + gap * observed
        if not single:
            unobserved = _ratio(missing, 1.0 - supported)
            weights += (1.0 - q) * unobserved.sum() - gap * unobserved
        updated = pi * weights
        total = updated.sum()
        if not total > 0:  # no count any distribution could explain: keep the last iterate
            break
        updated /= total
        change = float(np.max(np.abs(updated - pi)))
        pi = updated
        iterations += 1
    return IbuResult(pi, iterations, change)


def _ibu_point(mu: float, counts: np.ndarray, noise: SupportNoise, single: bool) -> np.ndarray:
    """The maximiser of the likelihood minus mu (p* - q*) sum(pi) over pi in [0, 1]^d.

    Per value, the stationary m solves c/m - (n - c)/(1 - m) = mu, i.e.
    mu m^2 - (mu + n) m + c = 0, whose root in [0, 1] is 2c / ((mu + n) + sqrt((mu + n)^2 -
    4 mu c)) (and, for c = 0, max(1 + n/mu, 0) when mu < 0); single support drops the
    (n - c) term: m = c / mu. Then pi = clip((m - q*)/(p* - q*), 0, 1).
    """
    n = float(noise.n)
    if single:
        m = counts / mu
    else:
        b = mu + n
        root = np.sqrt(np.maximum(b * b - 4.0 * mu * counts, 0.0))
        denominator = b + root
        with np.errstate(divide="ignore", invalid="ignore"):
            m = np.where(denominator > 0, 2.0 * counts / np.where(denominator > 0, denominator,
                                                                  1.0), 0.0)
        if mu < 0:
            m = np.where(counts == 0, max(1.0 + n / mu, 0.0), m)
    return np.clip((m - noise.q_star) / (noise.p_star - noise.q_star), 0.0, 1.0)


@_postprocessor
def ibu(estimate: np.ndarray, noise: SupportNoise) -> np.ndarray:
    """IBU's fixed point (`iterative_bayesian_update`), found directly: non-negative, sums to 1.

    The likelihood is separable (m_v depends on pi_v alone once sum pi = 1) and concave, so its
    maximiser on the simplex is the KKT point pi(mu) of `_ibu_point` with sum pi(mu) = 1; the
    sum falls as mu grows, and mu is found by Brent's method on a doubled bracket (named
    limits IBU_ROOT_MAX_ITERATIONS, IBU_BRACKET_DOUBLINGS). Equal estimates get equal outputs
    and order is kept (pi_v grows with c_v). O(d) per root-search step.
    """
    from scipy import optimize

    counts = support_counts_of(estimate, noise)
    single = is_single_support(noise, estimate.size)
    n = float(noise.n)

    def excess(mu: float) -> float:
        return float(_ibu_point(mu, counts, noise, single).sum()) - 1.0

    if single:
        low, high = n / 2.0, 2.0 * n
        for _ in range(IBU_BRACKET_DOUBLINGS):
            if excess(low) >= 0:
                break
            low /= 2.0
        for _ in range(IBU_BRACKET_DOUBLINGS):
            if excess(high) <= 0:
                break
            high *= 2.0
    else:
        low, high = -n, n
        for _ in range(IBU_BRACKET_DOUBLINGS):
            if excess(low) >= 0:
                break
            low *= 2.0
        for _ in range(IBU_BRACKET_DOUBLINGS):
            if excess(high) <= 0:
                break
            high *= 2.0
    if not (excess(low) >= 0 >= excess(high)):
        return project_to_simplex(estimate)  # no bracket within the limits: Norm-Sub's
    # disp=False: at the cap Brent's last point is kept (it is bracketed; the sum is renormalised)
    mu, _ = optimize.brentq(excess, low, high, xtol=1e-12 * max(abs(low), abs(high)),
                            maxiter=IBU_ROOT_MAX_ITERATIONS, full_output=True, disp=False)
    pi = _ibu_point(mu, counts, noise, single)
    total = pi.sum()
    return pi / total if total > 0 else project_to_simplex(estimate)


@_postprocessor
def cls(estimate: np.ndarray, noise: SupportNoise) -> np.ndarray:
    """CLS (§3.5): argmin ||f' - f~||_2 s.t. f' >= 0, sum f' = 1, by SLSQP from the uniform point.

    A numerical reference for tests (Norm-Sub must equal it); slow, meant for small d.
    """
    from scipy import optimize

    d = estimate.size
    solution = optimize.minimize(
        lambda x: 0.5 * np.sum((x - estimate) ** 2),
        np.full(d, 1.0 / d),
        jac=lambda x: x - estimate,
        method="SLSQP",
        bounds=[(0.0, None)] * d,
        constraints=[{"type": "eq", "fun": lambda x: x.sum() - 1.0, "jac": lambda x: np.ones(d)}],
        options={"ftol": 1e-15, "maxiter": 1000},
    )
    if not solution.success:
        raise RuntimeError(f"CLS did not converge: {solution.message}")
    return solution.x


# ---------------------------------------------------------------------------------------------
# §3.2 Power and PowerNS

_WINDOW_LOG_RATIO = 50.0  # terms left out of eq. 10 weigh at most e^-50 times a kept term
_FIT_SIGMAS = 3.0  # the exponent is fitted on estimated counts at least 3 sigma n
#: The largest exponent s of Power's prior: what the fit searches and what a registry may set
#: (`exponent`); the cells near count 1 of a wide window grow with s (`_cells`).
MAX_POWER_EXPONENT = 10.0
_CHUNK_ELEMENTS = 1 << 21  # at most this many (value, count) pairs in memory at once
#: Most terms Power sums per value. A wider window — σn above 1,800 to 3,300 (s from 10 to 0):
#: a pure oracle beyond 10⁹ reports, or a pooled-hash oracle, whose collision term puts a floor
#: under σ, from about 10⁶ reports — is summed over cells of `step` = ⌈width / POWER_MAX_TERMS⌉
#: counts (`_cells`).
POWER_MAX_TERMS = 1 << 16
#: A cell [c, c + w) of counts holds at most c / (_PRIOR_CELL_SHARE · max(s, 1)) counts, so the
#: prior c^-s changes by at most about 1/_PRIOR_CELL_SHARE within it. The midpoint's error on
#: a cell's prior mass is about s(s + 1) / (24 _PRIOR_CELL_SHARE²) relative; it moves the answer
#: most for s near 1 and values within a few σ of 0 (their posterior spreads over every scale of
#: counts): with 8, 1.2·10⁻⁴ σ at n = 5·10⁶, 1.8·10⁻⁴ σ at n = 10⁹; with 64, 2·10⁻⁶ σ and
#: 3.8·10⁻⁶ σ (the worst s in [0, 10], near 1; against eq. 10 over every count).
_PRIOR_CELL_SHARE = 64.0


def fit_power_law_exponent(estimate: np.ndarray, noise: SupportNoise) -> float:
    """Exponent s of the count prior Pr[c] ~ c^-s of eq. 10, by maximum likelihood.

    Fitted on the estimated counts c_v = f~_v n with c_v >= x_min = max(3 sigma n, 1), where the
    noise no longer dominates, as a continuous power law truncated to [x_min, n] (counts above n
    are clipped to n). The log-likelihood -s mean(log(c/x_min)) - log Z(s),
    Z(s) = integral_1^{n/x_min} y^-s dy, is concave; s is searched in [0, 10]. Returns 0 (a flat
    prior over counts) when no estimated count reaches x_min.
    """
    from scipy import optimize, special

    n = noise.n
    x_min = max(_FIT_SIGMAS * noise.sigma * n, 1.0)
    counts = np.asarray(estimate, dtype=np.float64) * n
    tail = np.minimum(counts[counts >= x_min], n)
    if tail.size == 0 or x_min >= n:
        return 0.0
    mean_log = float(np.mean(np.log(tail / x_min)))
    log_range = math.log(n / x_min)

    def negative_log_likelihood(s: float) -> float:
        # log Z(s) = log(log_range) + log(exprel((1 - s) log_range)), exprel(u) = (e^u - 1) / u
        return s * mean_log + math.log(special.exprel((1.0 - s) * log_range))

    fit = optimize.minimize_scalar(negative_log_likelihood, bounds=(0.0, MAX_POWER_EXPONENT),
                                   method="bounded", options={"xatol": 1e-8})
    return float(fit.x)


@_postprocessor
def power(estimate: np.ndarray, noise: SupportNoise, *,
          exponent: float | None = None) -> np.ndarray:
    """Power (§3.2, eq. 10): the posterior mean of f_v given f~_v under the prior Pr[c] ~ c^-s.

    f'_v = sum_i (i/n) w_i / sum_i w_i, w_i = exp(-(i - x)^2 / (2 (sigma n)^2)) i^-s, x = f~_v n
    clipped to [1, n], summed over the true counts i in [1, n] from x - L to x + 10 sigma n.
    The right reach is the paper's 10 sigma n; the left reach L = sigma n sqrt(100 + 2 s ln n)
    also beats the prior's growth towards small counts (n^s at most), so every term left out
    weighs at most e^-50 times the term at i = x: a relative error below n e^-50.
    Every value uses a window of the same width, so chunks of values are evaluated as 2-D
    arrays: O(d min(sigma n, POWER_MAX_TERMS)) time, bounded memory: a window wider than
    POWER_MAX_TERMS counts is summed over cells of counts (`_cells`), each weighted by its size
    at its midpoint, where neither the Gaussian (σn spans over 1,800 cells for s <= 10 and
    n <= 10^12) nor the prior (by at most 1/64 within a cell) changes much. s is `exponent`,
    or fitted by `fit_power_law_exponent` when None. With sigma = 0 eq. 10 tends to the nearest
    count in [1, n].
    """
    n = noise.n
    s = fit_power_law_exponent(estimate, noise) if exponent is None else float(exponent)
    spread = noise.sigma * n
    counts = estimate * n
    if spread == 0:
        return np.clip(np.rint(counts), 1, n) / n
    right = math.ceil(spread * math.sqrt(2 * _WINDOW_LOG_RATIO))
    left = math.ceil(spread * math.sqrt(2 * (_WINDOW_LOG_RATIO + s * math.log(n))))
    width = min(left + right + 1, n)
    starts = np.clip(np.floor(np.clip(counts, 1, n)) - left, 1, n - width + 1)
    step = math.ceil(width / POWER_MAX_TERMS)
    result = np.empty_like(estimate)
    if step == 1:  # every count of the window, exactly
        _posterior_means(result, counts, starts, np.arange(width, dtype=np.float64), None,
                         spread, s)
        return result / n
    # windows far from count 1 (where c^-s is smooth over `step` counts): cells of `step`
    far = starts >= _PRIOR_CELL_SHARE * max(s, 1.0) * step
    offsets = np.arange(0, width, step, dtype=np.float64)
    sizes = np.minimum(step, width - offsets)
    _posterior_means(result, counts, np.where(far, starts, 1.0),
                     offsets + (sizes - 1) / 2, np.log(sizes), spread, s, far)
    if not far.all():  # the others, widened down to count 1: one grid of cells from 1
        mids, cell_sizes = _cells(int(starts[~far].max()) + width - 1, step, s)
        _posterior_means(result, counts, np.zeros_like(starts), mids, np.log(cell_sizes),
                         spread, s, ~far)
    return result / n


def _cells(last: int, step: int, s: float) -> tuple[np.ndarray, np.ndarray]:
    """(midpoints, sizes) of cells covering the counts 1..last: a cell starting at count c holds
    min(step, max(1, ⌊c / (_PRIOR_CELL_SHARE · max(s, 1))⌋)) counts — one count each near 1,
    growing with c, then `step` — so about _PRIOR_CELL_SHARE · max(s, 1) · (1 + ln step) +
    last / step cells."""
    share = _PRIOR_CELL_SHARE * max(s, 1.0)
    mids, sizes = [], []
    c = 1
    while c <= last and c < share * step:
        size = min(step, max(1, int(c // share)), last - c + 1)
        mids.append(c + (size - 1) / 2)
        sizes.append(size)
        c += size
    starts = np.arange(c, last + 1, step, dtype=np.float64)
    tail = np.minimum(step, last + 1 - starts)
    return (np.concatenate([np.array(mids), starts + (tail - 1) / 2]),
            np.concatenate([np.array(sizes, dtype=np.float64), tail]))


def _posterior_means(result: np.ndarray, counts: np.ndarray, starts: np.ndarray,
                     offsets: np.ndarray, log_sizes: np.ndarray | None, spread: float, s: float,
                     chosen: np.ndarray | None = None) -> None:
    """Eq. 10's posterior mean of the count, into `result`, for the values `chosen` (every
    value when None): terms at starts_v + offsets, each weighing exp(log_sizes) counts."""
    rows = max(1, _CHUNK_ELEMENTS // offsets.size)
    indices = np.arange(counts.size) if chosen is None else np.flatnonzero(chosen)
    for first in range(0, indices.size, rows):
        chunk = indices[first:first + rows]
        true_counts = starts[chunk, None] + offsets
        log_weights = (true_counts - counts[chunk, None]) / spread
        log_weights *= log_weights
        log_weights *= -0.5
        if s != 0:
            log_weights -= s * np.log(true_counts)
        if log_sizes is not None:
            log_weights += log_sizes
        log_weights -= log_weights.max(axis=1, keepdims=True)
        weights = np.exp(log_weights, out=log_weights)
        result[chunk] = (weights * true_counts).sum(axis=1) / weights.sum(axis=1)


@_postprocessor
def power_ns(estimate: np.ndarray, noise: SupportNoise, *,
             exponent: float | None = None) -> np.ndarray:
    """PowerNS ([Wang20] NDSS §IV-E): Norm-Sub applied to Power's output."""
    return project_to_simplex(power(estimate, noise, exponent=exponent), 1.0)


# ---------------------------------------------------------------------------------------------
# Method table and configuration


@dataclass(frozen=True)
class PostprocessMethod:
    """A named post-processing method: its function and its parameters (the keyword-only
    parameters of `run`, with the same defaults)."""

    name: str
    run: Postprocessor
    parameters: Mapping[str, Parameter] = field(default_factory=dict)


def _is_exponent(value: Any) -> bool:
    return value is None or (is_finite_number(value) and 0 <= value <= MAX_POWER_EXPONENT)


def _float_or_none(value: Any) -> float | None:
    return None if value is None else float(value)


_ALPHA = Parameter(2.0, is_positive_number, "a finite number > 0", float)
_EXPONENT = Parameter(None, _is_exponent,
                      f"null (fit it) or a number in [0, {MAX_POWER_EXPONENT:g}]", _float_or_none)

#: The methods by name; "none" is another name of "base". The replay-chosen methods ("auto",
#: "auto-top", "auto-sets") register from ldp_telemetry.ldp.estimation.replay on first use.
METHODS: Catalog[PostprocessMethod] = Catalog("post-processing method", "postprocess",
                                              aliases={"none": "base"},
                                              modules=["ldp_telemetry.ldp.estimation.replay"])
for _method in (
    PostprocessMethod("base", base),
    PostprocessMethod("post-pos", base),  # the distribution is left as is; post_pos clips answers
    PostprocessMethod("base-pos", base_pos),
    PostprocessMethod("base-cut", base_cut, {"alpha": _ALPHA}),
    PostprocessMethod("norm", norm),
    PostprocessMethod("norm-mul", norm_mul),
    PostprocessMethod("norm-sub", norm_sub),
    PostprocessMethod("norm-cut", norm_cut),
    PostprocessMethod("norm-hyb", norm_hyb, {"alpha": _ALPHA}),
    PostprocessMethod("mle-apx", mle_apx),
    PostprocessMethod("ibu", ibu),
    PostprocessMethod("power", power, {"exponent": _EXPONENT}),
    PostprocessMethod("power-ns", power_ns, {"exponent": _EXPONENT}),
):
    METHODS.register(_method)
DEFAULT_METHOD = "norm-hyb"


@dataclass(frozen=True)
class PostprocessSpec(MethodChoice):
    """A validated choice of method and parameters; defaults are filled in, aliases resolved."""

    method: str = DEFAULT_METHOD

    catalog: ClassVar[Catalog] = METHODS

    @classmethod
    def parse(cls, value: str | Mapping[str, Any] | PostprocessSpec | None) -> PostprocessSpec:
        """From a registry value: a name, {"method": name, **params}, or None (the default)."""
        return cls() if value is None else super().parse(value)

    def apply(self, estimate: np.ndarray, noise: SupportNoise) -> np.ndarray:
        """Run the method on one estimate."""
        return self.definition.run(estimate, noise, **dict(self.params))

    def as_dict(self) -> dict[str, Any]:
        """{"method": name, **params} for output records; parse(as_dict()) gives an equal spec."""
        return {"method": self.method, **dict(self.params)}


def apply(method: str, estimate: np.ndarray, noise: SupportNoise, **params: Any) -> np.ndarray:
    """Validate the method name and parameters (RegistryError naming the bad one), then run it."""
    return PostprocessSpec(method, tuple(params.items())).apply(estimate, noise)
