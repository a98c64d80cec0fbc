"""Standard errors of a numeric estimate by a seeded parametric bootstrap.

An estimator maps the statistic of a window to a distribution x̂ with no closed-form error. The
bootstrap draws R statistics of n reports from the model the estimate implies (the protocol's
`resample`: for Square Wave the report histogram n_r ~ Multinomial(n, M x̂)), runs
the *same* estimator on each from its usual start, and reports the standard deviation over the
replicates of every bucket probability, of the mean and of each quantile. It measures the noise
of the estimator, not its bias: smoothing bias (EMS) is not in it, so intervals built from these
errors undercover where the bias matters (see docs/numeric.md for measured coverage).
"""
from __future__ import annotations

import math

from dataclasses import dataclass, replace
from collections.abc import Callable, Mapping

import numpy as np

from ldp_telemetry.ldp.base.registration import Parameter
from ldp_telemetry.ldp.base.validation import is_nonnegative_int
from ldp_telemetry.ldp.estimation.histograms import (QUANTILE_LEVELS, histogram_mean,
                                                     histogram_quantiles, histogram_variance)

#: z of a two-sided 95% normal interval (the 0.975 quantile of the standard normal).
Z95 = 1.959963984540054

#: Most bootstrap replicates a registry may ask for (each costs one estimator run per window).
MAX_REPLICATES = 1_000
DEFAULT_REPLICATES = 20


def _is_replicates(value: object) -> bool:
    return is_nonnegative_int(value) and value <= MAX_REPLICATES


BOOTSTRAP_PARAMETERS = {
    "bootstrap": Parameter(DEFAULT_REPLICATES, _is_replicates,
                           f"an integer in [0, {MAX_REPLICATES}] (0: no standard errors)"),
    "seed": Parameter(0, is_nonnegative_int, "a non-negative integer"),
}


@dataclass(frozen=True)
class BootstrapErrors:
    """Standard errors over `replicates` bootstrap replicates (NaN when there are fewer than 2):
    of each bucket, of each quantile and of the mean. `mean_std_error` is the bootstrap spread
    of the histogram's mean as `parametric_bootstrap` makes it; a finalized numeric window
    replaces it by the exact standard error of the mean it prints, the centre of the mean's
    band (`finalize_numeric_window`; a mean-only protocol's, with 0 replicates, is its exact
    one), and a record writes it as `mean_std_error`."""

    replicates: int
    buckets: np.ndarray
    mean_std_error: float
    quantiles: dict[str, float]


def parametric_bootstrap(resample: Callable, n: int,
                         estimate: Callable[[np.ndarray], np.ndarray], edges: np.ndarray,
                         replicates: int, seed: int) -> BootstrapErrors:
    """Standard errors of `estimate` (statistic -> distribution) at the fitted model.

    `resample(rng, size)` draws `size` statistics of n reports from the model of the point
    estimate (e.g. Multinomial(n, M x̂) for Square Wave); `seed` makes the draws reproducible
    (the stream is numpy's PCG64 seeded with (seed, n)).
    """
    levels = [float(level) for level in QUANTILE_LEVELS]
    buckets = len(edges) - 1
    if replicates < 2 or n <= 0:
        return BootstrapErrors(int(replicates), np.full(buckets, np.nan), float("nan"),
                               {key: float("nan") for key in QUANTILE_LEVELS})
    rng = np.random.default_rng([int(seed), int(n)])
    draws = np.array([estimate(statistic) for statistic in resample(rng, replicates)])
    quantiles = histogram_quantiles(draws, edges, levels).std(axis=0, ddof=1)
    return BootstrapErrors(int(replicates), draws.std(axis=0, ddof=1),
                           float(histogram_mean(draws, edges).std(ddof=1)),
                           dict(zip(QUANTILE_LEVELS, map(float, quantiles), strict=True)))


# -- calibrated 95% bands --------------------------------------------------------------------

