"""The surface every frequency oracle exposes.

A protocol is pure ([Fang25] Definition 2): each report supports a set of
values, the true value with probability p*, every other value with probability q* < p*. The
server therefore only needs, per window, the support count of every value; each protocol keeps a
*sufficient statistic* from which those counts follow, mergeable by addition and of a size that
does not depend on the number of reports.

One protocol = one module. Its class carries everything the rest of the project asks of it: client
perturbation over numpy arrays; the payload's Avro schema (`payload_schema`, one branch of the
report union in schemas/report.avsc) and its validity rule; the sufficient statistic and the support
counts; p* and q*, hence the analytical n·MSE (`n_mse`, [Fang25] eq. 4 with the protocol's own p*,
q*) that the planner ranks by; the aggregation cost (`server_cost`, `aggregation_rank`) for the
planner's tie-break; and `report_variance`, the variance of any weighted sum of one report's support
indicators, from which ldp_telemetry.ldp.estimation.queries computes the exact variance of any
linear answer. The support-set noise model (unbiased estimate, variances) is shared by every
pure protocol: ldp_telemetry.ldp.protocols.noise.
"""
from __future__ import annotations

import abc
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, ClassVar

import numpy as np

from ldp_telemetry.ldp.base.errors import RegistryError
from ldp_telemetry.ldp.base.validation import is_int, is_number
from ldp_telemetry.ldp.protocols.noise import SupportNoise

Columns = Mapping[str, np.ndarray]

#: The two kinds of protocol, by what a report carries: a value of a finite domain (a frequency
#: oracle) or a number in an interval (a numeric protocol). A protocol class's `kind`, a metric's
#: `kind` and an estimator method's `kind` (the protocols whose statistic it reads) are one of them.
FREQUENCY = "frequency"
NUMERIC = "numeric"
#: The third kind: a string of an open domain (ldp_telemetry.ldp.protocols.pem), estimated as the
#: window's heavy hitters.
STRINGS = "strings"


