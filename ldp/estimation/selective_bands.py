"""95% bands of top-k answers by inference conditional on the ranking (selective inference).

The unbiased estimate of a pure frequency oracle is approximately Gaussian, f~ ~ N(f, Σ), with
Σ_vv = Var(f_v) of [Wang20] journal eq. 2 and, for u ≠ v (`covariance_column`),

    Σ_uv = ((f_u + f_v) κ_in + (1 − f_u − f_v) κ_out) / (n (p* − q*)²),

κ_in = Cov([y supports u], [y supports v] | x = u) and κ_out the same for x ∉ {u, v}, read off
the protocol's own `report_variance` (0 for unary encoding and local hashing, −p*q* and −q*²
for GRR, negative for SS and RWS, HR's from its Walsh–Hadamard form).

Every post-processing method of ldp_telemetry.ldp.estimation.postprocess is order-preserving
(f~_a ≤ f~_b implies f'_a ≤ f'_b), so a top-k answer's value v ranked j-th by f~ is the event
that f~_v lies between the j-th and (j−1)-th largest of the other values' estimates. With
c = Σ_{·v} / Σ_vv and z = f~ − c f~_v (independent of f~_v), the others move as z + c t when
f~_v = t, and the event is t ∈ [V⁻, V⁺), two order statistics of the thresholds
(f~_u − c_u f~_v) / (1 − c_u) ([Lee16] Lemma 5.1, the polyhedral lemma). Conditional on it
and on z, f~_v ~ N(f_v, Σ_vv) truncated to [V⁻, V⁺) ([Lee16] Theorem 5.2).

The band is the hybrid interval of [Andrews24]: the projection set P = {μ : |f~_v − μ| ≤
c_β σ(μ)}, c_β = Φ⁻¹(1 − β / (2d)) (Bonferroni over the d values any rank could go to,
level β = `PROJECTION_LEVEL`), and within it every μ whose conditional test at level
a = (α − β) / (1 − β) accepts: a/2 ≤ F_TN(f~_v; μ, σ(μ), [V⁻, V⁺) ∩ [μ ± c_β σ(μ)]) ≤ 1 − a/2.
Under the Gaussian model its coverage is at least 1 − α = 95% and close to it (the
conditional interval alone: exactly 95%); the conditional interval alone grows
without bound when f~_v lies near V⁻ or V⁺, the hybrid one never leaves P.

σ(μ)² = Var(f~_v) at f_v = μ (eq. 2 at the value tested, as the score band of
frequency_bands.score_bands), so each test is exact under its own null; the conditioning
direction c uses Σ at the Norm-Sub plug-in for the other values and for v (a nuisance with
small entries for GRR, SS and HR, and none for independent supports). Only μ in [0, 1], where
the truth lies, are tested.

A value tied in f' with another (post-processing puts many values at 0; the tie is broken in
domain order, not by f~) is conditioned on its own rank by f~ as well: that is not the event
that selected it, and benchmarks/selective_top_k.py measures its coverage apart.

Measured on real windows (benchmarks/selective_top_k.py, docs/error-bars.md "Query answers")
these bands are not calibrated: where the top values lie within a few support counts of each
other the rank leaves the conditional law almost no information, and the band is most of the
projection set (coverage 0.98–1.00, 1.5 times the width of `ldp query`'s band); conditioning
on membership of the top k ("set") is calibrated on average over the ranks but not for the top
answer. So `ldp query` does not give them alone: it joins the rank-conditional band with its
union of the bootstrap and the score band, which removes the union's rank-1 dips
(frequency_bands.top_k_rank_conditional_bands), and gives that join as the answer's
conservative band, not as a 95% band. Why they over-cover (selective_top_k.py
--families, docs/error-bars.md "Taking the rank-conditional band apart"): not β (β = 0, the
conditional interval alone, over-covers as much, and is all of [0, 1] for a third of the
answers) but the lattice f~ lives on: the rank often confines f~_v to one or a few support
counts, where a test that is not randomized must accept nearly every μ; the same test
randomized on the lattice (`hybrid_band` with a uniform U) is calibrated there, and is not
shipped (a band must not depend on a coin; the hybrid randomized, measured against a rule
written before its results, put three quarters of its per-rank coverages in [0.93, 0.97] at
the join's width but fell to 0.84 at GRR's rank 1 where n · q* is just above 4, as the hybrid
does).

Values ranked by a linear estimate A f~ instead (a Wiener filter at its final gains) give the
same kind of event with its rows mapped through A: each margin (A f~)_v − (A f~)_u moves by
(A c)_v − (A c)_u per unit of f~_v (`linear_rank_interval`, `filtered_selective_bands`), the
target still f_v; frequency_bands.top_k_filtered_bands says how `ldp query` uses it.

Cost: O(d) per answer for the thresholds, then two root searches (brentq) on the truncated
normal's CDF, computed from ratios of Gaussian tail masses through scipy.special.erfcx
(`truncated_cdf`: truncnorm, and differences of log_ndtr, lose their accuracy many standard
deviations out).
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ldp_telemetry.ldp.protocols.base import FrequencyOracle

#: The two-sided level of the band: 1 − ALPHA = 95%.
ALPHA = 0.05
#: β of the hybrid interval: the projection (Bonferroni over d) set's level.
PROJECTION_LEVEL = 0.005
#: Absolute tolerance of the root searches on μ (frequency units).
ROOT_TOLERANCE = 1e-10


def covariance_terms(protocol: FrequencyOracle) -> tuple[float, float]:
    """(κ_in, κ_out): one report's covariance of the support indicators of two values u ≠ v
    when its true value is u (or v), and when it is neither (module docstring), from the
    protocol's `report_variance` at w = e_0 + e_1: Var = Var_0 + Var_1 + 2 Cov."""
    d = protocol.d
    if d < 2:
        return 0.0, 0.0
    p, q = protocol.p_star, protocol.q_star
    pair = np.zeros(d)
    pair[:2] = 1.0
    variances = protocol.report_variance(pair)
    inside = (float(variances[0]) - p * (1 - p) - q * (1 - q)) / 2.0
    outside = (float(variances[2]) - 2.0 * q * (1 - q)) / 2.0 if d > 2 else 0.0
    return inside, outside