#: How a record's bands were made (the window-estimate record's `band_method`).
BAND_EXACT = "exact-variance"  # estimate ± z · exact standard error (frequency oracles)
BAND_BOOTSTRAP = "bootstrap"  # estimate ± z · bootstrap standard error (spread only)
BAND_BIAS_CORRECTED = "bias-corrected-bootstrap"  # see bias_corrected_bands
BAND_FIXED_GAIN = "fixed-gain"  # Wiener filters in records written before WIENER_NO_BAND
BAND_NONE = "none"  # no band: every statistic's band is null with a reason
#: a top-k answer of a pure one-stage oracle: the bias-corrected bootstrap's band, the score
#: band and the band conditional on the answer's rank, joined
#: (frequency_bands.top_k_rank_conditional_bands); conservative, so given as the answer's
#: `conservative_method`, not its 95% band (CONSERVATIVE)
BAND_RANK_CONDITIONAL = "rank-conditional-union"
#: a CMS or HCMS window past the pool-bias share: the score band around the unbiased estimate
#: with its fixed pool's bias removed (frequency_bands.pool_corrected_bands)
BAND_POOL_CORRECTED = "pool-corrected"
BAND_METHODS = (BAND_EXACT, BAND_BOOTSTRAP, BAND_BIAS_CORRECTED, BAND_FIXED_GAIN, BAND_NONE,
                BAND_RANK_CONDITIONAL, BAND_POOL_CORRECTED)

#: A band that holds the truth in at least 95% of windows by construction and was measured far
#: above 0.95 (a top-k answer's, a whole-bins quantile's): not a 95% band. A statistic with one
#: has no 95% band (band_method none, its reason saying why) and gives it beside, under its own
#: name (`conservative_*`), never in the 95% band's place.
CONSERVATIVE = "conservative"
#: The band column of benchmarks/coverage_summary.py for those families' measured coverage.
CONSERVATIVE_LABEL = "(conservative, not a 95% band)"

#: A Wiener filter's values have the band of their unbiased estimate, as every post-processing
#: (the score band, from the record's p*, q* and n); a record keeps the filter's fixed-gain
#: standard error, which leaves out the filter's bias (coverage of estimate ± z · s.e.
#: 72–98%, docs/wiener.md) and is not what a band is made from. A pooled-hash oracle's band is
#: f~ ± z · f~'s standard error with the collision term, which its Wiener record keeps as
#: `unbiased_std_error`; why a record written before that field has none:
WIENER_NO_BAND = ("no band: a pooled-hash oracle's band is its unbiased estimate ± 1.96 of its "
                  "standard errors, and this Wiener record, written before records kept them "
                  "(unbiased_std_error), keeps only the filter's fixed-gain one")

#: The statistics a numeric record carries bands for: the mean, the variance and the record's
#: quantile levels.
BAND_STATISTICS: tuple[str, ...] = ("mean", "variance") + QUANTILE_LEVELS

#: The (ε, n per window) grid the record's margins are calibrated on
#: (benchmarks/calibrate_bands.py) and measured on (benchmarks/coverage.py), and the
#: replicates and buckets they are calibrated with. A window outside them gets the nearest
#: cell's margin, and its bands say so (`band_scales`): at 512 buckets the banded quantiles
#: covered 0.85-1.00 on held-out windows of two unseen shapes (11 of 24 (cell, level) pairs
#: more than two standard errors from 0.95, 10 of them below).
COVERAGE_EPSILONS: tuple[float, ...] = (0.5, 1.0, 2.0, 4.0)
COVERAGE_SIZES: tuple[int, ...] = (1_000, 10_000, 100_000, 1_000_000)
CALIBRATED_REPLICATES = DEFAULT_REPLICATES
CALIBRATED_BUCKETS = 128
#: The protocol the margins are calibrated on, with as many output buckets as buckets and the
#: interval fit (EM) at its default tolerance and iteration cap.
CALIBRATED_PROTOCOL = "sw"

