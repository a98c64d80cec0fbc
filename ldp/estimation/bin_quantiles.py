"""Bands for the quantiles of a CFO-binning or hierarchical-histogram window, by inverting the
exact bands of its CDF (Woodruff's interval, [Woo52]): conservative, not 95% bands (a record
gives them beside the quantile, whose 95% band is none: `conservative_quantile_bands`).

The CDF at the bin edge e_k, F(e_k) = P(value < e_k), is the linear answer Σ_{i<k} x~_i of the
window's unbiased bin estimate (ldp_telemetry.ldp.estimation.bin_answers.LinearBins): unbiased,
with an exact variance V_k (all B + 1 at once, `LinearBins.prefix_variances`). The ends are known,
F(e_0) = 0 and F(e_B) = 1, and taken as such (variance 0; for OLH, whose Σ x~ is not exactly 1,
the last bin's estimate is then 1 − F̂(e_{B−1})). A level α's band is built by test inversion:

* **whole bins** (`WHOLE_BINS`, what records give as the conservative band): bin
  k = [e_k, e_{k+1}) is kept unless F̂(e_k) − z·se_k > α or F̂(e_{k+1}) + z·se_{k+1} < α
  (z = Z95); the band is the hull of the kept bins. Whatever the values, the bin holding
  their α-quantile Q (the smallest value with at least a share α of the values at or below
  it, numpy's `inverted_cdf`) has
  F(e_k) ≤ α ≤ F(e_{k+1}), so it is dropped only when one of two one-sided normal tests at
  2.5% rejects a true hypothesis: the band holds Q with probability at least 95% (up to the
  normal approximation), point masses and heaped values included, and far more often where
  the bins are the resolution (measured 0.937–1.000, mean 0.990: CONSERVATIVE_QUANTILE_REASON),
  so it is no 95% band. At least one bin is always
  kept (the first k ≥ 1 with F̂(e_k) + z·se_k ≥ α, and the one below it), so the band is never
  empty: where F̂ never comes within z·se of α it is the bin at the domain's end.
* **interpolated** (`INTERPOLATED`, measured against it): under the records' convention of mass
  uniform within a bin, F̂(t) = F̂(e_k) + λ x~_k at t = e_k + λ (e_{k+1} − e_k); its exact
  variance is the quadratic V_k + 2λ C_k + λ² S_k (S_k = Var x~_k, C_k their covariance), so
  the set {λ : (F̂(t) − α)² ≤ z² Var F̂(t)} is solved exactly in every bin, and the band is its
  hull. It holds the quantile of the values spread uniformly in their bins, not the values'
  own, which can lie anywhere in their bin.

F̂ need not be monotone (x~ has negative entries): the hull takes every t the test keeps, so a
band can be wider than the bins between its two crossings. The band need not be centred on the
record's printed quantile (Norm-Sub's or ADMM's, which are biased); it is made from the
unbiased x~ alone. Cost: one cumulative sum and the B + 1 edge variances at once
(`LinearBins.prefix_variances`: O(B) for CFO-binning, O(B · h³) for a hierarchy); the
interpolated rule adds the B bins' variances (O(B · nodes) for a hierarchy);
benchmarks/coverage_bin_quantiles.py --cost measures both.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from ldp_telemetry.ldp.estimation.bin_answers import (NO_LEAF_REPORTS_REASON, LinearBins,
                                                      cfo_statistic_linear, form_variance,
                                                      hh_statistic_linear, symmetric_form)
from ldp_telemetry.ldp.estimation.histograms import QUANTILE_LEVELS
from ldp_telemetry.ldp.estimation.moments import MEASURED_REPORTS, SMALL_WINDOW_REASON
from ldp_telemetry.ldp.estimation.uncertainty import (BAND_EXACT, NO_REPORTS_REASON,
                                                      Z95, Band, conservative_reason,
                                                      conservative_split, coverage_cell)
from ldp_telemetry.ldp.protocols.cfo_binning import CfoBinning
from ldp_telemetry.ldp.protocols.hh import HierarchicalHistogram

WHOLE_BINS = "whole-bins"
INTERPOLATED = "interpolated"
RULES = (WHOLE_BINS, INTERPOLATED)


def edge_cdf(model: LinearBins, bins_too: bool = True
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """(F̂, V) at the B + 1 edges and (x, S) of the B bins, the ends known (module docstring):
    F̂(e_0) = 0, F̂(e_B) = 1 with variance 0, x_k = F̂(e_{k+1}) − F̂(e_k) and S_k its
    variance (None unless `bins_too`: the whole-bins rule needs none)."""
    bins = model.bins
    cdf = np.concatenate(([0.0], np.cumsum(model.unbiased)))
    cdf[-1] = 1.0
    found = model.prefix_variances()
    variance = model.variances(np.tri(bins + 1, bins, -1)) if found is None else found
    single = _single_variances(model) if bins_too else None
    variance[0] = variance[-1] = 0.0
    if single is not None:
        single = single.copy()
        single[-1] = variance[-2]  # the last bin is 1 − F̂(e_{B−1})
    return cdf, variance, np.diff(cdf), single


def _single_variances(model: LinearBins) -> np.ndarray:
    """The variance of every bin's x~_k: for CFO-binning f·w = f·w² = f_k and Σ w = Σ w² = 1
    (bin_answers.form_variance), for a hierarchy `LinearBins.variances` of the unit rows."""
    form = symmetric_form(model.oracles[0]) if model.depth_weights is None else None
    if form is None:
        return model.variances(np.eye(model.bins))
    f = model.plug_in
    one = np.ones(model.bins)
    return form_variance(model.oracles[0], model.reports[0], form, f, f, one, one,
                         float(f.sum()))


def quantile_bands(model: LinearBins, levels: Sequence[float], rule: str = WHOLE_BINS
                   ) -> np.ndarray:
    """[lower, upper] on the unit scale (bins of [0, 1]) of every level's 95% band by `rule`
    (WHOLE_BINS or INTERPOLATED, module docstring); shape (len(levels), 2)."""
    if rule not in RULES:
        raise ValueError(f"rule is one of {RULES}, got {rule!r}")
    cdf, variance, slope, single = edge_cdf(model, rule == INTERPOLATED)
    bins = model.bins
    half = Z95 * np.sqrt(variance)
    out = np.empty((len(levels), 2))
    for row, level in enumerate(levels):
        if rule == WHOLE_BINS:
            kept = np.flatnonzero((cdf[:-1] - half[:-1] <= level) & (cdf[1:] + half[1:] >= level))
            out[row] = kept[0] / bins, (kept[-1] + 1) / bins
        else:
            assert single is not None, "edge_cdf gives the bins' variances for this rule"
            out[row] = _interpolated(cdf, variance, slope, single, float(level)) / bins
    return out


def _interpolated(cdf: np.ndarray, variance: np.ndarray, slope: np.ndarray, single: np.ndarray,
                  level: float) -> np.ndarray:
    """[lower, upper] in bins of the hull of {t : (F̂(t) − α)² ≤ z² Var F̂(t)} (module
    docstring): in bin k, g(λ) = a λ² + b λ + c ≤ 0 with a = x_k² − z² S_k,
    b = 2 x_k (F̂_k − α) − 2 z² C_k, c = (F̂_k − α)² − z² V_k, solved over λ ∈ [0, 1]."""
    z2 = Z95 * Z95
    start, end = variance[:-1], variance[1:]
    cross = 0.5 * (end - start - single)  # C_k = Cov(F̂(e_k), x~_k)
    gap = cdf[:-1] - level
    a = slope * slope - z2 * single
    b = 2.0 * slope * gap - 2.0 * z2 * cross
    c = gap * gap - z2 * start
    candidates = [np.zeros_like(a), np.ones_like(a)]
    with np.errstate(divide="ignore", invalid="ignore"):
        root = np.sqrt(np.maximum(b * b - 4.0 * a * c, 0.0))
        real = b * b - 4.0 * a * c >= 0.0
        quadratic = np.abs(a) > 1e-300
        candidates += [np.where(real & quadratic, (-b - root) / (2.0 * a), np.nan),
                       np.where(real & quadratic, (-b + root) / (2.0 * a), np.nan),
                       np.where(~quadratic & (b != 0.0), -c / b, np.nan)]
    points = np.stack(candidates)  # (5, B)
    inside = (points >= 0.0) & (points <= 1.0)
    value = a * points * points + b * points + c
    scale = np.abs(a) + np.abs(b) + np.abs(c)
    kept = inside & (value <= 1e-9 * scale)
    where = np.arange(len(a)) + np.where(kept, points, np.nan)
    assert kept.any(), "F̂ runs continuously from 0 to 1, so it meets α where g ≤ 0"
    return np.array([np.nanmin(where), np.nanmax(where)])


#: The rule of the records' conservative bands (module docstring; chosen in
#: benchmarks/coverage_bin_quantiles.py).
RECORD_RULE = WHOLE_BINS

#: Statistic -> reason for quantile levels of a (protocol family, ε, n) cell declared without a
#: band (`declared_quantiles`): empty until a measurement says otherwise.
QUANTILE_DECLARED: dict[tuple[str, float, int], dict[str, str]] = {}

#: What a record's conservative quantile band holds (after CONSERVATIVE_QUANTILE_REASON in its
#: `band_reasons`, beside SMALL_WINDOW_REASON).
QUANTILE_BAND_REASON = ("band of the values' own quantile (values outside the domain counted "
                        "at its ends, as the client clips them): the exact CDF bands at the "
                        "edges of {bins} bins inverted, whole bins of width {width:.4g}; need "
                        "not be centred on the printed ({estimator}) quantile")


def declared_quantiles(family: str, epsilon: float, n: int) -> dict[str, str]:
    """Quantile level -> reason, for the levels whose band a window of `family` ("cfo" or
    "hh"), ε and n reports does not print (QUANTILE_DECLARED)."""
    return dict(QUANTILE_DECLARED.get((family, *coverage_cell(epsilon, n)), {}))


def bin_quantile_bands(model: LinearBins | None, n: int, low: float, high: float,
                       declared: dict[str, str], estimator: str,
                       missing: str = NO_REPORTS_REASON) -> dict[str, Band]:
    """The whole-bins band of every QUANTILE_LEVELS quantile in the metric's units (made from
    exact variances, `Band.method` BAND_EXACT; conservative, not a 95% band: a record gives it
    as such, `conservative_quantile_bands`) by `quantile_bands` and RECORD_RULE, scaled to
    [low, high], with
    QUANTILE_BAND_REASON and, below MEASURED_REPORTS reports, SMALL_WINDOW_REASON; none
    without `model` (`missing` says why) nor for the levels `declared` names."""
    if model is None:
        return {key: Band(None, None, missing) for key in QUANTILE_LEVELS}
    span = float(high) - float(low)
    found = float(low) + span * quantile_bands(model, [float(key) for key in QUANTILE_LEVELS],
                                               RECORD_RULE)
    reason = QUANTILE_BAND_REASON.format(bins=model.bins, width=span / model.bins,
                                         estimator=estimator)
    if n < MEASURED_REPORTS:
        reason += "; " + SMALL_WINDOW_REASON.format(n=f"{int(n):,}")
    return {key: (Band(None, None, declared[key]) if key in declared
                  else Band(float(lower), float(upper), reason, BAND_EXACT))
            for key, (lower, upper) in zip(QUANTILE_LEVELS, found, strict=True)}


def bin_quantile_statistic_bands(protocol: CfoBinning | HierarchicalHistogram,
                                 statistic: np.ndarray, n: int, low: float, high: float,
                                 estimator: str, declare: bool = True) -> dict[str, Band]:
    """`bin_quantile_bands` of a CFO-binning or hierarchical-histogram window from the
    protocol's statistic of n reports (`declare`: False to measure the declared levels too)."""
    hierarchy = isinstance(protocol, HierarchicalHistogram)
    family = "hh" if hierarchy else "cfo"
    declared = declared_quantiles(family, float(protocol.epsilon), int(n)) if declare else {}
    if n <= 0:
        return bin_quantile_bands(None, 0, low, high, declared, estimator)
    if isinstance(protocol, HierarchicalHistogram):
        return bin_quantile_bands(hh_statistic_linear(protocol, statistic), int(n), low, high,
                                  declared, estimator, NO_LEAF_REPORTS_REASON)
    return bin_quantile_bands(cfo_statistic_linear(protocol, statistic, int(n)), int(n), low,
                              high, declared, estimator)


