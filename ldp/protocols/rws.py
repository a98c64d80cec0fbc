"""Random Wheel Spinner ([Fang25] §4.3).

The client draws a 64-bit seed s; the seed fixes a uniform k-subset S(s) of [0, d) (the partial
Fisher-Yates shuffle of ldp_telemetry.ldp.protocols.hashing, driven by splitmix64(s, i) — portable,
never a library's random stream). The client reports <s, y> with y in [0, d) and

    Pr[y | v, s] = e^ε / Z  if (v - y) mod d ∈ S(s),   1 / Z otherwise,   Z = k e^ε + d - k,

i.e. it picks u = (v - y) mod d inside S(s) with probability k e^ε / Z (uniformly there), else
uniformly outside, and sends y = (v - u) mod d. Given s, the probabilities of any y under two
inputs differ by at most the factor e^ε (Theorem 2); s does not depend on v.

A report supports (S(s) + y) mod d: p* = k e^ε / Z, q* = p* (k-1)/(d-1) + (1 - p*) k/(d-1) —
the same as SS, and k is chosen the same way (ldp_telemetry.ldp.protocols.fixed_subset).
The support (S - u + x) mod d, u uniform in the wheel S or uniform outside it, is such a
fixed-size subset because the seeded wheel is a uniform k-subset: S - u is then uniform over
the k-subsets that contain 0, or over those that do not, so RWS shares SS's variances.

Aggregation re-derives S(s) for a block of reports at once — k vectorised swap steps over the block
(ldp_telemetry.ldp.protocols.hashing.seeded_permutations) — then adds y, folds [d, 2d) onto [0, d)
and counts all k·n supported values with one bincount. Cost O(n·(k + d)) numpy work with no Python
call per report or value; the d term is the copy of the identity permutation into the block.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ldp_telemetry.ldp.protocols import hashing
from ldp_telemetry.ldp.protocols.base import (BRANCH_BYTES, LONG_BYTES, Columns,
                                              check_seeded_payloads, random_seeds,
                                              seed_payload_schema, seeded_payloads_from_avro,
                                              seeded_payloads_to_avro, varint_bytes)
from ldp_telemetry.ldp.protocols.fixed_subset import FixedSizeSubset


@dataclass(frozen=True)
class RWS(FixedSizeSubset):
    name: ClassVar[str] = "rws"
    payload_schema: ClassVar[dict] = seed_payload_schema(
        "RwsPayload", "Subset seed: the uint64 as two's complement.",
        "Wheel displacement in [0, d).")
    aggregation_rank: ClassVar[float] = 70
    payload_rule: ClassVar[str] = "RWS y must lie in [0, d)"
    server_cost: ClassVar[str] = "O(n·(k + d)): seeded k-step shuffle per report, one bincount"

    def perturb(self, values: np.ndarray, rng: np.random.Generator) -> dict[str, np.ndarray]:
        values = np.asarray(values, dtype=np.int64)
        seeds = random_seeds(values.shape, rng)
        inside = rng.random(values.shape) < self.p_star
        position = np.where(inside, rng.integers(0, self.k, size=values.shape),
                            rng.integers(self.k, self.d, size=values.shape))
        landed = np.empty_like(values)
        for start, block in hashing.seeded_permutations(seeds, self.d, self.k):
            rows = slice(start, start + len(block))
            landed[rows] = block[np.arange(len(block)), position[rows]]
        return {"seed": seeds.view(np.int64), "y": (values - landed) % self.d}

    def payload_bytes(self) -> int:
        return BRANCH_BYTES + LONG_BYTES + varint_bytes(self.d - 1)

    def payloads_to_avro(self, columns: Columns) -> Iterator[dict]:
        return seeded_payloads_to_avro(columns)

    def payloads_from_avro(self, payloads: list[dict]
                               ) -> tuple[dict[str, np.ndarray], np.ndarray]:
        return seeded_payloads_from_avro(payloads, self.d)

    def check_payloads(self, columns: Columns) -> tuple[dict[str, np.ndarray], np.ndarray]:
        return check_seeded_payloads(columns, self.d)

    def accumulate(self, statistic: np.ndarray, columns: Columns) -> None:
        seeds, y = columns["seed"].view(np.uint64), np.asarray(columns["y"], dtype=np.int64)
        for start, block in hashing.seeded_permutations(seeds, self.d, self.k):
            supported = block[:, : self.k] + y[start:start + len(block), None]
            folded = np.bincount(supported.ravel(), minlength=2 * self.d)
            statistic += folded[: self.d]
            statistic += folded[self.d:]