def covariance_column(protocol: FrequencyOracle, n: int, frequencies: np.ndarray, v: int,
                      terms: tuple[float, float] | None = None) -> np.ndarray:
    """Σ_{·v}: the covariance of every value's unbiased estimate with value v's, for n reports
    from users with true distribution `frequencies` (clipped to [0, 1]); entry v is eq. 2."""
    f = np.clip(np.asarray(frequencies, dtype=np.float64), 0.0, 1.0)
    inside, outside = covariance_terms(protocol) if terms is None else terms
    p, q = protocol.p_star, protocol.q_star
    scale = n * (p - q) ** 2
    pair = f + f[v]
    column = (pair * inside + (1.0 - pair) * outside) / scale
    column[v] = (q * (1 - q) + f[v] * (p - q) * (1 - p - q)) / scale
    return column


def thresholds(unbiased: np.ndarray, column: np.ndarray, v: int, step: float = 0.0
               ) -> np.ndarray:
    """The values of f~_v at which v passes each other value, the others moving as z + c t
    (c = column / column[v]): (f~_u − c_u f~_v) / (1 − c_u), u ≠ v, in domain order. v ranks
    above u (f~ descending, ties in domain order, as the answers are ranked) exactly when f~_v
    exceeds u's threshold ([Lee16] Lemma 5.1). `step`: the lattice f~ lives on, 1 / (n (p*
    − q*)) (support counts are integers): each threshold moves half a step towards the side a
    tie puts it on (a continuity correction; 0 for none). ValueError when a coefficient of c
    is >= 1 (the event is then no interval)."""
    f = np.asarray(unbiased, dtype=np.float64)
    c = column / column[v]
    others = np.arange(f.size) != v
    if np.any(c[others] >= 1.0):
        raise ValueError("the conditioning direction has a coefficient >= 1: "
                         "the rank event is not an interval")
    # a value before v in domain order wins a tie: its threshold sits half a step higher
    side = np.where(np.arange(f.size) < v, 0.5, -0.5)[others]
    return (f[others] - c[others] * f[v]) / (1.0 - c[others]) + side * step


def rank_interval(passes: np.ndarray, estimate: float) -> tuple[float, float]:
    """[V⁻, V⁺): the values of f~_v that keep its rank (`thresholds` `passes`, f~_v =
    `estimate`); ±inf where v would be first or last."""
    above = passes[passes > estimate]
    below = passes[passes <= estimate]
    return (float(below.max()) if below.size else -math.inf,
            float(above.min()) if above.size else math.inf)


