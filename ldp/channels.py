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


class _PlateauSums:
    """s_m = Σ_k Ψ(x_m − y_k) w_k for fixed points x_m and sorted nodes y_k, in O(len(x) + len(y)).

    Ψ is the antiderivative of ψ(s) = clip(s + b, 0, 2b) (the length of [t − b, t + b] below
    t + s): Ψ(s) = 0 for s ≤ −b, (s + b)²/2 for |s| ≤ b, 2bs for s ≥ b. Split at y_k = x_m ∓ b,
    each piece is a polynomial in x_m whose coefficients are prefix sums of w, y w and y² w.
    Nodes are centred (y − c, x − c) to keep the expansion's cancellation small.
    """

    def __init__(self, x: np.ndarray, y: np.ndarray, b: float):
        centre = 0.5 * (y[0] + y[-1])
        x, y = x - centre, y - centre
        lo = np.searchsorted(y, x - b, side="right")  # y_k <= x - b: the linear part 2b(x - y)
        hi = np.searchsorted(y, x + b, side="left")  # x - b < y_k < x + b: (x + b - y)²/2
        z = x + b
        self._powers = np.stack((np.ones_like(y), y, y * y))  # prefix sums of w, y w, y² w
        index = np.concatenate((lo, hi))
        self._flat_index = np.arange(3)[:, None] * (len(y) + 1) + index[None, :]
        # s = Σ_k coef_lo[k] S_k[lo] + coef_hi[k] S_k[hi] with S_k the prefix sums above
        coef_lo = np.stack((2 * b * x - 0.5 * z * z, z - 2 * b, np.full_like(x, -0.5)))
        coef_hi = np.stack((0.5 * z * z, -z, np.full_like(x, 0.5)))
        self._coef = np.concatenate((coef_lo, coef_hi), axis=1)
        self._m = len(x)

    def __call__(self, w: np.ndarray) -> np.ndarray:
        sums = np.zeros((3, self._powers.shape[1] + 1))
        np.cumsum(self._powers * w, axis=1, out=sums[:, 1:])
        terms = (self._coef * sums.take(self._flat_index)).sum(axis=0)
        return terms[:self._m] + terms[self._m:]


@dataclass(frozen=True, eq=False)
class SquareWaveChannel(Channel):
    """Continuous Square Wave, randomise-then-bucketise ([Li20] §5.4 "R-B").

    Inputs: B buckets of [0, 1], the value uniform within its bucket. Reports: density p on
    [v − b, v + b], q elsewhere on [−b, 1 + b] ([Li20] eq. 3), counted in d̃ equal buckets of
    [−b, 1 + b]. With a_j the output edges and l_i the input edges (width h = 1/B),

        M[j, i] = q (a_{j+1} − a_j) + (p − q)/h · Δ_j Δ_i Ψ(a_j − l_i)

    (the plateau's overlap with output bucket j, averaged over the input bucket; Δ the forward
    differences in j and i, with the sign that makes the overlap positive). Column sums are
    q(1 + 2b) + (p − q) 2b = 1.
    """

    d: int
    d_out: int
    b: float
    p: float
    q: float
    out_edges: np.ndarray = field(init=False, repr=False)
    in_edges: np.ndarray = field(init=False, repr=False)

    def __post_init__(self):
        object.__setattr__(self, "out_edges", np.linspace(-self.b, 1.0 + self.b, self.d_out + 1))
        object.__setattr__(self, "in_edges", np.linspace(0.0, 1.0, self.d + 1))
        object.__setattr__(self, "_by_out", _PlateauSums(self.out_edges, self.in_edges, self.b))
        object.__setattr__(self, "_by_in", _PlateauSums(-self.in_edges, -self.out_edges[::-1],
                                                        self.b))
        object.__setattr__(self, "_band", (self.p - self.q) * self.d)  # (p − q)/h
        object.__setattr__(self, "_flat", self.q * (1.0 + 2.0 * self.b) / self.d_out)

    def forward(self, x):
        x = np.asarray(x, dtype=np.float64)
        # Σ_i x_i (K[·, i] − K[·, i+1]) = Σ_i' K[·, i'] u_i' with u = (x_0, x_1 − x_0, ..., −x_last)
        u = np.diff(x, prepend=0.0, append=0.0)
        return self._flat * x.sum() + self._band * np.diff(self._by_out(u))

    def backward(self, r):
        r = np.asarray(r, dtype=np.float64)
        # Σ_j r_j (K[j+1, i] − K[j, i]) = −Σ_j' K[j', i] s_j' with s = (r_0, r_1 − r_0, ..., −r_last)
        s = np.diff(r, prepend=0.0, append=0.0)
        # Kᵀ s at the input edges: Ψ(a − l) = Ψ((−l) − (−a)), nodes −a in ascending order
        return self._flat * r.sum() + self._band * np.diff(self._by_in(s[::-1]))


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
