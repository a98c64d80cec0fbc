"""Exact-variance 95% bands for the mean and the variance of a CFO-binning metric or a
hierarchical histogram.

A CFO-binning record's bin frequencies come from a frequency oracle (GRR, OLH) over B equal
bins of [low, high]; its unbiased estimate f~ = (c/n − q*)/(p* − q*) has an exact covariance,
so any linear answer Σ_i w_i f~_i is unbiased with the exact variance of
ldp_telemetry.ldp.estimation.queries (the protocol's `linear_variance`: Σ_x f_x Var[Y | x] /
(n (p* − q*)²), for the window's own values, evaluated at the Norm-Sub projection of f~ as the
records' frequency errors are). With c_i the bin centres and w the bin width:

    m̂₁ = Σ c_i f~_i                                the bin-centre mean of the values,
    m̂₂ = Σ c_i² f~_i                               their second moment,
    v̂  = m̂₂ − m̂₁² + Var̂(m̂₁) + w²/12                 the variance of the values spread
                                                    uniformly in their bins,

each unbiased (v̂ up to the plug-in of Var(m̂₁)). Var(v̂) by the delta method: s²(m₁) + 2 Var(m̂₁)²
(the square of a normal m̂₁), s²(t) = Var(Σ_i (c_i² − 2t c_i) f~_i) = A − 4tB + 4t²C (A, B, C
the exact variances and covariance of m̂₂ and m̂₁), taken at its largest over t ∈ m̂₁ ± half a
standard error of m̂₁ (`VARIANCE_SPREAD`), each end clipped to [0, 1] where m₁ lies, not at m̂₁:
an oracle's noise is as large in the empty bins as in the full ones, so s(t) is steep in t,
and at t = m̂₁ the band's width falls where the error rises (on the lognormal latency, GRR at
ε = 0.5, n = 10⁵, their correlation was −0.93 and the band held the variance in 0.91 of the
windows), while an unclipped m̂₁ far outside [0, 1] (few reports, small ε) made it hold
0.98–1.00.
A hierarchical histogram's bands are the same functions of its least-squares leaf estimate
(ldp_telemetry.ldp.estimation.bin_answers), which is unbiased with exact linear variances too.
Band = estimate ± Z95 · standard error, clipped to [low, high] (mean) and [0, (high − low)²/4]
(variance, Popoviciu). Cost O(B) per window, nothing iterative; the estimator's Norm-Sub
post-processing does not enter.

What the bands hold (`CFO_MEAN_REASON`, `CFO_VARIANCE_REASON`): the values' own mean can
differ from their bin-centre mean by up to w/2; with values x = c + u (u the offset in its bin,
|u| ≤ w/2) their own variance can differ from the bands' by 2 Cov(c, u) + Var(u) − w²/12, at
most w σ + w²/6 (σ the values' standard deviation). Where that gap is more than
CONSERVATIVE_SHARE of the half-width the record says so in `band_reasons`, as Square Wave's
bucketing bound does (ldp_telemetry.ldp.estimation.moments).
"""
from __future__ import annotations

import math

import numpy as np

from ldp_telemetry.ldp.estimation.moments import (CONSERVATIVE_SHARE, MEASURED_REPORTS,
                                                  MOMENT_STATISTICS, SMALL_WINDOW_REASON)
from ldp_telemetry.ldp.estimation.bin_answers import (NO_LEAF_REPORTS_REASON, LinearBins,
                                                      cfo_statistic_linear, hh_statistic_linear)
from ldp_telemetry.ldp.estimation.uncertainty import (BAND_EXACT, NO_REPORTS_REASON, Z95, Band,
                                                      conservative_split, coverage_cell)
from ldp_telemetry.ldp.protocols.cfo_binning import CfoBinning
from ldp_telemetry.ldp.protocols.hh import HierarchicalHistogram

#: The half-width, in standard errors of m̂₁, of the means over which the variance's standard
#: error is taken at its largest (module docstring; measured in benchmarks/coverage_moments.py
#: --cfo).
VARIANCE_SPREAD = 0.5

#: The (ε, n) cells of the coverage grid (`coverage_cell`) where the variance's band held the
#: truth outside [0.93, 0.97] by more than its standard error on some data set
#: (benchmarks/coverage_moments.py --cfo 64, W = 500, GRR and OLH): there the record prints
#: none (CFO_VARIANCE_DECLARED_REASON). The mean's held it in every cell.
CFO_VARIANCE_DECLARED: frozenset[tuple[float, int]] = frozenset({
    (0.5, 1_000), (0.5, 10_000), (0.5, 100_000), (1.0, 1_000), (2.0, 1_000)})