#: Why a window without reports has no bands (numeric and frequency records alike).
NO_REPORTS_REASON = "no band: no reports"
UNCALIBRATED_REASON = ("no calibrated band at ε = {epsilon:g}, n = {n}: no margin on the bootstrap "
                       "through EM brought this statistic's coverage into [0.93, 0.97] on the "
                       "calibration data (benchmarks/calibrate_bands.py)")
HELD_OUT_MISS_REASON = ("no calibrated band at ε = {epsilon:g}, n = {n}: on held-out windows at "
                        "ε = {cell_epsilon:g}, n = {cell_n:,} this statistic's band covered "
                        "{coverage:.2f} of {windows} windows of {dataset}, more than two "
                        "standard errors below 0.95 (benchmarks/declare_bands.py)")
POOLED_MISS_REASON = ("no calibrated band at ε = {epsilon:g}, n = {n}: on held-out windows at "
                      "ε = {cell_epsilon:g}, n = {cell_n:,} this statistic's band covered "
                      "{coverage:.3f} of {windows} windows pooled over {datasets} (data set, "
                      "window set) runs, "
                      "more than one standard error below 0.95 (benchmarks/declare_bands.py)")
LEVEL_MISS_REASON = ("no calibrated band for the {level} quantile: on held-out windows its band "
                     "covered {coverage:.3f} of {windows} windows pooled over the {banded} "
                     "calibrated (ε, n) settings that kept it, below 0.93 "
                     "(benchmarks/declare_bands.py)")
SET4_MISS_REASON = ("no calibrated band at ε = {epsilon:g}, n = {n}: at ε = {cell_epsilon:g}, "
                    "n = {cell_n:,} this statistic's band covered {coverage:.3f} of {windows} "
                    "held-out windows of {dataset} ({runs} runs of set 4 of "
                    "benchmarks/coverage.py), below 0.94: too near the goal's lower edge, 0.93 "
                    "(benchmarks/declare_bands.py)")
#: Why a quantile whose band over-covered on held-out windows has no 95% band: its band is
#: given as the conservative band (`conservative_statistics`).
OVER_COVERAGE_REASON = ("no calibrated 95% band at ε = {epsilon:g}, n = {n}: at "
                        "ε = {cell_epsilon:g}, n = {cell_n:,} this statistic's band covered "
                        "{coverage:.3f} of {windows} held-out windows of {dataset} ({runs} runs "
                        "of set 4 of benchmarks/coverage.py), above 0.97: the margin the "
                        "calibration shapes need is wider than other shapes need, so the band "
                        "is conservative; it is given as the conservative band "
                        "(conservative_bands; benchmarks/declare_bands.py)")
EXTRAPOLATED_REASON = ("band extrapolated: {what} outside the calibrated range ({measured}); "
                       "the margin of the nearest calibrated setting is used")


def grid_cell(epsilon: float, n: int, epsilons: tuple[float, ...], sizes: tuple[int, ...]
              ) -> tuple[float, int]:
    """The cell of a measured (ε, n) grid a window of ε and n reports falls in: the largest grid
    ε at or below ε (the smallest, `epsilons[0]`, when none is), the grid n nearest in log scale
    (the first of two as near). `epsilons` ascending; the one rule of every calibrated grid."""
    below = [grid for grid in epsilons if grid <= epsilon]
    cell_epsilon = below[-1] if below else epsilons[0]
    cell_n = min(sizes, key=lambda size: abs(math.log(max(n, 1)) - math.log(size)))
    return cell_epsilon, cell_n


def coverage_cell(epsilon: float, n: int) -> tuple[float, int]:
    """The cell of the numeric bands' calibration grid (COVERAGE_EPSILONS × COVERAGE_SIZES) a
    window of ε and n reports falls in (`grid_cell`)."""
    return grid_cell(epsilon, n, COVERAGE_EPSILONS, COVERAGE_SIZES)


