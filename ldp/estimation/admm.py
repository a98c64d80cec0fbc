"""The `admm` NUMERIC estimator of hierarchical histograms: HH-ADMM ([Li20] §4.3, eq. 2).

From the unbiased node frequencies x~ of every depth (ldp_telemetry.ldp.protocols.hh), find

    x̂ = argmin ½ Σ_ℓ w_ℓ ‖x_ℓ − x~_ℓ‖²   s.t.  A x = 0 (parent = sum of its 4 children),
                                               x ≥ 0,  x_root = 1

with w_ℓ = 1 at every depth with reports ([Li20] eq. 2 is the unweighted L2 norm) and 0 at a
depth without any. ADMM ([Li20]'s reference [7], scaled form) splits x (consistent, root 1)
from z (non-negative):

    x ← Π( (w x~ + ρ (z − u)) / (w + ρ) )     Π: the (w + ρ)-weighted least-squares projection
                                                onto {A x = 0, x_root = 1}
    z ← max(x + u, 0)
    u ← u + x − z

until the primal residual max|x − z| and the dual residual ρ·max|z − z_prev| are both below
`tolerance`, or `max_iterations`. Π is exact and O(nodes): a bottom-up pass forms each node's
best estimate of its subtree total from its subtree alone, z_v = (w_v y_v + π_c/4 · Σ z_c) /
(w_v + π_c/4) with π the precision of that estimate, and a top-down pass, starting from
x_root = 1, moves the 4 children of every node by the same amount so that they sum to it
(siblings have equal precision, so the equal shift is the least-squares one; the constrained
inference of [Li20]'s reference [17], here with the root fixed). The estimate is the leaf level
of x clipped at 0 and renormalised, a change below `tolerance` per bucket at convergence, so
the result is exactly a distribution and exactly tree-consistent.
"""
from __future__ import annotations

import numpy as np

from ldp_telemetry.ldp.base.registration import Parameter
from ldp_telemetry.ldp.base.validation import is_positive_int, is_positive_number
from ldp_telemetry.ldp.estimation.estimators import METHODS, EstimatorMethod, EstimatorOutput
from ldp_telemetry.ldp.estimation.uncertainty import BOOTSTRAP_PARAMETERS
from ldp_telemetry.ldp.protocols.base import NUMERIC
from ldp_telemetry.ldp.protocols.hh import BRANCHING, HierarchicalHistogram

#: Most ADMM iterations a registry may ask for (each costs O(nodes) numpy work).
MAX_ADMM_ITERATIONS = 100_000


def child_sums(level: np.ndarray) -> np.ndarray:
    """Sum of every group of 4 siblings along the last axis: the children totals of the level
    above (of every row, for a 2-D array of levels)."""
    return level.reshape(level.shape[:-1] + (-1, BRANCHING)).sum(axis=-1)


def tree_projection(targets: list[np.ndarray], weights: np.ndarray) -> list[np.ndarray]:
    """argmin Σ_ℓ weights[ℓ] ‖x_ℓ − targets[ℓ]‖² over tree-consistent x with root 1.

    `targets[ℓ]`: length 4^ℓ for depth ℓ = 0..h (targets[0], the root, is ignored: it is 1);
    `weights`: length h + 1, positive at depth h. Returns the levels of x.
    """
    h = len(targets) - 1
    subtree = [np.empty(0)] * (h + 1)
    subtree[h] = np.asarray(targets[h], dtype=np.float64)
    precision = float(weights[h])
    for depth in range(h - 1, 0, -1):
        below = precision / BRANCHING
        own = float(weights[depth])
        subtree[depth] = (own * targets[depth] + below * child_sums(subtree[depth + 1])) \
            / (own + below)
        precision = own + below
    levels = [np.ones(1)]
    for depth in range(1, h + 1):
        gap = levels[depth - 1] - child_sums(subtree[depth])
        levels.append(subtree[depth] + np.repeat(gap / BRANCHING, BRANCHING))
    return levels


def admm(estimates: list[np.ndarray], weights: np.ndarray, rho: float, tolerance: float,
         max_iterations: int) -> tuple[list[np.ndarray], int, float]:
    """HH-ADMM ([Li20] eq. 2) from the unbiased levels `estimates` (depth 1..h, NaN-free).

    Returns (x levels, depth 0..h; iterations; the last max(primal, dual) residual).
    """
    sizes = [1] + [len(level) for level in estimates]
    bounds = np.cumsum([0] + sizes)
    tilde = np.concatenate([np.ones(1), *estimates])
    w = np.repeat(np.concatenate([[0.0], weights]), sizes)
    scale = w + rho
    z = np.maximum(tilde, 0.0)
    u = np.zeros_like(tilde)
    level_weights = np.concatenate([[0.0], weights]) + rho
    residual = np.inf
    iterations = 0
    while iterations < max_iterations:
        iterations += 1
        target = (w * tilde + rho * (z - u)) / scale
        x = np.concatenate(tree_projection(
            [target[bounds[i]: bounds[i + 1]] for i in range(len(sizes))], level_weights))
        previous = z
        z = np.maximum(x + u, 0.0)
        u += x - z
        residual = max(float(np.abs(x - z).max()), rho * float(np.abs(z - previous).max()))
        if residual <= tolerance:
            break
    return [x[bounds[i]: bounds[i + 1]] for i in range(len(sizes))], iterations, residual


def _hh_admm(statistic: np.ndarray, n: int, protocol: HierarchicalHistogram, rho: float,
             tolerance: float, max_iterations: int, **_bootstrap: object) -> EstimatorOutput:
    reports, estimates = protocol.level_estimates(statistic)
    weights = (reports > 0).astype(np.float64)  # a depth without reports has no say
    filled = [np.nan_to_num(level, nan=1.0 / len(level)) for level in estimates]
    levels, iterations, residual = admm(filled, weights, rho, tolerance, max_iterations)
    leaves = np.maximum(levels[-1], 0.0)
    return EstimatorOutput(leaves / leaves.sum(), iterations=iterations, last_change=residual)


ADMM = METHODS.register(EstimatorMethod(
    "admm", NUMERIC, _hh_admm,
    {"rho": Parameter(1.0, is_positive_number, "a positive number"),
     "tolerance": Parameter(1e-7, is_positive_number, "a positive number"),
     "max_iterations": Parameter(
         10_000, lambda v: is_positive_int(v) and v <= MAX_ADMM_ITERATIONS,
         f"an integer in [1, {MAX_ADMM_ITERATIONS}]"),
     **BOOTSTRAP_PARAMETERS},
    summary="HH-ADMM: the hierarchy's level estimates made non-negative, summing to 1 and "
            "tree-consistent by ADMM ([Li20] §4.3)"))
