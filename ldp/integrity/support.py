"""What each protocol family lets the integrity tests see in a report: its support set.

A pure protocol's report supports a set of values ([Fang25] Definition 2): its own value with
probability p*, each other value with probability q*. The tests need, per family:

* `sampled(columns)`: the columns a report sample keeps (the payload; SS's items in the
  smallest integer type that holds d);
* `supports(columns, values)`: the (rows x K) boolean matrix "row supports value";
* `sizes(columns)` and `size_pmf()`: the support size of each row and its exact distribution
  under honest reports (None where it is constant: GRR, SS, RWS support 1 or k values always);
* `pair_probabilities()`: (r1, r0), the probability that an honest report supports both of two
  values a != b when its true value is a (r1), and when it is neither (r0);
  `set_probabilities(t)` the same for all of t values.

Unary encoding: bits are independent, so the size is Bernoulli(p*) + Binomial(d-1, q*) and
r1 = p* q*, r0 = q*^2. Local hashing: the report <s, y> supports v when H(s, v) = y; with the
3-wise independence the keyed hash gives in practice (local_hashing._report_variance), the
size is Bernoulli(p*) + Binomial(d-1, 1/g) and r1 = p*/g, r0 = 1/g^2. Fixed-size subsets
(SS, RWS): the support is the true value plus k-1 of the other d-1 values drawn without
replacement (probability p), else k of them, so r1 = p (k-1)/(d-1) and
r0 = (p (k-1)(k-2) + (1-p) k(k-1)) / ((d-1)(d-2)). GRR supports one value: no pair.
Other protocols (HR) have no model: their co-support and size tests are not defined.
"""
from __future__ import annotations

import math

from typing import Any

import numpy as np

from ldp_telemetry.ldp.protocols import hashing
from ldp_telemetry.ldp.protocols.base import Columns
from ldp_telemetry.ldp.protocols.fixed_subset import FixedSizeSubset
from ldp_telemetry.ldp.protocols.grr import GRR
from ldp_telemetry.ldp.protocols.local_hashing import LocalHashing
from ldp_telemetry.ldp.protocols.rws import RWS
from ldp_telemetry.ldp.protocols.unary_encoding import UnaryEncoding

#: Largest (rows x d) hash evaluations a local-hashing size test makes at finalize; beyond it
#: the test uses the first rows of the sample (itself a uniform sample).
MAX_SIZE_CELLS = 1 << 22
#: Largest (rows x (d + k)) work of an RWS support matrix at finalize; beyond it the tests use
#: the first rows of the sample (itself a uniform sample).
MAX_WHEEL_CELLS = 1 << 24
#: Popcount of every byte.
_POPCOUNT = np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1).sum(axis=1)


