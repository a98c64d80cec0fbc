"""The surface every numeric protocol exposes (Square Wave and the baselines of [Li20] §4, §2.2).

A numeric metric's true values are numbers in [low, high]; the client maps them onto the unit
interval, u = (x − low)/(high − low), and the protocol randomises u. The server keeps a
fixed-shape int64 statistic per window, mergeable by addition, exactly as the frequency oracles
do: the same `new_statistic` / `accumulate` / payload surface as
`ldp_telemetry.ldp.protocols.base.FrequencyOracle`, so counting is the same code for both.
What differs is the per-window estimator (a NUMERIC method of
ldp_telemetry.ldp.estimation.estimators), which reads the statistic through the protocol's
`channel()` or its own rule.

`d` is the number of input buckets B of [0, 1]: the estimate is a histogram of B probabilities.
"""
from __future__ import annotations

import abc
from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ldp_telemetry.ldp.base.errors import RegistryError
from ldp_telemetry.ldp.base.validation import is_int
from ldp_telemetry.ldp.protocols.base import NUMERIC, Columns, epsilon_problem

#: Largest number of input or output buckets of a numeric metric (the statistic and the
#: estimator's arrays are this long; EM costs O(buckets) per iteration).
MAX_BUCKETS = 65_536


def bucket_count_problem(value: object) -> str | None:
    """Why `value` is not a usable bucket count (a phrase), or None."""
    if not is_int(value) or not 2 <= value <= MAX_BUCKETS:
        return f"must be an integer in [2, {MAX_BUCKETS}], got {value!r}"
    return None


def unit_buckets(values: np.ndarray, buckets: int) -> np.ndarray:
    """Bucket index in [0, buckets) of values in [0, 1] (1 falls into the last bucket)."""
    index = np.floor(np.asarray(values, dtype=np.float64) * buckets).astype(np.int64)
    return np.clip(index, 0, buckets - 1)


@dataclass(frozen=True)
class NumericProtocol(abc.ABC):
    """An ε-LDP mechanism for numbers in [0, 1], estimated as a histogram of `d` buckets.

    Subclasses set `name`, `payload_record`, `payload_rule`, `server_cost`, `estimators` (the
    NUMERIC estimator methods that read their statistic, the first being the default) and
    implement the client (`perturb`), the wire format and the statistic.
    `output_buckets`: the size of the report histogram where the protocol has one (d̃).
    """

    epsilon: float
    d: int
    output_buckets: int | None = None

    name: ClassVar[str]
    payload_record: ClassVar[str]
    payload_rule: ClassVar[str]
    server_cost: ClassVar[str]
    estimators: ClassVar[tuple[str, ...]]
    kind: ClassVar[str] = NUMERIC

    def __post_init__(self) -> None:
        problem = epsilon_problem(self.epsilon)
        if problem:
            raise RegistryError(f"epsilon {problem}", "epsilon")
        problem = bucket_count_problem(self.d)
        if problem:
            raise RegistryError(f"buckets {problem}", "domain.buckets")
        if self.output_buckets is not None:
            problem = bucket_count_problem(self.output_buckets)
            if problem:
                raise RegistryError(f"output_buckets {problem}", "domain.output_buckets")

    # -- client -----------------------------------------------------------------------------
    @abc.abstractmethod
    def perturb(self, values: np.ndarray, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """Randomise true values in [0, 1] into payload columns (one row per report)."""

    # -- wire format ------------------------------------------------------------------------
    @abc.abstractmethod
    def payload_bytes(self) -> int:
        """Largest Avro-encoded size of one payload, the union branch index included."""

    @abc.abstractmethod
    def payloads_to_avro(self, columns: Columns) -> Iterator[dict]:
        """Payload columns -> Avro payload records (dicts), one per report."""

    @abc.abstractmethod
    def payloads_from_avro(self, payloads: list[dict]) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """Decoded Avro payload records -> (columns, invalid mask); see FrequencyOracle."""

    def check_payloads(self, columns: Columns) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """Fixed-width payload columns -> (columns, invalid mask); see FrequencyOracle."""
        raise NotImplementedError(f"{type(self).__name__} has no vectorised payload check")

    # -- server -----------------------------------------------------------------------------
    @abc.abstractmethod
    def new_statistic(self) -> np.ndarray:
        """An empty statistic (int64, fixed shape)."""

    @abc.abstractmethod
    def accumulate(self, statistic: np.ndarray, columns: Columns) -> None:
        """Add the reports of valid payload columns into `statistic`, in place."""

    @abc.abstractmethod
    def resample(self, estimate: np.ndarray, n: int, rng: np.random.Generator, size: int
                 ) -> np.ndarray:
        """`size` statistics of n reports drawn from the model of the distribution `estimate`
        (the parametric bootstrap of ldp_telemetry.ldp.estimation.uncertainty)."""


def float_column(payloads: list[dict], field: str) -> np.ndarray:
    """One floating-point field of every payload as a float64 column."""
    return np.fromiter((p[field] for p in payloads), dtype=np.float64, count=len(payloads))


def real_payloads_to_avro(columns: Columns) -> Iterator[dict]:
    """<y> payload records of protocols that report one real number."""
    return ({"y": y} for y in columns["y"].tolist())


def real_payloads_from_avro(payloads: list[dict], low: float, high: float
                            ) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """<y> payload records -> the y column, flagging y outside [low, high] (or NaN) invalid."""
    return check_real_payloads({"y": float_column(payloads, "y")}, low, high)


def check_real_payloads(columns: Columns, low: float, high: float
                        ) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """<y> column -> float64 column, flagging y outside [low, high] (or NaN) invalid."""
    y = np.asarray(columns["y"], dtype=np.float64)
    with np.errstate(invalid="ignore"):
        invalid = ~(np.isfinite(y) & (y >= low) & (y <= high))
    return {"y": np.where(invalid, 0.0, y)}, invalid
