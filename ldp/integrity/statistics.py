"""The integrity tests of one window and the record section they fill.

Each test gives a score, a p-value under honest reports (its null) and the values it
implicates; a test is flagged when its p-value is at most `IntegritySpec.level` = alpha / 4
(Bonferroni over the four TESTS), so an honest window is flagged with probability at most
alpha whatever the tests' dependence. Nulls (docs/integrity.md; tested by simulation in
tests/ldp/test_integrity.py):

* sum: Σ_v f~_v = (S/n - d q*)/(p* - q*), S the total support (Σ_v c_v). Under honest reports S
  is a sum of n independent support sizes whose mean makes the sum exactly 1 in expectation
  and whose variance σ² does not depend on the true value (support.support_size_moments), so
  z = (Σ f~ - 1) / (σ / (√n (p* - q*))) is asymptotically N(0, 1) (CLT); two-sided p-value.
  Not defined where the size is constant (GRR, SS, RWS: the sum is 1 exactly, for any report).
* support_size: the histogram of the sampled reports' support sizes against m times the exact
  honest pmf (support.SupportModel.size_pmf), cells pooled until each expects at least
  MIN_EXPECTED; Pearson's χ² with cells - 1 degrees of freedom.
* co_support: over the window's top-K values of f~, C_ab = sampled reports supporting both a
  and b. An honest report supports both with probability μ_ab = (f_a + f_b) r1 +
  (1 - f_a - f_b) r0 (support.SupportModel.pair_probabilities), f at the window's estimate
  clipped to [0, 1]; z_ab = (C_ab - s μ_ab) / sqrt(s μ_ab (1 - μ_ab) + s² (r1 - r0)² (se_a +
  se_b)²) (the second term bounds the variance of the plug-in μ, so the test is conservative),
  one-sided (fakes that support several targets raise C); p = min(1, P · Φ̄(max z)) over the
  P = K(K-1)/2 pairs (Bonferroni). Implicated: the values of pairs with z_ab above Φ̄⁻¹(level/P);
  when it is flagged, the section's `recovered` is their estimate with the estimated fake
  support removed (ldp_telemetry.ldp.integrity.recovery), beside the plain one.
* jump (`jump_statistic`, run by readers that have the metric's earlier windows): each top-K
  value's f~ against the mean of its `history` previous windows' f~,
  z_v = (f~_v - mean) / sqrt(se_v² + Σ se²/h²), one-sided, p = min(1, d · Φ̄(max z)): the
  top-K is chosen by the same estimates, so the largest z of the top is biased upward (a
  winner's curse; over K it gave honest z of 3 to 4 on real data) and the Bonferroni correction
  is over all d values, of which the top-K's are a subset. Its null is that the value's true
  frequency did not change: a genuine change flags too.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist
from typing import Any

import numpy as np

from ldp_telemetry.ldp.base.times import reports_per_window
from ldp_telemetry.ldp.integrity.recovery import recovered_estimate
from ldp_telemetry.ldp.integrity.sample import ReportSample
from ldp_telemetry.ldp.integrity.support import (SupportModel, support_model,
                                                 support_size_moments)
from ldp_telemetry.ldp.protocols.base import FrequencyOracle

#: Expected count below which support-size cells are pooled with their neighbours.
MIN_EXPECTED = 5.0
#: Fewest sampled reports a sampled test runs on.
MIN_SAMPLE = 50
_NORMAL = NormalDist()


def normal_sf(z: float) -> float:
    """P[N(0, 1) > z] (stdlib: readers such as `ldp show` never import scipy)."""
    return 0.5 * math.erfc(z / math.sqrt(2.0))


def normal_isf(p: float) -> float:
    """The z with P[N(0, 1) > z] = p, for 0 < p < 1."""
    return -_NORMAL.inv_cdf(p)


def statistic(name: str, score: float | None = None, p_value: float | None = None,
              level: float = 0.0, values: Sequence[int] = (), df: int | None = None,
              note: str | None = None) -> dict:
    """One test's entry of the record section (`flagged`: p_value <= level)."""
    return {"name": name, "score": None if score is None else float(score),
            "df": None if df is None else int(df),
            "p_value": None if p_value is None else float(p_value),
            "flagged": bool(p_value is not None and p_value <= level),
            "values": [str(v) for v in values], "note": note}


def sum_statistic(protocol: FrequencyOracle, counts: np.ndarray, n: int, level: float,
                  reports_per_device: int = 1) -> dict:
    """The sum of the unbiased estimate against 1 (module docstring).

    `reports_per_device` R > 1: a memoized metric's device sends up to R reports to the window
    that share its permanent response, so they are correlated. The variance of the sum of one
    device's R support sizes is at most R^2 sigma^2 (every covariance is at most sigma^2), so
    the variance of the window's sum is at most R sigma^2 / n, the bound used here: the test
    stays at or below its level, with less power."""
    moments = support_size_moments(protocol)
    if moments is None:
        return statistic("sum", note="no support model for this protocol")
    _, variance = moments
    if variance == 0:
        return statistic("sum", note="every report supports the same number of values: the "
                                     "sum is 1 exactly")
    if n == 0:
        return statistic("sum", note="no reports")
    p, q = protocol.p_star, protocol.q_star
    total = float(np.sum(counts, dtype=np.float64))
    estimate_sum = (total / n - protocol.d * q) / (p - q)
    error = math.sqrt(reports_per_device * variance / n) / (p - q)
    z = (estimate_sum - 1.0) / error
    return statistic("sum", z, 2 * normal_sf(abs(z)), level)