def band_scales(epsilon: float, n: int, buckets: int = CALIBRATED_BUCKETS,
                replicates: int = CALIBRATED_REPLICATES, protocol: str = CALIBRATED_PROTOCOL,
                output_buckets: int | None = None, default_fit: bool = True
                ) -> tuple[np.ndarray, dict[str, str]]:
    """(c per statistic of BAND_STATISTICS, reasons) for windows of ε, n reports, `buckets`
    buckets and R = `replicates`: the calibrated margin scale of the window's grid cell
    (`coverage_cell`; MARGIN_SCALES of ldp_telemetry.ldp.estimation.band_calibration), NaN
    where the statistic is declared without a band: no margin fitted (UNCALIBRATED_REASON), or
    its band missed on held-out windows in the cell (HELD_OUT_MISS_REASON, POOLED_MISS_REASON,
    SET4_MISS_REASON: below 0.94 pooled over set 4's runs of a data shape) or
    across the grid (LEVEL_MISS_REASON; HELD_OUT_MISSES, POOLED_MISSES, SET4_MISSES and
    DECLARED_LEVELS of
    ldp_telemetry.ldp.estimation.band_declarations); for a window
    outside the calibrated range (ε outside [0.5, 4], n outside [10³/√10, √10 · 10⁶], other
    than 128 buckets or R = 20) or channel and fit (a `protocol` other than
    CALIBRATED_PROTOCOL, `output_buckets` other than `buckets` (None: the same), an interval
    fit not at EM's default settings, `default_fit` False) every band's reason says it is
    extrapolated."""
    from ldp_telemetry.ldp.estimation.band_calibration import MARGIN_SCALES
    from ldp_telemetry.ldp.estimation.band_declarations import (DECLARED_LEVELS,
                                                                HELD_OUT_MISSES, POOLED_MISSES,
                                                                SET4_MISSES)
    cell = coverage_cell(epsilon, n)
    outside = []
    if not COVERAGE_EPSILONS[0] <= epsilon <= COVERAGE_EPSILONS[-1]:
        outside.append((f"ε = {epsilon:g}",
                        f"{COVERAGE_EPSILONS[0]:g}-{COVERAGE_EPSILONS[-1]:g}"))
    if not COVERAGE_SIZES[0] / math.sqrt(10) <= n <= COVERAGE_SIZES[-1] * math.sqrt(10):
        outside.append((f"n = {n:,}", f"{COVERAGE_SIZES[0]:,}-{COVERAGE_SIZES[-1]:,} reports"))
    if buckets != CALIBRATED_BUCKETS:
        outside.append((f"{buckets} buckets", f"{CALIBRATED_BUCKETS} buckets"))
    if replicates != CALIBRATED_REPLICATES:
        outside.append((f"{replicates} bootstrap replicates", f"{CALIBRATED_REPLICATES}"))
    if protocol != CALIBRATED_PROTOCOL:
        outside.append((f"protocol {protocol}", f"protocol {CALIBRATED_PROTOCOL}"))
    if output_buckets is not None and output_buckets != buckets:
        outside.append((f"{output_buckets} output buckets", "as many as buckets"))
    if not default_fit:
        outside.append(("EM settings (tolerance, max_iterations) of the interval fit",
                        "EM's default tolerance and iteration cap"))
    extrapolated = "; ".join(EXTRAPOLATED_REASON.format(what=what, measured=measured)
                             for what, measured in outside)
    scales = np.full(len(BAND_STATISTICS), np.nan)
    reasons = {}
    for at, key in enumerate(BAND_STATISTICS):
        scale = MARGIN_SCALES[cell][key]
        miss = HELD_OUT_MISSES.get(cell, {}).get(key)
        pooled = POOLED_MISSES.get(cell, {}).get(key)
        set4 = SET4_MISSES.get(cell, {}).get(key)
        if scale is None:
            reasons[key] = UNCALIBRATED_REASON.format(epsilon=epsilon, n=f"{n:,}")
        elif miss is not None:
            dataset, coverage, windows = miss
            reasons[key] = HELD_OUT_MISS_REASON.format(
                epsilon=epsilon, n=f"{n:,}", cell_epsilon=cell[0], cell_n=cell[1],
                coverage=coverage, windows=windows, dataset=dataset)
        elif pooled is not None:
            datasets, coverage, windows = pooled
            reasons[key] = POOLED_MISS_REASON.format(
                epsilon=epsilon, n=f"{n:,}", cell_epsilon=cell[0], cell_n=cell[1],
                coverage=coverage, windows=windows, datasets=datasets)
        elif set4 is not None:
            dataset, coverage, windows, runs = set4
            reasons[key] = SET4_MISS_REASON.format(
                epsilon=epsilon, n=f"{n:,}", cell_epsilon=cell[0], cell_n=cell[1],
                coverage=coverage, windows=windows, dataset=dataset, runs=runs)
        elif key in DECLARED_LEVELS:
            banded, coverage, windows = DECLARED_LEVELS[key]
            reasons[key] = LEVEL_MISS_REASON.format(level=key, coverage=coverage,
                                                    windows=windows, banded=banded)
        else:
            scales[at] = scale
            if extrapolated:
                reasons[key] = extrapolated
    return scales, reasons


