"""Two-stage (memoized) frequency oracles: a permanent response, then a fresh one per report.

Stage one, the permanent randomized response (PRR), randomises the device's value once, at the
lifetime level ε∞, and is memoized: every later report of the same value reuses it. Stage two,
the instantaneous randomized response (IRR), randomises the PRR afresh for every report. This is
RAPPOR's construction [Erlingsson14] (its "permanent" and "instantaneous" randomized responses),
in the parameterisation of Arcolezi et al. [Arcolezi22] (L-GRR, L-SUE, L-OSUE: the IRR is chosen
so that the composed channel is ε1-LDP for one report), and for local hashing that of LOLOHA
[Arcolezi23] (one hash per device, PRR and IRR on the hashed value).

Each class here is its one-stage protocol (same name, payload, statistic, wire format and
aggregation) whose p* and q* are those of the *composed* channel, so the estimator, the exact
variance ([Wang20] journal eq. 2 through `report_variance`) and every post-processing method
work on it unchanged:

- GRR-type stages over k symbols (GRR: k = d; local hashing: k = g, on the hashed value). Write
  a GRR of level ε over k symbols as "keep with λ(ε) = (e^ε - 1)/(e^ε + k - 1), else draw
  uniformly": two stages compose into λ1·λ2, so the IRR's λ2 = λ(ε1)/λ(ε∞) makes the composed
  channel exactly GRR_k at ε1 (p* = e^ε1/(e^ε1 + k - 1); local hashing keeps q* = 1/g). Needs
  ε1 < ε∞.
- Unary encoding: the member's PRR (OUE's, SUE's or RUE's bits at ε∞) then a symmetric IRR on
  every bit (1 stays 1 with 1 - t, 0 becomes 1 with t; SUE's form), t solving
  p*(1 - q*)/((1 - p*) q*) = e^ε1 with p* = p1(1 - t) + (1 - p1)t, q* = q1(1 - t) + (1 - q1)t
  (a quadratic in t; `symmetric_irr`). OUE then SUE is L-OSUE, SUE then SUE is L-SUE (basic
  RAPPOR, whose composition is SUE at ε1).

The composed channel keeps the properties `report_variance` relies on: a GRR-type report still
supports exactly one value (of [0, d) or of the hash range), and the unary bits are randomised
independently in both stages, so they stay independent (tests/ldp/test_memoized_privacy.py checks
both by enumeration). The variance holds for *one report per device*: reports of one device share
its PRR, and `repeated_report_variance` gives Var[Y] per report when each device contributes R
reports to a window.

`permanent_response` maps uniform 64-bit words (ldp_telemetry.ldp.config.memoize.prr_words, keyed
by the device secret) to the PRR; `instantaneous_response` randomises PRR columns with a numpy
Generator; `perturb` does both with fresh randomness per row (each row a distinct device).
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from ldp_telemetry.ldp.base.errors import RegistryError
from ldp_telemetry.ldp.protocols import hashing
from ldp_telemetry.ldp.protocols.base import (FrequencyOracle, epsilon_problem, grr_perturb,
                                              independent_support_variance, pure_n_mse,
                                              random_seeds)
from ldp_telemetry.ldp.protocols.blh import BLH
from ldp_telemetry.ldp.protocols.grr import GRR
from ldp_telemetry.ldp.protocols.local_hashing import LocalHashing
from ldp_telemetry.ldp.protocols.olh import OLH
from ldp_telemetry.ldp.protocols.oue import OUE
from ldp_telemetry.ldp.protocols.rlh import RLH
from ldp_telemetry.ldp.protocols.rue import RUE
from ldp_telemetry.ldp.protocols.sue import SUE
from ldp_telemetry.ldp.protocols.unary_encoding import UnaryEncoding

#: Words(kind, item, count) -> `count` uniform uint64 words of the device's keyed stream for
#: (kind, item) (ldp_telemetry.ldp.config.memoize.prr_words bound to a secret and configuration).
Words = Callable[[str, int, int], np.ndarray]
#: The stream kinds: a value's PRR, a device's hash seed, a hash bucket's PRR.
VALUE, SEED, BUCKET = "value", "seed", "bucket"
_TOP53 = np.uint64(11)
#: Rows of unary bits randomised at once (bounds the float draws held: _ROWS x d).
_ROWS = 4096


@dataclass(frozen=True)
class Stage:
    """One stage's probabilities: a GRR-type stage keeps its input with `p` and outputs each
    other symbol with `q`; a unary stage sets a 1 bit with `p` and a 0 bit with `q`."""

    p: float
    q: float


def grr_lambda(epsilon: float, k: int) -> float:
    """λ(ε) = (e^ε - 1)/(e^ε + k - 1): GRR_k at ε keeps its input with λ, else draws uniformly."""
    e = math.exp(epsilon)
    return (e - 1.0) / (e + k - 1.0)


def grr_stages(lifetime_epsilon: float, report_epsilon: float, k: int) -> tuple[Stage, Stage]:
    """(PRR, IRR) of two GRR_k stages composing to GRR_k at report_epsilon (module docstring)."""
    lam1 = grr_lambda(lifetime_epsilon, k)
    lam2 = grr_lambda(report_epsilon, k) / lam1
    prr = Stage(lam1 + (1.0 - lam1) / k, (1.0 - lam1) / k)
    return prr, Stage(lam2 + (1.0 - lam2) / k, (1.0 - lam2) / k)


def compose(prr: Stage, irr: Stage, k: int | None) -> tuple[float, float]:
    """(p*, q*) of the composed channel: GRR-type over k symbols, or unary bits (k None)."""
    if k is None:
        return (prr.p * irr.p + (1 - prr.p) * irr.q, prr.q * irr.p + (1 - prr.q) * irr.q)
    p_star = prr.p * irr.p + (k - 1) * prr.q * irr.q
    return p_star, (1.0 - p_star) / (k - 1)


def unary_epsilon(p: float, q: float) -> float:
    """ε of unary bits set with p (the 1 bit) and q (a 0 bit): ln(p(1 - q)/((1 - p)q))."""
    return math.log(p * (1 - q) / ((1 - p) * q))


def symmetric_irr(prr: Stage, report_epsilon: float) -> Stage:
    """The symmetric unary IRR (p = 1 - t, q = t) after `prr` making the composition ε1-LDP.

    With a = p1, b = 1 - 2p1, c = q1, e = 1 - 2q1, E = e^ε1, the condition
    (a + bt)(1 - c - et) = E(1 - a - bt)(c + et) is A t^2 + B t + C = 0 with A = be(E - 1),
    B = b(1 - c) - ae - E((1 - a)e - bc), C = a(1 - c) - E(1 - a)c; its root in [0, 1/2).
    """
    a, b, c, e = prr.p, 1 - 2 * prr.p, prr.q, 1 - 2 * prr.q
    big_e = math.exp(report_epsilon)
    qa = b * e * (big_e - 1)
    qb = b * (1 - c) - a * e - big_e * ((1 - a) * e - b * c)
    qc = a * (1 - c) - big_e * (1 - a) * c
    if abs(qa) < 1e-15 * max(abs(qb), 1.0):
        t = -qc / qb
    else:
        root = math.sqrt(qb * qb - 4 * qa * qc)
        # the numerically stable pair of roots; keep the one in [0, 1/2)
        first = -(qb + math.copysign(root, qb)) / 2
        candidates = [first / qa, qc / first]
        t = min((x for x in candidates if -1e-12 <= x < 0.5), key=abs, default=math.nan)
    if not 0.0 <= t < 0.5:
        raise RegistryError(f"no symmetric instantaneous response reaches ε1 = {report_epsilon:g} "
                            f"after a permanent response with p = {prr.p:g}, q = {prr.q:g}",
                            "memoize.lifetime_epsilon")
    return Stage(1.0 - t, t)


def coin(words: np.ndarray, p: float | np.ndarray) -> np.ndarray:
    """Portable Bernoulli(p) draws from uint64 words: (w >> 11) < ceil(p · 2^53) (within 2^-53
    of p; `p` a number or an array of them)."""
    thresholds = np.ceil(np.asarray(p, dtype=np.float64) * 2.0 ** 53).astype(np.uint64)
    return (np.asarray(words, dtype=np.uint64) >> _TOP53) < thresholds


def below(word: int | np.integer, k: int) -> int:
    """A portable integer in [0, k) from one uint64 word: (w · k) >> 64 (bias below k/2^64)."""
    return (int(word) * int(k)) >> 64


def grr_from_words(value: int, k: int, p: float, words: np.ndarray) -> int:
    """GRR_k of `value` keeping it with p, from two words: keep = coin(w0, p), else the
    other symbol below(w1, k - 1), skipping `value`."""
    if bool(coin(words[0], p)):
        return int(value)
    other = below(words[1], k - 1)
    return other + (other >= value)


if TYPE_CHECKING:  # to the type checker, each mixin is the oracle it is mixed into
    _Oracle = FrequencyOracle
    _Unary = UnaryEncoding
    _LocalHashing = LocalHashing
else:
    _Oracle = _Unary = _LocalHashing = object


class TwoStage(_Oracle):
    """What every two-stage oracle adds to its one-stage class (a mixin listed first).

    Subclasses are frozen dataclasses with the field `lifetime_epsilon` (ε∞); `epsilon` is the
    per-report ε1. They set `stages()` (PRR, IRR) and `prr_items` (the distinct permanent
    responses a device can hold: d, or g for local hashing).
    """

    memoized: ClassVar[bool] = True
    lifetime_epsilon: float
    epsilon: float
    d: int

    def _check_lifetime(self) -> None:
        problem = epsilon_problem(self.lifetime_epsilon)
        if problem:
            raise RegistryError(problem, "memoize.lifetime_epsilon")
        if not self.epsilon < self.lifetime_epsilon:
            raise RegistryError(f"must exceed the per-report epsilon ({self.epsilon:g}), got "
                                f"{self.lifetime_epsilon:g}: the instantaneous response is what "
                                "keeps the reports of one value from being identical",
                                "memoize.lifetime_epsilon")

    @property
    def prr(self) -> Stage:
        return self.stages()[0]

    @property
    def irr(self) -> Stage:
        return self.stages()[1]

    def stages(self) -> tuple[Stage, Stage]:
        raise NotImplementedError

    @property
    def prr_items(self) -> int:
        return self.d

    @property
    def p_star(self) -> float:
        return self._composed()[0]

    @property
    def q_star(self) -> float:
        return self._composed()[1]

    def _composed(self) -> tuple[float, float]:
        raise NotImplementedError

    def prr_item(self, value: int, words: Words) -> int:
        """What the PRR of `value` is memoized under: the value itself (local hashing: its
        bucket). A device holds one PRR per distinct item."""
        return int(value)

    def permanent_response(self, item: int, words: Words) -> dict[str, np.ndarray]:
        """The PRR of `item` as one row of payload columns, from the device's keyed words."""
        raise NotImplementedError

    def instantaneous_response(self, columns: dict[str, np.ndarray], rng: np.random.Generator
                               ) -> dict[str, np.ndarray]:
        """The IRR of PRR payload columns (one row per report), drawn from `rng`."""
        raise NotImplementedError

    def prr_report_variance(self, w: np.ndarray) -> np.ndarray:
        """Var over the PRR of E[Y | PRR] / (p2 - q2)^2, for every true value x (closed form)."""
        raise NotImplementedError

    def prr_support(self) -> tuple[float, float]:
        """(p, q*) of the PRR read as a pure protocol: its support probabilities."""
        return self.prr.p, self.prr.q

    def floor_n_mse(self) -> float:
        """n·MSE that averaging the estimates of many windows of the same devices never removes:
        the PRR's own ([Fang25] eq. 4 with the PRR's p, q*), since the composed p* - q* is
        (p1 - q1)(p2 - q2) and the IRR's share of the noise averages out while the PRR's does
        not. A one-stage protocol's floor is 0."""
        return pure_n_mse(*self.prr_support(), self.d)

    def repeated_report_variance(self, weights: np.ndarray, reports: int) -> np.ndarray:
        """Var[Y | x] per report when every device contributes `reports` reports sharing one PRR:
        report_variance(w) + (R - 1)(p2 - q2)^2 Var_PRR(E[Y | PRR]) (the reports are independent
        given the PRR; law of total variance)."""
        w = np.asarray(weights, dtype=np.float64)
        irr = self.irr
        return self.report_variance(w) + (int(reports) - 1) * (irr.p - irr.q) ** 2 * \
            self.prr_report_variance(w)