def set_interval(passes: np.ndarray, estimate: float, k: int) -> tuple[float, float]:
    """The values of f~_v that keep it inside the top k (when it is: [V⁻, ∞), V⁻ the k-th
    largest threshold) or outside them (when it is not: (−∞, V⁺), the same threshold)."""
    if k > passes.size:
        return -math.inf, math.inf
    kth = float(np.partition(passes, passes.size - k)[passes.size - k])
    return (kth, math.inf) if estimate > kth else (-math.inf, kth)


def _tail_gap(low: float, high: float) -> float:
    """log Φ(−low) − log Φ(−high) for 0 ≤ low ≤ high (inf for high = inf), accurate however
    far out: Φ(−t) = erfcx(t/√2) e^(−t²/2) / 2, so the gap is log(erfcx(low/√2) /
    erfcx(high/√2)) + (high − low)(high + low)/2, with no difference of two large logs (a
    difference of log_ndtr values loses |log Φ| · 1e-16 of absolute accuracy)."""
    from scipy.special import erfcx
    if high == math.inf:
        return math.inf
    root2 = math.sqrt(2.0)
    return (math.log(float(erfcx(low / root2)) / float(erfcx(high / root2)))
            + (high - low) * (high + low) / 2.0)


def _standard_cdf(x: float, low: float, high: float) -> float:
    """P(X ≤ x | low ≤ X < high) for X ~ N(0, 1), low ≤ x ≤ high: ratios of upper-tail
    masses (`_tail_gap`) when the interval lies on one side of 0, plain Φ differences when it
    holds 0 (its mass is then not small relative to Φ's rounding)."""
    from scipy.special import ndtr
    if low >= 0.0:  # (Φ(−low) − Φ(−x)) / (Φ(−low) − Φ(−high))
        return math.expm1(-_tail_gap(low, x)) / math.expm1(-_tail_gap(low, high))
    if high <= 0.0:  # mirrored: (Φ(−x') − Φ(−high')) / (Φ(−low') − Φ(−high')), ' = −
        top, bottom, point = -high, -low, -x
        return (math.exp(-_tail_gap(top, point)) * math.expm1(-_tail_gap(point, bottom))
                / math.expm1(-_tail_gap(top, bottom)))
    base = float(ndtr(low))
    return (float(ndtr(x)) - base) / (float(ndtr(high)) - base)


def truncated_cdf(y: float, mean: float, sd: float, low: float, high: float) -> float:
    """P(X ≤ y) for X ~ N(mean, sd²) truncated to [low, high) (`_standard_cdf`: accurate far
    in the tails, where scipy.stats.truncnorm is not); y is clipped to the interval."""
    a, b = (low - mean) / sd, (high - mean) / sd
    x = min(max((y - mean) / sd, a), b)
    if x <= a:
        return 0.0
    if x >= b:
        return 1.0
    return min(max(_standard_cdf(x, a, b), 0.0), 1.0)


@dataclass(frozen=True)
class Selection:
    """What the band of one selected value needs: its unbiased estimate, the interval its rank
    confines it to, and its variance Var(f~_v) = a + b f_v (eq. 2) as a function of f_v."""

    estimate: float
    low: float
    high: float
    a: float
    b: float
    d: int

    def sd(self, mu: float) -> float:
        """σ(μ): eq. 2 at f_v = μ clipped to [0, 1]."""
        return math.sqrt(max(self.a + self.b * min(max(mu, 0.0), 1.0), 1e-300))


def projection_set(selection: Selection, critical: float) -> tuple[float, float]:
    """{μ : |f~_v − μ| ≤ critical · σ(μ)} (σ² = a + b μ: the score construction in closed
    form, as frequency_bands.score_bands), clipped to [0, 1]."""
    y, a, b = selection.estimate, selection.a, selection.b
    z2 = critical * critical
    half = critical * math.sqrt(max(a + b * y + z2 * b * b / 4.0, 0.0))
    centre = y + z2 * b / 2.0
    return max(centre - half, 0.0), min(centre + half, 1.0)


