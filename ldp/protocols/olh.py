"""Optimised Local Hashing ([Wang20] journal §2.4; [Fang25] §3.3).

Local hashing (ldp_telemetry.ldp.protocols.local_hashing) with g = e^ε + 1 rounded to the nearest
integer (halves up), and at least 2: OLH's g minimises the approximate variance ([Fang25]
eq. 3), whose continuous optimum is e^ε + 1. This is the rounding behind [Fang25] Table 3
(ε = 4: g = 56, n·MSE 0.5798 at d = 2); the better of floor/ceil by eq. 4 would give g = 55
and 0.5703, which the table does not print.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from ldp_telemetry.ldp.protocols.base import seed_payload_schema
from ldp_telemetry.ldp.protocols.local_hashing import LocalHashing


@dataclass(frozen=True)
class OLH(LocalHashing):
    name: ClassVar[str] = "olh"
    payload_schema: ClassVar[dict] = seed_payload_schema(
        "OlhPayload", "Hash seed: the uint64 as two's complement.",
        "Perturbed hash value in [0, g).")
    aggregation_rank: ClassVar[float] = 90

    def choose_g(self) -> int:
        return max(2, math.floor(math.exp(self.epsilon) + 1.5))
