"""Finalize one window: support counts -> unbiased estimate, standard error, post-processing.

Cost depends on the domain size only, never on the number of reports.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ldp_telemetry.ldp.estimation import SupportNoise, standard_error, unbiased_estimate
from ldp_telemetry.ldp.estimators import EstimatorOutput
from ldp_telemetry.ldp.postprocess import project_to_simplex
from ldp_telemetry.ldp.registry import MetricConfig


@dataclass(frozen=True)
class WindowResult:
    """The estimates of one metric in one window (all arrays of length d)."""

    n: int
    unbiased: np.ndarray
    std_error: np.ndarray
    estimate: np.ndarray
    noise: SupportNoise
    estimator: EstimatorOutput | None = None


def error_plug_in(unbiased: np.ndarray) -> np.ndarray:
    """The estimate of f that variances are evaluated at: the Norm-Sub projection of f~.

    NaN (no reports) stays NaN. See finalize_window for why this plug-in.
    """
    unbiased = np.asarray(unbiased, dtype=np.float64)
    return unbiased if np.isnan(unbiased).any() else project_to_simplex(unbiased)


def finalize_window(config: MetricConfig, statistic: np.ndarray, n: int) -> WindowResult:
    """Estimate the window's distribution from the protocol's sufficient statistic.

    unbiased: f~ = (c/n - q*)/(p* - q*) ([Wang20] journal §2); estimate: the metric's estimator
    applied to f~ (the unbiased estimate itself by default), then its post-processing;
    std_error: the estimator's standard error where it reports one, else the standard error of
    f~, the square root of eq. 2 evaluated at the Norm-Sub projection of f~ (the constrained
    least-squares estimate of f).

    Eq. 2 must be evaluated at an estimate of f. At f~ clipped to [0, 1] it overstates the error
    of the many values near 0 (E[max(f~, 0)] > 0 there); at f~ itself it is unbiased but noisy and
    correlated with the error, so it understates the error of under-estimated values. The
    projection is neither: on real flight data (GRR, 229 airports, n = 5,000, ε = 2) the
    standardised errors have mean square 0.95 with it, against 0.88 and 1.09 for the other two.
    """
    protocol = config.protocol
    noise = protocol.noise(n)
    counts = np.asarray(protocol.support_counts(statistic), dtype=np.int64)
    unbiased = unbiased_estimate(counts, noise)
    if noise.n == 0:  # nothing to estimate from: every estimator would return NaN
        output = EstimatorOutput(unbiased)
    else:
        output = config.estimator.run(unbiased, noise, protocol)
    std_error = (output.std_error if output.std_error is not None
                 else standard_error(error_plug_in(unbiased), noise))
    return WindowResult(n=int(n), unbiased=unbiased, std_error=std_error,
                        estimate=config.postprocess.apply(output.estimate, noise), noise=noise,
                        estimator=output)
