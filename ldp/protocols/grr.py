"""Generalised Randomised Response ([Wang20] journal §2.2, eq. 1).

Report y = v with p = e^ε / (e^ε + d - 1), any other value with q = 1 / (e^ε + d - 1).
A report supports exactly the value it names: p* = p, q* = q. Statistic: the histogram of y.
"""
from __future__ import annotations

import math
from collections.abc import Iterator
from typing import ClassVar

import numpy as np

from ldp_telemetry.ldp.protocols.base import (BRANCH_BYTES, Columns, FrequencyOracle, grr_perturb,
                                              int_column, varint_bytes)


class GRR(FrequencyOracle):
    name: ClassVar[str] = "grr"
    payload_schema: ClassVar[dict] = {"type": "record", "name": "GrrPayload", "fields": [
        {"name": "value", "type": "int", "doc": "Reported value in [0, d)."}]}
    payload_rule: ClassVar[str] = "GRR value must lie in [0, d)"
    server_cost: ClassVar[str] = "O(n + d): histogram of y"
    aggregation_rank: ClassVar[float] = 10

    @property
    def p_star(self) -> float:
        e = math.exp(self.epsilon)
        return e / (e + self.d - 1)

    @property
    def q_star(self) -> float:
        return 1.0 / (math.exp(self.epsilon) + self.d - 1)

    def _report_variance(self, w: np.ndarray) -> np.ndarray:
        """A report supports exactly one value, so Y = w_y and, with m_x = p* w_x + q* (W - w_x)
        the mean of Y given x (W = Σ w, Q = Σ w^2),
            Var[Y | x] = p* w_x^2 + q* (Q - w_x^2) - m_x^2
        (the multinomial covariances Cov(c_u, c_v) = -n_x P[y=u|x] P[y=v|x] summed over users).
        For a set of k values: Var = (f_S P_in (1 - P_in) + (1 - f_S) k q* (1 - k q*)) /
        (n (p*-q*)^2), P_in = p* + (k - 1) q*; the whole domain has variance 0. Y shifts by a
        constant with w, so w is centred first (for accuracy).
        """
        p, q = self.p_star, self.q_star
        w = w - w.mean()
        mean = p * w + q * (w.sum() - w)
        return p * w ** 2 + q * (np.dot(w, w) - w ** 2) - mean ** 2

    def perturb(self, values: np.ndarray, rng: np.random.Generator) -> dict[str, np.ndarray]:
        return {"value": grr_perturb(values, self.d, self.p_star, rng)}

    def payload_bytes(self) -> int:
        return BRANCH_BYTES + varint_bytes(self.d - 1)

    def payloads_to_avro(self, columns: Columns) -> Iterator[dict]:
        return ({"value": v} for v in columns["value"].tolist())

    def payloads_from_avro(self, payloads: list[dict]
                               ) -> tuple[dict[str, np.ndarray], np.ndarray]:
        return self.check_payloads({"value": int_column(payloads, "value")})

    def check_payloads(self, columns: Columns) -> tuple[dict[str, np.ndarray], np.ndarray]:
        value = np.asarray(columns["value"], dtype=np.int64)
        invalid = (value < 0) | (value >= self.d)
        return {"value": np.where(invalid, 0, value)}, invalid

    def accumulate(self, statistic: np.ndarray, columns: Columns) -> None:
        statistic += np.bincount(columns["value"], minlength=self.d)
