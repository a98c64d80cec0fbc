"""Re-optimised Unary Encoding ([Fang25] §4.1.1).

Unary encoding (ldp_telemetry.ldp.protocols.unary_encoding) with p and q minimising the analytical
MSE (eq. 4/10) under the UE privacy constraint p = e^ε q / (1 - q + e^ε q) (eq. 9):

    h = sqrt((d - 1 + e^{-ε}) / (d - 1 + e^ε)),   p = 1 / (h + 1),   q = 1 / (e^ε h + 1).

p* = p, q* = q. d = 2 gives SUE's parameters, d -> infinity OUE's.
"""
from __future__ import annotations

import math
from typing import ClassVar

from ldp_telemetry.ldp.protocols.unary_encoding import UnaryEncoding, bits_payload_schema


def similarity_factor(epsilon: float, d: int) -> float:
    """The coefficient h of RUE and RLH ([Fang25] §4.1, Table 1)."""
    e = math.exp(epsilon)
    return math.sqrt((d - 1 + 1 / e) / (d - 1 + e))


class RUE(UnaryEncoding):
    name: ClassVar[str] = "rue"
    payload_schema: ClassVar[dict] = bits_payload_schema("RuePayload")
    aggregation_rank: ClassVar[float] = 60

    @property
    def p_star(self) -> float:
        return 1.0 / (similarity_factor(self.epsilon, self.d) + 1.0)

    @property
    def q_star(self) -> float:
        h = similarity_factor(self.epsilon, self.d)
        return 1.0 / (math.exp(self.epsilon) * h + 1.0)
