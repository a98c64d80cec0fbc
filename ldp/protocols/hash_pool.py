"""Frequency oracles over a bounded pool of k public hash functions: CMS, HCMS and FLH.

Apple's Count-Mean Sketch and Hadamard Count-Mean Sketch ([Apple17]) and Fast Local Hashing
([Cormode21], "FLH") share one structure. A client draws a hash index j
uniformly from [0, k), hashes its value to a bucket a = h_j(v) in [0, m), and reports j with a
bucket-level randomised response about a. The server keeps, per (j, bucket), how many reports
support that bucket: a (k, m) table filled in O(1) (HCMS, FLH) or O(m) (CMS) per report; the
support count of every value follows at finalisation, in O(k·d):

    c_v = Σ_j T[j, h_j(v)].

Hash j is local hashing's keyed hash (ldp_telemetry.ldp.protocols.hashing.local_hash) with the
public seed s_j = splitmix64(POOL_ROOT, j), so clients in any language derive the same pool.

Support. The bucket channel supports the client's own bucket with probability p and any other
bucket with probability q_b; a value v != x is supported when its bucket is, so over the draw of
the pool (hashes 3-wise independent, as local hashing assumes)

    p* = p,   q* = q_b + (p - q_b)/m,

and the support-set estimator f~ = (c/n - q*)/(p* - q*) (ldp_telemetry.ldp.protocols.noise) is
unbiased: it is [Apple17]'s estimator m/(m - 1)·(mean_j M[j, h_j(v)]/n - 1/m) written with p*, q*.

Exact variance. One pool serves every report, so reports are independent given the pool, not
over its draw. With κ(x, v) = (1/k) Σ_j [h_j(x) = h_j(v)] (mean 1/m, variance
σ² = (1/m)(1 - 1/m)/k over the pool), the law of total variance gives, for any weights w and
true frequencies f,

    Var[Σ_v w_v f~_v] = Σ_x f_x V(x) / (n (p* - q*)²)
                        + C·[(Σ f²)(Σ w²) - 2 Σ f_x² w_x² + (Σ f w)² - (1/n) Σ_x f_x (Σ w² - w_x²)]

with C = 1/(k (m - 1)) and V(x) = Var[Σ_v w_v Y_v | x] for one report whose hash is fresh
(`_report_variance`, each protocol's closed form). For one value (w = e_v) the first term is
[Wang20] journal eq. 2 and the second C·(Σ_{x != v} f_x² - (1 - f_v)/n): the hash-collision
term, which does not shrink with n. `PoolNoise` carries it into every window's standard
errors; `linear_variance` into every query's.
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator, Mapping
from dataclasses import InitVar, dataclass, field
from typing import ClassVar

import numpy as np

from ldp_telemetry.ldp.base.errors import RegistryError
from ldp_telemetry.ldp.base.validation import is_int
from ldp_telemetry.ldp.protocols import hashing
from ldp_telemetry.ldp.protocols.base import Columns, FrequencyOracle, int_column
from ldp_telemetry.ldp.protocols.noise import RESOLVABLE_STD_ERRORS, SupportNoise

#: Root of the public hash pool: s_j = splitmix64(POOL_ROOT, j) ("LDP_POOL" in ASCII).
POOL_ROOT = 0x4C44505F504F4F4C
#: Most hash functions k a pool may hold (the statistic has k rows; finalize costs k·d hashes).
MAX_POOL_HASHES = 1 << 16
#: Most buckets m of a sketch (CMS reports m bits; the statistic has k·m cells).
MAX_SKETCH_BUCKETS = 1 << 16
#: Most cells k·m (k·2m for HCMS) of one statistic: 2^24 int64 cells, 128 MiB.
MAX_POOL_CELLS = 1 << 24
#: Most hash evaluations k·d of one window's `support_counts` (about 80 s at the 2·10⁸ a second
#: measured by benchmarks/sketch_cost.py): FLH's default k = 1,024 at the largest domain, 2²⁴.
MAX_POOL_HASH_EVALUATIONS = 1 << 34
#: Hash evaluations per block of `support_counts`: (k x values) uint64, 2 MiB.
_SUPPORT_CELLS = 1 << 18
#: The sketch parameters a configuration may choose and a record carries: k hash functions and m
#: buckets (FLH's g), as the registry's `sketch` object and the window-estimate record's
#: `parameters` name them, mapped to the constructor's keywords.
SKETCH_FIELDS = {"k": "hashes", "m": "buckets"}


def sketch_arguments(parameters: Mapping[str, object]) -> dict[str, object]:
    """The constructor keywords (`hashes`, `buckets`) of a `sketch` / `parameters` mapping
    ({"k": K, "m": M}, either optional); ValueError naming an unknown key. The values are
    checked by the protocol's constructor (RegistryError naming ``sketch.k`` / ``sketch.m``)."""
    unknown = sorted(set(parameters) - set(SKETCH_FIELDS))
    if unknown:
        raise RegistryError(f"{unknown[0]!r} is not a sketch parameter (expected "
                            f"{sorted(SKETCH_FIELDS)})", f"sketch.{unknown[0]}")
    return {SKETCH_FIELDS[key]: value for key, value in parameters.items()}


