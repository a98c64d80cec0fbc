"""Optimised Local Hashing (consistency-norm-hyb.txt §2.4; rws-frequency-protocols.txt §3.3).

The client draws a 64-bit seed, hashes v to H(seed, v) in [0, g) (ldp_telemetry.ldp.hashing.local_hash) and
reports <seed, GRR_g(H(seed, v))> with p = e^ε / (e^ε + g - 1). A report <seed, y> supports
{v : H(seed, v) = y}: p* = p, q* = 1/g (not the GRR q of the hashed domain).

g is e^ε + 1 rounded to the nearest integer (halves up), and at least 2: OLH's g minimises
the approximate variance (eq. 3), whose continuous optimum is e^ε + 1. This is the rounding
behind Table 3 of rws-frequency-protocols.txt (ε = 4: g = 56, n·MSE 0.5798 at d = 2); the
better of floor/ceil by eq. 4 would give g = 55 and 0.5703, which the table does not print. The seed travels as an Avro long: the two's-complement view of the uint64.

Aggregation tests every (report, value) pair with the interval form of the hash described in
ldp_telemetry.ldp.hashing: three numpy operations per pair on cache-sized blocks, no Python call per pair.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import ClassVar, Iterator

import numpy as np

from ldp_telemetry.ldp import hashing
from ldp_telemetry.ldp.protocols.base import (BRANCH_BYTES, LONG_BYTES, Columns, FrequencyOracle, grr_perturb,
                                random_seeds, seeded_payloads_from_avro, seeded_payloads_to_avro,
                                varint_bytes)


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
    def p_star(self) -> float:
        e = math.exp(self.epsilon)
        return e / (e + self.g - 1)

    @property
    def q_star(self) -> float:
        return 1.0 / self.g

    def perturb(self, values, rng):
        values = np.asarray(values, dtype=np.int64)
        seeds = random_seeds(values.shape, rng)
        hashed = hashing.local_hash(seeds, values, self.g)
        return {"seed": seeds.view(np.int64), "y": grr_perturb(hashed, self.g, self.p_star, rng)}

    def payload_bytes(self) -> int:
        return BRANCH_BYTES + LONG_BYTES + varint_bytes(self.g - 1)

    def payloads_to_avro(self, columns: Columns) -> Iterator[dict]:
        return seeded_payloads_to_avro(columns)

    def payloads_from_avro(self, payloads):
        return seeded_payloads_from_avro(payloads, self.g)

    def accumulate(self, statistic, columns) -> None:
        hashing.add_local_hash_support(statistic, columns["seed"].view(np.uint64),
                                       columns["y"], self.g)


def better_rounding(candidates, n_mse_of) -> int:
    """The candidate integer with the lowest n·MSE (ties: the smaller one)."""
    return min(sorted(set(candidates)), key=n_mse_of)


@dataclass(frozen=True)
class OLH(LocalHashing):
    name: ClassVar[str] = "olh"
    payload_record: ClassVar[str] = "OlhPayload"

    def choose_g(self) -> int:
        return max(2, math.floor(math.exp(self.epsilon) + 1.5))


def local_hashing_n_mse(epsilon: float, d: int, g: int) -> float:
    """n·MSE of eq. 4 for local hashing with hash range g."""
    e = math.exp(epsilon)
    p, q = e / (e + g - 1), 1.0 / g
    return q * (1 - q) / (p - q) ** 2 + (1 - p - q) / (d * (p - q))
