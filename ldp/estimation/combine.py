"""One estimate from the reports of several configuration versions of a metric in one window.

Reports made under different configurations (ε, protocol, label order) are counted apart, each
version has its own unbiased estimate f~_k ([Wang20] journal §2) over its own domain. Where the
versions share values (labels, or the indices of sized domains of one size), the combined
estimate of a shared value v is the inverse-variance weighted mean

    f^_v = Σ_k w_k f~_{k,v} / Σ_k w_k,     w_k = 1 / σ_k²,
    σ_k² = q*_k (1 − q*_k) / (n_k (p*_k − q*_k)²)                         ([Wang20] journal eq. 7)

The weights depend only on each version's protocol and report count, never on the data, so f^
is exactly unbiased (each f~_k is), and its exact variance is

    Var[f^_v] = Σ_k w_k² Var[f~_{k,v}] / (Σ_k w_k)²                       (eq. 2 per version)

Versions of a pooled-hash oracle (CMS, HCMS, FLH) are the exception on both counts. Their σ_k²
includes the pool's collision term at the window's estimate of Σ f² (ldp_telemetry.ldp.
protocols.hash_pool.PoolNoise.for_window), so their weights depend on the data through Σ f²
alone (a bias of the order of that estimate's error, far below the standard error). And two
of them hashing one public pool make collision errors that are correlated, not independent:
where value v sits at the same index j in both, the variance gains
2 w_a w_b C_ab Σ_{i != j} f_{a,i} f_{b,i} / (Σ_k w_k)²
(f_{a,i}: the frequency of the value version a puts at index i; C_ab:
`SupportNoise.shared_collision`), with the versions' plug-ins for f.

The combination keeps each version's fixed collision bias, weighted: its values have no band
where the collision part of its variance at f = 0, Σ_k w_k² (collision term)_k plus the shared
part, exceeds frequency_bands.POOL_BIAS_SHARE of its privacy part Σ_k w_k² (eq. 7)_k — one
version's rule (`pool_bias_reason`) at the combination's own share (measured for single
versions only, benchmarks/pooled_values.py).

reported as a standard error with each Var[f~_{k,v}] the variance of that version's unbiased
estimate (eq. 2 at its plug-in estimate, `finalize.error_plug_in`; not the error a version's
estimator may report for its own output). σ_k² is eq. 2 at f_v = 0, so the weights are the optimal
ones for small frequencies, and close to them otherwise. The combination is not post-processed:
post-processing would make it biased and its variance inexact (each version's own estimate is).

A value present in only some versions is left out. The combination assumes that a shared value
has the same frequency under each version (the devices of each version are drawn from one
population); it is not formed for numeric metrics, whose estimators are not unbiased.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

import numpy as np

from ldp_telemetry.ldp.estimation.frequency_bands import (few_supports_reason, pool_share_reason,
                                                          pool_variances)
from ldp_telemetry.ldp.estimation.postprocess import error_plug_in
from ldp_telemetry.ldp.protocols.base import FREQUENCY
from ldp_telemetry.ldp.protocols.noise import RESOLVABLE_STD_ERRORS, standard_error

#: The estimator of a combined estimate, as records name it.
INVERSE_VARIANCE = "inverse-variance"


@dataclass(frozen=True)
class CombinedResult:
    """The combined estimate of the values the versions share (`labels`)."""

    versions: tuple[int, ...]
    labels: list[str]
    n: int
    estimate: np.ndarray
    std_error: np.ndarray
    weights: dict[int, float]  # version -> its share of the weight (the shares sum to 1)
    total_weight: float  # Σ_k w_k = 1 / Var of the combined estimate of a value of frequency 0
    #: why the values have no 95% band (a version with too few expected supports per value,
    #: frequency_bands.few_supports_reason; pooled-hash versions whose collision share of the
    #: combination's variance at f = 0 passes frequency_bands.POOL_BIAS_SHARE), or None
    band_reason: str | None = None
    #: Σ_{a != b} w_a w_b Cov[f~_a, f~_b] of a value of frequency 0: pooled-hash versions'
    #: shared collision errors (module docstring); 0 for every other oracle
    shared_variance: float = 0.0

    @property
    def smallest_resolvable(self) -> float:
        """RESOLVABLE_STD_ERRORS standard errors of the combined estimate of a value of
        frequency 0: 2·sqrt(Σ_k w_k + shared_variance) / Σ_k w_k (2 / sqrt(Σ_k w_k) when the
        versions' errors are independent)."""
        if self.shared_variance == 0.0:  # the same float as ever for independent versions
            return RESOLVABLE_STD_ERRORS / float(np.sqrt(self.total_weight))
        return (RESOLVABLE_STD_ERRORS * float(np.sqrt(self.total_weight + self.shared_variance))
                / self.total_weight)


def shared_labels(configs: Sequence[Any]) -> list[str] | None:
    """The values the versions `configs` share, in the order of the last one (the newest), or
    None when they cannot be combined: a numeric metric, sized domains of different sizes, or a
    mix of labelled and sized domains. Labels of a sized domain are the value indices."""
    if any(config.kind != FREQUENCY for config in configs):
        return None
    labelled = {config.labels is not None for config in configs}
    if len(labelled) > 1:
        return None
    if not labelled.pop():
        return None if len({config.d for config in configs}) > 1 else configs[-1].value_labels
    common = set(configs[0].labels).intersection(*(config.labels for config in configs[1:]))
    return [label for label in configs[-1].labels if label in common]


def combine_versions(parts: Iterable[tuple[Any, Any]]) -> CombinedResult | None:
    """Combine the window results of several versions: `parts` is a list of
    (MetricConfig, WindowResult), oldest version first. None when fewer than two versions have
    reports or they share no value."""
    parts = [(config, result) for config, result in parts if result.n > 0]
    if len(parts) < 2:
        return None
    labels = shared_labels([config for config, _ in parts])
    if not labels:
        return None
    weighted = np.zeros(len(labels))
    weighted_variance = np.zeros(len(labels))
    totals, rows_of, plug_ins = [], [], []
    for config, result in parts:
        weight = 1.0 / result.noise.sigma ** 2
        index = {label: i for i, label in enumerate(config.value_labels)}
        rows = np.fromiter((index[label] for label in labels), dtype=np.intp, count=len(labels))
        weighted += weight * np.asarray(result.unbiased, dtype=np.float64)[rows]
        plug_in = error_plug_in(result.unbiased)
        error = standard_error(plug_in, result.noise)
        weighted_variance += weight ** 2 * error[rows] ** 2
        totals.append(weight)
        rows_of.append(rows)
        plug_ins.append(np.clip(plug_in, 0.0, 1.0))
    shared_variance = 0.0
    for a, b in combinations(range(len(parts)), 2):
        shared = parts[a][1].noise.shared_collision(parts[b][1].noise)
        if shared == 0.0:
            continue
        # Cov[f~_a,v, f~_b,v] = C_ab·Σ_{i != j} f_a,i f_b,i where v sits at index j in both
        size = min(len(plug_ins[a]), len(plug_ins[b]))
        products = plug_ins[a][:size] * plug_ins[b][:size]
        both = float(products.sum())
        pair = 2.0 * totals[a] * totals[b] * shared
        same = rows_of[a] == rows_of[b]
        weighted_variance[same] += pair * (both - products[rows_of[a][same]])
        shared_variance += pair * both
    total = sum(totals)
    few = [(config.version, few_supports_reason(result.noise)) for config, result in parts]
    reasons = [f"version {version}: {reason}" for version, reason in few if reason is not None]
    # the pool-bias rule of a single version's record at the combination's own share: its
    # collision variance at f = 0 (each version's and their shared part) over its privacy one
    variances = [pool_variances(result.noise) for _, result in parts]
    collision = sum(w ** 2 * c for w, (c, _) in zip(totals, variances, strict=True))
    if collision + shared_variance > 0.0:
        privacy = sum(w ** 2 * p for w, (_, p) in zip(totals, variances, strict=True))
        pooled = pool_share_reason((collision + shared_variance) / privacy)
        if pooled is not None:
            reasons.append(f"combined: {pooled}")
    return CombinedResult(
        versions=tuple(config.version for config, _ in parts), labels=labels,
        n=sum(result.n for _, result in parts), estimate=weighted / total,
        std_error=np.sqrt(np.maximum(weighted_variance, 0.0)) / total,
        weights={config.version: weight / total
                 for (config, _), weight in zip(parts, totals, strict=True)},
        total_weight=total, band_reason="; ".join(reasons) or None,
        shared_variance=shared_variance)