CFO_VARIANCE_DECLARED_REASON = (
    "no band: CFO-binning's variance band held the truth outside [0.93, 0.97] at ε ≈ {epsilon:g}, "
    "n ≈ {n:,} (measured 0.91-0.99 by data set: its delta-method standard error depends "
    "steeply on the unknown mean where the oracle's noise fills the empty bins)")

#: The same cells for a hierarchical histogram's variance, chosen by the same rule on
#: benchmarks/coverage_bins.py --protocols hh --seed 43 (W = 500, 64 buckets, four data sets:
#: flights3m `minute` at n = 10³ held it in 0.992 at ε = 0.5 and 0.996 at ε = 1) and measured
#: on the script's own seed (41).
HH_VARIANCE_DECLARED: frozenset[tuple[float, int]] = frozenset({(0.5, 1_000), (1.0, 1_000)})
HH_VARIANCE_DECLARED_REASON = (
    "no band: a hierarchical histogram's variance band held the truth outside [0.93, 0.97] at "
    "ε ≈ {epsilon:g}, n ≈ {n:,} (measured up to 0.996 on a wide distribution: its "
    "delta-method standard error is conservative where the noise dominates the spread)")

#: Why a CFO-binning or hierarchical-histogram mean or variance whose band held too few
#: held-out windows has no band (`declared_moment_statistics`).
BIN_MISS_REASON = (
    "no band: at ε = {cell_epsilon:g}, n = {cell_n:,} this statistic's {protocol} band "
    "covered {coverage:.3f} of {windows} held-out windows of {dataset} ({runs} runs of "
    "benchmarks/coverage_bins.py), below the goal's lower edge, 0.93, or below 0.94 while "
    "another data shape's lay above 0.97: no band that means 95% across shapes "
    "(benchmarks/declare_bin_bands.py)")

#: Why a CFO-binning or hierarchical-histogram mean or variance whose band over-covered on
#: held-out windows has no 95% band: its band is given as the conservative band
#: (`conservative_moment_statistics`).
BIN_OVER_COVERAGE_REASON = (
    "no calibrated 95% band at ε = {epsilon:g}, n = {n}: at ε = {cell_epsilon:g}, "
    "n = {cell_n:,} this statistic's {protocol} band covered {coverage:.3f} of {windows} "
    "held-out windows of {dataset} ({runs} runs of benchmarks/coverage_bins.py), above 0.97: "
    "its standard error is larger there than the error it measures (the oracle's noise "
    "dominates the spread), so the band is conservative; it is given as the conservative band "
    "(conservative_bands; benchmarks/declare_bin_bands.py)")

CFO_MEAN_REASON = ("band of the values' bin-centre mean ({bins} bins of width w = {width:.4g}): "
                   "the values' own mean can differ by up to w/2 = {gap:.4g}, {share:.0%} of "
                   "the half-width")
CFO_VARIANCE_REASON = ("band of the variance of the values spread uniformly in their bins "
                       "({bins} bins of width w = {width:.4g}: the bin centres' variance plus "
                       "w²/12): the values' own variance can differ by up to w·σ + w²/6 = "
                       "{gap:.4g}, {share:.0%} of the half-width")


def bin_moments(model: LinearBins | None) -> tuple[float, float, float, float] | None:
    """(m̂₁, its standard error, v̂, its standard error) on the unit scale (bins of [0, 1],
    module docstring) from a window's unbiased bin estimate (`LinearBins`: CFO-binning's or a
    hierarchy's); None without one."""
    if model is None:
        return None
    bins = model.bins
    centres = (np.arange(bins) + 0.5) / bins
    mean = model.value(centres)
    var_mean = model.variance(centres)
    second = model.value(centres * centres)
    variance = second - mean * mean + var_mean + 1.0 / (12.0 * bins * bins)
    squares = centres * centres
    var_second = model.variance(squares)
    covariance = 0.5 * (model.variance(squares + centres) - var_second - var_mean)
    spread = VARIANCE_SPREAD * math.sqrt(var_mean)
    # s²(t) is convex in t (its t² coefficient 4 Var(m̂₁) ≥ 0): largest at an end
    largest = max(var_second - 4.0 * t * covariance + 4.0 * t * t * var_mean
                  for t in (min(max(mean - spread, 0.0), 1.0), min(max(mean + spread, 0.0), 1.0)))
    var_variance = max(largest, 0.0) + 2.0 * var_mean * var_mean
    return mean, math.sqrt(var_mean), variance, math.sqrt(var_variance)