def conservative_statistics(epsilon: float, n: int) -> dict[str, str]:
    """Statistic -> reason (OVER_COVERAGE_REASON), for the statistics whose band a window of ε
    and n reports gives as its conservative band, not its 95% band: in the window's grid cell
    (`coverage_cell`) the band covered above 0.97 of the held-out windows of one data shape
    pooled over set 4's runs (SET4_OVER_COVERAGE of
    ldp_telemetry.ldp.estimation.band_declarations); never a statistic `band_scales`
    declares."""
    from ldp_telemetry.ldp.estimation.band_declarations import SET4_OVER_COVERAGE
    cell = coverage_cell(epsilon, n)
    return {key: OVER_COVERAGE_REASON.format(
                epsilon=epsilon, n=f"{n:,}", cell_epsilon=cell[0], cell_n=cell[1],
                coverage=coverage, windows=windows, dataset=dataset, runs=runs)
            for key, (dataset, coverage, windows, runs)
            in SET4_OVER_COVERAGE.get(cell, {}).items()}


def conservative_reason(why: str, holds: str | None) -> str:
    """A statistic's `band_reasons` entry where its band is given as the conservative band:
    why it has no 95% band, then what the conservative band holds (`holds`: the band's own
    reason, if any)."""
    return why + ("" if holds is None else "; the conservative band: " + holds)


def conservative_split(bands: Mapping[str, Band], why: Mapping[str, str], method: str,
                       keys: tuple[str, ...] = QUANTILE_LEVELS
                       ) -> tuple[dict[str, Band], dict[str, Band]]:
    """(95% bands, conservative bands): the band of each statistic of `keys` that `why` names
    (statistic -> why it is conservative) moves, as it is, to the conservative bands
    (`Band.method` `method`, how it was made; its reason the band's own, what it holds), its
    95% band none (`Band.method` BAND_NONE) with `conservative_reason`, keeping the
    `Band.estimate` and `Band.std_error` a record prints; the conservative bands have every
    statistic of `keys` (by default every quantile level, QUANTILE_LEVELS; the Square Wave
    mean and variance: ldp_telemetry.ldp.estimation.moments.statistic_bands), none where its
    band is not conservative or there is no band; the other statistics stay as they are. One
    rule for every numeric record: a 95% band field only ever holds a band measured to mean
    95% (CONSERVATIVE)."""
    kept = dict(bands)
    conservative: dict[str, Band] = {}
    for key in keys:
        band = bands[key]
        if key not in why or band.lower is None:
            conservative[key] = Band(None, None)
            continue
        conservative[key] = Band(band.lower, band.upper, band.reason, method)
        kept[key] = replace(band, lower=None, upper=None,
                            reason=conservative_reason(why[key], band.reason), method=BAND_NONE)
    return kept, conservative


