"""Mean-only numeric protocols ([Li20] §2.2): Stochastic Rounding (`sr`) and the Piecewise
Mechanism (`pm`). Both report an unbiased randomisation ṽ of t = 2v − 1 in [−1, 1] (v the value
mapped onto [0, 1]); the server keeps [Σ ṽ-terms] and the `mean` estimator returns the mean of
ṽ and its standard error. They estimate the mean alone, not the distribution.

SR: p = e^ε/(e^ε + 1), q = 1 − p; the report is +1 with probability q + (p − q)(1 + t)/2, −1
otherwise, and ṽ = ±1/(p − q). Statistic: the counts of −1 and +1 (int64).

PM: with z = e^{ε/2} and s = (z + 1)/(z − 1), the report is uniform on [ℓ(t), r(t)],
ℓ(t) = (z t − 1)/(z − 1), r(t) = ℓ(t) + 2/(z − 1), with probability z/(z + 1), else uniform on
[−s, ℓ) ∪ (r, s] (each part in proportion to its length); the report itself is ṽ. Statistic:
[Σ ṽ, Σ ṽ²] (float64, merged by addition).
"""
from __future__ import annotations

import math
from collections.abc import Iterator
from typing import ClassVar

import numpy as np

from ldp_telemetry.ldp.protocols.base import BRANCH_BYTES, Columns
from ldp_telemetry.ldp.protocols.numeric import (NumericProtocol, check_real_payloads,
                                                 real_payloads_from_avro,
                                                 real_payloads_to_avro)
from ldp_telemetry.ldp.protocols.sw import DOUBLE_BYTES


class MeanMechanism(NumericProtocol):
    """A numeric protocol that estimates the mean only (no histogram: `d` is unused)."""

    estimators: ClassVar[tuple[str, ...]] = ("mean",)
    mean_only: ClassVar[bool] = True

    def mean_and_error(self, statistic: np.ndarray, n: int) -> tuple[float, float]:
        """Estimated mean of t = 2v − 1 and its standard error."""
        raise NotImplementedError

    def variance_of_t(self, statistic: np.ndarray, n: int) -> float | None:
        """An estimate of Var[t] over the users (t = 2v − 1), or None when the reports carry
        no information about it."""
        return None

    def resample(self, estimate: np.ndarray, n: int, rng: np.random.Generator, size: int
                 ) -> np.ndarray:
        raise NotImplementedError("mean-only protocols have closed-form standard errors")


class StochasticRounding(MeanMechanism):
    name: ClassVar[str] = "sr"
    payload_record: ClassVar[str] = "SrPayload"
    payload_schema: ClassVar[dict] = {"type": "record", "name": "SrPayload", "fields": [
        {"name": "up", "type": "boolean",
         "doc": "Stochastic rounding: true for +1, false for -1."}]}
    payload_rule: ClassVar[str] = "stochastic-rounding reports are a boolean"
    server_cost: ClassVar[str] = "O(n): counts of -1 and +1"

    @property
    def p(self) -> float:
        e = math.exp(self.epsilon)
        return e / (e + 1.0)

    def perturb(self, values: np.ndarray, rng: np.random.Generator) -> dict[str, np.ndarray]:
        t = 2.0 * np.asarray(values, dtype=np.float64) - 1.0
        p = self.p
        q = 1.0 - p
        return {"up": rng.random(t.shape) < q + (p - q) * (1.0 + t) / 2.0}

    def payload_bytes(self) -> int:
        return BRANCH_BYTES + 1

    def payloads_to_avro(self, columns: Columns) -> Iterator[dict]:
        return ({"up": bool(u)} for u in columns["up"].tolist())

    def payloads_from_avro(self, payloads: list[dict]
                               ) -> tuple[dict[str, np.ndarray], np.ndarray]:
        return self.check_payloads({"up": np.fromiter(
            (p["up"] for p in payloads), dtype=bool, count=len(payloads))})

    def check_payloads(self, columns: Columns) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """Every boolean is a valid report."""
        up = np.asarray(columns["up"], dtype=bool)
        return {"up": up}, np.zeros(len(up), dtype=bool)

    def new_statistic(self) -> np.ndarray:
        return np.zeros(2, dtype=np.int64)

    def accumulate(self, statistic: np.ndarray, columns: Columns) -> None:
        statistic += np.bincount(columns["up"].astype(np.int64), minlength=2)

    def mean_and_error(self, statistic: np.ndarray, n: int) -> tuple[float, float]:
        """t̄ = (c₊ − c₋)/(n (p − q)); Var ṽ_i = 1/(p − q)² − t_i² ≤ 1/(p − q)² − t̄² on average."""
        gap = 2.0 * self.p - 1.0
        mean = float(statistic[1] - statistic[0]) / (n * gap)
        return mean, math.sqrt(max(1.0 / gap ** 2 - mean ** 2, 0.0) / n)


