"""Symmetric Unary Encoding, i.e. basic RAPPOR ([Fang25] §3.2).

Unary encoding (ldp_telemetry.ldp.protocols.unary_encoding) with the symmetric choice: the 1 bit
stays 1 with p = e^{ε/2} / (e^{ε/2} + 1), each 0 bit becomes 1 with q = 1 / (e^{ε/2} + 1). Then
p(1 - q) / ((1 - p) q) = e^ε (Theorem 1). p* = p, q* = q.
"""
from __future__ import annotations

import math
from typing import ClassVar

from ldp_telemetry.ldp.protocols.unary_encoding import UnaryEncoding, bits_payload_schema


class SUE(UnaryEncoding):
    name: ClassVar[str] = "sue"
    payload_schema: ClassVar[dict] = bits_payload_schema("SuePayload")
    aggregation_rank: ClassVar[float] = 50

    @property
    def p_star(self) -> float:
        half = math.exp(self.epsilon / 2)
        return half / (half + 1.0)

    @property
    def q_star(self) -> float:
        return 1.0 / (math.exp(self.epsilon / 2) + 1.0)