def pool_seeds(indices: np.ndarray, root: int = POOL_ROOT) -> np.ndarray:
    """The public seeds s_j = splitmix64(root, j) of pool indices j (uint64)."""
    return hashing.splitmix64(np.uint64(root), np.asarray(indices, dtype=np.int64))


def pool_hash(indices: np.ndarray, values: np.ndarray, m: int, root: int = POOL_ROOT
              ) -> np.ndarray:
    """h_j(v) = local_hash(s_j, v, m) in [0, m) for paired indices and values (broadcasting)."""
    return hashing.local_hash(pool_seeds(indices, root), values, m)


@dataclass(frozen=True)
class PoolNoise(SupportNoise):
    """SupportNoise plus the pool's collision term: `collision` = 1/(k (m - 1)).

    variance(f) = [Wang20] journal eq. 2 + collision·(Σ_{x != v} f_x² - (1 - f_v)/n), f clipped
    to [0, 1] as in SupportNoise (module docstring), with Σ_{x != v} f_x² = `squares` − f_v²
    once the window's Σ f² is known (`for_window`, `given`). `sigma`, the standard error of a
    value of frequency 0 that thresholds, weights and `smallest_resolvable` use, is
    sqrt(eq. 7 + collision·(Σ f² - 1/n)) with Σ f² (`squares`) estimated from the window's
    unbiased estimate (`for_window`) or of given frequencies (`given`); eq. 7 alone (the
    privacy noise) until then. `pool` = (root, k, m)
    identifies the hashes, so that two versions' collision errors over one pool are known to be
    correlated (`shared_collision`)."""

    collision: float = 0.0
    squares: float | None = None  # Σ f² of the plug-in distribution given (None: none yet)
    pool: tuple[int, int, int] | None = None  # (root, k, m) of the pool (None: not known)

    def given(self, frequencies: np.ndarray) -> PoolNoise:
        f = np.clip(np.asarray(frequencies, dtype=np.float64), 0.0, 1.0)
        return dataclasses.replace(self, squares=float(np.dot(f, f)))

    def for_window(self, unbiased: np.ndarray) -> PoolNoise:
        """This model with Σ f² estimated without bias from the window's unbiased estimate f~:
        summing E[f~_v²] = f_v² + variance_v(f) over the d values (Σ f = 1),

            E[Σ f~²] = Σ f² (1 + C(d − 1)) + E2 − C(d − 1)/n,
            E2 = (d q*(1 − q*) + (p* − q*)(1 − p* − q*)) / (n (p* − q*)²),

        solved for Σ f², then clipped to [1/d, 1] (what a distribution on d values can have).
        The Norm-Sub plug-in's Σ f², which zeroes the small values and shifts the large ones
        down, understated it by 5–8% (FLH and CMS, ε = 2, d = 64, Σ f² = 0.14)."""
        f = np.asarray(unbiased, dtype=np.float64)
        d, n, p, q = f.size, self.n, self.p_star, self.q_star
        if n == 0 or d == 0 or not np.isfinite(f).all():
            return self
        spread = self.collision * (d - 1)
        privacy = (d * q * (1 - q) + (p - q) * (1 - p - q)) / (n * (p - q) ** 2)
        squares = (float(np.dot(f, f)) - privacy + spread / n) / (1.0 + spread)
        return dataclasses.replace(self, squares=min(max(squares, 1.0 / d), 1.0))

    def shared_collision(self, other: SupportNoise) -> float:
        """C_ab of two versions hashing one pool (same root): their bias given the pool is
        Σ_{x != v} f_x (κ(x, v) - 1/m)/(1 - 1/m) (module docstring) over the pool's common first
        min(k_a, k_b) hashes, so Cov = Σ_{x != v} f_x² / (max(k_a, k_b)·(m - 1)) for one m.
        For different m (the multiply-shift hash of one seed places a value in related buckets
        at every m) Cauchy-Schwarz per hash bounds it by 1/(max k·sqrt((m_a - 1)(m_b - 1))),
        which is used. 0 for another root or a noise without a pool."""
        if not isinstance(other, PoolNoise) or self.pool is None or other.pool is None:
            return 0.0
        (root, k, m), (other_root, other_k, other_m) = self.pool, other.pool
        if root != other_root:
            return 0.0
        return 1.0 / (max(k, other_k) * math.sqrt((m - 1) * (other_m - 1)))

    @property
    def extra_variance(self) -> float:
        """The collision term at the plug-in given, collision·(Σ f² − 1/n); 0 until one is."""
        if self.n == 0 or self.squares is None:
            return 0.0
        return self.collision * max(self.squares - 1.0 / self.n, 0.0)

    @property
    def sigma(self) -> float:
        return math.sqrt(super().sigma ** 2 + self.extra_variance)

    @property
    def smallest_resolvable(self) -> float | None:
        if self.n == 0 or self.squares is None:
            return super().smallest_resolvable
        return RESOLVABLE_STD_ERRORS * self.sigma

    def variance(self, f: np.ndarray) -> np.ndarray:
        base = super().variance(f)
        if self.n == 0:
            return base
        f = np.clip(np.asarray(f, dtype=np.float64), 0.0, 1.0)
        # Σ_{x != v} f_x² from the window's Σ f² where it is known (`for_window`, `given`)
        squares = float(np.dot(f, f)) if self.squares is None else self.squares
        others = np.maximum(squares - f ** 2, 0.0)
        return base + self.collision * (others - (1.0 - f) / self.n)


