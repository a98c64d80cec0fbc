"""Re-optimised Local Hashing ([Fang25] §4.1.2 and §4.2).

Local hashing (ldp_telemetry.ldp.protocols.local_hashing) whose g minimises the analytical MSE
(eq. 12): the continuous optimum is g = h·e^ε + 1 with h of
ldp_telemetry.ldp.protocols.rue.similarity_factor; g is floor or ceil of it, whichever has the
lower n·MSE (eq. 4), and at least 2.

The paper's §4.2 replaces the hash by a "randomized grouping vector" B drawn from numpy's generator
with seed s, which no other language (nor a later numpy) reproduces. Here the grouping vector is
B(v) = H(seed, v) of ldp_telemetry.ldp.protocols.hashing.local_hash, the portable SplitMix64
multiply-add-shift hash shared with OLH: the same O(nd) aggregation, with a (report x value) block
test instead of a d-long random vector per report.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from ldp_telemetry.ldp.protocols.base import seed_payload_schema
from ldp_telemetry.ldp.protocols.local_hashing import (LocalHashing, better_rounding,
                                                       local_hashing_n_mse)
from ldp_telemetry.ldp.protocols.rue import similarity_factor


@dataclass(frozen=True)
class RLH(LocalHashing):
    name: ClassVar[str] = "rlh"
    payload_schema: ClassVar[dict] = seed_payload_schema(
        "RlhPayload", "Grouping seed: the uint64 as two's complement.",
        "Perturbed group in [0, g).")
    aggregation_rank: ClassVar[float] = 80

    def choose_g(self) -> int:
        target = similarity_factor(self.epsilon, self.d) * math.exp(self.epsilon) + 1
        candidates = [max(2, math.floor(target)), max(2, math.ceil(target))]
        return better_rounding(candidates, lambda g: local_hashing_n_mse(self.epsilon, self.d, g))