@dataclass(frozen=True)
class FrequencyOracle(abc.ABC):
    """An ε-LDP frequency oracle over the domain [0, d).

    Subclasses set the class attributes
      `name`              the registry name;
      `payload_schema`    the Avro record of their report payload (a dict, as in an .avsc);
                          `payload_record`, its name, follows from it;
      `payload_rule`      what makes a payload valid, for dead-letter reasons;
      `server_cost`       the aggregation cost in O-notation, n reports;
      `aggregation_rank`  a number, smaller = cheaper aggregation: the planner's tie-break
                          between protocols of equal accuracy and report size;
    and implement p_star, q_star, perturb, payload_bytes, payloads_to_avro, payloads_from_avro,
    accumulate and _report_variance (plus new_statistic / support_counts when the statistic is
    not the d support counts).
    """

    epsilon: float
    d: int

    name: ClassVar[str]
    payload_schema: ClassVar[dict]
    payload_record: ClassVar[str]
    payload_rule: ClassVar[str]
    server_cost: ClassVar[str]
    aggregation_rank: ClassVar[float]
    #: The kind of protocol: estimator methods of this kind read its statistic.
    kind: ClassVar[str] = FREQUENCY

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "payload_schema" in cls.__dict__:
            cls.payload_record = cls.payload_schema["name"]

    def __post_init__(self) -> None:
        problem = epsilon_problem(self.epsilon)
        if problem:
            raise RegistryError(f"epsilon {problem}", "epsilon")
        if not is_int(self.d) or self.d < 2:
            raise RegistryError(f"domain size must be an integer >= 2, got {self.d!r}",
                                "domain.size")

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
        """n times the analytical full-domain MSE, with this protocol's p*, q* (pure_n_mse)."""
        return pure_n_mse(self.p_star, self.q_star, self.d)

    @property
    def parameter(self) -> str:
        """The rounded parameter the protocol really uses, as text ('g=56', 'k=122'; '' if none)."""
        return ""

    # -- variance of linear answers ---------------------------------------------------------
    def report_variance(self, weights: np.ndarray) -> np.ndarray:
        """Var[Y | x] for every true value x, where Y = Σ_v w_v [the report supports v].

        One report's weighted support, the building block of the exact variance of any linear
        answer Σ_v w_v f~_v (ldp_telemetry.ldp.estimation.queries); w = e_v gives the numerator of
        [Wang20] journal eq. 2.
        `weights`: length d. Returns an array of length d, indexed by the true value x.
        """
        w = np.asarray(weights, dtype=np.float64)
        if w.shape != (self.d,):
            raise ValueError(f"weights must have length d = {self.d}, got shape {w.shape}")
        return self._report_variance(w)

    @abc.abstractmethod
    def _report_variance(self, w: np.ndarray) -> np.ndarray:
        """report_variance for validated float64 weights of length d (closed form)."""

    def linear_variance(self, n: int, weights: np.ndarray, frequencies: np.ndarray) -> float:
        """Var[Σ_v w_v f~_v] for n reports from users with true distribution `frequencies`.

        Reports are independent: Σ_x f_x Var[Y | x] / (n (p* - q*)^2); inf when n = 0.
        """
        f = np.asarray(frequencies, dtype=np.float64)
        if n == 0:
            return math.inf
        per_report = float(np.dot(f, self.report_variance(weights)))
        return max(per_report, 0.0) / (n * (self.p_star - self.q_star) ** 2)

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
        are placeholders and must be dropped by the caller. Gathers the records' fields into
        columns and calls `check_payloads` (plus the checks only a record can fail, such as a
        bit vector's length).
        """

    def check_payloads(self, columns: Columns) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """Fixed-width payload columns -> (columns in the decoder's dtypes, invalid mask).

        The one place of the protocol's payload rule (`payload_rule`) for columns of any
        origin: gathered from Avro records (`payloads_from_avro`) or read from a report
        envelope (`ldp_telemetry.schemas.envelopes`). Invalid rows' entries are replaced by
        placeholders that `accumulate` accepts.
        """
        raise NotImplementedError(f"{type(self).__name__} has no vectorised payload check")

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


def pure_n_mse(p_star: float, q_star: float, d: int) -> float:
    """n times the analytical full-domain MSE of a pure protocol over d values
    ([Fang25] eq. 4): q*(1 - q*)/(p* - q*)^2 + (1 - p* - q*)/(d (p* - q*))."""
    p, q = p_star, q_star
    return q * (1 - q) / (p - q) ** 2 + (1 - p - q) / (d * (p - q))


def independent_support_variance(p_star: float, q_star: float, w: np.ndarray) -> np.ndarray:
    """Var[Y | x] when a report's support indicators of distinct values are independent:
    p*(1 - p*) w_x^2 + q*(1 - q*) (Σ w^2 - w_x^2), so a set's variance is the sum of [Wang20]
    journal eq. 2 over its values (unary encoding, local hashing)."""
    p, q = p_star, q_star
    return p * (1 - p) * w ** 2 + q * (1 - q) * (np.dot(w, w) - w ** 2)


def seed_payload_schema(record: str, seed_doc: str, y_doc: str) -> dict:
    """The Avro record of a <seed, y> payload (local hashing, RWS)."""
    return {"type": "record", "name": record, "fields": [
        {"name": "seed", "type": "long", "doc": seed_doc},
        {"name": "y", "type": "int", "doc": y_doc}]}


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


def epsilon_problem(epsilon: object) -> str | None:
    """Why `epsilon` is not a usable privacy level (a phrase), or None when it is."""
    if not is_number(epsilon):
        return f"must be a number, got {epsilon!r}"
    if not (math.isfinite(epsilon) and MIN_EPSILON <= epsilon <= MAX_EPSILON):
        return f"must lie in [{MIN_EPSILON:g}, {MAX_EPSILON:g}], got {epsilon!r}"
    return None


def random_seeds(shape: int | tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Fresh uniform 64-bit client seeds (uint64), from which the server re-derives structure."""
    return rng.integers(0, np.iinfo(np.uint64).max, size=shape, dtype=np.uint64, endpoint=True)


def seeded_payloads_to_avro(columns: Columns) -> Iterator[dict]:
    """<seed, y> payload records; the seed column holds the int64 view of the uint64 seed."""
    return ({"seed": s, "y": y}
            for s, y in zip(columns["seed"].tolist(), columns["y"].tolist(), strict=True))


def seeded_payloads_from_avro(payloads: list[dict], y_bound: int
                              ) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """<seed, y> payload records -> columns, flagging y outside [0, y_bound) as invalid."""
    return check_seeded_payloads({"seed": int_column(payloads, "seed"),
                                  "y": int_column(payloads, "y")}, y_bound)


def check_seeded_payloads(columns: Columns, y_bound: int
                          ) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """<seed, y> columns -> int64 columns, flagging y outside [0, y_bound) as invalid."""
    y = np.asarray(columns["y"], dtype=np.int64)
    invalid = (y < 0) | (y >= y_bound)
    return {"seed": np.asarray(columns["seed"], dtype=np.int64),
            "y": np.where(invalid, 0, y)}, invalid


def int_column(payloads: list[dict], field: str) -> np.ndarray:
    """One integer field of every payload as an int64 column."""
    return np.fromiter(map(itemgetter(field), payloads), dtype=np.int64, count=len(payloads))


def grr_perturb(values: np.ndarray, k: int, p: float, rng: np.random.Generator) -> np.ndarray:
    """Generalised randomised response over [0, k) ([Wang20] journal eq. 1).

    Keeps the value with probability p, otherwise reports one of the k - 1 other values
    uniformly: each other value has probability (1 - p) / (k - 1).
    """
    values = np.asarray(values, dtype=np.int64)
    keep = rng.random(values.shape) < p
    other = rng.integers(0, k - 1, size=values.shape)
    other += other >= values
    return np.where(keep, values, other)