# -- GRR -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class MemoizedGRR(TwoStage, GRR):
    """L-GRR [Arcolezi22]: GRR_d at ε∞ memoized, then GRR_d composing to GRR_d at ε1."""

    lifetime_epsilon: float = math.nan

    def __post_init__(self) -> None:
        GRR.__post_init__(self)
        self._check_lifetime()

    def stages(self) -> tuple[Stage, Stage]:
        return grr_stages(self.lifetime_epsilon, self.epsilon, self.d)

    def _composed(self) -> tuple[float, float]:
        return compose(*self.stages(), self.d)

    def prr_report_variance(self, w: np.ndarray) -> np.ndarray:
        return GRR(self.lifetime_epsilon, self.d).report_variance(w)

    def perturb(self, values: np.ndarray, rng: np.random.Generator) -> dict[str, np.ndarray]:
        prr = grr_perturb(values, self.d, self.prr.p, rng)
        return self.instantaneous_response({"value": prr}, rng)

    def instantaneous_response(self, columns: dict[str, np.ndarray], rng: np.random.Generator
                                   ) -> dict[str, np.ndarray]:
        return {"value": grr_perturb(columns["value"], self.d, self.irr.p, rng)}

    def permanent_response(self, item: int, words: Words) -> dict[str, np.ndarray]:
        y = grr_from_words(item, self.d, self.prr.p, words(VALUE, int(item), 2))
        return {"value": np.array([y], dtype=np.int64)}