def hybrid_band(selection: Selection, alpha: float = ALPHA, beta: float = PROJECTION_LEVEL,
                uniform: float | None = None, step: float = 0.0) -> tuple[float, float]:
    """(lower, upper) of the hybrid interval (module docstring): within the projection set at
    level beta, every μ the conditional test at (alpha − beta)/(1 − beta) accepts. beta = 0:
    the conditional interval alone. Only μ in [0, 1] are tested (the truth lies there): when
    every one is rejected, the band is the point of [0, 1] nearest to the μ the test accepts
    (0 when f~_v lies so close above V⁻ that only negative frequencies explain it): it then
    holds the truth only if the truth is that point, as the empty set it stands for would
    not.

    `uniform` U in (0, 1) (None: not randomized) randomizes the test on the lattice f~ lives
    on, `step` s = 1 / (n (p* − q*)) apart (V⁻ and V⁺ moved half a step, `thresholds`): the
    test reads G(μ) = F(y − s/2) + U (F(y + s/2) − F(y − s/2)) in place of F(y), F the
    truncated normal CDF at μ; with U uniform and independent of f~, G is uniform when f~_v
    is the Gaussian law rounded to the lattice (the randomized probability integral
    transform of a discrete law), so the conditional interval (beta = 0) holds exactly
    1 − alpha there, the hybrid 1 − alpha to (1 − alpha) / (1 − beta) (P's ends, μ ± c_β
    σ(μ), fall between lattice points, in tails of mass below beta). Without U, a rank that
    confines f~_v to one or a few counts leaves no test that is exact. Measured, not
    shipped: the band depends on U."""
    from scipy.optimize import brentq
    from scipy.stats import norm
    if beta > 0.0:
        critical = float(norm.isf(beta / (2.0 * selection.d)))
        start, stop = projection_set(selection, critical)
        level = (alpha - beta) / (1.0 - beta)
    else:
        critical, start, stop, level = math.inf, 0.0, 1.0, alpha
    if start > stop:  # P misses [0, 1]: f~_v lies far outside it
        point = 0.0 if stop <= 0.0 else 1.0
        return point, point
    y = selection.estimate

    def cdf(mu: float) -> float:
        sd = selection.sd(mu)
        low = max(selection.low, mu - critical * sd)
        high = min(selection.high, mu + critical * sd)
        if uniform is None:
            return truncated_cdf(y, mu, sd, low, high)
        below = truncated_cdf(y - step / 2.0, mu, sd, low, high)
        return below + uniform * (truncated_cdf(y + step / 2.0, mu, sd, low, high) - below)

    upper_tail, lower_tail = 1.0 - level / 2.0, level / 2.0
    # F falls as μ rises: the band's lower end is where F = 1 − a/2, its upper end F = a/2
    at_start, at_stop = cdf(start), cdf(stop)
    if at_start < lower_tail:  # every μ rejected, the accepted ones lie below
        return start, start
    if at_stop > upper_tail:  # ... above
        return stop, stop
    lower = start if at_start <= upper_tail else brentq(
        lambda mu: cdf(mu) - upper_tail, start, stop, xtol=ROOT_TOLERANCE)
    upper = stop if at_stop >= lower_tail else brentq(
        lambda mu: cdf(mu) - lower_tail, lower, stop, xtol=ROOT_TOLERANCE)
    return float(lower), float(upper)


#: What a selected value's band is conditional on: its rank ("rank"), or its membership of
#: the top k ("set").
EVENTS = ("rank", "set")


def selections(unbiased: np.ndarray, protocol: FrequencyOracle, n: int,
               plug_in: np.ndarray, selected: np.ndarray, lattice: bool = True,
               event: str = "rank") -> list[Selection]:
    """The Selection of each selected value (module docstring): O(d) each. `lattice`: f~ is
    made of integer support counts (`thresholds`' continuity correction); False for an f~
    drawn from the Gaussian model itself. `event`: one of EVENTS."""
    if event not in EVENTS:
        raise ValueError(f"event must be one of {EVENTS}, got {event!r}")
    f = np.asarray(unbiased, dtype=np.float64)
    terms = covariance_terms(protocol)
    p, q = protocol.p_star, protocol.q_star
    scale = n * (p - q) ** 2
    a, b = q * (1 - q) / scale, (p - q) * (1 - p - q) / scale
    out = []
    out_of = np.asarray(selected, dtype=np.int64)
    for v in out_of:
        column = covariance_column(protocol, n, plug_in, int(v), terms)
        passes = thresholds(f, column, int(v), 1.0 / (n * (p - q)) if lattice else 0.0)
        low, high = (rank_interval(passes, float(f[v])) if event == "rank"
                     else set_interval(passes, float(f[v]), len(out_of)))
        out.append(Selection(float(f[v]), low, high, a, b, f.size))
    return out


