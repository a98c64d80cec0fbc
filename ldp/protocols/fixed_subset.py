"""Fixed-size subsets, the family of SS and RWS ([Fang25] §3.4, §4.3).

A report supports k values: with probability p = k e^ε / (k e^ε + d - k) the true value plus
k - 1 others, otherwise k others, the others a uniform subset of the d - 1 values != v. So
p* = p and q* = p (k-1)/(d-1) + (1 - p) k/(d-1). k is floor or ceil of d / (e^ε + 1),
whichever has the lower n·MSE (eq. 4), clipped to [1, d - 1] (k = 1 is GRR).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ldp_telemetry.ldp.protocols.base import FrequencyOracle, pure_n_mse
from ldp_telemetry.ldp.protocols.local_hashing import better_rounding


def subset_support(epsilon: float, d: int, k: int) -> tuple[float, float]:
    """(p*, q*) of a protocol whose output supports a k-subset holding v with k e^ε/(k e^ε+d-k)."""
    e = math.exp(epsilon)
    p = k * e / (k * e + d - k)
    return p, p * (k - 1) / (d - 1) + (1 - p) * k / (d - 1)


def subset_n_mse(epsilon: float, d: int, k: int) -> float:
    """n·MSE (eq. 4) of a fixed-size-k subset protocol (SS, RWS; eq. 15)."""
    return pure_n_mse(*subset_support(epsilon, d, k), d)


@dataclass(frozen=True)
class FixedSizeSubset(FrequencyOracle):
    """Shared parameters of the fixed-size subset protocols (SS, RWS): k, p*, q*, the variance."""

    k: int = field(init=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        target = self.d / (math.exp(self.epsilon) + 1)
        candidates = [min(self.d - 1, max(1, f(target))) for f in (math.floor, math.ceil)]
        object.__setattr__(self, "k", better_rounding(
            candidates, lambda k: subset_n_mse(self.epsilon, self.d, k)))

    @property
    def parameter(self) -> str:
        return f"k={self.k}"

    @property
    def p_star(self) -> float:
        return subset_support(self.epsilon, self.d, self.k)[0]

    @property
    def q_star(self) -> float:
        return subset_support(self.epsilon, self.d, self.k)[1]

    def _report_variance(self, w: np.ndarray) -> np.ndarray:
        """Var[Y | x] when the support is x plus k - 1 of the N = d - 1 others drawn uniformly
        without replacement (probability p*), else k of them.

        With mu = (W - w_x)/N and s^2 = (Q - w_x^2)/N - mu^2 the mean and population variance
        of the others' weights (W = Σ w, Q = Σ w^2), a sum of m of them has variance
        V_m = m (N - m) / (N - 1) s^2 (0 when N = 1), and by the law of total variance
            Var[Y | x] = p* V_{k-1} + (1 - p*) V_k + p*(1 - p*) (w_x - mu)^2.
        A report supports exactly k values, so the whole domain has variance 0. Y shifts by a
        constant with w, so w is centred first (for accuracy).
        """
        p, k = self.p_star, self.k
        w = w - w.mean()
        others = w.size - 1
        mean = (w.sum() - w) / others  # of the others' weights
        spread = np.maximum((np.dot(w, w) - w ** 2) / others - mean ** 2, 0.0)

        def draw_variance(m: int) -> np.ndarray:  # sum of m of the others, without replacement
            return m * (others - m) / (others - 1) * spread if others > 1 else np.zeros_like(w)

        return (p * draw_variance(k - 1) + (1 - p) * draw_variance(k)
                + p * (1 - p) * (w - mean) ** 2)