# -- unary encoding ---------------------------------------------------------------------------

class _MemoizedUnary(TwoStage, _Unary):
    """A unary member's bits at ε∞ memoized, then a symmetric IRR on every bit."""

    one_stage: ClassVar[type[UnaryEncoding]]

    def __post_init__(self) -> None:
        self.one_stage.__post_init__(self)
        self._check_lifetime()

    def stages(self) -> tuple[Stage, Stage]:
        base = self.one_stage(self.lifetime_epsilon, self.d)
        prr = Stage(base.p_star, base.q_star)
        return prr, symmetric_irr(prr, self.epsilon)

    def _composed(self) -> tuple[float, float]:
        return compose(*self.stages(), None)

    def prr_report_variance(self, w: np.ndarray) -> np.ndarray:
        prr = self.prr
        return independent_support_variance(prr.p, prr.q, w)

    def perturb(self, values: np.ndarray, rng: np.random.Generator) -> dict[str, np.ndarray]:
        values = np.asarray(values, dtype=np.int64)
        prr = self.prr
        packed = np.empty((len(values), (self.d + 7) // 8), dtype=np.uint8)
        for start in range(0, len(values), _ROWS):  # bounded memory: _ROWS x d at a time
            rows = values[start:start + _ROWS]
            bits = rng.random((len(rows), self.d)) < prr.q
            bits[np.arange(len(rows)), rows] = rng.random(len(rows)) < prr.p
            packed[start:start + len(rows)] = np.packbits(bits, axis=1, bitorder="little")
        return self.instantaneous_response({"bits": packed}, rng)

    def instantaneous_response(self, columns: dict[str, np.ndarray], rng: np.random.Generator
                                   ) -> dict[str, np.ndarray]:
        packed = np.asarray(columns["bits"], dtype=np.uint8)
        out = np.empty_like(packed)
        irr = self.irr
        for start in range(0, len(packed), _ROWS):
            bits = np.unpackbits(packed[start:start + _ROWS], axis=1, count=self.d,
                                 bitorder="little").astype(bool)
            drawn = rng.random(bits.shape) < np.where(bits, irr.p, irr.q)
            out[start:start + len(bits)] = np.packbits(drawn, axis=1, bitorder="little")
        return {"bits": out}

    def permanent_response(self, item: int, words: Words) -> dict[str, np.ndarray]:
        prr = self.prr
        probabilities = np.full(self.d, prr.q)
        probabilities[int(item)] = prr.p
        bits = coin(words(VALUE, int(item), self.d), probabilities)
        return {"bits": np.packbits(bits[None, :], axis=1, bitorder="little")}


@dataclass(frozen=True)
class MemoizedOUE(_MemoizedUnary, OUE):
    """L-OSUE [Arcolezi22]: OUE's bits at ε∞, then SUE-form bits composing to ε1."""

    one_stage: ClassVar[type] = OUE
    lifetime_epsilon: float = math.nan


@dataclass(frozen=True)
class MemoizedSUE(_MemoizedUnary, SUE):
    """L-SUE, basic RAPPOR [Erlingsson14]: SUE's bits at ε∞, then SUE-form bits (composed: SUE
    at ε1)."""

    one_stage: ClassVar[type] = SUE
    lifetime_epsilon: float = math.nan


@dataclass(frozen=True)
class MemoizedRUE(_MemoizedUnary, RUE):
    """RUE's bits at ε∞, then SUE-form bits composing to ε1."""

    one_stage: ClassVar[type] = RUE
    lifetime_epsilon: float = math.nan


# -- local hashing ----------------------------------------------------------------------------

#: How a memoized local-hashing protocol chooses g: the one-stage member's g at ε1 (the
#: default; the composed channel is then the member at ε1), or LOLOHA's lifetime-aware g.
REPORT_G, LOLOHA_G = "report", "loloha"
G_RULES = (REPORT_G, LOLOHA_G)


def loloha_irr_epsilon(lifetime_epsilon: float, report_epsilon: float) -> float:
    """LOLOHA's IRR level [Arcolezi23]: ln((e^(ε∞+ε1) - 1)/(e^ε∞ - e^ε1)), the level at which a
    binary IRR after a binary PRR at ε∞ composes to exactly ε1."""
    return math.log(math.expm1(lifetime_epsilon + report_epsilon)
                    / (math.exp(lifetime_epsilon) - math.exp(report_epsilon)))


def loloha_variance(lifetime_epsilon: float, report_epsilon: float, g: int) -> float:
    """n·Var of LOLOHA's estimate at f = 0 with hash range g: q*(1 - q*)/(p* - q*)^2 with
    q* = 1/g and p* the composition of GRR_g at ε∞ and GRR_g at `loloha_irr_epsilon`."""
    prr = Stage(*_grr_support(lifetime_epsilon, g))
    irr = Stage(*_grr_support(loloha_irr_epsilon(lifetime_epsilon, report_epsilon), g))
    p_star = compose(prr, irr, g)[0]
    q_star = 1.0 / g
    return q_star * (1.0 - q_star) / (p_star - q_star) ** 2


def _grr_support(epsilon: float, k: int) -> tuple[float, float]:
    e = math.exp(epsilon)
    return e / (e + k - 1.0), 1.0 / (e + k - 1.0)


def loloha_g(lifetime_epsilon: float, report_epsilon: float, upper: int) -> int:
    """LOLOHA's g: the integer in [2, upper] minimising `loloha_variance` (ties: the smaller).

    The variance falls and then rises in g (one minimum; tests check it against every g on a
    grid), so the minimiser is the smallest g whose successor is no better, found by bisection
    in O(log upper) evaluations. Callers pass twice the one-report g (plus 2) as `upper`: the
    minimiser never exceeds the one-report g by more than 1 (OLH rounds e^ε1 + 1 to the
    nearest integer, not to the better one; checked by the same tests)."""
    def rises(g: int) -> bool:
        return (loloha_variance(lifetime_epsilon, report_epsilon, g + 1)
                >= loloha_variance(lifetime_epsilon, report_epsilon, g))
    low, high = 2, max(2, int(upper))
    while low < high:
        middle = (low + high) // 2
        if rises(middle):
            high = middle
        else:
            low = middle + 1
    return low


class _MemoizedLocalHashing(TwoStage, _LocalHashing):
    """LOLOHA's construction [Arcolezi23]: one hash seed per device (memoized), a PRR per hash
    bucket GRR_g at ε∞ (memoized), then an IRR GRR_g composing to GRR_g at ε1; g is the
    member's own choice at ε1 (the composed channel is local hashing at ε1), or with
    `g_rule = "loloha"` LOLOHA's (`loloha_g`), which weighs the lifetime: a device holds at most
    g permanent responses, whatever the number of values it reports, so its lifetime ε is at
    most g·ε∞. Either way the stages compose to GRR_g at ε1 exactly."""

    one_stage: ClassVar[type[LocalHashing]]
    #: whether g is a choice (OLH, RLH) or the protocol's definition (BLH: g = 2)
    g_is_chosen: ClassVar[bool] = True
    g_rule: str

    def __post_init__(self) -> None:
        if self.g_rule not in G_RULES:
            raise RegistryError(f"must be one of {list(G_RULES)}, got {self.g_rule!r}",
                                "memoize.g")
        self.one_stage.__post_init__(self)
        self._check_lifetime()

    @property
    def report_g(self) -> int:
        """The one-stage member's g at ε1 (the g of `g_rule` "report")."""
        return self.one_stage.choose_g(self)

    def choose_g(self) -> int:
        report_g = self.report_g
        if (self.g_rule == REPORT_G or not self.g_is_chosen
                or not self.epsilon < self.lifetime_epsilon):
            return report_g  # (an invalid ε∞ is reported by _check_lifetime)
        return loloha_g(self.lifetime_epsilon, self.epsilon, 2 * report_g + 2)

    @property
    def prr_items(self) -> int:
        return self.g

    def stages(self) -> tuple[Stage, Stage]:
        return grr_stages(self.lifetime_epsilon, self.epsilon, self.g)

    def _composed(self) -> tuple[float, float]:
        return compose(*self.stages(), self.g)[0], 1.0 / self.g

    def prr_support(self) -> tuple[float, float]:
        return self.prr.p, 1.0 / self.g

    def prr_report_variance(self, w: np.ndarray) -> np.ndarray:
        # E[Y | seed, PRR z] = Σ_v w_v (q2 + (p2 - q2)[H(v) = z]): one-stage local hashing at
        # the PRR's level, whose support indicators are independent (LocalHashing)
        return independent_support_variance(self.prr.p, 1.0 / self.g, w)

    def perturb(self, values: np.ndarray, rng: np.random.Generator) -> dict[str, np.ndarray]:
        values = np.asarray(values, dtype=np.int64)
        seeds = random_seeds(values.shape, rng)
        hashed = hashing.local_hash(seeds, values, self.g)
        prr = grr_perturb(hashed, self.g, self.prr.p, rng)
        return self.instantaneous_response({"seed": seeds.view(np.int64), "y": prr}, rng)

    def instantaneous_response(self, columns: dict[str, np.ndarray], rng: np.random.Generator
                                   ) -> dict[str, np.ndarray]:
        return {"seed": np.asarray(columns["seed"], dtype=np.int64),
                "y": grr_perturb(columns["y"], self.g, self.irr.p, rng)}

    def _seed(self, words: Words) -> np.ndarray:
        return np.asarray(words(SEED, 0, 1), dtype=np.uint64)[:1]

    def prr_item(self, value: int, words: Words) -> int:
        """The device's hash bucket H(seed, value): its PRR is the bucket's."""
        seed = self._seed(words)
        return int(hashing.local_hash(seed, np.array([int(value)]), self.g)[0])

    def permanent_response(self, item: int, words: Words) -> dict[str, np.ndarray]:
        seed = self._seed(words)
        y = grr_from_words(item, self.g, self.prr.p, words(BUCKET, int(item), 2))
        return {"seed": seed.view(np.int64), "y": np.array([y], dtype=np.int64)}


@dataclass(frozen=True)
class MemoizedOLH(_MemoizedLocalHashing, OLH):
    one_stage: ClassVar[type] = OLH
    lifetime_epsilon: float = math.nan
    g_rule: str = REPORT_G


@dataclass(frozen=True)
class MemoizedBLH(_MemoizedLocalHashing, BLH):
    one_stage: ClassVar[type] = BLH
    g_is_chosen: ClassVar[bool] = False
    lifetime_epsilon: float = math.nan
    g_rule: str = REPORT_G


@dataclass(frozen=True)
class MemoizedRLH(_MemoizedLocalHashing, RLH):
    one_stage: ClassVar[type] = RLH
    lifetime_epsilon: float = math.nan
    g_rule: str = REPORT_G


#: The two-stage class of every protocol memoization is defined for, by registry name.
MEMOIZED: dict[str, type[TwoStage]] = {cls.name: cls for cls in (
    MemoizedGRR, MemoizedOUE, MemoizedSUE, MemoizedRUE, MemoizedOLH, MemoizedBLH, MemoizedRLH)}
#: The two-stage local-hashing protocols whose g a registry's `memoize.g` may choose (not BLH,
#: whose g = 2 is its definition).
LOCAL_HASHING = frozenset(name for name, cls in MEMOIZED.items()
                          if issubclass(cls, _MemoizedLocalHashing) and cls.g_is_chosen)


def make_memoized_protocol(name: str, report_epsilon: float, d: int, lifetime_epsilon: float,
                           g_rule: str | None = None) -> TwoStage:
    """The two-stage oracle `name` at ε1 = report_epsilon and ε∞ = lifetime_epsilon over [0, d),
    local hashing with g chosen by `g_rule` (None: the default, "report"); RegistryError when
    `name` has no two-stage form, or a g rule is given for a protocol without g."""
    try:
        cls = MEMOIZED[name]
    except KeyError:
        raise RegistryError(f"memoization is defined for protocols {sorted(MEMOIZED)}, not "
                            f"{name!r}", "memoize") from None
    if g_rule is None:
        # each class is a dataclass with the field lifetime_epsilon (and g_rule, local hashing)
        return cls(epsilon=report_epsilon, d=d, lifetime_epsilon=lifetime_epsilon)  # type: ignore[call-arg]
    if name not in LOCAL_HASHING:
        raise RegistryError(f"applies to local hashing with a chosen g ({sorted(LOCAL_HASHING)}),"
                            f" not {name!r}", "memoize.g")
    return cls(epsilon=report_epsilon, d=d, lifetime_epsilon=lifetime_epsilon,  # type: ignore[call-arg]
               g_rule=g_rule)