#: Why a CFO-binning or hierarchical-histogram record's quantile has no 95% band (its
#: `band_reasons`, before what its conservative band holds): the whole-bins band identifies
#: the quantile only to a bin and holds it far more often than 95% of windows (coverage of the
#: (cell, level) pairs of n = 10³–10⁶), and the narrower interpolated rule misses the values'
#: own quantile.
CONSERVATIVE_QUANTILE_REASON = (
    "no calibrated 95% band: the band of whole bins identifies the quantile only to a bin and "
    "is conservative, holding the truth in at least 95% of windows by construction, measured "
    "0.937–1.000 of windows, 1,448 of 1,584 (cell, level) pairs above 0.97, mean 0.990 "
    "(benchmarks/coverage_bin_quantiles.py); it is given as the conservative band "
    "(conservative_bands)")


def conservative_quantile_bands(bands: Mapping[str, Band]
                                ) -> tuple[dict[str, Band], dict[str, Band]]:
    """(95% bands, conservative bands) of a CFO-binning or hierarchical-histogram window from
    its bands (`bin_quantile_statistic_bands`' with the mean's and the variance's): every
    quantile's whole-bins band moves, as it is, to the conservative bands (`Band.method`
    WHOLE_BINS, how it was made), its 95% band none with CONSERVATIVE_QUANTILE_REASON and what
    the band holds (its reason; uncertainty.conservative_split); a quantile without a band
    keeps its reason and has no conservative band; the other statistics stay as they are."""
    return conservative_split(bands, dict.fromkeys(QUANTILE_LEVELS, CONSERVATIVE_QUANTILE_REASON),
                              WHOLE_BINS)


def conservative_quantile_reason(holds: str | None) -> str:
    """A quantile's `band_reasons` entry where its band is conservative:
    CONSERVATIVE_QUANTILE_REASON, then what the conservative band holds (`holds`, its
    QUANTILE_BAND_REASON and SMALL_WINDOW_REASON)."""
    return conservative_reason(CONSERVATIVE_QUANTILE_REASON, holds)
