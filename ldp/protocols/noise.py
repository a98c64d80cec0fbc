"""The support-set estimator shared by every pure frequency oracle.

A pure protocol lets the server compute, for every value v, the support count c_v: how many
reports "support" v. A user holding v supports it with probability p*, a user holding any other
value with probability q* < p*. From [Wang20] journal §2 (§2.2 and §2.4):

    unbiased estimate    f~_v = (c_v / n - q*) / (p* - q*)
    exact variance       Var[f~_v] = (q*(1 - q*) + f_v (p* - q*)(1 - p* - q*))
                                     / (n (p* - q*)^2)                               (eq. 2)
    uniform noise        sigma^2   = q*(1 - q*) / (n (p* - q*)^2)                    (eq. 7)
    smallest resolvable  2 sqrt(q*(1 - q*) / n) / (p* - q*)                (eq. 2 at f_v = 0)
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class SupportNoise:
    """The noise model of one window's estimate: support probabilities and report count."""

    p_star: float
    q_star: float
    n: int

    def __post_init__(self) -> None:
        if not 0.0 <= self.q_star < self.p_star <= 1.0:
            raise ValueError(f"need 0 <= q* < p* <= 1, got p*={self.p_star}, q*={self.q_star}")
        if self.n < 0:
            raise ValueError(f"n must be >= 0, got {self.n}")

    @property
    def sigma(self) -> float:
        """Standard deviation of the f-independent part of the noise (eq. 7); inf when n = 0."""
        if self.n == 0:
            return float("inf")
        p, q = self.p_star, self.q_star
        return float(np.sqrt(q * (1.0 - q) / (self.n * (p - q) ** 2)))

    def given(self, frequencies: np.ndarray) -> SupportNoise:
        """This noise model for a window whose distribution is estimated by `frequencies` (a
        plug-in, e.g. the Norm-Sub projection of f~): itself, since eq. 2 and 7 need nothing
        more; a model with a term that depends on f (the pooled-hash oracles' collision term,
        ldp_telemetry.ldp.protocols.hash_pool.PoolNoise) takes it into `sigma`."""
        return self

    def for_window(self, unbiased: np.ndarray) -> SupportNoise:
        """This noise model for a window whose unbiased estimate is `unbiased`: itself, since
        eq. 2 and 7 need nothing more; a pooled-hash oracle's (PoolNoise) estimates its
        collision term's Σ f² from it."""
        return self

    def shared_collision(self, other: SupportNoise) -> float:
        """C_ab: the covariance of this window's unbiased estimate of a value with `other`'s
        (another version's reports of the same window), per unit Σ_{x != v} f_x². 0: reports
        made apart are independent unless both versions hash values through one public pool
        (ldp_telemetry.ldp.protocols.hash_pool.PoolNoise)."""
        return 0.0

    @property
    def extra_variance(self) -> float:
        """The part of every value's variance that eq. 2 leaves out and does not depend on the
        value itself: 0 here (a pooled-hash oracle's collision term in PoolNoise)."""
        return 0.0

    @property
    def smallest_resolvable(self) -> float | None:
        """RESOLVABLE_STD_ERRORS · `sigma`, the smallest frequency the window resolves (the
        standard error of a value of frequency 0): `smallest_resolvable`; None when n = 0."""
        return smallest_resolvable(self.p_star, self.q_star, self.n)

    def variance(self, f: np.ndarray) -> np.ndarray:
        """Exact variance of the unbiased estimate when the true frequencies are f (eq. 2).

        Frequencies are clipped to [0, 1] first, so a plug-in estimate (which may be negative or
        above 1) gives the variance at the nearest valid frequency.
        """
        f = np.clip(np.asarray(f, dtype=np.float64), 0.0, 1.0)
        if self.n == 0:
            return np.full_like(f, np.inf)
        p, q = self.p_star, self.q_star
        return (q * (1.0 - q) + f * (p - q) * (1.0 - p - q)) / (self.n * (p - q) ** 2)


def unbiased_estimate(support_counts: np.ndarray, noise: SupportNoise) -> np.ndarray:
    """f~_v = (c_v / n - q*) / (p* - q*) for every value (§2.2); NaN everywhere when n = 0."""
    counts = np.asarray(support_counts, dtype=np.float64)
    if noise.n == 0:
        return np.full_like(counts, np.nan)
    return (counts / noise.n - noise.q_star) / (noise.p_star - noise.q_star)


def standard_error(frequencies: np.ndarray, noise: SupportNoise) -> np.ndarray:
    """Standard error of the unbiased estimate: sqrt of eq. 2 at `frequencies` clipped to [0, 1].

    `frequencies` is an estimate of the true distribution to plug into eq. 2;
    ldp_telemetry.ldp.engine.finalize uses the Norm-Sub projection of the unbiased estimate (see
    finalize_window for why).
    """
    return np.sqrt(noise.variance(frequencies))


#: The smallest frequency a window resolves is this many standard errors of the unbiased estimate
#: of a value of frequency 0.
RESOLVABLE_STD_ERRORS = 2.0


def smallest_resolvable(p_star: float, q_star: float, n: int) -> float | None:
    """RESOLVABLE_STD_ERRORS standard errors of the unbiased estimate of a value of frequency 0
    at n reports: 2·sqrt(q*(1 − q*) / n) / (p* − q*)  ([Wang20] journal eq. 2 at f_v = 0).

    A true frequency below it is indistinguishable from 0 in the window; None when n = 0.
    """
    if n <= 0:
        return None
    return RESOLVABLE_STD_ERRORS * math.sqrt(q_star * (1 - q_star) / n) / (p_star - q_star)
