"""Heavy hitters of a string metric's window, found from one round of PEM reports.

Decoding ([Wang19], with every level's reports from the same round): level
1 tests the one-byte prefixes; each further level ℓ tests the one-byte extensions of the
`width` best candidates of level ℓ − 1 against the reports of level ℓ and keeps the `width`
best again. Values are UTF-8 (the client refuses anything else), so only extensions that keep
a prefix valid UTF-8 are tested: at a character boundary NUL, ASCII or a lead byte whose
character fits in max_bytes (179 of 256 bytes, fewer near the end), inside a character the 64
continuation bytes; every heavy hitter is valid UTF-8. A candidate that ended in NUL is a
complete string: its only extension is NUL, and because a string's prefix of every length
beyond it is the string itself padded, its estimate pools the support counts of every level
since it completed. After level m (max_bytes) every
candidate is complete; the heavy hitters are the `top` best whose estimate exceeds `threshold`.

Estimate of a candidate from S support counts among N reports of its levels ([Wang20] journal
eq. 2, p* and q* of ldp_telemetry.ldp.protocols.pem):

    f~ = (S/N − q*) / (p* − q*)
    Var[f~] = (f p*(1 − p*) + (1 − f) q*(1 − q*)) / (N (p* − q*)^2) + pool term,

the pool term being the variance over the hash pool of the collisions with the other heavy
hitters x: Σ_ℓ n_ℓ^2 / N^2 · Σ_x f_x^2 (p − q_g)^2 (1/g)(1 − 1/g) / (K (p* − q*)^2), with
q_g = (1 − p)/(g − 1) GRR's probability of reporting a given other bucket, evaluated at the
reported heavy hitters' estimates (clipped at 0). Error bars are estimate ± 1.96 standard errors.

Cost per window: m levels × (at most 179 × width candidates) × K hash evaluations, whatever n.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from ldp_telemetry.ldp.base.registration import Parameter
from ldp_telemetry.ldp.base.validation import is_finite_number, is_int
from ldp_telemetry.ldp.estimation.estimators import METHODS, EstimatorMethod
from ldp_telemetry.ldp.estimation.uncertainty import Z95
from ldp_telemetry.ldp.protocols.base import STRINGS
from ldp_telemetry.ldp.protocols.pem import HASH_BLOCK_CELLS, PrefixExtension
from ldp_telemetry.ldp.protocols.string_keys import (PAD, PREFIX_KEY_ROOT, extend_keys,
                                                     padded_rows, row_strings, string_problem)

#: Most heavy hitters one window reports (`top`).
MAX_TOP = 500
#: Most candidates kept per level (`width`): a level tests 256 × width prefixes.
MAX_WIDTH = 1_000
#: Most strings of a candidate dictionary.
MAX_CANDIDATES = 1_000_000
_BYTES = np.arange(256, dtype=np.uint8)
#: Continuation bytes a byte announces when it starts a UTF-8 character (0: ASCII or NUL; -1:
#: it cannot start one: a continuation byte, C0, C1, F5..FF).
_NEEDS = np.full(256, -1, dtype=np.int64)
_NEEDS[:0x80], _NEEDS[0xC2:0xE0], _NEEDS[0xE0:0xF0], _NEEDS[0xF0:0xF5] = 0, 1, 2, 3
#: The bytes that continue a UTF-8 character.
_CONTINUATION = (_BYTES >= 0x80) & (_BYTES <= 0xBF)


@dataclass(frozen=True)
class HeavyHitters:
    """A window's heavy hitters, best first: `values` (UTF-8 bytes), their `estimate`d
    frequencies, `std_error`, 95% band (`lower`, `upper`); `level_reports` n_ℓ per level;
    `reason` why the list is empty when it must be (None otherwise)."""

    values: list[bytes]
    estimate: np.ndarray
    std_error: np.ndarray
    level_reports: np.ndarray
    reason: str | None = None

    @property
    def lower(self) -> np.ndarray:
        return self.estimate - Z95 * self.std_error

    @property
    def upper(self) -> np.ndarray:
        return self.estimate + Z95 * self.std_error

    @property
    def labels(self) -> list[str]:
        """The values as text (invalid UTF-8, which only a truncated prefix could hold, is
        shown with replacement characters)."""
        return [value.decode("utf-8", errors="replace") for value in self.values]


#: Bytes per candidate while a level is decoded: its prefix (max_bytes), key, support, pooled
#: count, estimate, the sort's order and the next level's copies (both held at once).
CANDIDATE_BYTES = 2 * 48
#: Bytes of the hash evaluation's block: the uint64 cells, the gathered counts, slack.
HASH_BLOCK_BYTES = 3 * 8 * HASH_BLOCK_CELLS


def decode_nbytes(protocol: PrefixExtension, width: int) -> int:
    """Bytes the decoding of one window holds beyond the statistic (256 × width candidates per
    level), whatever the number of reports: the memory model's window working set."""
    return 256 * width * (CANDIDATE_BYTES + 2 * protocol.d) + HASH_BLOCK_BYTES


