"""Binary Local Hashing: local hashing with g = 2 (consistency-norm-hyb.txt §2.4, the
"Random Matrix Projection" of its reference [6]).

Everything but g is ldp_telemetry.ldp.protocols.olh.LocalHashing: report <seed, GRR_2(H(seed, v))> with
p = e^ε / (e^ε + 1); p* = p, q* = 1/2.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ldp_telemetry.ldp.protocols.olh import LocalHashing


@dataclass(frozen=True)
class BLH(LocalHashing):
    name: ClassVar[str] = "blh"
    payload_record: ClassVar[str] = "BlhPayload"

    def choose_g(self) -> int:
        return 2
