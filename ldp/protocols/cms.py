"""Apple's Count-Mean Sketch ([Apple17], CMS): a one-hot of m buckets, bit flips.

The client draws j uniformly from [0, k), sets the bit of its bucket h_j(v) in a one-hot vector
of m bits (h_j the pool's hash, ldp_telemetry.ldp.protocols.hash_pool), flips every bit
independently with probability 1/(e^{ε/2} + 1) and reports <j, bits>. Two inputs' vectors differ
in at most two bits, each costing a factor e^{ε/2}: ε-LDP.

Support: a report supports the buckets whose bit is set: bucket p = e^{ε/2}/(e^{ε/2} + 1),
q_b = 1 - p, so p* = p and q* = q_b + (p - q_b)/m. The statistic is the (k, m) table of set
bits per (hash, bucket), [Apple17]'s sketch M up to the affine map its server applies: O(m) per
report (bits unpacked, summed per hash index). Wire format: the m bits packed little-endian
in ceil(m/8) bytes, padding bits clear (as unary encoding's).
"""
from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ldp_telemetry.ldp.protocols.base import BRANCH_BYTES, Columns, varint_bytes
from ldp_telemetry.ldp.protocols.hash_pool import HashPool
from ldp_telemetry.ldp.protocols.unary_encoding import bit_rows

#: Default pool size k and bucket count m of CMS and HCMS (a 1 MiB statistic for CMS).
DEFAULT_SKETCH_HASHES = 128
DEFAULT_SKETCH_BUCKETS = 1024
#: Unpacked bits (reports x m) per block of `accumulate`.
_BLOCK_BITS = 1 << 20


def sketch_buckets(d: int) -> int:
    """Default m: the smallest power of two >= d, at most DEFAULT_SKETCH_BUCKETS."""
    return min(DEFAULT_SKETCH_BUCKETS, 1 << (d - 1).bit_length())


@dataclass(frozen=True)
class CMS(HashPool):
    name: ClassVar[str] = "cms"
    payload_schema: ClassVar[dict] = {"type": "record", "name": "CmsPayload", "fields": [
        {"name": "hash", "type": "int", "doc": "Pool hash index j in [0, k)."},
        {"name": "bits", "type": "bytes",
         "doc": "m perturbed one-hot bits packed little-endian in ceil(m/8) bytes."}]}
    payload_rule: ClassVar[str] = ("CMS hash index must lie in [0, k) and the bit vector have "
                                   "ceil(m/8) bytes with padding bits clear")
    server_cost: ClassVar[str] = "O(n·m + k·d): bits summed per hash, k·d hashes per window"
    aggregation_rank: ClassVar[float] = 60

    def default_k(self) -> int:
        return DEFAULT_SKETCH_HASHES

    def default_m(self) -> int:
        return sketch_buckets(self.d)

    @property
    def n_bytes(self) -> int:
        """Bytes of the packed bit vector (the envelope column's width)."""
        return (self.m + 7) // 8

    @property
    def bucket_p(self) -> float:
        half = math.exp(self.epsilon / 2)
        return half / (half + 1.0)

    @property
    def bucket_q(self) -> float:
        return 1.0 - self.bucket_p

    def _report_variance(self, w: np.ndarray) -> np.ndarray:
        """Var[Y | x] for a report with a fresh hash (hash_pool's module docstring).

        Given the set S of set bits (s = |S|) and x's bucket a, Y = w_x [a in S] + Σ_{v != x}
        w_v [h(v) in S] with h(v) uniform: E[Y | S] = w_x [a in S] + W' s/m and
        Var[Y | S] = Q' (s/m)(1 - s/m), W' = Σ_{v != x} w_v, Q' = Σ_{v != x} w_v². With
        s = [a in S] + B, B ~ Binomial(m - 1, q_b) independent of [a in S] ~ Bernoulli(p):
        Var[Y | x] = Q' E[(s/m)(1 - s/m)] + (w_x + W'/m)² p(1 - p) + W'² (m - 1) q_b(1 - q_b)/m².
        """
        p, q, m = self.bucket_p, self.bucket_q, self.m
        rest_sum, rest_squares = w.sum() - w, np.dot(w, w) - w ** 2
        mean_s = p + (m - 1) * q
        second_s = p * (1 - p) + (m - 1) * q * (1 - q) + mean_s ** 2
        spread = mean_s / m - second_s / m ** 2
        return (rest_squares * spread + (w + rest_sum / m) ** 2 * p * (1 - p)
                + rest_sum ** 2 * (m - 1) * q * (1 - q) / m ** 2)

    def perturb(self, values: np.ndarray, rng: np.random.Generator) -> dict[str, np.ndarray]:
        j, bucket = self.client_buckets(values, rng)
        flip = rng.random((len(j), self.m)) >= self.bucket_p
        one_hot = np.zeros((len(j), self.m), dtype=bool)
        one_hot[np.arange(len(j)), bucket] = True
        return {"hash": j, "bits": np.packbits(one_hot ^ flip, axis=1, bitorder="little")}

    def payload_bytes(self) -> int:
        return BRANCH_BYTES + varint_bytes(self.k - 1) + varint_bytes(self.n_bytes) + self.n_bytes

    def payloads_to_avro(self, columns: Columns) -> Iterator[dict]:
        return ({"hash": j, "bits": row.tobytes()}
                for j, row in zip(columns["hash"].tolist(), columns["bits"], strict=True))

    def payloads_from_avro(self, payloads: list[dict]
                           ) -> tuple[dict[str, np.ndarray], np.ndarray]:
        bits, wrong_length = bit_rows(payloads, self.n_bytes)
        columns, invalid = self.check_payloads({"hash": self.int_columns(payloads, ("hash",))
                                                ["hash"], "bits": bits})
        return columns, invalid | wrong_length

    def check_payloads(self, columns: Columns) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """`hash`: j in [0, k); `bits`: (n, ceil(m/8)) uint8 with padding bits clear."""
        j, invalid = self.check_hash(columns)
        bits = np.asarray(columns["bits"], dtype=np.uint8).reshape(len(j), self.n_bytes)
        padding = self.n_bytes * 8 - self.m
        if padding and len(bits):
            invalid = invalid | ((bits[:, -1] >> np.uint8(8 - padding)) != 0)
        if invalid.any():
            bits = np.where(invalid[:, None], np.uint8(0), bits)
        return {"hash": np.where(invalid, 0, j), "bits": bits}, invalid

    def accumulate(self, statistic: np.ndarray, columns: Columns) -> None:
        """Unpack blocks of reports, sort them by hash index, and sum each index's rows."""
        j_all, bits_all = np.asarray(columns["hash"], dtype=np.int64), columns["bits"]
        rows = max(1, _BLOCK_BITS // self.m)
        for start in range(0, len(j_all), rows):
            j = j_all[start:start + rows]
            order = np.argsort(j, kind="stable")
            unpacked = np.unpackbits(bits_all[start:start + rows][order], axis=1, count=self.m,
                                     bitorder="little")
            ordered = j[order]
            first = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
            statistic[ordered[first]] += np.add.reduceat(unpacked, first, axis=0,
                                                         dtype=np.int64)