def _empty(protocol: PrefixExtension, reports: np.ndarray, reason: str) -> HeavyHitters:
    return HeavyHitters([], np.zeros(0), np.zeros(0), reports, reason)


def find_heavy_hitters(protocol: PrefixExtension, statistic: np.ndarray, *, top: int = 10,
                       threshold: float = 0.0, width: int | None = None) -> HeavyHitters:
    """The `top` heavy hitters (estimate > threshold) of a window's PEM statistic, found by
    prefix extension with `width` candidates per level (default 2 × top)."""
    width = 2 * top if width is None else width
    reports = protocol.level_reports(statistic)
    if (reports == 0).any():
        empty = int(np.flatnonzero(reports == 0)[0]) + 1
        return _empty(protocol, reports, f"no heavy hitters: level {empty} has no reports "
                                         f"({int(reports.sum())} reports in the window)")
    p, q = protocol.p_star, protocol.q_star
    rows = np.zeros((1, 0), dtype=np.uint8)
    keys = np.array([PREFIX_KEY_ROOT], dtype=np.uint64)
    complete = np.zeros(1, dtype=bool)
    support = np.zeros(1, dtype=np.int64)  # pooled over the levels since the string completed
    pooled = np.zeros(1, dtype=np.int64)
    pending = np.zeros(1, dtype=np.int64)  # continuation bytes the prefix still owes
    for level in range(1, protocol.levels + 1):
        open_ = ~complete
        wait = pending[open_]
        allowed = np.where((wait == 0)[:, None], (_NEEDS >= 0) & (level + _NEEDS <= protocol.d),
                           _CONTINUATION[None, :])
        which, byte = np.nonzero(allowed)
        grown = np.concatenate([rows[open_][which], byte.astype(np.uint8)[:, None]], axis=1)
        done = np.concatenate([rows[complete], np.full((int(complete.sum()), 1), PAD,
                                                       dtype=np.uint8)], axis=1)
        rows = np.concatenate([grown, done])
        keys = np.concatenate([extend_keys(keys[open_][which], byte),
                               extend_keys(keys[complete], PAD)])
        pending = np.concatenate([np.where(wait[which] == 0, _NEEDS[byte], wait[which] - 1),
                                  np.zeros(int(complete.sum()), dtype=np.int64)])
        support = np.concatenate([np.zeros(len(grown), dtype=np.int64), support[complete]])
        pooled = np.concatenate([np.zeros(len(grown), dtype=np.int64), pooled[complete]])
        complete = rows[:, -1] == PAD
        support += protocol.prefix_support(statistic, level, keys)
        pooled += reports[level - 1]
        estimate = (support / pooled - q) / (p - q)
        keep = np.argsort(-estimate, kind="stable")[:width]
        rows, keys, complete, pending = rows[keep], keys[keep], complete[keep], pending[keep]
        support, pooled = support[keep], pooled[keep]
    estimate = (support / pooled - q) / (p - q)
    order = np.argsort(-estimate, kind="stable")
    order = order[estimate[order] > threshold][:top]
    rows, support, pooled, estimate = rows[order], support[order], pooled[order], estimate[order]
    return HeavyHitters(row_strings(rows), estimate,
                        _std_errors(protocol, estimate, pooled, reports),
                        reports)


