"""Local hashing, the family of OLH, BLH and RLH ([Wang20] journal §2.4;
[Fang25] §3.3).

The client draws a 64-bit seed, hashes v to H(seed, v) in [0, g)
(ldp_telemetry.ldp.protocols.hashing.local_hash) and reports <seed, GRR_g(H(seed, v))> with
p = e^ε / (e^ε + g - 1). A report <seed, y> supports {v : H(seed, v) = y}: p* = p, q* = 1/g
(not the GRR q of the hashed domain). Members differ only in g (`choose_g`). The seed travels as an
Avro long: the two's-complement view of the uint64.

Aggregation tests every (report, value) pair with the interval form of the hash described in
ldp_telemetry.ldp.protocols.hashing: three numpy operations per pair on cache-sized blocks, no
Python call per pair.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from ldp_telemetry.ldp.protocols import hashing
from ldp_telemetry.ldp.protocols.base import (BRANCH_BYTES, LONG_BYTES, Columns, FrequencyOracle,
                                              check_seeded_payloads,
                                              grr_perturb, independent_support_variance,
                                              pure_n_mse, random_seeds, seeded_payloads_from_avro,
                                              seeded_payloads_to_avro, varint_bytes)


def local_hashing_support(epsilon: float, g: int) -> tuple[float, float]:
    """(p*, q*) of local hashing with hash range g: (e^ε / (e^ε + g - 1), 1/g)."""
    e = math.exp(epsilon)
    return e / (e + g - 1), 1.0 / g


def local_hashing_n_mse(epsilon: float, d: int, g: int) -> float:
    """n·MSE (eq. 4) of local hashing with hash range g."""
    return pure_n_mse(*local_hashing_support(epsilon, g), d)


def better_rounding(candidates: Iterable[int], n_mse_of: Callable[[int], float]) -> int:
    """The candidate integer with the lowest n·MSE (ties: the smaller one)."""
    return min(sorted(set(candidates)), key=n_mse_of)


@dataclass(frozen=True)
class LocalHashing(FrequencyOracle):
    """Shared machinery of the local-hashing protocols; subclasses choose g."""

    g: int = field(init=False)
    payload_rule: ClassVar[str] = "local-hashing y must lie in [0, g)"
    server_cost: ClassVar[str] = "O(n·d): interval hash test per (report, value)"

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "g", self.choose_g())

    def choose_g(self) -> int:
        raise NotImplementedError

    @property
    def parameter(self) -> str:
        return f"g={self.g}"

    @property
    def p_star(self) -> float:
        return local_hashing_support(self.epsilon, self.g)[0]

    @property
    def q_star(self) -> float:
        return local_hashing_support(self.epsilon, self.g)[1]

    def _report_variance(self, w: np.ndarray) -> np.ndarray:
        """Independent support indicators (base.independent_support_variance).

        x is supported when the GRR_g coin keeps H(x), and v != x when H(v) = y; the indicators
        of two values u, v != x are uncorrelated when the buckets of u, v and x are independent
        (3-wise independence). The keyed hash of ldp_telemetry.ldp.protocols.hashing gives that in
        practice: it hashes a pseudo-random 64-bit key per value, so the buckets of a few
        values, consecutive ones included, behave as independent.
        """
        return independent_support_variance(self.p_star, self.q_star, w)

    def perturb(self, values: np.ndarray, rng: np.random.Generator) -> dict[str, np.ndarray]:
        values = np.asarray(values, dtype=np.int64)
        seeds = random_seeds(values.shape, rng)
        hashed = hashing.local_hash(seeds, values, self.g)
        return {"seed": seeds.view(np.int64), "y": grr_perturb(hashed, self.g, self.p_star, rng)}

    def payload_bytes(self) -> int:
        return BRANCH_BYTES + LONG_BYTES + varint_bytes(self.g - 1)

    def payloads_to_avro(self, columns: Columns) -> Iterator[dict]:
        return seeded_payloads_to_avro(columns)

    def payloads_from_avro(self, payloads: list[dict]
                               ) -> tuple[dict[str, np.ndarray], np.ndarray]:
        return seeded_payloads_from_avro(payloads, self.g)

    def check_payloads(self, columns: Columns) -> tuple[dict[str, np.ndarray], np.ndarray]:
        return check_seeded_payloads(columns, self.g)

    def accumulate(self, statistic: np.ndarray, columns: Columns) -> None:
        hashing.add_local_hash_support(statistic, columns["seed"].view(np.uint64),
                                       columns["y"], self.g)
