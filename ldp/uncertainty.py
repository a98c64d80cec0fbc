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

from dataclasses import dataclass
from collections.abc import Callable

import numpy as np

from ldp_telemetry.ldp.histograms import QUANTILE_LEVELS, histogram_mean, histogram_quantiles
from ldp_telemetry.ldp.registration import Parameter
from ldp_telemetry.ldp.validation import is_nonnegative_int

#: Most bootstrap replicates a registry may ask for (each costs one estimator run per window).
MAX_REPLICATES = 1_000
DEFAULT_REPLICATES = 20


def _is_replicates(value) -> bool:
    return is_nonnegative_int(value) and value <= MAX_REPLICATES


BOOTSTRAP_PARAMETERS = {
    "bootstrap": Parameter(DEFAULT_REPLICATES, _is_replicates,
                           f"an integer in [0, {MAX_REPLICATES}] (0: no standard errors)"),
    "seed": Parameter(0, is_nonnegative_int, "a non-negative integer"),
}


@dataclass(frozen=True)
class BootstrapErrors:
    """Standard errors over `replicates` bootstrap replicates (NaN when there are fewer than 2)."""

    replicates: int
    buckets: np.ndarray
    mean: float
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
