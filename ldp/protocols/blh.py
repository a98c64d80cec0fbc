"""Binary Local Hashing: local hashing with g = 2 ([Wang20] journal §2.4, the
"Random Matrix Projection" of its reference [6]).

Everything but g is ldp_telemetry.ldp.protocols.local_hashing.LocalHashing: report
<seed, GRR_2(H(seed, v))> with p = e^ε / (e^ε + 1); p* = p, q* = 1/2.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ldp_telemetry.ldp.protocols.base import seed_payload_schema
from ldp_telemetry.ldp.protocols.local_hashing import LocalHashing


@dataclass(frozen=True)
class BLH(LocalHashing):
    name: ClassVar[str] = "blh"
    payload_schema: ClassVar[dict] = seed_payload_schema(
        "BlhPayload", "Hash seed: the uint64 as two's complement.",
        "Perturbed hash value in [0, 2).")
    aggregation_rank: ClassVar[float] = 100

    def choose_g(self) -> int:
        return 2
