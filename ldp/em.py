"""EM and EMS reconstruction of a numeric distribution from a report histogram ([Li20] §5.5).

Given the report counts n_j over d̃ output buckets and the transition model M (a
`ldp_telemetry.ldp.channels.Channel`), EM ([Li20] Algorithm 1) iterates

    E-step  P_i = x_i Σ_j n_j M[j, i] / (M x)_j
    M-step  x_i = P_i / Σ_k P_k

which never decreases the log-likelihood L(x) = Σ_j n_j ln (M x)_j. EMS adds a smoothing step
after the M-step: each x_i becomes the binomial (1, 2, 1)/4 average of itself and its
neighbours. The paper leaves the two edge buckets open; here the mass a bucket would push past
an edge stays in the edge bucket (x_0 ← (3x_0 + x_1)/4, likewise at the other end), so the
smoothing matrix is symmetric and stochastic by rows and columns: it preserves total mass and
the uniform distribution.

Stopping rule ([Li20] §5.5, §6.1): stop when |L(x⁽ᵗ⁺¹⁾) − L(x⁽ᵗ⁾)| < τ, with L in report counts
(natural log) and τ = 10⁻³ e^ε for EM, 10⁻³ for EMS unless configured; or after
`max_iterations`. The paper's L is ln Pr[ṽ | x], the log-likelihood of the whole sample (a sum
over reports, not a per-report mean), so the rule is absolute and more reports take more
iterations; it stays the default. Every iteration costs two products with M, O(d + d̃) for
Square Wave, through the channel's `products` (work buffers reused within one run).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ldp_telemetry.ldp.channels import Channel
from ldp_telemetry.ldp.estimators import (NUMERIC, EstimatorMethod, EstimatorOutput, Parameter,
                                          is_positive_int, is_positive_number, register)
from ldp_telemetry.ldp.uncertainty import BOOTSTRAP_PARAMETERS

#: Largest number of EM iterations a registry may ask for (each is O(d + d̃)).
MAX_ITERATIONS_LIMIT = 1_000_000
DEFAULT_MAX_ITERATIONS = 10_000


@dataclass(frozen=True)
class EmResult:
    """The reconstructed distribution and how the iteration ended."""

    estimate: np.ndarray
    iterations: int
    last_change: float  # |ΔL| of the last iteration (report counts, natural log)
    log_likelihood: float


def smooth(x: np.ndarray) -> np.ndarray:
    """The binomial (1, 2, 1)/4 smoothing of EMS with mass-keeping edges (see module docstring)."""
    out = np.convolve(x, _KERNEL, mode="same")
    out[0] += 0.25 * x[0]
    out[-1] += 0.25 * x[-1]
    return out


_KERNEL = np.array([0.25, 0.5, 0.25])


def paper_tolerance(epsilon: float, smoothing: bool) -> float:
    """τ of [Li20] §6.1: 10⁻³ for EMS, 10⁻³ e^ε for EM."""
    return 1e-3 if smoothing else 1e-3 * math.exp(epsilon)


def log_likelihood(counts: np.ndarray, predicted: np.ndarray) -> float:
    """L = Σ_j n_j ln y_j (y = M x, report-bucket probabilities, all positive)."""
    return float(np.asarray(counts, dtype=np.float64) @ np.log(predicted))


def expectation_maximisation(channel: Channel, counts: np.ndarray, *, smoothing: bool,
                             tolerance: float, max_iterations: int = DEFAULT_MAX_ITERATIONS,
                             start: np.ndarray | None = None) -> EmResult:
    """EM (smoothing=False) or EMS (smoothing=True) from the uniform distribution (or `start`).

    `counts`: report counts per output bucket (length d̃). Returns the estimate over d input
    buckets (non-negative, summing to 1), the iterations run and the final |ΔL|.
    """
    counts = np.asarray(counts, dtype=np.float64)
    if counts.shape != (channel.d_out,):
        raise ValueError(f"expected {channel.d_out} report counts, got shape {counts.shape}")
    n = counts.sum()
    if n == 0:
        return EmResult(np.full(channel.d, np.nan), 0, math.nan, 0.0)
    x = np.full(channel.d, 1.0 / channel.d) if start is None else np.array(start, float)
    forward, backward = channel.products()  # work buffers of this run
    predicted = forward(x)  # > 0 everywhere: every column of M is at least q·width
    share = counts / n
    ratio, logs = np.empty_like(predicted), np.empty_like(predicted)
    current = float(counts @ np.log(predicted, out=logs))
    change = math.inf
    iterations = 0
    while iterations < max_iterations:
        # E- and M-step in one: Σ_i x_i (Mᵀ(n/Mx))_i = Σ_j n_j = n, so x ← x · Mᵀ((n/N)/Mx)
        # is already normalised
        x *= backward(np.divide(share, predicted, out=ratio))
        if smoothing:
            x = smooth(x)  # keeps the mass
        predicted = forward(x)
        updated = float(counts @ np.log(predicted, out=logs))
        change = abs(updated - current)
        current = updated
        iterations += 1
        if change < tolerance:
            break
    x = np.clip(x, 0.0, None)
    return EmResult(x / x.sum(), iterations, change, current)


# -- the registry's NUMERIC methods ----------------------------------------------------------

def _is_tolerance(value) -> bool:
    return value is None or is_positive_number(value)


def _is_iteration_limit(value) -> bool:
    return is_positive_int(value) and value <= MAX_ITERATIONS_LIMIT


def _run(smoothing: bool):
    def run(counts: np.ndarray, n: int, protocol, *, tolerance=None,
            max_iterations=DEFAULT_MAX_ITERATIONS, **_bootstrap) -> EstimatorOutput:
        """The NUMERIC estimator surface: (statistic, n, protocol, **params)."""
        tau = paper_tolerance(protocol.epsilon, smoothing) if tolerance is None else tolerance
        result = expectation_maximisation(protocol.channel(), counts, smoothing=smoothing,
                                          tolerance=float(tau), max_iterations=max_iterations)
        return EstimatorOutput(result.estimate, iterations=result.iterations,
                               last_change=result.last_change)
    return run


_EM_PARAMETERS = {
    "tolerance": Parameter(None, _is_tolerance,
                           "a positive number (|ΔL| in report counts), or null for [Li20]'s "
                           "10⁻³ (ems) / 10⁻³ e^ε (em)"),
    "max_iterations": Parameter(DEFAULT_MAX_ITERATIONS, _is_iteration_limit,
                                f"an integer in [1, {MAX_ITERATIONS_LIMIT}]"),
    **BOOTSTRAP_PARAMETERS,
}

EM = register(EstimatorMethod(
    "em", NUMERIC, _run(False), _EM_PARAMETERS, ordinal=True,
    summary="expectation maximisation of the report likelihood ([Li20] Algorithm 1)"))
EMS = register(EstimatorMethod(
    "ems", NUMERIC, _run(True), _EM_PARAMETERS, ordinal=True,
    summary="EM with the (1, 2, 1)/4 smoothing step ([Li20] §5.5); the default for sw"))
