"""Hadamard Response ([Wang20] journal §2.4), the randomised-response-on-a-row variant.

Embedding: the values [0, d) are the first d columns of the K x K Sylvester-Hadamard matrix,
K the smallest power of two >= d (K >= 2), whose entries are H[j, v] = (-1)^popcount(j & v).
Every row j >= 1 has exactly K/2 entries +1, so row j and a bit b name the exact half

    Y(j, b) = {v in [0, K) : popcount(j & v) mod 2 = b}

of the embedded domain (columns d..K-1 are never held by a user). Row 0 (all +1) is never
used: it splits nothing.

Client: draw j uniformly from [1, K), compute b = popcount(j & v) mod 2 and keep it with
p = e^ε / (e^ε + 1), otherwise flip it; report <j, b>. Since j does not depend on v, the
ratio of any output's probabilities under two inputs is p / (1 - p) = e^ε.

Support: <j, b> supports Y(j, b). p* = p. Two distinct columns agree on exactly K/2 of the K
rows, row 0 included, so on K/2 - 1 of the K - 1 rows used:
q* = ((K/2 - 1) p + (K/2) (1 - p)) / (K - 1) = (K/2 - p) / (K - 1). (d = K = 2 is binary RR.)

Statistic: the (K, 2) table of report counts per (row, bit), one bincount per batch — O(1) per
report. The support counts follow at finalisation with one fast Walsh-Hadamard transform:
with t_j = count[j, 0] - count[j, 1] and N = Σ count,
c_v = Σ_j count[j, popcount(j & v) mod 2] = (N + (H t)_v) / 2, O(K log K) per window.
"""
from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from ldp_telemetry.ldp.protocols.base import (BRANCH_BYTES, Columns, FrequencyOracle, int_column,
                                              varint_bytes)


def hadamard_parity(rows: np.ndarray, columns: np.ndarray) -> np.ndarray:
    """popcount(row & column) mod 2 (broadcasting): 0 where H = +1, 1 where H = -1."""
    both = np.bitwise_and(np.asarray(rows, dtype=np.int64), np.asarray(columns, dtype=np.int64))
    return (np.bitwise_count(both) & 1).astype(np.int64)


def walsh_hadamard(vector: np.ndarray) -> np.ndarray:
    """H @ vector for the Sylvester-Hadamard matrix of size len(vector) (a power of two); a
    2-D array is transformed along its first axis (every column at once)."""
    out = np.array(vector, dtype=np.int64)
    size, half = len(out), 1
    while half < size:
        pairs = out.reshape(-1, 2, half, *out.shape[1:])
        top, bottom = pairs[:, 0].copy(), pairs[:, 1]
        pairs[:, 0] += bottom
        pairs[:, 1] = top - bottom
        half *= 2
    return out


@dataclass(frozen=True)
class HR(FrequencyOracle):
    name: ClassVar[str] = "hr"
    payload_schema: ClassVar[dict] = {"type": "record", "name": "HrPayload", "fields": [
        {"name": "row", "type": "int",
         "doc": "Hadamard row in [1, K), K = smallest power of 2 >= d."},
        {"name": "bit", "type": "boolean", "doc": "Perturbed parity of popcount(row & value)."}]}
    payload_rule: ClassVar[str] = "HR row must lie in [1, K), K the smallest power of 2 >= d"
    server_cost: ClassVar[str] = "O(n + K log K): (row, bit) histogram, one Hadamard transform"
    aggregation_rank: ClassVar[float] = 20

    K: int = field(init=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "K", 1 << (self.d - 1).bit_length())

    @property
    def p_star(self) -> float:
        e = math.exp(self.epsilon)
        return e / (e + 1.0)

    @property
    def q_star(self) -> float:
        return (self.K / 2 - self.p_star) / (self.K - 1)

    @property
    def parameter(self) -> str:
        return f"K={self.K}"

    def _report_variance(self, w: np.ndarray) -> np.ndarray:
        """Var[Y | x] with w padded with zeros to length K (W = Σ w, Q = Σ w^2).

        With s_r(v) = (-1)^popcount(r & v), the report <r, b> supports v with indicator
        (1 + (-1)^b s_r(v)) / 2, and (-1)^b = sigma s_r(x), sigma = +1 with probability p*,
        else -1. So Y = (W + sigma s_r(x) h_r) / 2 with h_r = Σ_v s_r(v) w_v the Walsh-Hadamard
        transform of w and r uniform on [1, K). Parseval (Σ_r h_r^2 = K Q) and the inverse
        transform (Σ_r s_r(x) h_r = K w_x), both over r in [0, K) with h_0 = W, give
            Var[Y | x] = [ (K Q - W^2)/(K - 1) - (2p* - 1)^2 ((K w_x - W)/(K - 1))^2 ] / 4.
        When d = K a report supports exactly K/2 values and the whole domain has variance 0.
        """
        p, K, total, squares = self.p_star, self.K, w.sum(), np.dot(w, w)
        bias = (2 * p - 1) * (K * w - total) / (K - 1)
        return ((K * squares - total ** 2) / (K - 1) - bias ** 2) / 4

    def perturb(self, values: np.ndarray, rng: np.random.Generator) -> dict[str, np.ndarray]:
        values = np.asarray(values, dtype=np.int64)
        row = rng.integers(1, self.K, size=values.shape)
        flip = rng.random(values.shape) >= self.p_star
        return {"row": row, "bit": hadamard_parity(row, values) ^ flip}

    def payload_bytes(self) -> int:
        return BRANCH_BYTES + varint_bytes(self.K - 1) + 1

    def payloads_to_avro(self, columns: Columns) -> Iterator[dict]:
        return ({"row": j, "bit": bool(b)}
                for j, b in zip(columns["row"].tolist(), columns["bit"].tolist(), strict=True))

    def payloads_from_avro(self, payloads: list[dict]
                               ) -> tuple[dict[str, np.ndarray], np.ndarray]:
        return self.check_payloads({"row": int_column(payloads, "row"),
                                    "bit": int_column(payloads, "bit")})

    def check_payloads(self, columns: Columns) -> tuple[dict[str, np.ndarray], np.ndarray]:
        row = np.asarray(columns["row"], dtype=np.int64)
        bit = np.asarray(columns["bit"], dtype=np.int64)
        invalid = (row < 1) | (row >= self.K)
        return {"row": np.where(invalid, 1, row), "bit": bit}, invalid

    def new_statistic(self) -> np.ndarray:
        return np.zeros((self.K, 2), dtype=np.int64)

    def statistic_nbytes(self) -> int:
        return 16 * self.K

    def accumulate(self, statistic: np.ndarray, columns: Columns) -> None:
        cells = 2 * np.asarray(columns["row"], dtype=np.int64) + columns["bit"]
        statistic += np.bincount(cells, minlength=statistic.size).reshape(statistic.shape)

    def support_counts(self, statistic: np.ndarray) -> np.ndarray:
        spread = walsh_hadamard(statistic[:, 0] - statistic[:, 1])
        return (statistic.sum() + spread[: self.d]) // 2
