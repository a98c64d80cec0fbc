"""Exact-variance 95% bands for the mean and the variance of a Square Wave metric.

The mean and the variance need no deconvolution. A Square Wave report's k-th moment given the
value is a polynomial of degree k in the value whose leading coefficient β is the same for
every k, so the values' raw moments have unbiased linear estimates from the reports' moments.

Continuous Square Wave ([Li20] eq. 3: density p on [v − b, v + b], q elsewhere on
[−b, 1 + b]), for a report Y of value v ∈ [0, 1]:

    E[Y^k | v] = q ((1 + b)^{k+1} − (−b)^{k+1})/(k + 1)
                 + (p − q) ((v + b)^{k+1} − (v − b)^{k+1})/(k + 1),     β = 2b (p − q)

(k = 1: q (1 + 2b)/2 + β v; k = 2: q ((1 + b)³ + b³)/3 + (p − q)(2b v² + 2b³/3)).
Discrete Square Wave ([Li20] §5.4: output j ∈ [0, B + 2b), probability p for i ≤ j ≤ i + 2b,
q otherwise) for the bucket i of the value: E[j^k | i] = q Σ_j j^k + (p − q) Σ_{t=0}^{2b} (i + t)^k,
β = (2b + 1)(p − q).

Estimates (`moment_bands`): m̂ = C⁻¹ T̄ with C the triangular matrix of those polynomials and T̄
the reports' mean powers 0..4; the mean m̂₁, the variance m̂₂ − m̂₁² + Var̂(m̂₁) (unbiased up to
the delta method's O(1/n²)). Standard errors are exact for the window's own values (the truth
is their mean and variance, not a super-population's): for a linear statistic Σ_k a_k T̄_k the
variance is (1/n) avg_i Var(h(T_i) | x_i), h(T) = Σ a_k T^k, which is the reports' sample
variance of h(T) minus the spread of E[h(T) | x] over the values — a polynomial of degree ≤ 4
in x, estimated from m̂₁..m̂₄. The variance's error adds 2 Var(m̂₁)² (the square of a normal
m̂₁). Cost: O(d̃), nothing iterative.

The server keeps only the report histogram over d̃ buckets. A report's conditional density is
flat in every bucket but the two that hold the plateau's edges, so the k-th moment of a
uniform spread over its bucket is exact there; the two edge buckets leave a per-value error
e_k(v). Averaged over the edges' positions in their buckets (any value distribution smooth at
the bucket width) e₁ is 0 and e₂ about β w̃²/6 (w̃ the output bucket width, where the plateau
spans a whole bucket; the average over one period otherwise), which is subtracted;
what remains is bounded over every value (`bucketing_bounds`, evaluated at 64 points per output
bucket) by B, and the band's half-width is the smallest c · standard error that holds a
normal error shifted by any bias up to B with probability 0.95 (`bias_aware_z`: the
fixed-length bias-aware interval of [Armstrong20], its critical value cv₀.₀₅), so the band
holds whatever the values' positions in the buckets. Across ε 0.5–4 and d̃ ≥ 1024 the mean's
bound is below 2% of the smallest standard error at n = 10⁶; at d̃ = 128 it is below 10% for
ε ≤ 2 and reaches 0.6 of it at ε = 4 (a point mass at a bad position), where the band is
accordingly wider. Real values are not packed so: on seven real shapes the bucketing bias was
at most 3% of B (docs/error-bars.md), so where B is a large part of the band it over-covers:
where it widens the half-width by more than CONSERVATIVE_SHARE the band is no 95% band but the
conservative band (`statistic_bands`).

The discrete protocol's reports are exact integers (no server-side bucketing); the client has
put the value in its bucket, so the band is for the mean and variance of the values as the
client bucketed them: each uniform over its bucket (the record's histogram convention), the
mean of the bucket centres, the variance of the centres plus w²/12 (`DISCRETE_REASON`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from numpy.polynomial import polynomial as P

from ldp_telemetry.ldp.estimation.uncertainty import (BAND_EXACT, COVERAGE_SIZES,
                                                      NO_REPORTS_REASON, Z95, Band,
                                                      conservative_split)
from ldp_telemetry.ldp.integrity.statistics import normal_sf
from ldp_telemetry.ldp.protocols.channels import discrete_sw_parameters, sw_b, sw_pq
from ldp_telemetry.ldp.protocols.numeric import NumericProtocol
from ldp_telemetry.ldp.protocols.sw import DiscreteSquareWave, SquareWave

#: The statistics whose bands this module makes (their `Band.method` is BAND_EXACT).
MOMENT_STATISTICS: tuple[str, ...] = ("mean", "variance")

#: The highest power of the reports used: 4 (the variance's standard error needs E[T⁴ | x]).
ORDER = 4

#: Points per output bucket at which the bucketing bound is evaluated, and the most points
#: (d̃ may be up to MAX_BUCKETS = 65,536: 16 points a bucket there), evaluated in chunks.
BOUND_POINTS_PER_BUCKET = 64
MAX_BOUND_POINTS = 1 << 20
BOUND_CHUNK = 1 << 15
#: The means m₁ ∈ [0, 1] at which the variance's bound max_v |r₂(v) − 2 m₁ r₁(v)| is kept: a
#: convex function of m₁, so the straight line between two of them lies above it.
BOUND_MEANS = np.linspace(0.0, 1.0, 129)

#: Share of a band's 95% half-width (Z95 · standard error, or the band's own) that a bias it
#: allows for, or a gap it does not hold, must exceed before band_reasons names it; here: the
#: widening cv(B/s) · s − Z95 · s of `statistic_bands` (cfo_moments and numeric_queries use it
#: for their gaps). Past it a centred normal error is covered with more than
#: P(|Z| < 1.96 · 1.1) = 0.969 wherever the values' positions cause no error (measured at
#: d̃ = 128, ε = 4, n = 10⁶: docs/error-bars.md).
CONSERVATIVE_SHARE = 0.1
#: Why a mean or variance band widened past CONSERVATIVE_SHARE is no 95% band (`statistic_bands`:
#: given, unchanged, as the conservative band). Records written before said of the same band,
#: given as the 95% band, "band widened by … it over-covers where the values are spread".
CONSERVATIVE_REASON = ("no 95% band: the band is widened by {widened:.3g} ({share:.0%} of its "
                       "half-width) to hold the {what} whatever the bias of the report "
                       "histogram's {buckets} output buckets, at most {bound:.3g} (values at "
                       "their worst positions), so it would hold an unbiased error with "
                       "probability above 0.969: it is conservative, given as the conservative "
                       "band (conservative_bands); more output buckets (domain.output_buckets) "
                       "make the widening smaller")

#: The 0.95 quantile of the standard normal: the least excess c − t of `bias_aware_z` (t → ∞).
Z95_ONE_SIDED = 1.6448536269514722

#: Bisection steps of `bias_aware_excess` (the bracket [Z95_ONE_SIDED, Z95], 0.32 wide, halves
#: each step: 60 steps leave less than 10⁻¹⁸ of it).
BIAS_AWARE_STEPS = 60

#: The fewest reports for which the bands' coverage was measured: COVERAGE_SIZES' smallest, 10³
#: (benchmarks/coverage_moments.py), within √10 as for the bootstrap's bands (`band_scales`).
#: Below it a band is a normal approximation the published measurements do not cover (at
#: 10–100 reports and ε = 4 it held the truth of 2,000 windows 0.87–0.94 of the time,
#: docs/error-bars.md), and its reason says so.
MEASURED_REPORTS = COVERAGE_SIZES[0] / math.sqrt(10)
SMALL_WINDOW_REASON = ("band extrapolated: n = {n} below the measured range (10³-10⁶ reports); "
                       "with fewer than 316 reports it may hold the truth less often than 95%")

#: What a discrete Square Wave record's mean and variance bands hold (band_reasons; `width` the
#: bucket width in the metric's units, as the bands are).
DISCRETE_REASON = ("band of the values as the client bucketed them (sw-discrete): the mean of "
                   "the bucket centres, the variance of the centres plus w²/12 (w = {width:g}); "
                   "the values' own mean can differ by up to w/2")


@dataclass(frozen=True)
class MomentModel:
    """The reports' moments as polynomials in the value x, for one protocol configuration.

    `conditional[k, l]`: E[T^k | x] = Σ_l conditional[k, l] x^l (k, l = 0..ORDER), lower
    triangular; `bucket_powers[j, k]`: the k-th power of a report in output bucket j (its mean
    over the bucket for continuous reports); `shift`: the average bucketing error of each
    report power, subtracted from the reports' mean powers; `mean_bound`: the largest remaining
    error r₁(v) of m̂₁ over the values v, `variance_bounds`: the largest |r₂(v) − 2 m₁ r₁(v)|
    over v at each m₁ of BOUND_MEANS (the first-order error of m̂₂ − m̂₁²; empty without
    server-side bucketing), read by `bucketing_bounds`;
    `unit`: (offset, scale, within) mapping x to the unit value v = offset + scale · x, with
    `within` the variance added for a value spread over its bucket (discrete: 1/(12 B²)).
    """

    conditional: np.ndarray
    bucket_powers: np.ndarray
    shift: np.ndarray
    mean_bound: float
    variance_bounds: np.ndarray
    unit: tuple[float, float, float]
    domain: tuple[float, float]  # the values x can take
    reason: str | None = None  # what the bands hold, of {width} (metric units): `statistic_bands`


def _powers(x: np.ndarray) -> np.ndarray:
    """x^0..x^ORDER as columns."""
    return np.asarray(x, dtype=np.float64)[:, None] ** np.arange(ORDER + 1)


def _bucket_moments(lo: np.ndarray, hi: np.ndarray, k: int) -> np.ndarray:
    """The k-th moment of a value uniform over [lo, hi)."""
    return (hi ** (k + 1) - lo ** (k + 1)) / ((k + 1) * (hi - lo))


def _segment(lo: np.ndarray, hi: np.ndarray, level: np.ndarray, k: int) -> np.ndarray:
    """∫_lo^hi (level − y^k) dy."""
    return level * (hi - lo) - (hi ** (k + 1) - lo ** (k + 1)) / (k + 1)


def edge_errors(epsilon: float, d_out: int, v: np.ndarray) -> np.ndarray:
    """e_k(v) for k = 1, 2 (shape (len(v), 2)): the exact error of the report's k-th power
    taken uniform over its output bucket, given the value v ∈ [0, 1], for continuous Square
    Wave over d̃ = `d_out` buckets of [−b, 1 + b] (only the plateau's two edge buckets err)."""
    b = sw_b(epsilon)
    p, q = sw_pq(epsilon, b)
    width = (1.0 + 2.0 * b) / d_out
    v = np.asarray(v, dtype=np.float64)
    left, right = v - b, v + b
    jl = np.clip(np.floor((left + b) / width).astype(np.int64), 0, d_out - 1)
    jr = np.clip(np.floor((right + b) / width).astype(np.int64), 0, d_out - 1)
    out = np.empty((v.size, 2))
    for column, k in enumerate((1, 2)):
        lo_l, hi_l = -b + jl * width, -b + (jl + 1) * width
        lo_r, hi_r = -b + jr * width, -b + (jr + 1) * width
        level_l, level_r = _bucket_moments(lo_l, hi_l, k), _bucket_moments(lo_r, hi_r, k)
        apart = (_segment(left, np.minimum(hi_l, right), level_l, k)
                 + _segment(np.maximum(lo_r, left), right, level_r, k))
        together = _segment(left, right, level_l, k)
        out[:, column] = (p - q) * np.where(jl == jr, together, apart)
    return out


@lru_cache(maxsize=64)
def square_wave_model(epsilon: float, d_out: int) -> MomentModel:
    """The moment model of continuous Square Wave at ε over d̃ = `d_out` output buckets
    ([Li20] eq. 3, §5.4 "R-B"), with its bucketing shift and bounds."""
    b = sw_b(epsilon)
    p, q = sw_pq(epsilon, b)
    conditional = np.zeros((ORDER + 1, ORDER + 1))
    for k in range(ORDER + 1):
        flat = q * ((1.0 + b) ** (k + 1) - (-b) ** (k + 1)) / (k + 1)
        plateau = (P.polypow([b, 1.0], k + 1) - P.polypow([-b, 1.0], k + 1)) / (k + 1)
        row = (p - q) * np.pad(plateau, (0, ORDER + 2 - plateau.size))[:ORDER + 1]
        row[0] += flat
        conditional[k] = row
    edges = np.linspace(-b, 1.0 + b, d_out + 1)
    lo, hi = edges[:-1], edges[1:]
    bucket_powers = np.column_stack([_bucket_moments(lo, hi, k) for k in range(ORDER + 1)])
    beta = 2.0 * b * (p - q)
    width = (1.0 + 2.0 * b) / d_out
    # the average of e₂ over one period of the edges' positions (v and v + w̃ differ by a
    # first-moment term that averages to 0): β w̃²/6 when the plateau spans a whole bucket
    period = (np.arange(4096) + 0.5) / 4096 * min(width, 1.0)
    shift = np.zeros(ORDER + 1)
    shift[2] = float(edge_errors(epsilon, d_out, period)[:, 1].mean())
    grid = np.linspace(0.0, 1.0, min(BOUND_POINTS_PER_BUCKET * d_out, MAX_BOUND_POINTS) + 1)
    mean_bound, variance_bounds = 0.0, np.zeros(BOUND_MEANS.size)
    for start in range(0, grid.size, BOUND_CHUNK):
        residuals = (edge_errors(epsilon, d_out, grid[start:start + BOUND_CHUNK])
                     - shift[1:3]) / beta
        mean_bound = max(mean_bound, float(np.abs(residuals[:, 0]).max()))
        spread = np.abs(residuals[:, 1][None, :]
                        - 2.0 * BOUND_MEANS[:, None] * residuals[:, 0][None, :]).max(axis=1)
        variance_bounds = np.maximum(variance_bounds, spread)
    return MomentModel(conditional, bucket_powers, shift, mean_bound, variance_bounds,
                       (0.0, 1.0, 0.0), (0.0, 1.0))


@lru_cache(maxsize=64)
def discrete_square_wave_model(epsilon: float, d: int) -> MomentModel:
    """The moment model of discrete Square Wave at ε over B = `d` buckets ([Li20] §5.4 "B-R"):
    x is the value's bucket i, a report j ∈ [0, B + 2b); no server-side bucketing."""
    b, p, q = discrete_sw_parameters(epsilon, d)
    outputs = np.arange(d + 2 * b, dtype=np.float64)
    conditional = np.zeros((ORDER + 1, ORDER + 1))
    for k in range(ORDER + 1):
        row = np.zeros(ORDER + 1)
        for t in range(2 * b + 1):
            shifted = P.polypow([float(t), 1.0], k)
            row[:shifted.size] += shifted
        row *= p - q
        row[0] += q * float(np.sum(outputs ** k))
        conditional[k] = row
    return MomentModel(conditional, _powers(outputs), np.zeros(ORDER + 1), 0.0, np.zeros(0),
                       (0.5 / d, 1.0 / d, 1.0 / (12.0 * d * d)), (0.0, float(d - 1)),
                       DISCRETE_REASON)


@dataclass(frozen=True)
class MomentBands:
    """Unit-scale (values in [0, 1]) estimates, standard errors and 95% bands of the mean and
    the variance (`lower`/`upper` clipped to what each can take: [0, 1], [0, 1/4])."""

    mean: float
    mean_std_error: float
    variance: float
    variance_std_error: float
    mean_band: tuple[float, float]
    variance_band: tuple[float, float]
    bounds: tuple[float, float]  # bucketing bounds the half-widths allow for (mean, variance)


def bucketing_bounds(model: MomentModel, mean_range: tuple[float, float]) -> tuple[float, float]:
    """(bound on |bias| of m̂₁, bound on |bias| of m̂₂ − m̂₁²) from the report histogram's
    bucketing, x units: the largest residual over the values for the mean; for the variance,
    whose first-order bias is E[r₂(v) − 2 m₁ r₁(v)], its largest absolute value over the values
    and over m₁ in `mean_range` (the mean's band, within [0, 1]: the bound is convex in m₁, so
    its largest value there is at an end, and interpolating it between BOUND_MEANS stays above
    it). (0, 0) for a model without server-side bucketing."""
    if not model.variance_bounds.size:
        return 0.0, 0.0
    ends = np.clip(np.asarray(mean_range, dtype=np.float64), 0.0, 1.0)
    return model.mean_bound, float(np.interp(ends, BOUND_MEANS, model.variance_bounds).max())


def bias_aware_excess(ratio: float) -> float:
    """u = `bias_aware_z`(t) − t at t = |`ratio`|: the root of Φ(u) − Φ(−u − 2t) = 0.95 in
    [Z95_ONE_SIDED, Z95] (Z95 at t = 0, falling to Z95_ONE_SIDED as t grows), found without
    forming c − t, so it is exact for every t, infinite included."""
    t = abs(float(ratio))
    if t == 0.0:
        return Z95  # exactly: the bisection's last bit is rounding
    low, high = Z95_ONE_SIDED, Z95
    for _ in range(BIAS_AWARE_STEPS):
        middle = 0.5 * (low + high)
        # Φ(u) − Φ(−u − 2t), with Φ(x) = P[N(0, 1) > −x]
        if normal_sf(-middle) - normal_sf(middle + 2.0 * t) >= 0.95:
            high = middle
        else:
            low = middle
    return high


def bias_aware_z(ratio: float) -> float:
    """The smallest c with P(|Z + t| ≤ c) ≥ 0.95 for every |t| ≤ `ratio` (Z standard normal):
    the half-width, in standard errors, of a 95% band whose estimate may be biased by up to
    `ratio` standard errors ([Armstrong20]'s critical value cv₀.₀₅(t), the 0.95 quantile of
    |N(t, 1)|). The coverage falls as |t| grows, so c solves Φ(c − t) − Φ(−c − t) = 0.95 at
    t = `ratio`: t + `bias_aware_excess`(t), Z95 at 0, within Z95 − 1.645 of t + 1.645 as t
    grows (the far tail vanishes), never more than t + Z95 (linear addition)."""
    t = abs(float(ratio))
    return t + bias_aware_excess(t)


def bias_aware_half(error: float, bound: float) -> float:
    """The 95% half-width of an estimate with standard error `error` and a bias of at most
    `bound`: `bound` + `error` · `bias_aware_excess`(`bound` / `error`) (`bias_aware_z` times
    `error`, finite however small `error` is; `bound` itself when `error` is 0)."""
    if error <= 0.0:
        return bound
    return bound + error * bias_aware_excess(bound / error)


def widening(error: float, bound: float) -> float:
    """How much allowing for a bias of at most `bound` widens a 95% half-width beyond
    Z95 · `error` (`bias_aware_half` − Z95 · `error`, the same units)."""
    return bias_aware_half(error, bound) - Z95 * error


def widened_past_share(error: float, bound: float) -> bool:
    """Whether `widening` exceeds CONSERVATIVE_SHARE of Z95 · `error`: then the band holds a
    centred normal error with probability above P(|Z| < 1.1 · Z95) = 0.969, conservative, not a
    95% band (`statistic_bands`; benchmarks/coverage_moments.py counts such windows)."""
    return widening(error, bound) > CONSERVATIVE_SHARE * Z95 * error


def _pad(coefficients: np.ndarray) -> np.ndarray:
    """Polynomial coefficients padded (or cut) to powers 0..ORDER."""
    out = np.zeros(ORDER + 1)
    kept = np.asarray(coefficients, dtype=np.float64)[:ORDER + 1]
    out[:kept.size] = kept
    return out


def _linear_variance(model: MomentModel, a: np.ndarray, reports: np.ndarray,
                     moments: np.ndarray, n: int) -> float:
    """Var(Σ_k a_k T̄_k) for the window's own values, a the weights of the report powers 0..2:
    (1/n) times the average over reports of Var(h(T) | x), h = Σ a_k T^k — the reports'
    sample variance of h(T) minus the spread of E[h(T) | x] over the values (a polynomial of
    degree ≤ 4 in x, averaged with the moment estimates; at most the sample variance), kept at
    least the smallest conditional variance any value x gives: a few reports' sample variance
    (0 at one report) must not make the band narrower than any values allow."""
    a = _pad(a[:3])
    square = _pad(np.convolve(a[:3], a[:3]))  # h(T)² as powers of T
    sample = float(square @ reports - (a @ reports) ** 2)
    mean_of_h = a @ model.conditional  # E[h(T) | x] as a polynomial in x (degree ≤ 2)
    spread = float(_pad(P.polymul(mean_of_h[:3], mean_of_h[:3])) @ moments
                   - (mean_of_h @ moments) ** 2)
    grid = _powers(np.linspace(*model.domain, 257))
    floor = float(np.min(grid @ (square @ model.conditional) - (grid @ mean_of_h) ** 2))
    per_report = max(sample - max(spread, 0.0), floor, 0.0)
    return per_report / n


def moment_bands(model: MomentModel, counts: np.ndarray) -> MomentBands | None:
    """Mean and variance of the values behind a report histogram `counts` (one count per output
    bucket of `model`), with exact standard errors and 95% bands, on the unit scale; None
    without reports.

    band = estimate ± `bias_aware_half`(standard error, bucketing bound), the bound of the
    report histogram's bucketing (`square_wave_model`; 0 for the discrete protocol, whose
    half-width is then Z95 · standard error), clipped to
    [0, 1] for the mean and [0, 1/4] for the variance (Popoviciu)."""
    counts = np.asarray(counts, dtype=np.float64)
    n = int(round(counts.sum()))
    if n <= 0:
        return None
    reports = counts @ model.bucket_powers / n - model.shift  # T̄_0..T̄_4
    inverse = np.linalg.inv(model.conditional)
    moments = inverse @ reports  # m̂_0..m̂_4 (m̂_0 = 1)
    first = np.zeros(ORDER + 1)
    first[1] = 1.0
    var_mean = _linear_variance(model, first @ inverse, reports, moments, n)
    m1 = float(moments[1])
    gradient = np.zeros(ORDER + 1)
    gradient[1], gradient[2] = -2.0 * m1, 1.0
    var_second = _linear_variance(model, gradient @ inverse, reports, moments, n)
    offset, scale, within = model.unit
    mean = offset + scale * m1
    variance = scale * scale * (float(moments[2]) - m1 * m1 + var_mean) + within
    mean_se = scale * math.sqrt(var_mean)
    variance_se = scale * scale * math.sqrt(var_second + 2.0 * var_mean * var_mean)
    mean_bound = scale * bucketing_bounds(model, (m1, m1))[0]
    half_m = bias_aware_half(mean_se, mean_bound)
    low_x, high_x = model.domain
    near = (min(max(m1 - half_m / scale, low_x), high_x), min(max(m1 + half_m / scale, low_x),
                                                              high_x))
    variance_bound = scale * scale * bucketing_bounds(model, near)[1]
    half_v = bias_aware_half(variance_se, variance_bound)
    return MomentBands(
        mean, mean_se, variance, variance_se,
        (min(max(mean - half_m, 0.0), 1.0), min(max(mean + half_m, 0.0), 1.0)),
        (min(max(variance - half_v, 0.0), 0.25), min(max(variance + half_v, 0.0), 0.25)),
        (mean_bound, variance_bound))


def protocol_model(protocol: NumericProtocol) -> MomentModel | None:
    """The moment model of a Square Wave protocol (continuous or discrete); None for others."""
    if isinstance(protocol, DiscreteSquareWave):
        return discrete_square_wave_model(float(protocol.epsilon), protocol.d)
    if isinstance(protocol, SquareWave):
        assert protocol.output_buckets is not None, "set by SquareWave.__post_init__"
        return square_wave_model(float(protocol.epsilon), protocol.output_buckets)
    return None


def statistic_bands(model: MomentModel, counts: np.ndarray, low: float, high: float
                    ) -> tuple[dict[str, Band], dict[str, Band]]:
    """(95% bands, conservative bands) of the mean and the variance in the metric's units
    ([low, high]: the mean affine, the variance times (high − low)²).

    Each band is the exact-variance one (`Band.method` BAND_EXACT) of `moment_bands`,
    `Band.estimate` the unbiased moment estimate clipped to what the statistic can take
    ([low, high]; [0, (high − low)²/4]: so within the band, which is clipped alike) and
    `Band.std_error` its exact standard error, with the model's reason (what the band holds,
    for the discrete protocol) and, below MEASURED_REPORTS reports, that it is extrapolated
    (SMALL_WINDOW_REASON, after the other, "; "-joined). Where allowing for the bucketing bound
    (`bias_aware_half`, [Armstrong20]) widens the half-width by more than CONSERVATIVE_SHARE
    of Z95 · standard error (`widened_past_share`) the band holds a centred normal error with
    probability above 0.969: not a 95% band, it moves unchanged to the conservative bands
    (`conservative_split`, method BAND_EXACT), the statistic's 95% band none (BAND_NONE,
    estimate and standard error kept) with CONSERVATIVE_REASON (the widening, its share of
    the half-width and the bound) before what the band holds. The conservative bands have
    both statistics (none where not conservative). No band without reports."""
    found = moment_bands(model, counts)
    if found is None:
        empty = {key: Band(None, None, NO_REPORTS_REASON) for key in MOMENT_STATISTICS}
        return empty, {key: Band(None, None) for key in MOMENT_STATISTICS}
    span = float(high) - float(low)
    n = int(round(float(np.sum(counts))))
    reasons: dict[str, str | None] = {}
    why: dict[str, str] = {}
    for key, bound, error, scale in (("mean", found.bounds[0], found.mean_std_error, span),
                                     ("variance", found.bounds[1], found.variance_std_error,
                                      span * span)):
        reasons[key] = (None if model.reason is None
                        else model.reason.format(width=span * model.unit[1]))
        if widened_past_share(error, bound):
            half = bias_aware_half(error, bound)
            widened = half - Z95 * error  # `widening`
            why[key] = CONSERVATIVE_REASON.format(
                widened=widened * scale, bound=bound * scale,
                buckets=len(model.bucket_powers), what=key, share=widened / half)
        if n < MEASURED_REPORTS:
            small = SMALL_WINDOW_REASON.format(n=f"{n:,}")
            reasons[key] = small if reasons[key] is None else f"{reasons[key]}; {small}"
    bands = {"mean": Band(float(low) + span * found.mean_band[0],
                          float(low) + span * found.mean_band[1], reasons["mean"], BAND_EXACT,
                          float(low) + span * min(max(found.mean, 0.0), 1.0),
                          span * found.mean_std_error),
             "variance": Band(span * span * found.variance_band[0],
                              span * span * found.variance_band[1], reasons["variance"],
                              BAND_EXACT, span * span * min(max(found.variance, 0.0), 0.25),
                              span * span * found.variance_std_error)}
    return conservative_split(bands, why, BAND_EXACT, MOMENT_STATISTICS)


def printed_moments(bands: dict[str, Band], histogram: dict[str, float]
                    ) -> dict[str, tuple[float, float | None]]:
    """Statistic of MOMENT_STATISTICS -> (the value a record prints, its standard error): the
    `Band.estimate` its band is made around (the unbiased moment estimate, clipped to what the
    statistic can take, so never outside its band) with `Band.std_error`, kept where the
    statistic is declared without a band; the estimated histogram's value (`histogram`, by
    key) and no standard error where no estimate was made (no reports, or a hierarchy without
    leaf reports)."""
    printed: dict[str, tuple[float, float | None]] = {}
    for key in MOMENT_STATISTICS:
        band = bands.get(key)
        if band is not None and band.estimate is not None:
            printed[key] = (float(band.estimate), band.std_error)
        else:
            printed[key] = (float(histogram[key]), None)
    return printed
