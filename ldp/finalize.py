"""Finalize one window: support counts -> unbiased estimate, standard error, post-processing.

Cost depends on the domain size only, never on the number of reports.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ldp.estimation import SupportNoise, standard_error, unbiased_estimate
from ldp.registry import MetricConfig


@dataclass(frozen=True)
class WindowResult:
    """The estimates of one metric in one window (all arrays of length d)."""

    n: int
    unbiased: np.ndarray
    std_error: np.ndarray
    estimate: np.ndarray
    noise: SupportNoise


def finalize_window(config: MetricConfig, statistic: np.ndarray, n: int) -> WindowResult:
    """Estimate the window's distribution from the protocol's sufficient statistic.

    unbiased: f~ = (c/n - q*)/(p* - q*) (consistency-norm-hyb.txt §2); std_error: square root
    of eq. 2 at f~ clipped to [0, 1]; estimate: the metric's post-processing applied to f~.
    """
    protocol = config.protocol
    noise = protocol.noise(n)
    counts = np.asarray(protocol.support_counts(statistic), dtype=np.int64)
    unbiased = unbiased_estimate(counts, noise)
    return WindowResult(n=int(n), unbiased=unbiased, std_error=standard_error(unbiased, noise),
                        estimate=config.postprocess.apply(unbiased, noise), noise=noise)
