"""Transition models of numeric mechanisms: M[j, i] = Pr[report in output bucket j | input in bucket i].

EM ([Li20] Algorithm 1) needs two products per iteration, y = M x and z = Mᵀ r. For Square Wave
M is a constant plus a band ([Li20] §5.5: the report density is q everywhere and p inside the
plateau |ỹ − v| ≤ b), so both products take O(d + d̃) operations with cumulative sums instead
of O(d · d̃) with a dense matrix. Each model also builds its dense matrix (for tests and small
domains). Models are cached per configuration (`square_wave_channel`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np


class Channel:
    """A d̃ × d column-stochastic transition matrix, applied without forming it."""

    d: int  # input buckets
    d_out: int  # output buckets

    def forward(self, x: np.ndarray) -> np.ndarray:
        """M x (length d̃) for x of length d."""
        raise NotImplementedError

    def backward(self, r: np.ndarray) -> np.ndarray:
        """Mᵀ r (length d) for r of length d̃."""
        raise NotImplementedError

    def dense(self) -> np.ndarray:
        """M as a (d̃, d) array, column by column."""
        return np.column_stack([self.forward(e) for e in np.eye(self.d)])


class _DoubleIntegral:
    """Q(s) = ∫∫ ρ at fixed points s, for a density ρ constant on each bucket of a grid.

    With C the integral of ρ up to each edge and Q its integral, inside bucket k at distance δ
    from its left edge Q(s) = Q_k + C_k δ + ρ_k δ²/2; left of the grid Q = 0, right of it
    Q grows with slope C_last. Two cumulative sums and three gathers: O(buckets + points).
    """

    def __init__(self, edges: np.ndarray, points: np.ndarray):
        k = np.clip(np.searchsorted(edges, points, side="right") - 1, 0, len(edges) - 1)
        self._k = k
        self._delta = np.clip(points - edges[k], 0.0, None)  # 0 left of the grid
        self._half_delta2 = 0.5 * self._delta ** 2
        self._widths = np.diff(edges)

    def __call__(self, density: np.ndarray) -> np.ndarray:
        mass = density * self._widths
        c = np.zeros(len(mass) + 1)
        np.cumsum(mass, out=c[1:])
        q = np.zeros(len(mass) + 1)
        np.cumsum(self._widths * (c[:-1] + 0.5 * mass), out=q[1:])
        k = self._k
        rho = np.append(density, 0.0)  # no density right of the grid
        return q[k] + c[k] * self._delta + rho[k] * self._half_delta2


@dataclass(frozen=True, eq=False)
class SquareWaveChannel(Channel):
    """Continuous Square Wave, randomise-then-bucketise ([Li20] §5.4 "R-B").

    Inputs: B buckets of [0, 1], the value uniform within its bucket. Reports: density p on
    [v − b, v + b], q elsewhere on [−b, 1 + b] ([Li20] eq. 3), counted in d̃ equal buckets of
    [−b, 1 + b]. With a_j the output edges and l_i the input edges (width h = 1/B),

        M[j, i] = q (a_{j+1} − a_j) + (p − q)/h ∫_{l_i}^{l_{i+1}} |[a_j, a_{j+1}) ∩ [t − b, t + b]| dt

    (the plateau's overlap with output bucket j, averaged over the input bucket). Column sums
    are q(1 + 2b) + (p − q) 2b = 1. Products without M: for an input density f (x_i/h on
    bucket i), the band part of (M x)_j is (p − q) ∫_{a_j}^{a_{j+1}} (F(s + b) − F(s − b)) ds,
    a difference of the double integral H of f at a_j ± b; for Mᵀ r, the same with the
    density r_j on output bucket j, integrated over each input bucket and divided by h.
    """

    d: int
    d_out: int
    b: float
    p: float
    q: float
    out_edges: np.ndarray = field(init=False, repr=False)
    in_edges: np.ndarray = field(init=False, repr=False)

    def __post_init__(self):
        out_edges = np.linspace(-self.b, 1.0 + self.b, self.d_out + 1)
        in_edges = np.linspace(0.0, 1.0, self.d + 1)
        object.__setattr__(self, "out_edges", out_edges)
        object.__setattr__(self, "in_edges", in_edges)
        b = self.b
        object.__setattr__(self, "_of_input", _DoubleIntegral(
            in_edges, np.concatenate((out_edges + b, out_edges - b))))
        object.__setattr__(self, "_of_output", _DoubleIntegral(
            out_edges, np.concatenate((in_edges + b, in_edges - b))))
        object.__setattr__(self, "_flat", self.q * (1.0 + 2.0 * b) / self.d_out)

    def forward(self, x):
        x = np.asarray(x, dtype=np.float64)
        h = self._of_input(x * self.d)  # density x_i / (1/d)
        n = self.d_out + 1
        return self._flat * x.sum() + (self.p - self.q) * np.diff(h[:n] - h[n:])

    def backward(self, r):
        r = np.asarray(r, dtype=np.float64)
        h = self._of_output(r)
        n = self.d + 1
        return self._flat * r.sum() + (self.p - self.q) * self.d * np.diff(h[:n] - h[n:])


@dataclass(frozen=True, eq=False)
class DiscreteSquareWaveChannel(Channel):
    """Discrete Square Wave, bucketise-then-randomise ([Li20] §5.4 "B-R").

    Input i in [0, d), output j in [0, d + 2b): M[j, i] = p if i ≤ j ≤ i + 2b, else q. Products
    are a constant plus a moving sum of width 2b + 1 (prefix sums).
    """

    d: int
    b: int
    p: float
    q: float

    @property
    def d_out(self) -> int:
        return self.d + 2 * self.b

    def forward(self, x):
        x = np.asarray(x, dtype=np.float64)
        c = np.concatenate(([0.0], np.cumsum(x)))
        j = np.arange(self.d_out)
        window = c[np.minimum(j + 1, self.d)] - c[np.clip(j - 2 * self.b, 0, self.d)]
        return self.q * c[-1] + (self.p - self.q) * window

    def backward(self, r):
        r = np.asarray(r, dtype=np.float64)
        c = np.concatenate(([0.0], np.cumsum(r)))
        i = np.arange(self.d)
        return self.q * c[-1] + (self.p - self.q) * (c[i + 2 * self.b + 1] - c[i])


@lru_cache(maxsize=64)
def square_wave_channel(epsilon: float, d: int, d_out: int) -> SquareWaveChannel:
    """The continuous Square Wave model of one configuration, built once."""
    from ldp_telemetry.ldp.protocols.sw import sw_b, sw_pq
    b = sw_b(epsilon)
    p, q = sw_pq(epsilon, b)
    return SquareWaveChannel(d, d_out, b, p, q)


@lru_cache(maxsize=64)
def discrete_square_wave_channel(epsilon: float, d: int) -> DiscreteSquareWaveChannel:
    """The discrete Square Wave model of one configuration, built once."""
    from ldp_telemetry.ldp.protocols.sw import discrete_sw_parameters
    b, p, q = discrete_sw_parameters(epsilon, d)
    return DiscreteSquareWaveChannel(d, b, p, q)
