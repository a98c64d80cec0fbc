"""Exact-variance 95% bands for the mean and the variance of a CFO-binning metric.

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

each unbiased (v̂ up to the plug-in of Var(m̂₁)); Var(v̂) by the delta method: the linear
variance of the weights c_i² − 2 m̂₁ c_i plus 2 Var(m̂₁)² (the square of a normal m̂₁).
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
from ldp_telemetry.ldp.estimation.postprocess import error_plug_in
from ldp_telemetry.ldp.estimation.uncertainty import BAND_EXACT, NO_REPORTS_REASON, Z95, Band
from ldp_telemetry.ldp.protocols.cfo_binning import CfoBinning
from ldp_telemetry.ldp.protocols.noise import unbiased_estimate

CFO_MEAN_REASON = ("band of the values' bin-centre mean ({bins} bins of width w = {width:.4g}): "
                   "the values' own mean can differ by up to w/2 = {gap:.4g}, {share:.0%} of "
                   "the half-width")
CFO_VARIANCE_REASON = ("band of the variance of the values spread uniformly in their bins "
                       "({bins} bins of width w = {width:.4g}: the bin centres' variance plus "
                       "w²/12): the values' own variance can differ by up to w·σ + w²/6 = "
                       "{gap:.4g}, {share:.0%} of the half-width")


def cfo_moments(protocol: CfoBinning, statistic: np.ndarray, n: int
                ) -> tuple[float, float, float, float] | None:
    """(m̂₁, its standard error, v̂, its standard error) on the unit scale (bins of [0, 1],
    module docstring) from the oracle's statistic of a window of n reports; None without
    reports."""
    if n <= 0:
        return None
    unbiased = unbiased_estimate(protocol.support_counts(statistic), protocol.noise(n))
    plug_in = error_plug_in(unbiased)
    bins = protocol.d
    centres = (np.arange(bins) + 0.5) / bins
    oracle = protocol.inner
    mean = float(centres @ unbiased)
    var_mean = oracle.linear_variance(n, centres, plug_in)
    second = float((centres * centres) @ unbiased)
    variance = second - mean * mean + var_mean + 1.0 / (12.0 * bins * bins)
    var_variance = (oracle.linear_variance(n, centres * centres - 2.0 * mean * centres, plug_in)
                    + 2.0 * var_mean * var_mean)
    return mean, math.sqrt(var_mean), variance, math.sqrt(var_variance)


def cfo_statistic_bands(protocol: CfoBinning, statistic: np.ndarray, n: int, low: float,
                        high: float) -> dict[str, Band]:
    """The mean's and the variance's 95% bands in the metric's units, `Band.method`
    BAND_EXACT: the bin-centre mean and the variance of the values spread in their bins
    (module docstring), with CFO_MEAN_REASON / CFO_VARIANCE_REASON where the gap to the values'
    own statistic is more than CONSERVATIVE_SHARE of the half-width and SMALL_WINDOW_REASON
    below MEASURED_REPORTS reports ("; "-joined); no band without reports."""
    found = cfo_moments(protocol, statistic, int(n))
    if found is None:
        return {key: Band(None, None, NO_REPORTS_REASON) for key in MOMENT_STATISTICS}
    mean, mean_se, variance, variance_se = found
    span = float(high) - float(low)
    width = span / protocol.d
    mean, mean_se = float(low) + span * mean, span * mean_se
    variance, variance_se = span * span * variance, span * span * variance_se
    sigma = math.sqrt(max(variance, 0.0))
    out = {}
    for key, value, error, gap, text, limits in (
            ("mean", mean, mean_se, width / 2.0, CFO_MEAN_REASON, (float(low), float(high))),
            ("variance", variance, variance_se, width * sigma + width * width / 6.0,
             CFO_VARIANCE_REASON, (0.0, span * span / 4.0))):
        half = Z95 * error
        reasons = []
        if gap > CONSERVATIVE_SHARE * half:
            reasons.append(text.format(bins=protocol.d, width=width, gap=gap,
                                       share=gap / half if half > 0 else math.inf))
        if n < MEASURED_REPORTS:
            reasons.append(SMALL_WINDOW_REASON.format(n=f"{int(n):,}"))
        out[key] = Band(min(max(value - half, limits[0]), limits[1]),
                        min(max(value + half, limits[0]), limits[1]),
                        "; ".join(reasons) or None, BAND_EXACT)
    return out
