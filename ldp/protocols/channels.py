"""Transition models of numeric mechanisms:
M[j, i] = Pr[report in output bucket j | input in bucket i].

EM ([Li20] Algorithm 1) needs two products per iteration, y = M x and z = Mᵀ r. For Square Wave
M is a constant plus a band ([Li20] §5.5: the report density is q everywhere and p inside the
plateau |ỹ − v| ≤ b), so both products take O(d + d̃) operations with cumulative sums instead
of O(d · d̃) with a dense matrix. Each model also builds its dense matrix (for tests and small
domains). Models are cached per configuration (`square_wave_channel`). The Square Wave parameters
(`sw_b`, `sw_pq`, `discrete_sw_parameters`) live here, with the channels they define.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

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

    def products(self) -> tuple[Product, Product]:
        """(M·, Mᵀ·) for one caller's repeated use (an EM run): each has its own `input`
        buffer to write into and work buffers of its own, so not to be shared between
        threads."""
        return (Product(self.d, self.forward), Product(self.d_out, self.backward))


class Product:
    """A linear map applied to its own input buffer: write into `input`, then call.

    The caller writes the vector in place (no copy per call); the result is a new array.
    """

    def __init__(self, size: int, apply: Callable[[np.ndarray], np.ndarray],
                 buffer: np.ndarray | None = None) -> None:
        self.input = np.zeros(size) if buffer is None else buffer
        self._apply = apply

    def __call__(self) -> np.ndarray:
        return self._apply(self.input)


class _PlateauOperator:
    """The product with a Square Wave model's matrix from one side, in O(buckets + points).

    A density constant on each of K equal buckets (width w, masses m_k) has the running
    integral c (c_0 = 0, c_{k+1} = c_k + m_k) and the double integral Q, which at distance δ
    into bucket k is Q = w Σ_{t<k} c_t + (w/2 + δ) c_k + (δ²/2w) m_k (right of the grid: k = K,
    m_K = 0; left of it: Q = 0). The product's output i is

        scale · ((Q(s⁺_{i+1}) − Q(s⁻_{i+1})) − (Q(s⁺_i) − Q(s⁻_i))) + flat · c_K

    at fixed points s±, linear in v = [Σ_{t≤k} c_t, c_k, m_k]: one sparse matrix with at most
    13 entries a row, built once. A product is then two cumulative sums and one sparse product.
    """

    def __init__(self, edges: np.ndarray, plus: np.ndarray, minus: np.ndarray, scale: float,
                 flat: float):
        from scipy import sparse
        buckets = len(edges) - 1
        width = (edges[-1] - edges[0]) / buckets
        size = buckets + 1  # each block of v: indices 0..K
        rows, cols, values = [], [], []
        for sign, points in ((1.0, plus), (-1.0, minus)):
            k = np.clip(np.floor((points - edges[0]) / width).astype(np.int64), 0, buckets)
            delta = np.where(points < edges[0], 0.0, points - (edges[0] + k * width))
            inside = points >= edges[0]
            for row_sign, offset in ((1.0, 1), (-1.0, 0)):  # output i: point i+1 minus point i
                point_rows = np.arange(len(points)) - offset
                valid = (point_rows >= 0) & (point_rows < len(points) - 1) & inside
                r = point_rows[valid]
                kk, dd = k[valid], delta[valid]
                factor = sign * row_sign * scale
                # w Σ_{t<k} c_t = w (Σ_{t≤k−1} c_t): block 0 at index k − 1 (nothing for k = 0)
                has_prefix = kk >= 1
                rows += [r[has_prefix], r, r]
                cols += [kk[has_prefix] - 1, size + kk, 2 * size + kk]
                values += [np.full(has_prefix.sum(), factor * width),
                           factor * (0.5 * width + dd), factor * dd * dd / (2.0 * width)]
        n_out = len(plus) - 1
        rows.append(np.arange(n_out))
        cols.append(np.full(n_out, size + buckets))  # c_K, the total mass
        values.append(np.full(n_out, flat))
        self._matrix = sparse.csr_matrix(
            (np.concatenate(values), (np.concatenate(rows), np.concatenate(cols))),
            shape=(n_out, 3 * size))
        self._size = size

    def __call__(self, mass: np.ndarray) -> np.ndarray:
        """The product with `mass`."""
        product = self.product()
        product.input[:] = mass
        return product()

    def product(self) -> Product:
        """The product reading its input in place: `input` is the m block of one work vector
        v = [Σ_{t≤k} c_t, c_k, m_k], so a call is two running sums and one sparse product
        (one EM run's buffers, not thread-safe)."""
        size, matrix = self._size, self._matrix
        v = np.zeros(3 * size)  # v[size] (c_0) and v[-1] (m_K) stay 0
        running, masses = v[size + 1:2 * size], v[2 * size:3 * size - 1]
        double, c = v[:size], v[size:2 * size]
        accumulate = np.add.accumulate  # np.cumsum's loop, without its dispatch overhead
        sparse_product = _sparse_product(matrix)

        def apply(_masses: np.ndarray) -> np.ndarray:
            accumulate(masses, out=running)
            accumulate(c, out=double)
            return sparse_product(v)
        return Product(size - 1, apply, masses)


def _sparse_product(matrix: Any, kernel: Any = None) -> Callable[[np.ndarray], np.ndarray]:
    """`matrix @ v` as a function of v, through scipy's compiled CSR kernel where this scipy
    has it (`scipy.sparse._sparsetools.csr_matvec`, y += A v, without `@`'s checks: a third
    of the time of a product at d = 1024) and through `@` otherwise."""
    kernel = _csr_matvec() if kernel is None else kernel
    if not kernel:
        return matrix.__matmul__
    rows, columns = matrix.shape
    indptr, indices, data = matrix.indptr, matrix.indices, matrix.data
    zeros = np.zeros

    def product(v: np.ndarray) -> np.ndarray:
        out = zeros(rows)
        kernel(rows, columns, indptr, indices, data, v, out)
        return out
    return product


def _csr_matvec() -> Any:
    """scipy's compiled CSR kernel, or False for a scipy without it (`@` gives the same
    product). Imported on first use: the commands that need no estimation never load scipy."""
    try:
        from scipy.sparse._sparsetools import csr_matvec
    except ImportError:
        return False
    return csr_matvec


@dataclass(frozen=True, eq=False)
class SquareWaveChannel(Channel):
    """Continuous Square Wave, randomise-then-bucketise ([Li20] §5.4 "R-B").

    Inputs: B buckets of [0, 1], the value uniform within its bucket. Reports: density p on
    [v − b, v + b], q elsewhere on [−b, 1 + b] ([Li20] eq. 3), counted in d̃ equal buckets of
    [−b, 1 + b]. With a_j the output edges and l_i the input edges (width h = 1/B),

        M[j, i] = q (a_{j+1} − a_j)
                  + (p − q)/h ∫_{l_i}^{l_{i+1}} |[a_j, a_{j+1}) ∩ [t − b, t + b]| dt

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
    _forward: _PlateauOperator = field(init=False, repr=False)
    _backward: _PlateauOperator = field(init=False, repr=False)

    def __post_init__(self) -> None:
        out_edges = np.linspace(-self.b, 1.0 + self.b, self.d_out + 1)
        in_edges = np.linspace(0.0, 1.0, self.d + 1)
        object.__setattr__(self, "out_edges", out_edges)
        object.__setattr__(self, "in_edges", in_edges)
        b, band = self.b, self.p - self.q
        flat = self.q * (1.0 + 2.0 * b) / self.d_out
        width_out = (1.0 + 2.0 * b) / self.d_out
        # M x: masses x_i on the input grid, read at the output edges ± b
        object.__setattr__(self, "_forward", _PlateauOperator(
            in_edges, out_edges + b, out_edges - b, band, flat))
        # Mᵀ r: masses r_j · w̃ on the output grid (density r_j), read at the input edges ± b,
        # divided by h = 1/d; the operator takes r itself, so its matrix carries the factor w̃
        # (the flat part q w̃ Σ r = flat Σ r)
        object.__setattr__(self, "_backward", _PlateauOperator(
            out_edges, in_edges + b, in_edges - b, band * self.d * width_out, flat))

    def forward(self, x: np.ndarray) -> np.ndarray:
        return self._forward(np.asarray(x, dtype=np.float64))

    def backward(self, r: np.ndarray) -> np.ndarray:
        return self._backward(np.asarray(r, dtype=np.float64))

    def products(self) -> tuple[Product, Product]:
        return self._forward.product(), self._backward.product()

    def interval_column(self, low: float, high: float) -> np.ndarray:
        """The report-bucket probabilities (length d̃) of a value uniform on [low, high] ⊂
        [0, 1] (low < high): the column M would have for that input interval,

            q (a_{j+1} − a_j)
              + (p − q)/(high − low) ∫_low^high |[a_j, a_{j+1}) ∩ [t − b, t + b]| dt,

        the integral being K(a_{j+1} − low) − K(a_{j+1} − high) − K(a_j − low) + K(a_j − high)
        with K(z) = ∫_{−∞}^z min(max(y + b, 0), 2b) dy."""
        b, a = self.b, self.out_edges

        def k(z: np.ndarray) -> np.ndarray:
            inside = np.clip(z + b, 0.0, 2.0 * b)
            return np.where(z > b, 2.0 * b * b + 2.0 * b * (z - b), 0.5 * inside * inside)
        area = k(a[1:] - low) - k(a[1:] - high) - k(a[:-1] - low) + k(a[:-1] - high)
        return self.q * np.diff(a) + (self.p - self.q) * area / (high - low)


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
    def d_out(self) -> int:  # type: ignore[override]  # read-only here: it follows from d and b
        return self.d + 2 * self.b

    def forward(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        c = np.concatenate(([0.0], np.cumsum(x)))
        j = np.arange(self.d_out)
        window = c[np.minimum(j + 1, self.d)] - c[np.clip(j - 2 * self.b, 0, self.d)]
        return self.q * c[-1] + (self.p - self.q) * window

    def backward(self, r: np.ndarray) -> np.ndarray:
        r = np.asarray(r, dtype=np.float64)
        c = np.concatenate(([0.0], np.cumsum(r)))
        i = np.arange(self.d)
        return self.q * c[-1] + (self.p - self.q) * (c[i + 2 * self.b + 1] - c[i])


def sw_b(epsilon: float) -> float:
    """Half-width b of the plateau ([Li20] §5.3); tends to 1/2 as ε → 0 and to 0 as ε → ∞."""
    e = math.exp(epsilon)
    excess = math.expm1(epsilon) - epsilon  # e^ε − 1 − ε, accurate for small ε
    return (epsilon * e - math.expm1(epsilon)) / (2.0 * e * excess)


def sw_pq(epsilon: float, b: float) -> tuple[float, float]:
    """Plateau and floor densities p = e^ε/(2b e^ε + 1), q = 1/(2b e^ε + 1) ([Li20] §5.2)."""
    e = math.exp(epsilon)
    return e / (2.0 * b * e + 1.0), 1.0 / (2.0 * b * e + 1.0)


def discrete_sw_parameters(epsilon: float, d: int) -> tuple[int, float, float]:
    """(b, p, q) of the discrete Square Wave over d buckets ([Li20] §5.4)."""
    b = int(math.floor(sw_b(epsilon) * d))
    e = math.exp(epsilon)
    total = (2 * b + 1) * e + d - 1
    return b, e / total, 1.0 / total


@lru_cache(maxsize=64)
def square_wave_channel(epsilon: float, d: int, d_out: int) -> SquareWaveChannel:
    """The continuous Square Wave model of one configuration, built once."""
    b = sw_b(epsilon)
    p, q = sw_pq(epsilon, b)
    return SquareWaveChannel(d, d_out, b, p, q)


@lru_cache(maxsize=64)
def discrete_square_wave_channel(epsilon: float, d: int) -> DiscreteSquareWaveChannel:
    """The discrete Square Wave model of one configuration, built once."""
    b, p, q = discrete_sw_parameters(epsilon, d)
    return DiscreteSquareWaveChannel(d, b, p, q)
