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
hitters x: Σ_ℓ n_ℓ^2 / N^2 (over the candidate's pooled levels, whatever their split)
· Σ_x f_x^2 (p − q_g)^2 (1/g)(1 − 1/g) / (K (p* − q*)^2), with
q_g = (1 − p)/(g − 1) GRR's probability of reporting a given other bucket, evaluated at the
reported heavy hitters' estimates (clipped at 0). Error bars are estimate ± 1.96 standard errors:
the band of a string fixed in advance. A heavy hitter was chosen by the search because its
estimate was high (the winner's curse), and how often that band holds the truth of the strings
found was never measured, so a heavy hitter has no 95% band — its record states none with
this reason, and every reader (`ldp show`, the store, the dashboard, `ldp query`) gives it none
— its standard error kept (HEAVY_HITTER_BAND_REASON).

Cost per window: m levels × (at most 179 × width candidates) × K hash evaluations, whatever n.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ldp_telemetry.ldp.base.registration import Parameter
from ldp_telemetry.ldp.base.validation import is_finite_number, is_int
from ldp_telemetry.ldp.estimation.estimators import METHODS, EstimatorMethod
from ldp_telemetry.ldp.estimation.uncertainty import Z95
from ldp_telemetry.ldp.protocols.base import STRINGS
from ldp_telemetry.ldp.protocols.pem import HASH_BLOCK_CELLS, MAX_CANDIDATES, PrefixExtension
from ldp_telemetry.ldp.protocols.string_keys import (PAD, PREFIX_KEY_ROOT, extend_keys,
                                                     padded_rows, row_strings, string_problem)

#: Most heavy hitters one window reports (`top`).
MAX_TOP = 500
#: Most candidates kept per level (`width`): a level tests 256 × width prefixes.
MAX_WIDTH = 1_000
#: Why a heavy hitter has no 95% band (module docstring): its record's `band_reasons`, and what
#: its readers say.
HEAVY_HITTER_BAND_REASON = (
    "no 95% band for heavy hitters: 1.96 standard errors either side of the estimate is the "
    "band of a string fixed in advance, and these strings were chosen by the search for their "
    "high estimates (the winner's curse); no benchmark measured how often it holds the truth of "
    "the strings found (benchmarks/open_domains.py measures the search's precision, recall and "
    "F1)")
_BYTES = np.arange(256, dtype=np.uint8)
#: Continuation bytes a byte announces when it starts a UTF-8 character (0: ASCII or NUL; -1:
#: it cannot start one: a continuation byte, C0, C1, F5..FF).
_NEEDS = np.full(256, -1, dtype=np.int64)
_NEEDS[:0x80], _NEEDS[0xC2:0xE0], _NEEDS[0xE0:0xF0], _NEEDS[0xF0:0xF5] = 0, 1, 2, 3
#: The bytes that continue a UTF-8 character.
_CONTINUATION = (_BYTES >= 0x80) & (_BYTES <= 0xBF)


#: How the heavy hitters are ranked (the estimator's `rank`): by estimate, or by the estimate
#: less Z95 sampling standard errors (rank_scores: a ranking score, not a band).
RANK_ESTIMATE, RANK_LOWER = "estimate", "lower"
#: How a heavy hitter was found (the record's `heavy_hitters.found_by`): by the prefix search
#: only, from the candidate dictionary only (the search did not reach it), or by both.
SEARCH, DICTIONARY, BOTH = "search", "dictionary", "both"


@dataclass(frozen=True)
class HeavyHitters:
    """A window's heavy hitters, best first: `values` (UTF-8 bytes), their `estimate`d
    frequencies and their `std_error` (no 95% band: HEAVY_HITTER_BAND_REASON); `level_reports`
    n_ℓ per level; `reason` why the list is empty when it must be (None otherwise); `found_by`
    how each was found (SEARCH, DICTIONARY or BOTH; empty when no dictionary was given)."""

    values: list[bytes]
    estimate: np.ndarray
    std_error: np.ndarray
    level_reports: np.ndarray
    reason: str | None = None
    found_by: tuple[str, ...] = ()

    @property
    def labels(self) -> list[str]:
        """The values as text (invalid UTF-8, which only a truncated prefix could hold, is
        shown with replacement characters)."""
        return [value.decode("utf-8", errors="replace") for value in self.values]


#: Most candidates one kept candidate yields at the next level: its valid UTF-8 extensions.
MAX_EXTENSIONS = 179
#: Bytes per candidate while a level is decoded, beyond twice its prefix (max_bytes): its key,
#: support, pooled count, estimate and the sort's order, some held twice while the next level's
#: copies are made (tracemalloc: 77 bytes a candidate in all at m = 10, 112 at m = 32).
CANDIDATE_BYTES = 64
#: Bytes per dictionary string while a window is decoded, beyond its padded row (max_bytes):
#: its first level, key, support, pooled count, the level's sorted keys and selection and the
#: merge's copies (tracemalloc: 72 to 93 at m = 10 for 16,000 to 78,000 strings).
DICTIONARY_BYTES = 96
#: Bytes of the hash evaluation's blocks: the uint64 cells, the gathered counts, slack.
HASH_BLOCK_BYTES = 3 * 8 * HASH_BLOCK_CELLS


def decode_nbytes(protocol: PrefixExtension, width: int, dictionary: int = 0) -> int:
    """Bytes the decoding of one window holds beyond the statistic (MAX_EXTENSIONS × width
    candidates per level, and `dictionary` strings), whatever the number of reports: the memory
    model's window working set."""
    return (MAX_EXTENSIONS * width * (CANDIDATE_BYTES + 2 * protocol.d)
            + dictionary * (DICTIONARY_BYTES + protocol.d) + HASH_BLOCK_BYTES)


def _empty(protocol: PrefixExtension, reports: np.ndarray, reason: str) -> HeavyHitters:
    return HeavyHitters([], np.zeros(0), np.zeros(0), reports, reason)


#: Dictionary strings padded at once (bounds the padding's temporary bytes objects).
PAD_CHUNK = 4_096


def check_dictionary(values: Iterable[bytes], max_bytes: int) -> list[bytes]:
    """The candidate dictionary as a list; ValueError naming a string the metric cannot hold or
    more than MAX_CANDIDATES strings (a repeated string is refused by `_Dictionary`)."""
    values = list(values)
    if len(values) > MAX_CANDIDATES:
        raise ValueError(f"{len(values):,} candidates, more than MAX_CANDIDATES "
                         f"({MAX_CANDIDATES:,})")
    for value in values:
        problem = string_problem(value, max_bytes)
        if problem:
            raise ValueError(f"candidate {value!r} {problem}")
    return values


class _Dictionary:
    """The candidate dictionary's state while a window is decoded: each string's key at the
    current level, and its support and reports pooled over the levels from its length + 1
    (its length, for a string of max_bytes) on. ValueError when a string is listed twice."""

    def __init__(self, values: list[bytes], max_bytes: int):
        self.rows = np.empty((len(values), max_bytes), dtype=np.uint8)
        for start in range(0, len(values), PAD_CHUNK):
            self.rows[start:start + PAD_CHUNK] = padded_rows(values[start:start + PAD_CHUNK],
                                                             max_bytes)
        ordered = np.sort(self.rows.view(f"V{max_bytes}").ravel())
        twice = np.flatnonzero(ordered[1:] == ordered[:-1])
        if twice.size:
            value = bytes(ordered[twice[0]]).rstrip(b"\0")
            raise ValueError(f"candidate {value!r} appears more than once")
        del ordered
        lengths = np.fromiter((len(v) for v in values), dtype=np.int64, count=len(values))
        self.first = np.minimum(lengths + 1, max_bytes)
        self.key = np.full(len(values), PREFIX_KEY_ROOT, dtype=np.uint64)
        self.support = np.zeros(len(values), dtype=np.int64)
        self.pooled = np.zeros(len(values), dtype=np.int64)
        self.complete_keys = np.zeros(0, dtype=np.uint64)
        self.complete_index = np.zeros(0, dtype=np.int64)
        self.reached = np.zeros(len(values), dtype=bool)  # completed by the search

    def add_level(self, protocol: PrefixExtension, statistic: np.ndarray, level: int,
                  reports: int) -> None:
        """Pool level `level`: the strings complete by then gain their support there;
        `complete_keys` are their keys at this level, sorted (`complete_index` their
        positions in the dictionary)."""
        self.key = extend_keys(self.key, self.rows[:, level - 1])
        use = np.flatnonzero(self.first <= level)
        keys = self.key[use]
        order = np.argsort(keys)
        self.complete_keys, self.complete_index = keys[order], use[order]
        del order
        if use.size:
            self.support[use] += protocol.prefix_support(statistic, level, keys)
            self.pooled[use] += reports


    def leave(self, keys: np.ndarray, complete: np.ndarray) -> np.ndarray:
        """Which search candidates of this level (`keys`; `complete`: ended in NUL) are
        complete dictionary strings; they are marked `reached`."""
        if self.complete_keys.size == 0:
            return np.zeros(keys.shape, dtype=bool)
        at = np.minimum(np.searchsorted(self.complete_keys, keys), self.complete_keys.size - 1)
        hit = complete & (self.complete_keys[at] == keys)
        self.reached[self.complete_index[at[hit]]] = True
        return hit


def find_heavy_hitters(protocol: PrefixExtension, statistic: np.ndarray, *, top: int = 10,
                       threshold: float = 0.0, width: int | None = None,
                       dictionary: Iterable[bytes] = (), rank: str = RANK_LOWER
                       ) -> HeavyHitters:
    """The `top` heavy hitters (estimate > threshold) of a window's PEM statistic, found by
    prefix extension with `width` candidates per level (default 2 × top) and, when a candidate
    `dictionary` is given (checked by `check_dictionary`), among its strings estimated directly
    as `estimate_strings` does; both ranked together. A dictionary string the search completes
    leaves the search (its estimate is the dictionary's, the same counts), so the search's
    width goes to strings the dictionary does not hold. `rank`: RANK_ESTIMATE orders the heavy
    hitters by estimate, RANK_LOWER by `rank_scores` (the estimate less Z95 sampling standard
    errors)."""
    width = 2 * top if width is None else width
    values = check_dictionary(dictionary, protocol.d)
    reports = protocol.level_reports(statistic)
    if (reports == 0).any():
        empty = int(np.flatnonzero(reports == 0)[0]) + 1
        return _empty(protocol, reports, f"no heavy hitters: level {empty} has no reports "
                                         f"({int(reports.sum())} reports in the window)")
    known = _Dictionary(values, protocol.d) if values else None
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
        if known is not None:
            known.add_level(protocol, statistic, level, int(reports[level - 1]))
            leave = known.leave(keys, complete)
            if leave.any():
                stay = ~leave
                rows, keys, complete = rows[stay], keys[stay], complete[stay]
                pending, support, pooled = pending[stay], support[stay], pooled[stay]
        support += protocol.prefix_support(statistic, level, keys)
        pooled += reports[level - 1]
        estimate = (support / pooled - q) / (p - q)
        keep = np.argsort(-estimate, kind="stable")[:width]
        rows, keys, complete, pending = rows[keep], keys[keep], complete[keep], pending[keep]
        support, pooled = support[keep], pooled[keep]
    found = row_strings(rows)
    if known is not None:
        # a string of max_bytes (never completed by a NUL) the search holds at the end: every
        # dictionary string is complete at level m, so `leave` finds it by its key there
        searched = np.flatnonzero(~known.leave(keys, np.ones(keys.shape, dtype=bool)))
        found = [found[i] for i in searched.tolist()]
        support = np.concatenate([support[searched], known.support])
        pooled = np.concatenate([pooled[searched], known.pooled])
    estimate = (support / pooled - q) / (p - q)
    order = np.argsort(-rank_scores(protocol, estimate, pooled, rank), kind="stable")
    order = order[estimate[order] > threshold][:top]
    pooled, estimate = pooled[order], estimate[order]
    values_by: list[bytes] = []
    found_by: list[str] = []
    for i in order.tolist():
        if i < len(found):
            values_by.append(found[i])
            found_by.append(SEARCH)
        else:
            assert known is not None, "only a dictionary's strings follow the search's"
            values_by.append(values[i - len(found)])
            found_by.append(BOTH if known.reached[i - len(found)] else DICTIONARY)
    return HeavyHitters(values_by, estimate, _std_errors(protocol, estimate, pooled, reports),
                        reports, found_by=tuple(found_by) if known is not None else ())


def estimate_strings(protocol: PrefixExtension, statistic: np.ndarray,
                     values: Iterable[bytes]) -> HeavyHitters:
    """Every string of a candidate dictionary estimated directly (no search): the pooled
    estimate over the levels from its length + 1 (its length, for a string of max_bytes) to m.
    Returned in the dictionary's order; ValueError naming a string the metric cannot hold."""
    values = check_dictionary(values, protocol.d)
    reports = protocol.level_reports(statistic)
    known = _Dictionary(values, protocol.d)
    for level in range(1, protocol.d + 1):
        known.add_level(protocol, statistic, level, int(reports[level - 1]))
    p, q = protocol.p_star, protocol.q_star
    support, pooled = known.support, known.pooled
    with np.errstate(invalid="ignore", divide="ignore"):
        estimate = np.where(pooled > 0, (support / np.maximum(pooled, 1) - q) / (p - q), np.nan)
    return HeavyHitters(values, estimate, _std_errors(protocol, estimate, pooled, reports),
                        reports)


def rank_scores(protocol: PrefixExtension, estimate: np.ndarray, pooled: np.ndarray,
                rank: str) -> np.ndarray:
    """What the heavy hitters are ordered by: the estimate (RANK_ESTIMATE), or (RANK_LOWER) the
    estimate minus Z95 of its sampling standard errors, without the pool term (which depends on
    the strings chosen): a ranking score, not the end of a band (a heavy hitter has none).
    Candidates pooled over fewer levels (longer strings, whose estimates from a dictionary or a
    deep search are noisier) then need more support to rank high, instead of filling the top
    with noise."""
    if rank == RANK_ESTIMATE:
        return estimate
    p, q = protocol.p_star, protocol.q_star
    f = np.clip(estimate, 0.0, 1.0)
    sampling = (f * p * (1 - p) + (1 - f) * q * (1 - q)) / (pooled * (p - q) ** 2)
    return estimate - Z95 * np.sqrt(sampling)


def _std_errors(protocol: PrefixExtension, estimate: np.ndarray, pooled: np.ndarray,
                reports: np.ndarray) -> np.ndarray:
    """The module docstring's standard error of each estimate (NaN where N = 0)."""
    p, q, g, k = protocol.p_star, protocol.q_star, protocol.g, protocol.pool
    f = np.clip(np.nan_to_num(estimate, nan=0.0), 0.0, 1.0)
    n = np.maximum(pooled, 1).astype(np.float64)
    sampling = (f * p * (1 - p) + (1 - f) * q * (1 - q)) / (n * (p - q) ** 2)
    q_grr = (1 - p) / (g - 1)
    others = np.sum(f ** 2) - f ** 2
    share = _pooled_square_share(reports, pooled, n)
    pool = share * others * (p - q_grr) ** 2 * q * (1 - q) / (k * (p - q) ** 2)
    return np.where(pooled > 0, np.sqrt(sampling + pool), np.nan)


def _pooled_square_share(reports: np.ndarray, pooled: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Σ_ℓ n_ℓ² / N² over each candidate's pooled levels. Every reported candidate pools a
    suffix of the levels (from its length + 1 to m), identified by its N, a suffix sum of n_ℓ;
    an N that is no suffix sum gets the bound n_max / N. Exact whatever the level split
    (`final_share` puts more reports at level m)."""
    reports = np.asarray(reports, dtype=np.float64)
    suffix = np.cumsum(reports[::-1])  # N of the suffixes from level m back to level 1
    squares = np.cumsum(reports[::-1] ** 2)
    at = np.minimum(np.searchsorted(suffix, pooled), suffix.size - 1)
    exact = suffix[at] == pooled
    return np.where(exact, squares[at] / n ** 2, np.minimum(1.0, reports.max() / n))


def _run(statistic: np.ndarray, n: int, protocol: PrefixExtension, *, top: int,
         threshold: float, width: int, rank: str, dictionary: Iterable[bytes] = ()) -> Any:
    """The estimator's run: HeavyHitters (Any: EstimatorMethod types the other kinds' output,
    and finalize_string_window checks this one's)."""
    return find_heavy_hitters(protocol, statistic, top=top, threshold=threshold,
                              width=width or None, dictionary=dictionary, rank=rank)


HEAVY_HITTERS = METHODS.register(EstimatorMethod(
    "heavy-hitters", STRINGS, _run,
    parameters={
        "top": Parameter(10, lambda v: is_int(v) and 1 <= v <= MAX_TOP,
                         f"an integer in [1, {MAX_TOP}]"),
        "threshold": Parameter(0.0, lambda v: is_finite_number(v) and 0 <= v < 1,
                               "a frequency in [0, 1)", float),
        "width": Parameter(0, lambda v: is_int(v) and (v == 0 or 1 <= v <= MAX_WIDTH),
                           f"0 (twice top) or an integer in [1, {MAX_WIDTH}]"),
        "rank": Parameter(RANK_LOWER, lambda v: v in (RANK_ESTIMATE, RANK_LOWER),
                          f"{RANK_ESTIMATE!r} or {RANK_LOWER!r}")},
    summary="prefix extension over one round of PEM reports: the top strings with standard errors"))
