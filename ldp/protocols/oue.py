"""Optimised Unary Encoding ([Wang20] journal §2.3).

Unary encoding (ldp_telemetry.ldp.protocols.unary_encoding) with p = 1/2 and
q = 1 / (e^ε + 1) (errata: not 1/(e^{ε/2} + 1)). p* = p, q* = q.
"""
from __future__ import annotations

import math
from typing import ClassVar

from ldp_telemetry.ldp.protocols.unary_encoding import UnaryEncoding, bits_payload_schema


class OUE(UnaryEncoding):
    name: ClassVar[str] = "oue"
    payload_schema: ClassVar[dict] = bits_payload_schema("OuePayload")
    aggregation_rank: ClassVar[float] = 40

    @property
    def p_star(self) -> float:
        return 0.5

    @property
    def q_star(self) -> float:
        return 1.0 / (math.exp(self.epsilon) + 1.0)