def uncalibrated_statistics(epsilon: float, n: int) -> dict[str, str]:
    """Statistic -> reason, for the statistics declared without a band for windows of ε and n
    reports (`band_scales`)."""
    scales, reasons = band_scales(epsilon, n)
    return {key: reasons[key] for key, scale in zip(BAND_STATISTICS, scales, strict=True)
            if np.isnan(scale)}


@dataclass(frozen=True)
class Band:
    """A 95% band [lower, upper] for one statistic, or none (both None) and the reason;
    `method` names how it was made where that differs from the rest of its record's bands
    (None: the record's `band_method`); `estimate` and `std_error`, where the band's maker
    gives them, the point estimate the band is made around (within [lower, upper]) and its
    standard error (the numeric mean's and variance's: ldp_telemetry.ldp.estimation.moments,
    .cfo_moments), which a record prints."""

    lower: float | None
    upper: float | None
    reason: str | None = None
    method: str | None = None
    estimate: float | None = None
    std_error: float | None = None

    def as_dict(self) -> dict | None:
        """{"lower", "upper"} as the record stores it; None when there is no band."""
        return None if self.lower is None else {"lower": self.lower, "upper": self.upper}


def no_bands(reason: str) -> dict[str, Band]:
    """Every statistic of BAND_STATISTICS without a band, for `reason`."""
    return {key: Band(None, None, reason) for key in BAND_STATISTICS}


