"""EM and EMS reconstruction of a numeric distribution from a report histogram ([Li20] §5.5).

Given the report counts n_j over d̃ output buckets and the transition model M (a
`ldp_telemetry.ldp.protocols.channels.Channel`), EM ([Li20] Algorithm 1) iterates

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
Square Wave, through the channel's `products` (input and work buffers reused within one run),
and two dot products that bound ΔL (see `expectation_maximisation`): the logarithms of L are
taken only where those bounds leave the rule open, a few times a run.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ldp_telemetry.ldp.base.registration import Parameter
from ldp_telemetry.ldp.base.validation import is_positive_int, is_positive_number
from ldp_telemetry.ldp.estimation.estimators import METHODS, EstimatorMethod, EstimatorOutput
from ldp_telemetry.ldp.estimation.uncertainty import BOOTSTRAP_PARAMETERS
from ldp_telemetry.ldp.protocols.base import NUMERIC
from ldp_telemetry.ldp.protocols.channels import Channel
from ldp_telemetry.ldp.protocols.sw import DiscreteSquareWave, SquareWave

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

    The stopping rule needs ΔL = Σ_j n_j ln(y'_j / y_j) (y = M x before, y' after the
    iteration). Its bounds 1 − 1/a ≤ ln a ≤ a − 1 give, from the ratios share/y that the
    E-steps compute anyway, N (1 − (share/y')·y) ≤ ΔL ≤ N ((share/y)·y' − 1) for two dot
    products; the logarithms are taken only when the bounds do not settle |ΔL| < τ, so the
    iterations run are those of the rule itself. ΔL as one sum of log ratios is exact to
    rounding, where the difference of two log-likelihoods L' − L loses the digits of |L|
    (|L| ≈ 5·10⁸ at n = 10⁸: steps of 2⁻²³ ≈ 10⁻⁷); with a τ near that floor it can stop
    at another iteration than the difference would; at the defaults (τ ≥ 10⁻³) they agree.
    """
    counts = np.asarray(counts, dtype=np.float64)
    if counts.shape != (channel.d_out,):
        raise ValueError(f"expected {channel.d_out} report counts, got shape {counts.shape}")
    n = counts.sum()
    if n == 0:
        return EmResult(np.full(channel.d, np.nan), 0, math.nan, 0.0)
    forward, backward = channel.products()  # work buffers of this run
    x, ratio = forward.input, backward.input  # M x reads x, Mᵀ r reads ratio, in place
    # EMS keeps x scaled by 4 (the smoothing's (1, 2, 1) without its 1/4): EM's update and
    # the stopping rule's ratios do not depend on the scale of x
    scale = 4.0 if smoothing else 1.0
    x[:] = scale / channel.d if start is None else scale * np.asarray(start, float)
    smooth_step = _SmoothingStep(x) if smoothing else None
    unsmoothed = smooth_step.input if smooth_step is not None else x
    share = counts / n
    # rounding of N·(a·b) − N: below N·d̃·2⁻⁵² (a·b ≈ 1, d̃ positive terms)
    margin = 4.0 * n * channel.d_out * np.finfo(float).eps
    undecided = tolerance - margin  # bounds within ±this settle |ΔL| < τ
    settled = tolerance + margin  # a bound beyond ±this settles |ΔL| ≥ τ
    predicted = forward()  # > 0 everywhere: every column of M is at least q·width
    np.divide(share, predicted, out=ratio)
    change: float | None = math.inf  # |ΔL| of the last iteration, where computed
    iterations = 0
    while iterations < max_iterations:
        # E- and M-step in one: Σ_i x_i (Mᵀ(n/N / Mx))_i = Σ_j n_j/N = 1, so
        # x ← x · Mᵀ(share / Mx) is already normalised
        np.multiply(x, backward(), out=unsmoothed)
        if smooth_step is not None:
            smooth_step()  # x ← 4 S(unsmoothed), the mass kept
        previous, predicted = predicted, forward()
        upper_ratio = ratio @ predicted  # ratio = share / previous
        np.divide(share, predicted, out=ratio)  # the next E-step's ratio
        lower = n - n * (ratio @ previous)
        iterations += 1
        change = None
        if lower >= settled:
            continue  # ΔL ≥ τ
        upper = n * upper_ratio - n
        if upper < undecided and lower > -undecided:
            break  # |ΔL| < τ
        if upper > -settled:  # the bounds leave it open
            change = abs(float(counts @ np.log(predicted / previous)))
            if change < tolerance:
                break
    if change is None:
        change = abs(float(counts @ np.log(predicted / previous)))
    estimate = np.clip(x, 0.0, None)
    return EmResult(estimate / estimate.sum(), iterations, change,
                    log_likelihood(counts, predicted / scale))


class _SmoothingStep:
    """4 S u written into `out` by two additions: u sits inside a buffer with one ghost cell
    at each end, a copy of its edge value, so (u_{k−1} + u_k) + (u_k + u_{k+1}) is also the
    mass-keeping edge rule 4 (3u_0 + u_1)/4. Write u into `input`, then call."""

    def __init__(self, out: np.ndarray):
        padded, pairs = np.zeros(len(out) + 2), np.empty(len(out) + 1)
        self.input = padded[1:-1]
        self._padded, self._out = padded, out
        self._halves = padded[:-1], padded[1:], pairs, pairs[:-1], pairs[1:]

    def __call__(self) -> None:
        padded = self._padded
        padded[0], padded[-1] = padded[1], padded[-2]
        left, right, pairs, pairs_left, pairs_right = self._halves
        np.add(left, right, out=pairs)
        np.add(pairs_left, pairs_right, out=self._out)


# -- the registry's NUMERIC methods ----------------------------------------------------------

def _is_tolerance(value: object) -> bool:
    return value is None or is_positive_number(value)


def _is_iteration_limit(value: object) -> bool:
    return is_positive_int(value) and value <= MAX_ITERATIONS_LIMIT


def _run(smoothing: bool) -> Callable[..., EstimatorOutput]:
    def run(counts: np.ndarray, n: int, protocol: SquareWave | DiscreteSquareWave, *,
            tolerance: float | None = None, max_iterations: int = DEFAULT_MAX_ITERATIONS,
            **_bootstrap: object) -> EstimatorOutput:
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

EM = METHODS.register(EstimatorMethod(
    "em", NUMERIC, _run(False), _EM_PARAMETERS, ordinal=True,
    summary="expectation maximisation of the report likelihood ([Li20] Algorithm 1)"))
EMS = METHODS.register(EstimatorMethod(
    "ems", NUMERIC, _run(True), _EM_PARAMETERS, ordinal=True,
    summary="EM with the (1, 2, 1)/4 smoothing step ([Li20] §5.5); the default for sw"))
