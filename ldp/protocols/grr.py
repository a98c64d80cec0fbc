"""Generalised Randomised Response (consistency-norm-hyb.txt §2.2, eq. 1).

Report y = v with p = e^ε / (e^ε + d - 1), any other value with q = 1 / (e^ε + d - 1).
A report supports exactly the value it names: p* = p, q* = q. Statistic: the histogram of y.
"""
from __future__ import annotations

import math
from typing import ClassVar, Iterator

import numpy as np

from ldp_telemetry.ldp.protocols.base import (BRANCH_BYTES, Columns, FrequencyOracle, grr_perturb, int_column,
                                varint_bytes)


class GRR(FrequencyOracle):
    name: ClassVar[str] = "grr"
    payload_record: ClassVar[str] = "GrrPayload"
    payload_rule: ClassVar[str] = "GRR value must lie in [0, d)"
    server_cost: ClassVar[str] = "O(n + d): histogram of y"

    @property
    def p_star(self) -> float:
        e = math.exp(self.epsilon)
        return e / (e + self.d - 1)

    @property
    def q_star(self) -> float:
        return 1.0 / (math.exp(self.epsilon) + self.d - 1)

    def perturb(self, values, rng):
        return {"value": grr_perturb(values, self.d, self.p_star, rng)}

    def payload_bytes(self) -> int:
        return BRANCH_BYTES + varint_bytes(self.d - 1)

    def payloads_to_avro(self, columns: Columns) -> Iterator[dict]:
        return ({"value": v} for v in columns["value"].tolist())

    def payloads_from_avro(self, payloads):
        value = int_column(payloads, "value")
        invalid = (value < 0) | (value >= self.d)
        return {"value": np.where(invalid, 0, value)}, invalid

    def accumulate(self, statistic, columns) -> None:
        statistic += np.bincount(columns["value"], minlength=self.d)