def estimate_strings(protocol: PrefixExtension, statistic: np.ndarray,
                     values: Iterable[bytes]) -> HeavyHitters:
    """Every string of a candidate dictionary estimated directly (no search): the pooled
    estimate over the levels from its length + 1 (its length, for a string of max_bytes) to m.
    Returned in the dictionary's order; ValueError naming a string the metric cannot hold."""
    values = list(values)
    if len(values) > MAX_CANDIDATES:
        raise ValueError(f"{len(values):,} candidates, more than MAX_CANDIDATES "
                         f"({MAX_CANDIDATES:,})")
    for value in values:
        problem = string_problem(value, protocol.d)
        if problem:
            raise ValueError(f"candidate {value!r} {problem}")
    reports = protocol.level_reports(statistic)
    rows = padded_rows(values, protocol.d)
    lengths = np.array([len(v) for v in values], dtype=np.int64)
    first = np.minimum(lengths + 1, protocol.d)
    support = np.zeros(len(values), dtype=np.int64)
    pooled = np.zeros(len(values), dtype=np.int64)
    key = np.full(len(values), PREFIX_KEY_ROOT, dtype=np.uint64)
    for level in range(1, protocol.d + 1):
        key = extend_keys(key, rows[:, level - 1])
        use = first <= level
        if use.any():
            support[use] += protocol.prefix_support(statistic, level, key[use])
            pooled[use] += reports[level - 1]
    p, q = protocol.p_star, protocol.q_star
    with np.errstate(invalid="ignore", divide="ignore"):
        estimate = np.where(pooled > 0, (support / np.maximum(pooled, 1) - q) / (p - q), np.nan)
    return HeavyHitters(values, estimate, _std_errors(protocol, estimate, pooled, reports),
                        reports)


def _std_errors(protocol: PrefixExtension, estimate: np.ndarray, pooled: np.ndarray,
                reports: np.ndarray) -> np.ndarray:
    """The module docstring's standard error of each estimate (NaN where N = 0)."""
    p, q, g, k = protocol.p_star, protocol.q_star, protocol.g, protocol.pool
    f = np.clip(np.nan_to_num(estimate, nan=0.0), 0.0, 1.0)
    n = np.maximum(pooled, 1).astype(np.float64)
    sampling = (f * p * (1 - p) + (1 - f) * q * (1 - q)) / (n * (p - q) ** 2)
    q_grr = (1 - p) / (g - 1)
    others = np.sum(f ** 2) - f ** 2
    # Σ_ℓ n_ℓ² / N² over a candidate's pooled levels, bounded by its largest level share
    share = np.minimum(1.0, reports.max() / n)
    pool = share * others * (p - q_grr) ** 2 * q * (1 - q) / (k * (p - q) ** 2)
    return np.where(pooled > 0, np.sqrt(sampling + pool), np.nan)


def _run(statistic, n, protocol, *, top, threshold, width):
    return find_heavy_hitters(protocol, statistic, top=top, threshold=threshold,
                              width=width or None)


HEAVY_HITTERS = METHODS.register(EstimatorMethod(
    "heavy-hitters", STRINGS, _run,
    parameters={
        "top": Parameter(10, lambda v: is_int(v) and 1 <= v <= MAX_TOP,
                         f"an integer in [1, {MAX_TOP}]"),
        "threshold": Parameter(0.0, lambda v: is_finite_number(v) and 0 <= v < 1,
                               "a frequency in [0, 1)", float),
        "width": Parameter(0, lambda v: is_int(v) and (v == 0 or 1 <= v <= MAX_WIDTH),
                           f"0 (twice top) or an integer in [1, {MAX_WIDTH}]")},
    summary="prefix extension over one round of PEM reports: the top strings with bands"))
