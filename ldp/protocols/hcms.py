"""Apple's Hadamard Count-Mean Sketch ([Apple17], HCMS): one bit per report.

The client draws j uniformly from [0, k) and a Hadamard row l uniformly from [0, m) (m a power of
two; row 0 included, as in [Apple17]), computes the parity b = popcount(l & a) mod 2 of its
bucket a = h_j(v) (h_j the pool's hash, ldp_telemetry.ldp.protocols.hash_pool; b = 1 where the
Sylvester-Hadamard entry H[l, a] is -1, ldp_telemetry.ldp.protocols.hr.hadamard_parity), keeps
it with probability p = e^ε/(e^ε + 1), else flips it, and reports <j, l, b>. Neither j nor l
depends on v: ε-LDP.

Support: <j, l, b> supports the buckets u with popcount(l & u) mod 2 = b: the own bucket with
probability p; another bucket with probability 1/2 (two distinct columns agree on exactly m/2
rows of [0, m)), so p* = p and q* = 1/2 + (p - 1/2)/m. Statistic: the (k, m, 2) report counts per
(hash, row, bit), one bincount per batch, O(1) per report; the (k, m) bucket support table
follows with one Walsh-Hadamard transform per hash, as HR's: S[j] = (N_j + H t_j)/2 with
t_j = count[j, :, 0] - count[j, :, 1] and N_j the reports of hash j. O(k·m log m + k·d) per window.
"""
from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ldp_telemetry.ldp.base.validation import is_int
from ldp_telemetry.ldp.protocols.base import BRANCH_BYTES, Columns, varint_bytes
from ldp_telemetry.ldp.protocols.cms import DEFAULT_SKETCH_HASHES, sketch_buckets
from ldp_telemetry.ldp.protocols.hash_pool import HashPool
from ldp_telemetry.ldp.protocols.hr import hadamard_parity, walsh_hadamard


@dataclass(frozen=True)
class HCMS(HashPool):
    name: ClassVar[str] = "hcms"
    payload_schema: ClassVar[dict] = {"type": "record", "name": "HcmsPayload", "fields": [
        {"name": "hash", "type": "int", "doc": "Pool hash index j in [0, k)."},
        {"name": "row", "type": "int", "doc": "Hadamard row l in [0, m)."},
        {"name": "bit", "type": "boolean",
         "doc": "Perturbed parity of popcount(row & bucket)."}]}
    payload_rule: ClassVar[str] = "HCMS hash index must lie in [0, k) and the row in [0, m)"
    server_cost: ClassVar[str] = ("O(n + k·m log m + k·d): (hash, row, bit) histogram, "
                                  "k Hadamard transforms and k·d hashes per window")
    aggregation_rank: ClassVar[float] = 22
    cell_width: ClassVar[int] = 2

    def default_k(self) -> int:
        return DEFAULT_SKETCH_HASHES

    def default_m(self) -> int:
        return sketch_buckets(self.d)

    def buckets_problem(self, m: object) -> str | None:
        problem = super().buckets_problem(m)
        if problem is None and is_int(m) and m & (m - 1):
            return f"must be a power of two, got {m!r}"
        return problem

    @property
    def bucket_p(self) -> float:
        e = math.exp(self.epsilon)
        return e / (e + 1.0)

    @property
    def bucket_q(self) -> float:
        return 0.5

    def _report_variance(self, w: np.ndarray) -> np.ndarray:
        """Var[Y | x] for a report with a fresh hash (hash_pool's module docstring).

        With probability (m - 1)/m the row l is not 0: the report supports m/2 buckets, x's
        with S ~ Bernoulli(p), and Y = w_x S + Σ_{v != x} w_v [h(v) supported] has
        E[Y | S] = w_x S + W'/2 and Var[Y | S] = Q'/4. With probability 1/m the row is 0 and the
        report supports all buckets or none: Y = (w_x + W') S. (W', Q': the sum and the sum of
        squares of w over v != x.) Var[Y | x] = Q' (m - 1)/(4m) + Var[Z], Z the mixture of the
        two conditional means.
        """
        p, m = self.bucket_p, self.m
        rest_sum, rest_squares = w.sum() - w, np.dot(w, w) - w ** 2
        other = (m - 1) / m
        mean = other * (w * p + rest_sum / 2) + (w + rest_sum) * p / m
        second = (other * (w ** 2 * p + w * rest_sum * p + rest_sum ** 2 / 4)
                  + (w + rest_sum) ** 2 * p / m)
        return rest_squares * other / 4 + second - mean ** 2

    def perturb(self, values: np.ndarray, rng: np.random.Generator) -> dict[str, np.ndarray]:
        j, bucket = self.client_buckets(values, rng)
        row = rng.integers(0, self.m, size=j.shape)
        flip = rng.random(j.shape) >= self.bucket_p
        return {"hash": j, "row": row, "bit": hadamard_parity(row, bucket) ^ flip}

    def payload_bytes(self) -> int:
        return BRANCH_BYTES + varint_bytes(self.k - 1) + varint_bytes(self.m - 1) + 1

    def payloads_to_avro(self, columns: Columns) -> Iterator[dict]:
        return ({"hash": j, "row": r, "bit": bool(b)}
                for j, r, b in zip(columns["hash"].tolist(), columns["row"].tolist(),
                                   columns["bit"].tolist(), strict=True))

    def payloads_from_avro(self, payloads: list[dict]
                           ) -> tuple[dict[str, np.ndarray], np.ndarray]:
        return self.check_payloads(self.int_columns(payloads, ("hash", "row", "bit")))

    def check_payloads(self, columns: Columns) -> tuple[dict[str, np.ndarray], np.ndarray]:
        j, invalid = self.check_hash(columns)
        row = np.asarray(columns["row"], dtype=np.int64)
        bit = np.asarray(columns["bit"], dtype=np.int64)
        invalid = invalid | (row < 0) | (row >= self.m)
        return ({"hash": np.where(invalid, 0, j), "row": np.where(invalid, 0, row),
                 "bit": np.where(invalid, 0, bit & 1)}, invalid)

    def accumulate(self, statistic: np.ndarray, columns: Columns) -> None:
        cells = ((np.asarray(columns["hash"], dtype=np.int64) * self.m + columns["row"]) * 2
                 + columns["bit"])
        statistic += np.bincount(cells, minlength=statistic.size).reshape(statistic.shape)

    def bucket_support(self, statistic: np.ndarray) -> np.ndarray:
        spread = walsh_hadamard((statistic[:, :, 0] - statistic[:, :, 1]).T).T
        return (statistic.sum(axis=(1, 2))[:, None] + spread) // 2