def _pooled_cells(expected: np.ndarray, observed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Adjacent cells pooled until each expects at least MIN_EXPECTED (the last pooled into its
    neighbour when short)."""
    cum_e, cum_o = np.cumsum(expected), np.cumsum(observed)
    cuts, last = [], 0.0
    for i, value in enumerate(cum_e):
        if value - last >= MIN_EXPECTED:
            cuts.append(i)
            last = value
    if not cuts:
        return np.array([cum_e[-1]]), np.array([cum_o[-1]])
    cuts[-1] = len(expected) - 1
    e = np.diff(np.concatenate([[0.0], cum_e[cuts]]))
    o = np.diff(np.concatenate([[0.0], cum_o[cuts]]))
    return e, o


def support_size_statistic(model: SupportModel, columns: dict, level: float) -> dict:
    """Pearson's χ² of the sampled support sizes against their honest pmf."""
    pmf = model.size_pmf()
    if pmf is None:
        return statistic("support_size", note="every report supports the same number of values")
    sizes = model.sizes(columns)
    assert sizes is not None, "a model with a size pmf has sizes"
    m = len(sizes)
    if m < MIN_SAMPLE:
        return statistic("support_size", note=f"{m} sampled reports, fewer than {MIN_SAMPLE}")
    observed = np.bincount(sizes, minlength=len(pmf)).astype(np.float64)
    expected, observed = _pooled_cells(m * pmf, observed[: len(pmf)])
    if len(expected) < 2:
        return statistic("support_size", note="too few reports for two cells")
    chi2 = float(np.sum((observed - expected) ** 2 / expected))
    df = len(expected) - 1
    from scipy.special import chdtrc  # here: readers of records never load scipy
    return statistic("support_size", chi2, chdtrc(df, chi2), level, df=df)


def co_support_statistic(model: SupportModel, columns: dict, unbiased: np.ndarray,
                         std_error: np.ndarray, labels: Sequence[str], top_k: int,
                         level: float) -> dict:
    """The co-support excess over the top-K values (module docstring)."""
    pairs = model.pair_probabilities()
    if pairs is None:
        return statistic("co_support", note="a report supports one value: no pairs")
    s = len(next(iter(columns.values()))) if columns else 0
    if s < MIN_SAMPLE:
        return statistic("co_support", note=f"{s} sampled reports, fewer than {MIN_SAMPLE}")
    unbiased = np.asarray(unbiased, dtype=np.float64)
    order = np.argsort(-np.nan_to_num(unbiased, nan=-np.inf), kind="stable")
    top = order[: min(top_k, len(order))]
    r1, r0 = pairs
    supported = model.supports(columns, top)
    assert supported is not None, "a model with pair probabilities has supports"
    matrix = supported.astype(np.float64)
    s = len(matrix)  # RWS: a bounded number of the sampled rows
    together = matrix.T @ matrix
    f = np.clip(np.nan_to_num(unbiased[top]), 0.0, 1.0)
    se = np.nan_to_num(np.asarray(std_error, dtype=np.float64)[top])
    f_pair = np.minimum(f[:, None] + f[None, :], 1.0)
    mu = f_pair * r1 + (1.0 - f_pair) * r0
    variance = s * mu * (1 - mu) + (s * (r1 - r0) * (se[:, None] + se[None, :])) ** 2
    z = (together - s * mu) / np.sqrt(np.maximum(variance, 1e-300))
    upper = np.triu_indices(len(top), 1)
    z_pairs = z[upper]
    count = len(z_pairs)
    if count == 0:
        return statistic("co_support", note="fewer than two values")
    z_max = float(z_pairs.max())
    p_value = min(1.0, count * normal_sf(z_max))
    cut = normal_isf(level / count)
    hot = z_pairs > cut
    implicated = sorted(set(top[upper[0][hot]].tolist()) | set(top[upper[1][hot]].tolist()),
                        key=lambda v: -unbiased[v])
    entry = statistic("co_support", z_max, p_value, level, [labels[v] for v in implicated])
    entry["indices"] = implicated  # for the recovery; dropped from the record
    return entry


def jump_statistic(unbiased: np.ndarray, std_error: np.ndarray, earlier: list,
                   labels: Sequence[str],
                   top_k: int, level: float) -> dict:
    """The jump of each top-K value against the mean of `earlier` windows' (unbiased, se)
    arrays of the same values (module docstring)."""
    if not earlier:
        return statistic("jump", note="no earlier window")
    unbiased = np.asarray(unbiased, dtype=np.float64)
    if np.isnan(unbiased).all():
        return statistic("jump", note="no reports")
    order = np.argsort(-np.nan_to_num(unbiased, nan=-np.inf), kind="stable")
    top = order[: min(top_k, len(order))]
    past = np.array([np.asarray(f, dtype=np.float64)[top] for f, _ in earlier])
    past_se = np.array([np.asarray(e, dtype=np.float64)[top] for _, e in earlier])
    usable = ~np.isnan(past).any(axis=1)
    if not usable.any():
        return statistic("jump", note="no earlier window with reports")
    past, past_se = past[usable], past_se[usable]
    h = len(past)
    baseline = past.mean(axis=0)
    variance = (np.asarray(std_error, dtype=np.float64)[top] ** 2
                + (past_se ** 2).sum(axis=0) / h ** 2)
    z = (unbiased[top] - baseline) / np.sqrt(np.maximum(variance, 1e-300))
    z_max = float(np.max(z))
    d = len(unbiased)  # the top-K is chosen by the same estimates: Bonferroni over all d
    p_value = min(1.0, d * normal_sf(z_max))
    hot = top[z > normal_isf(level / d)]
    return statistic("jump", z_max, p_value, level, [labels[v] for v in hot])


def summarise(section: dict) -> dict:
    """Set the section's `flagged` and `implicated` from its statistics (in place)."""
    flagged = [s for s in section["statistics"] if s["flagged"]]
    section["flagged"] = bool(flagged)
    implicated: list[str] = []
    for entry in flagged:
        implicated += [v for v in entry["values"] if v not in implicated]
    section["implicated"] = implicated
    return section


def shared_reports(config: Any, window_ms: int | None) -> int:
    """R, the most reports one device sends to a window of `window_ms` that share a permanent
    response: ceil(reports_per_day x window length) for a memoized metric with a configured
    rate, else 1 (one-stage reports of a device are independent given its value)."""
    if getattr(config, "memoize", None) is None or window_ms is None:
        return 1
    rate = reports_per_window(config, window_ms)
    return 1 if rate is None or rate <= 1 else math.ceil(rate)


def window_integrity(config: Any, result: Any, table: np.ndarray, sample: ReportSample | None,
                     window_ms: int | None = None
                     ) -> dict | None:
    """The integrity section of a frequency-oracle window's record, or None when the metric has
    integrity off (or is numeric). `result`: its finalize.WindowResult; `table`: the version's
    statistic; `sample`: its ReportSample (None when its protocol keeps none); `window_ms`: the
    window's length. When a memoized metric's devices send several reports per window
    (`shared_reports`), the sum test uses its variance bound and the sampled tests, which
    assume independent reports, are not run."""
    spec = getattr(config, "integrity", None)
    if spec is None or config.kind != "frequency":
        return None
    protocol = config.protocol
    level = spec.level
    labels = config.value_labels
    recovered = None
    counts = np.asarray(protocol.support_counts(table))
    shared = shared_reports(config, window_ms)
    entries = [sum_statistic(protocol, counts, result.n, level, shared)]
    model = support_model(protocol)
    columns = sample.rows()[1] if sample is not None else {}
    sampled = len(next(iter(columns.values()))) if columns else 0
    if model is not None and shared > 1:
        note = (f"up to {shared} reports of one device per window share its permanent "
                "response (memoized): the test assumes independent reports")
        entries.append(statistic("support_size", note=note))
        entries.append(statistic("co_support", note=note))
    elif model is None:
        entries.append(statistic("support_size", note="no support model for this protocol"))
        entries.append(statistic("co_support", note="no support model for this protocol"))
    else:
        if columns:
            entries.append(support_size_statistic(model, columns, level))
        else:
            entries.append(statistic("support_size", note=(
                "every report supports the same number of values" if model.size_pmf() is None
                else _unsampled(sample))))
        if columns:
            entry = co_support_statistic(model, columns, result.unbiased, result.std_error,
                                         labels, spec.top_k, level)
            indices = entry.pop("indices", [])
            if entry["flagged"]:
                recovered = recovered_estimate(protocol, model, columns, result.unbiased,
                                               labels, indices)
            entries.append(entry)
        else:
            entries.append(statistic("co_support", note=(
                "a report supports one value: no pairs" if model.pair_probabilities() is None
                else _unsampled(sample))))
    section = {"alpha": spec.alpha, "level": level, "top_k": spec.top_k, "history": spec.history,
               "sample": sampled, "statistics": entries, "recovered": recovered}
    return summarise(section)


def _unsampled(sample: ReportSample | None) -> str:
    """Why a version with a sampled test has no sampled reports."""
    if sample is None:
        return (f"no report sample: fewer than {MIN_SAMPLE} reports fit in the metric's "
                "integrity.sample_bytes")
    return "no sampled reports"