@dataclass(frozen=True)
class HashPool(FrequencyOracle):
    """Shared machinery of the pooled-hash oracles; subclasses give the bucket channel.

    `hashes` and `buckets` override the default k and m (`default_k`, `default_m`), `pool` the
    pool's root (POOL_ROOT; another root draws another pool, as the tests of unbiasedness over
    the pool do); the values used are the fields `k`, `m` and `root`, part of the
    configuration's fingerprint.
    """

    hashes: InitVar[int | None] = None
    buckets: InitVar[int | None] = None
    pool: InitVar[int | None] = None
    k: int = field(init=False)
    m: int = field(init=False)
    root: int = field(init=False)

    #: statistic cells per (hash, bucket): 1, or 2 for HCMS's (row, bit) counts
    cell_width: ClassVar[int] = 1

    def __post_init__(self, hashes: int | None = None, buckets: int | None = None,
                      pool: int | None = None) -> None:
        super().__post_init__()
        k = self.default_k() if hashes is None else hashes
        m = self.default_m() if buckets is None else buckets
        if not (is_int(k) and 1 <= k <= MAX_POOL_HASHES):
            raise RegistryError(f"{self.name} needs k hash functions in [1, {MAX_POOL_HASHES:,}]"
                                f" (MAX_POOL_HASHES), got {k!r}", "sketch.k")
        problem = self.buckets_problem(m)
        if problem:
            raise RegistryError(f"{self.name} buckets m {problem}", "sketch.m")
        if k * m * self.cell_width > MAX_POOL_CELLS:
            raise RegistryError(f"{self.name}: k·m = {k * m * self.cell_width:,} statistic "
                                f"cells exceed {MAX_POOL_CELLS:,} (MAX_POOL_CELLS)", "sketch")
        if k * self.d > MAX_POOL_HASH_EVALUATIONS:
            raise RegistryError(f"{self.name}: k·d = {k * self.d:,} hash evaluations per window "
                                f"exceed {MAX_POOL_HASH_EVALUATIONS:,} "
                                f"(MAX_POOL_HASH_EVALUATIONS): at most k = "
                                f"{MAX_POOL_HASH_EVALUATIONS // self.d:,} at d = {self.d:,}",
                                "sketch.k")
        root = POOL_ROOT if pool is None else pool
        if not (is_int(root) and 0 <= root < 1 << 64):
            raise RegistryError(f"{self.name} pool root must be an integer in [0, 2^64), "
                                f"got {root!r}", "sketch.pool")
        object.__setattr__(self, "k", int(k))
        object.__setattr__(self, "m", int(m))
        object.__setattr__(self, "root", int(root))

    # -- what subclasses give ---------------------------------------------------------------
    def default_k(self) -> int:
        raise NotImplementedError

    def default_m(self) -> int:
        raise NotImplementedError

    def buckets_problem(self, m: object) -> str | None:
        """Why m is not a usable bucket count (a phrase), or None."""
        if not (is_int(m) and 2 <= m <= MAX_SKETCH_BUCKETS):
            return f"must be an integer in [2, {MAX_SKETCH_BUCKETS:,}] (MAX_SKETCH_BUCKETS), " \
                   f"got {m!r}"
        return None

    @property
    def bucket_p(self) -> float:
        """Probability that a report supports its own bucket."""
        raise NotImplementedError

    @property
    def bucket_q(self) -> float:
        """Probability that a report supports a given other bucket."""
        raise NotImplementedError

    def bucket_support(self, statistic: np.ndarray) -> np.ndarray:
        """The (k, m) table of reports supporting each (hash, bucket), from the statistic."""
        return statistic

    # -- the pure-protocol surface ----------------------------------------------------------
    @property
    def p_star(self) -> float:
        return self.bucket_p

    @property
    def q_star(self) -> float:
        return self.bucket_q + (self.bucket_p - self.bucket_q) / self.m

    @property
    def parameter(self) -> str:
        return f"k={self.k}, m={self.m}"

    def sketch_parameters(self) -> dict[str, int]:
        """{"k": k, "m": m}: what a window-estimate record carries to rebuild this protocol
        (`sketch_arguments` turns it back into the constructor's keywords)."""
        return {"k": self.k, "m": self.m}

    @property
    def collision(self) -> float:
        """C = 1/(k (m - 1)): the pool's collision variance per unit Σ_{x != v} f_x²."""
        return 1.0 / (self.k * (self.m - 1))

    def noise(self, n: int) -> PoolNoise:
        return PoolNoise(self.p_star, self.q_star, int(n), self.collision,
                         pool=(self.root, self.k, self.m))

    def linear_variance(self, n: int, weights: np.ndarray, frequencies: np.ndarray) -> float:
        """The module docstring's exact variance: independent reports plus the pool's term."""
        if n == 0:
            return math.inf
        private = super().linear_variance(n, weights, frequencies)
        w = np.asarray(weights, dtype=np.float64)
        f = np.asarray(frequencies, dtype=np.float64)
        squares = float(np.dot(w, w))
        shared = (float(np.dot(f, f)) * squares - 2.0 * float(np.dot(f ** 2, w ** 2))
                  + float(np.dot(f, w)) ** 2 - float(np.dot(f, squares - w ** 2)) / n)
        return max(private + self.collision * shared, 0.0)

    def n_mse(self) -> float:
        """n·MSE of the privacy noise ([Fang25] eq. 4); the collision term adds
        at most `collision` per value whatever n (module docstring)."""
        return super().n_mse()

    # -- wire format ------------------------------------------------------------------------
    def check_hash(self, columns: Columns) -> tuple[np.ndarray, np.ndarray]:
        """(hash column as int64 with invalid entries 0, invalid mask): j outside [0, k)."""
        j = np.asarray(columns["hash"], dtype=np.int64)
        invalid = (j < 0) | (j >= self.k)
        return np.where(invalid, 0, j), invalid

    def int_columns(self, payloads: list[dict], names: tuple[str, ...]) -> dict:
        return {name: int_column(payloads, name) for name in names}

    # -- server -----------------------------------------------------------------------------
    def new_statistic(self) -> np.ndarray:
        shape = (self.k, self.m) if self.cell_width == 1 else (self.k, self.m, self.cell_width)
        return np.zeros(shape, dtype=np.int64)

    def statistic_nbytes(self) -> int:
        return 8 * self.k * self.m * self.cell_width

    def _bucket_blocks(self) -> Iterator[tuple[int, np.ndarray]]:
        """(first value, (k x block) buckets h_j(v)) over blocks of the domain: O(k·d) hashes."""
        seeds = pool_seeds(np.arange(self.k), self.root)[:, None]
        step = max(1, _SUPPORT_CELLS // self.k)
        for start in range(0, self.d, step):
            values = np.arange(start, min(self.d, start + step), dtype=np.int64)
            yield start, hashing.local_hash(seeds, values[None, :], self.m)

    def support_counts(self, statistic: np.ndarray) -> np.ndarray:
        """c_v = Σ_j T[j, h_j(v)], hashing blocks of values against the whole pool: O(k·d)."""
        table = self.bucket_support(statistic)
        counts = np.empty(self.d, dtype=np.int64)
        for start, buckets in self._bucket_blocks():
            counts[start:start + buckets.shape[1]] = np.take_along_axis(table, buckets, 1).sum(0)
        return counts

    def _collided(self, f: np.ndarray) -> np.ndarray:
        """Σ_{x != v} f_x κ(x, v) for every v: S_v − f_v with S_v = (1/k) Σ_j F[j, h_j(v)] and
        F[j, a] = Σ_x f_x [h_j(x) = a] (f folded through the pool): two passes of k·d hashes,
        no d x d matrix."""
        if f.shape != (self.d,):
            raise ValueError(f"frequencies must have shape ({self.d},), got {f.shape}")
        folded = np.zeros(self.k * self.m)
        rows = (np.arange(self.k) * self.m)[:, None]
        for start, buckets in self._bucket_blocks():
            block = f[start:start + buckets.shape[1]]
            folded += np.bincount((rows + buckets).ravel(),
                                  np.broadcast_to(block, buckets.shape).ravel(),
                                  minlength=self.k * self.m)
        table = folded.reshape(self.k, self.m)
        shared = np.empty(self.d)
        for start, buckets in self._bucket_blocks():
            shared[start:start + buckets.shape[1]] = np.take_along_axis(table, buckets,
                                                                        1).sum(0) / self.k
        return shared - f

    def collision_bias(self, frequencies: np.ndarray) -> np.ndarray:
        """E[f~ | this pool] − f for frequencies f: the bias the fixed pool adds to every value
        (module docstring: zero only on average over pools),

            b_v = m/(m − 1) · Σ_{x != v} f_x (κ(x, v) − 1/m)

        (`_collided`: O(k·d)). Linear in f; the same for every ε (p and q_b cancel)."""
        f = np.asarray(frequencies, dtype=np.float64)
        return self.m / (self.m - 1) * (self._collided(f) - (f.sum() - f) / self.m)

    def others_support(self, frequencies: np.ndarray) -> np.ndarray:
        """r_v: the probability, given this pool, that a report of a value other than v (drawn
        by frequencies f) supports v, q_b + (p − q_b) Σ_{x != v} f_x κ(x, v) / Σ_{x != v} f_x
        (q* on average over pools; q* where no other value has mass). A report of v supports v
        with p, so given the pool a window's f~_v has variance
        (f_v p(1 − p) + Σ_{x != v} f_x P_x(1 − P_x)) / (n (p* − q*)²) with
        P_x = q_b + (p − q_b) κ(x, v), which (1 − f_v) r_v (1 − r_v) bounds from above
        (P(1 − P) is concave) and meets up to (p − q_b)² times the spread of κ(·, v) over the
        pool, about (p − q_b)²/(k m)."""
        f = np.asarray(frequencies, dtype=np.float64)
        others = f.sum() - f
        share = np.divide(self._collided(f), others, out=np.full(self.d, 1.0 / self.m),
                          where=others > 0)
        return self.bucket_q + (self.bucket_p - self.bucket_q) * share

    def client_buckets(self, values: np.ndarray, rng: np.random.Generator
                       ) -> tuple[np.ndarray, np.ndarray]:
        """(hash index j uniform on [0, k), bucket h_j(v)) for each value."""
        values = np.asarray(values, dtype=np.int64)
        j = rng.integers(0, self.k, size=values.shape)
        return j, pool_hash(j, values, self.m, self.root)

    def with_pool(self, root: int) -> HashPool:
        """The same protocol (ε, d, k, m) over the pool of another root."""
        return type(self)(self.epsilon, self.d, hashes=self.k, buckets=self.m, pool=root)