def cfo_moments(protocol: CfoBinning, statistic: np.ndarray, n: int
                ) -> tuple[float, float, float, float] | None:
    """`bin_moments` of a CFO-binning window from the oracle's statistic of n reports; None
    without reports."""
    return bin_moments(cfo_statistic_linear(protocol, statistic, int(n)))


def hh_declared_statistics(epsilon: float, n: int) -> dict[str, str]:
    """Statistic -> reason, for the hierarchical-histogram statistics whose band a window of
    ε and n reports does not print (HH_VARIANCE_DECLARED)."""
    cell = coverage_cell(epsilon, n)
    if cell not in HH_VARIANCE_DECLARED:
        return {}
    return {"variance": HH_VARIANCE_DECLARED_REASON.format(epsilon=cell[0], n=cell[1])}


def declared_statistics(epsilon: float, n: int) -> dict[str, str]:
    """Statistic -> reason, for the CFO-binning statistics whose band a window of ε and n
    reports does not print (CFO_VARIANCE_DECLARED)."""
    cell = coverage_cell(epsilon, n)
    if cell not in CFO_VARIANCE_DECLARED:
        return {}
    return {"variance": CFO_VARIANCE_DECLARED_REASON.format(epsilon=cell[0], n=cell[1])}


def fixed_declared_statistics(protocol: str, epsilon: float, n: int) -> dict[str, str]:
    """Statistic -> reason, for the mean and variance a CFO-binning or hierarchical-histogram
    window of protocol `protocol` ("cfo-grr", "cfo-olh", "hh"), ε and n reports declares by the
    declarations made before the pooled rule (`declared_statistics` or
    `hh_declared_statistics`): what benchmarks/coverage_bins.py records as a cell's `declared`,
    so that benchmarks/declare_bin_bands.py, which reads those cells, never reads its own
    declarations (BIN_MISSES) back as its input."""
    return (hh_declared_statistics(epsilon, n) if protocol == HierarchicalHistogram.name
            else declared_statistics(epsilon, n))


def declared_moment_statistics(protocol: str, epsilon: float, n: int) -> dict[str, str]:
    """Statistic -> reason, for the mean and variance whose band a CFO-binning or
    hierarchical-histogram window of protocol `protocol` (its name: "cfo-grr", "cfo-olh",
    "hh"), ε and n reports does not print: `fixed_declared_statistics`, and in the window's
    grid cell (`coverage_cell`) those whose band covered below 0.93 of the held-out windows of
    one data shape pooled over three runs, or below 0.94 while another shape's lay above 0.97
    (BIN_MISSES of ldp_telemetry.ldp.estimation.bin_band_declarations; BIN_MISS_REASON)."""
    from ldp_telemetry.ldp.estimation.bin_band_declarations import BIN_MISSES
    declared = fixed_declared_statistics(protocol, epsilon, n)
    cell = coverage_cell(epsilon, n)
    for key, (dataset, coverage, windows, runs) in BIN_MISSES.get((protocol, *cell), {}).items():
        declared.setdefault(key, BIN_MISS_REASON.format(
            cell_epsilon=cell[0], cell_n=cell[1], protocol=protocol, coverage=coverage,
            windows=windows, dataset=dataset, runs=runs))
    return declared


def conservative_moment_statistics(protocol: str, epsilon: float, n: int) -> dict[str, str]:
    """Statistic -> reason (BIN_OVER_COVERAGE_REASON), for the mean and variance whose band a
    CFO-binning or hierarchical-histogram window of protocol `protocol` (its name: "cfo-grr",
    "cfo-olh", "hh"), ε and n reports gives as its conservative band, not its 95% band: in the
    window's grid cell (`coverage_cell`) the band covered above 0.97 of the held-out windows of
    one data shape pooled over three runs, and no shape's below 0.94 (BIN_OVER_COVERAGE of
    ldp_telemetry.ldp.estimation.bin_band_declarations); never a statistic
    `declared_moment_statistics` declares there."""
    from ldp_telemetry.ldp.estimation.bin_band_declarations import BIN_OVER_COVERAGE
    cell = coverage_cell(epsilon, n)
    return {key: BIN_OVER_COVERAGE_REASON.format(
                epsilon=epsilon, n=f"{n:,}", cell_epsilon=cell[0], cell_n=cell[1],
                protocol=protocol, coverage=coverage, windows=windows, dataset=dataset,
                runs=runs)
            for key, (dataset, coverage, windows, runs)
            in BIN_OVER_COVERAGE.get((protocol, *cell), {}).items()}