def linear_rank_interval(filtered: np.ndarray, image: np.ndarray, v: int, estimate: float
                         ) -> tuple[float, float]:
    """[V⁻, V⁺]: the values of f~_v that keep v's rank by a linear estimate e = A f~ (A fixed:
    a Wiener filter at its final gains), the others moving as z + c t. With `filtered` = A f~
    and `image` = A c, value u's margin e_v − e_u moves by g_u = image_v − image_u per unit of
    f~_v, so the rank (descending, ties in domain order) holds while every margin keeps its
    sign: t − f~_v ≥ −(e_v − e_u) / g_u where that bounds from below, ≤ where from above
    ([Lee16] Lemma 5.1 with the event's rows e_u − e_v mapped through A; A = I gives
    `thresholds` and `rank_interval` without the lattice correction). ±inf where nothing
    bounds it."""
    e = np.asarray(filtered, dtype=np.float64)
    margin = e[v] - e
    slope = image[v] - np.asarray(image, dtype=np.float64)
    others = np.arange(e.size) != v
    below = (margin > 0) | ((margin == 0) & (np.arange(e.size) > v))  # ranked after v
    sign = np.where(below, 1.0, -1.0)
    moving = others & (slope != 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        bound = -margin / slope
    lower_side = moving & (sign * slope > 0)
    upper_side = moving & (sign * slope < 0)
    low = float(bound[lower_side].max()) if lower_side.any() else -math.inf
    high = float(bound[upper_side].min()) if upper_side.any() else math.inf
    return estimate + min(low, 0.0), estimate + max(high, 0.0)


def filtered_selections(unbiased: np.ndarray, protocol: FrequencyOracle, n: int,
                        plug_in: np.ndarray, selected: np.ndarray,
                        linear: Callable[[np.ndarray], np.ndarray]) -> list[Selection]:
    """The Selection of each selected value when the values are ranked by `linear`(f~) (a
    filter at its final gains, x -> A x: `linear_rank_interval`); the target is still f_v, the
    pivot f~_v. O(cost of A) per answer."""
    f = np.asarray(unbiased, dtype=np.float64)
    terms = covariance_terms(protocol)
    p, q = protocol.p_star, protocol.q_star
    scale = n * (p - q) ** 2
    a, b = q * (1 - q) / scale, (p - q) * (1 - p - q) / scale
    filtered = linear(f)
    out = []
    for v in np.asarray(selected, dtype=np.int64):
        column = covariance_column(protocol, n, plug_in, int(v), terms)
        low, high = linear_rank_interval(filtered, linear(column / column[v]), int(v),
                                         float(f[v]))
        out.append(Selection(float(f[v]), low, high, a, b, f.size))
    return out


def filtered_selective_bands(unbiased: np.ndarray, protocol: FrequencyOracle, n: int,
                             plug_in: np.ndarray, selected: np.ndarray,
                             linear: Callable[[np.ndarray], np.ndarray], alpha: float = ALPHA,
                             beta: float = PROJECTION_LEVEL) -> tuple[np.ndarray, np.ndarray]:
    """(lower, upper) of the hybrid bands of the true frequencies of the `selected` values,
    ranked by `linear`(f~) (`filtered_selections`), within [0, 1] (`hybrid_band`)."""
    bands = [hybrid_band(s, alpha, beta)
             for s in filtered_selections(unbiased, protocol, n, plug_in, selected, linear)]
    return (np.array([band[0] for band in bands], dtype=np.float64),
            np.array([band[1] for band in bands], dtype=np.float64))


def selective_bands(unbiased: np.ndarray, protocol: FrequencyOracle, n: int,
                    plug_in: np.ndarray, selected: np.ndarray, alpha: float = ALPHA,
                    beta: float = PROJECTION_LEVEL, lattice: bool = True,
                    event: str = "rank") -> tuple[np.ndarray, np.ndarray]:
    """(lower, upper) of the hybrid bands of the `selected` values (indices ranked highest by
    an order-preserving post-processing of `unbiased`), for a pure (not pooled-hash) oracle's
    window of n reports; `plug_in`: the distribution Σ's off-diagonal terms are evaluated at
    (the Norm-Sub projection of f~); `event`: what each band is conditional on (EVENTS).
    Within [0, 1] (`hybrid_band`)."""
    bands = [hybrid_band(s, alpha, beta)
             for s in selections(unbiased, protocol, n, plug_in, selected, lattice, event)]
    lower = np.array([band[0] for band in bands], dtype=np.float64)
    upper = np.array([band[1] for band in bands], dtype=np.float64)
    return lower, upper