class PiecewiseMechanism(MeanMechanism):
    name: ClassVar[str] = "pm"
    payload_record: ClassVar[str] = "PmPayload"
    payload_schema: ClassVar[dict] = {"type": "record", "name": "PmPayload", "fields": [
        {"name": "y", "type": "double",
         "doc": "Piecewise Mechanism report in [-s, s]."}]}
    payload_rule: ClassVar[str] = "Piecewise Mechanism report must be a finite number in [-s, s]"
    server_cost: ClassVar[str] = "O(n): sum and sum of squares of the reports"

    @property
    def s(self) -> float:
        z = math.exp(self.epsilon / 2.0)
        return (z + 1.0) / (z - 1.0)

    def perturb(self, values: np.ndarray, rng: np.random.Generator) -> dict[str, np.ndarray]:
        t = 2.0 * np.asarray(values, dtype=np.float64) - 1.0
        z = math.exp(self.epsilon / 2.0)
        s = self.s
        left = (z * t - 1.0) / (z - 1.0)
        width = 2.0 / (z - 1.0)
        inside = rng.random(t.shape) < z / (z + 1.0)
        u = rng.random(t.shape)
        near = left + width * u
        # outside: uniform over [−s, ℓ) ∪ (r, s], total length 2s − width
        point = -s + u * (2.0 * s - width)
        far = np.where(point < left, point, point + width)
        return {"y": np.clip(np.where(inside, near, far), -s, s)}

    def payload_bytes(self) -> int:
        return BRANCH_BYTES + DOUBLE_BYTES

    def payloads_to_avro(self, columns: Columns) -> Iterator[dict]:
        return real_payloads_to_avro(columns)

    def payloads_from_avro(self, payloads: list[dict]
                               ) -> tuple[dict[str, np.ndarray], np.ndarray]:
        return real_payloads_from_avro(payloads, -self.s, self.s)

    def check_payloads(self, columns: Columns) -> tuple[dict[str, np.ndarray], np.ndarray]:
        return check_real_payloads(columns, -self.s, self.s)

    def new_statistic(self) -> np.ndarray:
        return np.zeros(2, dtype=np.float64)

    def accumulate(self, statistic: np.ndarray, columns: Columns) -> None:
        y = columns["y"]
        statistic += (y.sum(), y @ y)

    def mean_and_error(self, statistic: np.ndarray, n: int) -> tuple[float, float]:
        """t̄ = Σ ṽ/n with the reports' sample standard error."""
        mean = float(statistic[0]) / n
        return mean, math.sqrt(max(float(statistic[1]) / n - mean ** 2, 0.0) / n)

    def report_second_moment(self, t: np.ndarray) -> np.ndarray:
        """E[ṽ² | t] = t² + Var[ṽ | t], with PM's variance t²/(z − 1) + (z + 3)/(3(z − 1)²),
        z = e^{ε/2} (the Piecewise Mechanism's own analysis, cited by [Li20] §2.2)."""
        z = math.exp(self.epsilon / 2.0)
        t = np.asarray(t, dtype=np.float64)
        return t ** 2 * z / (z - 1.0) + (z + 3.0) / (3.0 * (z - 1.0) ** 2)

    def variance_of_t(self, statistic: np.ndarray, n: int) -> float | None:
        """Var[t] from the second moment: E[t²] = (Σṽ²/n − (z + 3)/(3(z − 1)²)) (z − 1)/z, minus
        (t̄² − se²), an unbiased estimate of E[t]² ([Li20] §6 estimates the variance with PM);
        clipped at 0."""
        z = math.exp(self.epsilon / 2.0)
        second = (float(statistic[1]) / n - (z + 3.0) / (3.0 * (z - 1.0) ** 2)) * (z - 1.0) / z
        mean, error = self.mean_and_error(statistic, n)
        return max(second - (mean ** 2 - error ** 2), 0.0)