def bin_moment_bands(protocol: CfoBinning | HierarchicalHistogram, statistic: np.ndarray,
                     n: int, low: float, high: float
                     ) -> tuple[dict[str, Band], dict[str, Band]]:
    """(95% bands, conservative bands) of the mean and the variance of a CFO-binning or
    hierarchical-histogram window, as records give them: `cfo_statistic_bands` or
    `hh_statistic_bands`, the band of a statistic `conservative_moment_statistics` names moved,
    as it is, to the conservative bands (uncertainty.conservative_split; none where it has no
    band)."""
    bands = (cfo_statistic_bands(protocol, statistic, n, low, high)
             if isinstance(protocol, CfoBinning) else
             hh_statistic_bands(protocol, statistic, n, low, high))
    return conservative_split(bands, conservative_moment_statistics(
        protocol.name, float(protocol.epsilon), int(n)), BAND_EXACT, keys=MOMENT_STATISTICS)


def cfo_statistic_bands(protocol: CfoBinning, statistic: np.ndarray, n: int, low: float,
                        high: float, declare: bool = True) -> dict[str, Band]:
    """The mean's and the variance's 95% bands of a CFO-binning window (`bin_statistic_bands`);
    no band without reports, nor (`declare`, as records do; False to measure it) where
    `declared_moment_statistics` says so."""
    declared = (declared_moment_statistics(protocol.name, float(protocol.epsilon), int(n))
                if declare else {})
    return bin_statistic_bands(cfo_statistic_linear(protocol, statistic, int(n)), int(n), low,
                               high, declared)


def hh_statistic_bands(protocol: HierarchicalHistogram, statistic: np.ndarray, n: int,
                       low: float, high: float, declare: bool = True) -> dict[str, Band]:
    """The mean's and the variance's 95% bands of a hierarchical-histogram window
    (`bin_statistic_bands` of its least-squares leaf estimate,
    ldp_telemetry.ldp.estimation.bin_answers); no band without reports at the bucket depth, nor
    (`declare`) where `declared_moment_statistics` says so."""
    declared = (declared_moment_statistics(protocol.name, float(protocol.epsilon), int(n))
                if declare else {})
    model = hh_statistic_linear(protocol, statistic) if n > 0 else None
    if model is None and n > 0:
        return {key: Band(None, None, NO_LEAF_REPORTS_REASON) for key in MOMENT_STATISTICS}
    return bin_statistic_bands(model, int(n), low, high, declared)


def bin_statistic_bands(model: LinearBins | None, n: int, low: float, high: float,
                        declared: dict[str, str]) -> dict[str, Band]:
    """The mean's and the variance's 95% bands in the metric's units, `Band.method`
    BAND_EXACT: the bin-centre mean and the variance of the values spread in their bins
    (module docstring), with CFO_MEAN_REASON / CFO_VARIANCE_REASON where the gap to the values'
    own statistic is more than CONSERVATIVE_SHARE of the half-width and SMALL_WINDOW_REASON
    below MEASURED_REPORTS reports ("; "-joined); `Band.estimate` the unbiased estimate clipped
    to what the statistic can take ([low, high]; [0, (high − low)²/4]: within the band, which
    is clipped alike) and `Band.std_error` its standard error, kept for a statistic `declared`
    (statistic -> reason) without a band; no band nor estimate without `model` (no reports)."""
    found = bin_moments(model)
    if found is None:
        return {key: Band(None, None, NO_REPORTS_REASON) for key in MOMENT_STATISTICS}
    assert model is not None  # bin_moments found moments
    bins = model.bins
    mean, mean_se, variance, variance_se = found
    span = float(high) - float(low)
    width = span / bins
    mean, mean_se = float(low) + span * mean, span * mean_se
    variance, variance_se = span * span * variance, span * span * variance_se
    sigma = math.sqrt(max(variance, 0.0))
    out = {}
    for key, value, error, gap, text, limits in (
            ("mean", mean, mean_se, width / 2.0, CFO_MEAN_REASON, (float(low), float(high))),
            ("variance", variance, variance_se, width * sigma + width * width / 6.0,
             CFO_VARIANCE_REASON, (0.0, span * span / 4.0))):
        estimate = min(max(value, limits[0]), limits[1])
        if key in declared:
            out[key] = Band(None, None, declared[key], estimate=estimate, std_error=error)
            continue
        half = Z95 * error
        reasons = []
        if gap > CONSERVATIVE_SHARE * half:
            reasons.append(text.format(bins=bins, width=width, gap=gap,
                                       share=gap / half if half > 0 else math.inf))
        if n < MEASURED_REPORTS:
            reasons.append(SMALL_WINDOW_REASON.format(n=f"{int(n):,}"))
        out[key] = Band(min(max(value - half, limits[0]), limits[1]),
                        min(max(value + half, limits[0]), limits[1]),
                        "; ".join(reasons) or None, BAND_EXACT, estimate, error)
    return out
