"""Square Wave reporting ([Li20] §5.2–5.4): an ε-LDP mechanism for numbers in [0, 1].

Continuous (`sw`, "randomise then bucketise"): the report ỹ of v has density
p = e^ε/(2b e^ε + 1) on the plateau [v − b, v + b] and q = 1/(2b e^ε + 1) elsewhere on
[−b, 1 + b] ([Li20] eq. 3), with b from the mutual-information bound ([Li20] §5.3)

    b = (ε e^ε − e^ε + 1) / (2 e^ε (e^ε − 1 − ε)).

Outside the plateau the report is uniform over [−b, v − b) ∪ (v + b, 1 + b]: the left part is
chosen with probability proportional to its length v (not one half, which would break ε-LDP).
The server counts reports in d̃ equal buckets of [−b, 1 + b] (default d̃ = B, as in [Li20] §5.4).

Discrete (`sw-discrete`, "bucketise then randomise", [Li20] §5.4): the value is first put in one
of B buckets i, then reported as j in [0, B + 2b) with probability p = e^ε/((2b + 1)e^ε + B − 1)
when i ≤ j ≤ i + 2b (|ỹ − i| ≤ b with ỹ = j − b) and q = 1/((2b + 1)e^ε + B − 1) otherwise,
b = ⌊B · b_continuous⌋.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar

import numpy as np

from ldp_telemetry.ldp.base.errors import RegistryError
from ldp_telemetry.ldp.protocols.base import BRANCH_BYTES, Columns, int_column, varint_bytes
from ldp_telemetry.ldp.protocols.channels import (DiscreteSquareWaveChannel, SquareWaveChannel,
                                                  discrete_sw_parameters,
                                                  discrete_square_wave_channel,
                                                  square_wave_channel, sw_b, sw_pq)
from ldp_telemetry.ldp.protocols.numeric import (NumericProtocol, check_real_payloads,
                                                 real_payloads_from_avro,
                                                 real_payloads_to_avro, unit_buckets)

#: Bytes of an Avro double.
DOUBLE_BYTES = 8


def _buckets(protocol: NumericProtocol) -> int:
    """d̃, the report histogram's size, which a Square Wave protocol's __post_init__ sets."""
    assert protocol.output_buckets is not None, "set by __post_init__"
    return protocol.output_buckets


def _multinomial(probabilities: np.ndarray, n: int, rng: np.random.Generator, size: int
                 ) -> np.ndarray:
    probabilities = np.clip(probabilities, 0.0, None)
    return rng.multinomial(int(n), probabilities / probabilities.sum(), size=size)


class SquareWave(NumericProtocol):
    name: ClassVar[str] = "sw"
    payload_record: ClassVar[str] = "SwPayload"
    payload_schema: ClassVar[dict] = {"type": "record", "name": "SwPayload", "fields": [
        {"name": "y", "type": "double",
         "doc": "Square Wave report in [-b, 1 + b] (the value mapped onto [0, 1], randomised)."}]}
    payload_rule: ClassVar[str] = "Square Wave report y must be a finite number in [-b, 1 + b]"
    server_cost: ClassVar[str] = "O(n + d̃): histogram of y over d̃ buckets of [-b, 1 + b]"
    estimators: ClassVar[tuple[str, ...]] = ("ems", "em")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.output_buckets is None:
            object.__setattr__(self, "output_buckets", self.d)

    @property
    def b(self) -> float:
        return sw_b(self.epsilon)

    @property
    def p(self) -> float:
        return sw_pq(self.epsilon, self.b)[0]

    @property
    def q(self) -> float:
        return sw_pq(self.epsilon, self.b)[1]

    def density(self, v: np.ndarray, y: np.ndarray) -> np.ndarray:
        """The report density at y given the true value v ([Li20] eq. 3); 0 outside [−b, 1 + b]."""
        v, y = np.broadcast_arrays(np.asarray(v, dtype=np.float64), np.asarray(y, dtype=np.float64))
        b = self.b
        inside = (y >= -b) & (y <= 1.0 + b)
        return np.where(inside, np.where(np.abs(y - v) <= b, self.p, self.q), 0.0)

    def channel(self) -> SquareWaveChannel:
        return square_wave_channel(float(self.epsilon), self.d, self.output_buckets)

    def resample(self, estimate: np.ndarray, n: int, rng: np.random.Generator, size: int
                 ) -> np.ndarray:
        """`size` report histograms ~ Multinomial(n, M x) for the distribution x = `estimate`."""
        return _multinomial(self.channel().forward(estimate), n, rng, size)

    def perturb(self, values: np.ndarray, rng: np.random.Generator) -> dict[str, np.ndarray]:
        v = np.asarray(values, dtype=np.float64)
        b = self.b
        plateau = rng.random(v.shape) < 2.0 * b * self.p
        u = rng.random(v.shape)
        # tail: uniform on [−b, v − b) ∪ (v + b, 1 + b] (total length 1): left iff u < v
        tail = np.where(u < v, u - b, u + b)
        y = np.where(plateau, v - b + 2.0 * b * u, tail)
        return {"y": np.clip(y, -b, 1.0 + b)}

    def payload_bytes(self) -> int:
        return BRANCH_BYTES + DOUBLE_BYTES

    def payloads_to_avro(self, columns: Columns) -> Iterator[dict]:
        return real_payloads_to_avro(columns)

    def payloads_from_avro(self, payloads: list[dict]
                               ) -> tuple[dict[str, np.ndarray], np.ndarray]:
        return real_payloads_from_avro(payloads, -self.b, 1.0 + self.b)

    def check_payloads(self, columns: Columns) -> tuple[dict[str, np.ndarray], np.ndarray]:
        return check_real_payloads(columns, -self.b, 1.0 + self.b)

    def new_statistic(self) -> np.ndarray:
        return np.zeros(_buckets(self), dtype=np.int64)

    def accumulate(self, statistic: np.ndarray, columns: Columns) -> None:
        b, d_out = self.b, _buckets(self)
        j = np.floor((columns["y"] + b) * (d_out / (1.0 + 2.0 * b))).astype(np.int64)
        statistic += np.bincount(np.clip(j, 0, d_out - 1), minlength=d_out)


class DiscreteSquareWave(NumericProtocol):
    name: ClassVar[str] = "sw-discrete"
    payload_record: ClassVar[str] = "SwDiscretePayload"
    payload_schema: ClassVar[dict] = {"type": "record", "name": "SwDiscretePayload", "fields": [
        {"name": "y", "type": "int",
         "doc": "Discrete Square Wave report in [0, B + 2b)."}]}
    payload_rule: ClassVar[str] = "discrete Square Wave report y must lie in [0, B + 2b)"
    server_cost: ClassVar[str] = "O(n + B): histogram of y"
    estimators: ClassVar[tuple[str, ...]] = ("ems", "em")

    def __post_init__(self) -> None:
        super().__post_init__()
        b, _, _ = discrete_sw_parameters(self.epsilon, self.d)
        if self.output_buckets not in (None, self.d + 2 * b):
            raise RegistryError(f"output_buckets of sw-discrete is B + 2b = {self.d + 2 * b}, "
                                f"got {self.output_buckets}", "domain.output_buckets")
        object.__setattr__(self, "output_buckets", self.d + 2 * b)

    @property
    def b(self) -> int:
        return discrete_sw_parameters(self.epsilon, self.d)[0]

    def probabilities(self) -> np.ndarray:
        """The exact (B + 2b) × B matrix of report probabilities."""
        return self.channel().dense()

    def channel(self) -> DiscreteSquareWaveChannel:
        return discrete_square_wave_channel(float(self.epsilon), self.d)

    def resample(self, estimate: np.ndarray, n: int, rng: np.random.Generator, size: int
                 ) -> np.ndarray:
        """`size` report histograms ~ Multinomial(n, M x) for the distribution x = `estimate`."""
        return _multinomial(self.channel().forward(estimate), n, rng, size)

    def perturb(self, values: np.ndarray, rng: np.random.Generator) -> dict[str, np.ndarray]:
        i = unit_buckets(values, self.d)
        b, p, _ = discrete_sw_parameters(self.epsilon, self.d)
        plateau = rng.random(i.shape) < (2 * b + 1) * p
        near = i + rng.integers(0, 2 * b + 1, size=i.shape)
        # one of the B − 1 outputs off the plateau
        other = rng.integers(0, self.d - 1, size=i.shape)
        far = np.where(other < i, other, other + 2 * b + 1)
        return {"y": np.where(plateau, near, far)}

    def payload_bytes(self) -> int:
        return BRANCH_BYTES + varint_bytes(_buckets(self) - 1)

    def payloads_to_avro(self, columns: Columns) -> Iterator[dict]:
        return ({"y": y} for y in columns["y"].tolist())

    def payloads_from_avro(self, payloads: list[dict]
                               ) -> tuple[dict[str, np.ndarray], np.ndarray]:
        return self.check_payloads({"y": int_column(payloads, "y")})

    def check_payloads(self, columns: Columns) -> tuple[dict[str, np.ndarray], np.ndarray]:
        y = np.asarray(columns["y"], dtype=np.int64)
        invalid = (y < 0) | (y >= _buckets(self))
        return {"y": np.where(invalid, 0, y)}, invalid

    def new_statistic(self) -> np.ndarray:
        return np.zeros(_buckets(self), dtype=np.int64)

    def accumulate(self, statistic: np.ndarray, columns: Columns) -> None:
        statistic += np.bincount(columns["y"], minlength=_buckets(self))