def _bit_supports(bits: np.ndarray, values: np.ndarray) -> np.ndarray:
    values = np.asarray(values, dtype=np.int64)
    return ((bits[:, values // 8] >> (values % 8).astype(np.uint8)) & 1).astype(bool)


def _binomial_pmf(n: int, q: float) -> np.ndarray:
    """pmf of Binomial(n, q) over 0..n, 0 < q < 1 (log-gamma form)."""
    from scipy.special import gammaln  # at finalize only: readers never load scipy
    k = np.arange(n + 1)
    log_pmf = (gammaln(n + 1) - gammaln(k + 1) - gammaln(n - k + 1)
               + k * math.log(q) + (n - k) * math.log1p(-q))
    return np.exp(log_pmf)


def _one_plus_binomial_pmf(p: float, others: int, q: float) -> np.ndarray:
    """pmf over 0..others+1 of Bernoulli(p) + Binomial(others, q)."""
    binomial = _binomial_pmf(others, q)
    pmf = np.zeros(others + 2)
    pmf[:-1] += (1 - p) * binomial
    pmf[1:] += p * binomial
    return pmf


class SupportModel:
    """The support facts of one protocol (see the module docstring); subclasses per family."""

    def __init__(self, protocol: Any) -> None:
        self.protocol = protocol

    def sampled(self, columns: Columns) -> dict:
        return dict(columns)

    def row_bytes(self) -> int:
        """Bytes of one sampled row, its 8-byte priority included."""
        raise NotImplementedError

    def supports(self, columns: Columns, values: np.ndarray) -> np.ndarray | None:
        return None

    def sizes(self, columns: Columns) -> np.ndarray | None:
        return None

    def size_pmf(self) -> np.ndarray | None:
        return None

    def pair_probabilities(self) -> tuple[float, float] | None:
        return self.set_probabilities(2)

    def set_probabilities(self, t: int) -> tuple[float, float] | None:
        """(P[an honest report supports all of t values | its value is one of them],
        P[... | its value is none of them]); pair_probabilities is t = 2."""
        return None


class UnaryModel(SupportModel):
    def row_bytes(self) -> int:
        return 8 + self.protocol.n_bytes

    def supports(self, columns: Columns, values: np.ndarray) -> np.ndarray:
        return _bit_supports(columns["bits"], values)

    def sizes(self, columns: Columns) -> np.ndarray:
        return _POPCOUNT[columns["bits"]].sum(axis=1, dtype=np.int64)

    def size_pmf(self) -> np.ndarray:
        p = self.protocol
        return _one_plus_binomial_pmf(p.p_star, p.d - 1, p.q_star)

    def set_probabilities(self, t: int) -> tuple[float, float] | None:
        p, q = self.protocol.p_star, self.protocol.q_star
        return p * q ** (t - 1), q ** t


class HashingModel(SupportModel):
    def row_bytes(self) -> int:
        return 8 + 16

    def supports(self, columns: Columns, values: np.ndarray) -> np.ndarray:
        seeds = columns["seed"].view(np.uint64)
        values = np.asarray(values, dtype=np.int64)
        hashed = hashing.local_hash(seeds[:, None], values[None, :], self.protocol.g)
        return hashed == np.asarray(columns["y"])[:, None]

    def sizes(self, columns: Columns) -> np.ndarray:
        d = self.protocol.d
        rows = min(len(columns["y"]), max(1, MAX_SIZE_CELLS // d))
        seeds = columns["seed"][:rows].view(np.uint64)
        counts = np.zeros(rows, dtype=np.int64)
        step = max(1, (1 << 18) // rows)
        for start in range(0, d, step):
            values = np.arange(start, min(d, start + step))
            counts += self.supports({"seed": seeds.view(np.int64),
                                     "y": columns["y"][:rows]}, values).sum(axis=1)
        return counts

    def size_pmf(self) -> np.ndarray:
        p = self.protocol
        return _one_plus_binomial_pmf(p.p_star, p.d - 1, 1.0 / p.g)

    def set_probabilities(self, t: int) -> tuple[float, float] | None:
        p, g = self.protocol.p_star, self.protocol.g
        return p / g ** (t - 1), 1.0 / g ** t


class SubsetModel(SupportModel):
    """SS and RWS: the sample keeps the payload (SS's k items in the smallest integer type, RWS's
    seed and y); supports are derived at finalize, for RWS from at most MAX_WHEEL_CELLS / (d + k)
    rows (each row's seeded k-subset costs O(d + k))."""

    @property
    def _item_type(self) -> type[np.signedinteger]:
        return np.int16 if self.protocol.d <= np.iinfo(np.int16).max else np.int32

    def row_bytes(self) -> int:
        if isinstance(self.protocol, RWS):
            return 8 + 16
        return 8 + self.protocol.k * np.dtype(self._item_type).itemsize

    def sampled(self, columns: Columns) -> dict:
        if isinstance(self.protocol, RWS):
            return dict(columns)
        return {"items": np.asarray(columns["items"]).astype(self._item_type)}

    def supports(self, columns: Columns, values: np.ndarray) -> np.ndarray:
        values = np.asarray(values, dtype=np.int64)
        protocol = self.protocol
        if not isinstance(protocol, RWS):
            items = columns["items"]
            out = np.empty((len(items), len(values)), dtype=bool)
            for j, value in enumerate(values.tolist()):
                out[:, j] = (items == value).any(axis=1)
            return out
        d, k = protocol.d, protocol.k
        rows = min(len(columns["y"]), max(1, MAX_WHEEL_CELLS // (d + k)))
        seeds = columns["seed"][:rows].view(np.uint64)
        y = np.asarray(columns["y"][:rows], dtype=np.int64)
        out = np.empty((rows, len(values)), dtype=bool)
        for start, block in hashing.seeded_permutations(seeds, d, k):
            members = (block[:, :k] + y[start:start + len(block), None]) % d
            for j, value in enumerate(values.tolist()):
                out[start:start + len(block), j] = (members == value).any(axis=1)
        return out

    def set_probabilities(self, t: int) -> tuple[float, float] | None:
        """The others are k - 1 (probability p*) or k draws without replacement from d - 1."""
        p, k, d = self.protocol.p_star, self.protocol.k, self.protocol.d
        if t > d - 1:
            return None

        def draws(m: int, count: int) -> float:  # P[count given others all among m draws]
            return math.prod((m - i) / (d - 1 - i) for i in range(count)) if m >= count else 0.0

        return p * draws(k - 1, t - 1), p * draws(k - 1, t) + (1 - p) * draws(k, t)


class SingleModel(SupportModel):
    """GRR: one supported value per report; nothing beyond the sum (which is exactly 1)."""

    def row_bytes(self) -> int:
        return 8 + 8


def support_model(protocol: object) -> SupportModel | None:
    """The model of `protocol`'s family, or None when integrity has none (numeric, HR)."""
    if isinstance(protocol, UnaryEncoding):
        return UnaryModel(protocol)
    if isinstance(protocol, LocalHashing):
        return HashingModel(protocol)
    if isinstance(protocol, FixedSizeSubset):
        return SubsetModel(protocol)
    if isinstance(protocol, GRR):
        return SingleModel(protocol)
    return None


def support_size_moments(protocol: object) -> tuple[float, float] | None:
    """(mean, variance) of one honest report's support size, whatever its true value, or None
    when the family has no model. Constant sizes (GRR 1, SS/RWS k) have variance 0."""
    model = support_model(protocol)
    if model is None:
        return None
    pmf = model.size_pmf()
    if pmf is None:
        size = float(getattr(protocol, "k", 1))
        return size, 0.0
    sizes = np.arange(len(pmf))
    mean = float(pmf @ sizes)
    return mean, float(pmf @ (sizes - mean) ** 2)
