"""The surface every frequency oracle exposes.

A protocol is pure (rws-frequency-protocols.txt Definition 2): each report supports a set of
values, the true value with probability p*, every other value with probability q* < p*. The
server therefore only needs, per window, the support count of every value; each protocol keeps a
*sufficient statistic* from which those counts follow, mergeable by addition and of a size that
does not depend on the number of reports.

One protocol = one module: client perturbation over numpy arrays, the payload's Avro record and
its validity rule, the statistic, and p*/q*. Estimation is shared (ldp_telemetry.ldp.estimation).
"""
from __future__ import annotations

import abc
import math
from dataclasses import dataclass
from typing import ClassVar, Iterator, Mapping

import numpy as np

from ldp_telemetry.ldp.estimation import SupportNoise

Columns = Mapping[str, np.ndarray]


@dataclass(frozen=True)
class FrequencyOracle(abc.ABC):
    """An ε-LDP frequency oracle over the domain [0, d).

    Subclasses set `name` (the registry name), `payload_record` (the Avro record name of their
    report payload), `payload_rule` (what makes a payload valid, for dead-letter reasons) and
    `server_cost` (the aggregation cost in O-notation, n reports).
    """

    epsilon: float
    d: int

    name: ClassVar[str]
    payload_record: ClassVar[str]
    payload_rule: ClassVar[str]
    server_cost: ClassVar[str]

    def __post_init__(self) -> None:
        problem = epsilon_problem(self.epsilon)
        if problem:
            raise ValueError(f"epsilon {problem}")
        if isinstance(self.d, bool) or not isinstance(self.d, int) or self.d < 2:
            raise ValueError(f"domain size must be an integer >= 2, got {self.d!r}")

    # -- the pure-protocol parameters -------------------------------------------------------
    @property
    @abc.abstractmethod
    def p_star(self) -> float:
        """Probability that a report supports its own value."""

    @property
    @abc.abstractmethod
    def q_star(self) -> float:
        """Probability that a report supports a given other value."""

    def noise(self, n: int) -> SupportNoise:
        """The noise model of an estimate built from n reports."""
        return SupportNoise(self.p_star, self.q_star, int(n))

    def n_mse(self) -> float:
        """n times the analytical full-domain MSE (rws-frequency-protocols.txt eq. 4)."""
        p, q, d = self.p_star, self.q_star, self.d
        return q * (1 - q) / (p - q) ** 2 + (1 - p - q) / (d * (p - q))

    # -- client -----------------------------------------------------------------------------
    @abc.abstractmethod
    def perturb(self, values: np.ndarray, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """Randomise true values in [0, d) into payload columns (one row per report)."""

    # -- wire format ------------------------------------------------------------------------
    @abc.abstractmethod
    def payload_bytes(self) -> int:
        """Largest Avro-encoded size of one payload, the union branch index included."""

    @abc.abstractmethod
    def payloads_to_avro(self, columns: Columns) -> Iterator[dict]:
        """Payload columns -> Avro payload records (dicts), one per report."""

    @abc.abstractmethod
    def payloads_from_avro(self, payloads: list[dict]) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """Decoded Avro payload records -> (columns, invalid mask).

        Rows flagged invalid lie outside the protocol's output space; their column entries
        are placeholders and must be dropped by the caller.
        """

    # -- server -----------------------------------------------------------------------------
    def new_statistic(self) -> np.ndarray:
        """An empty sufficient statistic (int64, fixed shape): by default the d support counts."""
        return np.zeros(self.d, dtype=np.int64)

    def statistic_nbytes(self) -> int:
        """Bytes of one statistic from `new_statistic`, known without allocating it."""
        return 8 * self.d

    @abc.abstractmethod
    def accumulate(self, statistic: np.ndarray, columns: Columns) -> None:
        """Add the reports of valid payload columns into `statistic`, in place."""

    def support_counts(self, statistic: np.ndarray) -> np.ndarray:
        """Support count of every value (length d) from the statistic."""
        return statistic


def varint_bytes(value: int) -> int:
    """Bytes of an Avro int/long: the zig-zag value as a base-128 varint."""
    zigzag = 2 * value if value >= 0 else -2 * value - 1
    return max(1, -(-zigzag.bit_length() // 7))


#: The union branch index of every report payload (fewer than 64 branches: one byte).
BRANCH_BYTES = 1
#: Largest encoding of an Avro long (a uniformly drawn 64-bit seed needs 9 or 10 bytes).
LONG_BYTES = 10


#: The privacy levels every protocol supports. Below MIN_EPSILON, e^ε is 1 to within a few ulps
#: and p* - q* vanishes; above MAX_EPSILON a report keeps its value with probability above
#: 1 - 2e-9 (no privacy is left) and local hashing's range g ~ e^ε would leave 32 bits.
MIN_EPSILON = 1e-6
MAX_EPSILON = 20.0


def epsilon_problem(epsilon) -> str | None:
    """Why `epsilon` is not a usable privacy level (a phrase), or None when it is."""
    if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float)):
        return f"must be a number, got {epsilon!r}"
    if not (math.isfinite(epsilon) and MIN_EPSILON <= epsilon <= MAX_EPSILON):
        return f"must lie in [{MIN_EPSILON:g}, {MAX_EPSILON:g}], got {epsilon!r}"
    return None


def random_seeds(shape, rng: np.random.Generator) -> np.ndarray:
    """Fresh uniform 64-bit client seeds (uint64), from which the server re-derives structure."""
    return rng.integers(0, np.iinfo(np.uint64).max, size=shape, dtype=np.uint64, endpoint=True)


def seeded_payloads_to_avro(columns: Columns) -> Iterator[dict]:
    """<seed, y> payload records; the seed column holds the int64 view of the uint64 seed."""
    return ({"seed": s, "y": y} for s, y in zip(columns["seed"].tolist(), columns["y"].tolist()))


def seeded_payloads_from_avro(payloads: list[dict], y_bound: int
                              ) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """<seed, y> payload records -> columns, flagging y outside [0, y_bound) as invalid."""
    seed = int_column(payloads, "seed")
    y = int_column(payloads, "y")
    invalid = (y < 0) | (y >= y_bound)
    return {"seed": seed, "y": np.where(invalid, 0, y)}, invalid


def int_column(payloads: list[dict], field: str) -> np.ndarray:
    """One integer field of every payload as an int64 column."""
    return np.fromiter((p[field] for p in payloads), dtype=np.int64, count=len(payloads))


def grr_perturb(values: np.ndarray, k: int, p: float, rng: np.random.Generator) -> np.ndarray:
    """Generalised randomised response over [0, k) (consistency-norm-hyb.txt eq. 1).

    Keeps the value with probability p, otherwise reports one of the k - 1 other values
    uniformly: each other value has probability (1 - p) / (k - 1).
    """
    values = np.asarray(values, dtype=np.int64)
    keep = rng.random(values.shape) < p
    other = rng.integers(0, k - 1, size=values.shape)
    other += other >= values
    return np.where(keep, values, other)