def _statistics(x: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Mean, variance and the record's quantiles of each row of x (columns: BAND_STATISTICS)."""
    x = np.atleast_2d(x)
    levels = [float(level) for level in QUANTILE_LEVELS]
    return np.column_stack([histogram_mean(x, edges), histogram_variance(x, edges),
                            histogram_quantiles(x, edges, levels)])


def bootstrap_statistics(channel_model: Callable[[np.ndarray], np.ndarray],
                         fit: Callable[[np.ndarray], np.ndarray], counts: np.ndarray, n: int,
                         edges: np.ndarray, replicates: int, seed: int
                         ) -> tuple[np.ndarray, np.ndarray]:
    """(θ̂, θ*): the BAND_STATISTICS of fit(counts) and of R = `replicates` refits of report
    histograms drawn from Multinomial(n, M x̂) (`channel_model(x̂)` = M x̂), shapes (S,) and
    (R, S). Seeded with (seed, n, 95). Cost: R + 1 runs of `fit`."""
    pilot = np.asarray(fit(counts), dtype=np.float64)
    rng = np.random.default_rng([int(seed), int(n), 95])
    probabilities = np.clip(channel_model(pilot), 0.0, None)
    draws = rng.multinomial(int(n), probabilities / probabilities.sum(), size=int(replicates))
    return (_statistics(pilot, edges)[0],
            _statistics(np.array([fit(draw) for draw in draws]), edges))


def feasible_ranges(edges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(lowest, highest) each statistic of BAND_STATISTICS can take for values in
    [edges[0], edges[-1]]: the domain for the mean and the quantiles, [0, (high − low)²/4]
    for the variance (Popoviciu's bound)."""
    low, high = float(edges[0]), float(edges[-1])
    lowest = np.full(len(BAND_STATISTICS), low)
    highest = np.full(len(BAND_STATISTICS), high)
    at = BAND_STATISTICS.index("variance")
    lowest[at], highest[at] = 0.0, (high - low) ** 2 / 4.0
    return lowest, highest


def half_widths(spread: np.ndarray, bias: np.ndarray, replicates: int,
                scale: np.ndarray | float) -> np.ndarray:
    """Half-width of the bias-corrected band for margin scale c (`bias_corrected_bands`):
    t · s · √(1 + 1/R) · min(1, 1 + c) + max(c, 0) · |b|, with t the 0.975 quantile of
    Student's t with R − 1 degrees of freedom. Increasing in c: c ≥ 0 adds c · |b| to the
    replicates' spread, c in [−1, 0) narrows the spread part (where it alone over-covers)."""
    from scipy.stats import t as student_t  # scipy only where bands are made
    t = float(student_t.ppf(0.975, replicates - 1))
    scale = np.asarray(scale, dtype=np.float64)
    return (t * np.asarray(spread) * np.sqrt(1.0 + 1.0 / replicates) * np.minimum(1.0, 1.0 + scale)
            + np.maximum(scale, 0.0) * np.abs(bias))


def band_limits(theta: np.ndarray, replicated: np.ndarray, edges: np.ndarray,
                scales: np.ndarray | float) -> tuple[np.ndarray, np.ndarray]:
    """(lower, upper) of the bias-corrected bands of each statistic from θ̂ and the R
    replicates θ* (see `bias_corrected_bands`) with margin scale c (one, or one per statistic;
    `half_widths`), clipped to the statistics' feasible ranges (the true value always lies
    there, so clipping never loses coverage). NaN where c is NaN."""
    scales = np.broadcast_to(np.asarray(scales, dtype=np.float64), theta.shape)
    if np.any(scales[~np.isnan(scales)] < -1.0):
        raise ValueError(f"a margin scale is at least -1, got {np.nanmin(scales)!r}")
    replicates = replicated.shape[0]
    bias = replicated.mean(axis=0) - theta
    half = half_widths(replicated.std(axis=0, ddof=1), bias, replicates, scales)
    lowest, highest = feasible_ranges(edges)
    centre = theta - bias
    return (np.clip(centre - half, lowest, highest), np.clip(centre + half, lowest, highest))


def bias_corrected_bands(channel_model: Callable[[np.ndarray], np.ndarray],
                         fit: Callable[[np.ndarray], np.ndarray], counts: np.ndarray, n: int,
                         edges: np.ndarray, replicates: int, seed: int,
                         scales: np.ndarray, reasons: dict[str, str]) -> dict[str, Band]:
    """95% bands for the mean, variance and quantiles by a bias-corrected parametric bootstrap.

    `fit` is the interval estimator, report counts -> distribution over the buckets (EM without
    smoothing, [Li20] Algorithm 1: its early-stopped deconvolution is far less biased than
    EMS's smoothed one); `channel_model(x)` the report-bucket probabilities M x of [Li20] §5.5.
    With x̂ = fit(counts) and θ̂ a statistic of x̂, R report histograms are drawn from
    Multinomial(n, M x̂) (exactly the reports the client's Square Wave would send if x̂ were
    the truth), each is fitted again, and with θ*_r the replicates' statistics

        b = mean(θ*) − θ̂,   s = std(θ*),
        band = θ̂ − b ± (t · s · √(1 + 1/R) · min(1, 1 + c) + max(c, 0) · |b|)

    clipped to the range the statistic can take (`feasible_ranges`), t the 0.975 quantile of
    Student's t with R − 1 degrees of freedom (s is estimated from R replicates), √(1 + 1/R)
    for the variance s²/R of the estimated bias. The bias is measured at x̂, which EM has
    smoothed, not at the truth, so the correction leaves a bias of its own; the margin scale c
    per statistic (`scales`, from `band_scales`: calibrated per (ε, n) cell on calibration
    windows, measured on held-out ones) sizes the band to 95% coverage. A statistic whose c
    is NaN gets no band; `reasons` (statistic -> text) go with the bands (why there is none,
    or that the band is extrapolated). Cost: R + 1 runs of `fit`, independent of n up to the
    iterations EM takes (at most its max_iterations).
    """
    if replicates < 2 or n <= 0:
        return no_bands("no band: fewer than 2 bootstrap replicates" if n > 0
                        else NO_REPORTS_REASON)
    theta, replicated = bootstrap_statistics(channel_model, fit, counts, n, edges, replicates,
                                             seed)
    lower, upper = band_limits(theta, replicated, edges, scales)
    bands = {}
    for key, low, high, scale in zip(BAND_STATISTICS, lower, upper, scales, strict=True):
        if np.isnan(scale):
            bands[key] = Band(None, None, reasons[key])
        else:
            bands[key] = Band(float(low), float(high), reasons.get(key))
    return bands
