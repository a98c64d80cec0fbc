"""Fast Local Hashing ([Cormode21], pure-ldp's FastLH): OLH over a pool of k hashes.

The client draws j uniformly from [0, k) and reports <j, GRR_g(h_j(v))>, h_j the pool's hash
(ldp_telemetry.ldp.protocols.hash_pool) into g = m buckets, g chosen as OLH's (e^ε + 1 rounded,
ldp_telemetry.ldp.protocols.olh) and p = e^ε / (e^ε + g - 1). Since j does not depend on v, the
privacy is GRR's over the hashed domain: ε.

Support: bucket p = p, bucket q_b = (1 - p)/(g - 1), hence p* = p and q* = 1/g, OLH's. Reports
are counted per (j, y), one bincount: O(1) per report; the support counts cost O(k·d) per window
(hash_pool.HashPool.support_counts), against OLH's O(n·d). The price is the pool's collision
term C = 1/(k (g - 1)) per unit Σ_{x != v} f_x² in every variance (hash_pool's module
docstring): at ε = 2 with k = DEFAULT_FLH_HASHES it stays below the privacy noise up to about
n = 10⁵ reports when Σ f² = 0.05; `hashes` trades it against finalisation cost.
"""
from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ldp_telemetry.ldp.protocols.base import (BRANCH_BYTES, Columns, grr_perturb,
                                              independent_support_variance, varint_bytes)
from ldp_telemetry.ldp.protocols.hash_pool import HashPool

#: Default pool size k of FLH.
DEFAULT_FLH_HASHES = 1024


@dataclass(frozen=True)
class FLH(HashPool):
    name: ClassVar[str] = "flh"
    payload_schema: ClassVar[dict] = {"type": "record", "name": "FlhPayload", "fields": [
        {"name": "hash", "type": "int", "doc": "Pool hash index j in [0, k)."},
        {"name": "y", "type": "int", "doc": "Perturbed hash value in [0, g), g = m."}]}
    payload_rule: ClassVar[str] = "FLH hash index must lie in [0, k) and y in [0, g)"
    server_cost: ClassVar[str] = "O(n + k·d): (hash, y) histogram, k·d hashes per window"
    aggregation_rank: ClassVar[float] = 25

    def default_k(self) -> int:
        return DEFAULT_FLH_HASHES

    def default_m(self) -> int:
        return max(2, math.floor(math.exp(self.epsilon) + 1.5))

    @property
    def parameter(self) -> str:
        return f"k={self.k}, g={self.m}"

    @property
    def bucket_p(self) -> float:
        e = math.exp(self.epsilon)
        return e / (e + self.m - 1)

    @property
    def bucket_q(self) -> float:
        return (1.0 - self.bucket_p) / (self.m - 1)

    def _report_variance(self, w: np.ndarray) -> np.ndarray:
        """With a fresh hash the support indicators are uncorrelated, as OLH's
        (local_hashing.LocalHashing._report_variance): independent_support_variance."""
        return independent_support_variance(self.p_star, self.q_star, w)

    def perturb(self, values: np.ndarray, rng: np.random.Generator) -> dict[str, np.ndarray]:
        j, bucket = self.client_buckets(values, rng)
        return {"hash": j, "y": grr_perturb(bucket, self.m, self.bucket_p, rng)}

    def payload_bytes(self) -> int:
        return BRANCH_BYTES + varint_bytes(self.k - 1) + varint_bytes(self.m - 1)

    def payloads_to_avro(self, columns: Columns) -> Iterator[dict]:
        return ({"hash": j, "y": y}
                for j, y in zip(columns["hash"].tolist(), columns["y"].tolist(), strict=True))

    def payloads_from_avro(self, payloads: list[dict]
                           ) -> tuple[dict[str, np.ndarray], np.ndarray]:
        return self.check_payloads(self.int_columns(payloads, ("hash", "y")))

    def check_payloads(self, columns: Columns) -> tuple[dict[str, np.ndarray], np.ndarray]:
        j, invalid = self.check_hash(columns)
        y = np.asarray(columns["y"], dtype=np.int64)
        invalid = invalid | (y < 0) | (y >= self.m)
        return {"hash": np.where(invalid, 0, j), "y": np.where(invalid, 0, y)}, invalid

    def accumulate(self, statistic: np.ndarray, columns: Columns) -> None:
        cells = np.asarray(columns["hash"], dtype=np.int64) * self.m + columns["y"]
        statistic += np.bincount(cells, minlength=statistic.size).reshape(statistic.shape)
