"""The Prefix Extending Method in a single round: strings of an open domain ([Wang19]).

A string metric's values are UTF-8 strings of at most `max_bytes` = m bytes, padded with NUL
(ldp_telemetry.ldp.protocols.string_keys). The population is divided into m levels, not the
privacy budget ([Wang19]): a client draws its level ℓ uniformly from 1..m — or, with
`final_share` = s > 0, level m with probability s and else uniformly from 1..m, so level m
holds a share s + (1 − s)/m of the reports and every other level (1 − s)/m — and reports
the prefix of ℓ bytes of its padded string through local hashing at the full ε. Each level is
one frequency oracle over the 64-bit keys of ℓ-byte prefixes, so no dictionary is needed: the
server tests candidate prefixes only (ldp_telemetry.ldp.estimation.heavy_hitters), extending the
best ones byte by byte, all from one round of reports.

The hash functions come from a bounded public pool (the pool of Fast Local Hashing,
[Cormode21]): level ℓ's pool holds `pool` = K seeds s_{ℓ,j} = splitmix64(POOL_ROOT,
ℓ·2^32 + j); the client draws j uniformly from [0, K), hashes its prefix key to
H(s_{ℓ,j}, key) in [0, g) (ldp_telemetry.ldp.protocols.hashing.local_hash) and reports
<ℓ, j, GRR_g(H)> with p = e^ε / (e^ε + g − 1). The level (whatever s) and j are drawn
independently of the value and GRR_g is ε-LDP, so the report is ε-LDP. g is OLH's,
round(e^ε + 1), at most MAX_HASH_RANGE. A report supports a prefix with p* = p if it is its
own, and q* = 1/g in expectation over the pool otherwise ([Wang20] journal §2.4).

Payload `PemPayload` {level, hash, y}. Statistic (int64, mergeable by addition, its size fixed by
the configuration): [n_1, …, n_m, then for each level the K × g counts of (j, y)]: counting is
one `bincount`, O(n) whatever the number of candidates.
"""
from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from typing import ClassVar

import numpy as np

from ldp_telemetry.ldp.base.errors import RegistryError
from ldp_telemetry.ldp.base.validation import is_finite_number, is_int
from ldp_telemetry.ldp.protocols import hashing
from ldp_telemetry.ldp.protocols.base import (BRANCH_BYTES, STRINGS, Columns, epsilon_problem,
                                              grr_perturb, int_column, varint_bytes)
from ldp_telemetry.ldp.protocols.string_keys import prefix_keys

#: Largest `max_bytes` of a string metric (one level per byte).
MAX_STRING_BYTES = 64
#: Most strings of a candidate dictionary decoded beside the search (each costs up to m × pool
#: hash evaluations per window; ldp_telemetry.ldp.estimation.heavy_hitters).
MAX_CANDIDATES = 100_000
#: Largest pool of hash functions per level.
MAX_POOL = 65_536
#: Smallest pool: fewer seeds make the pool's collisions between heavy prefixes dominate.
MIN_POOL = 16
#: Default pool size K.
DEFAULT_POOL = 1_024
#: Largest hash range g (OLH's e^ε + 1 is capped here, from ε ≈ 4.14 on).
MAX_HASH_RANGE = 64
#: Largest statistic of one window: levels × pool × g counts of 8 bytes (64 MiB).
MAX_STATISTIC_BYTES = 64 << 20
#: Cells (pool × candidates) of one block of the candidates' hash evaluation: 512 KiB of uint64,
#: so a block stays in a core's cache through its passes (1 << 20 cells took twice as long).
HASH_BLOCK_CELLS = 1 << 16
#: Largest `final_share`: every level below m keeps at least (1 − 0.9)/m of the reports, which
#: the prefix search needs to reach level m at all.
MAX_FINAL_SHARE = 0.9
#: The root of the level pools' seeds.
POOL_ROOT = np.uint64(0x6A09E667F3BCC908)


def string_domain_problem(max_bytes: object, pool: object) -> tuple[str, str] | None:
    """(field under domain.strings, why) when max_bytes or pool is unusable; None if usable."""
    if not is_int(max_bytes) or not 1 <= max_bytes <= MAX_STRING_BYTES:
        return "max_bytes", (f"must be an integer in [1, {MAX_STRING_BYTES}] "
                             f"(MAX_STRING_BYTES), got {max_bytes!r}")
    if not is_int(pool) or not MIN_POOL <= pool <= MAX_POOL:
        return "pool", f"must be an integer in [{MIN_POOL}, {MAX_POOL}], got {pool!r}"
    return None


def final_share_problem(final_share: object) -> str | None:
    """Why `domain.strings.final_share` is unusable (a real number in [0, MAX_FINAL_SHARE]),
    or None."""
    if not is_finite_number(final_share) or not 0 <= final_share <= MAX_FINAL_SHARE:
        return (f"must be a number in [0, {MAX_FINAL_SHARE}] (MAX_FINAL_SHARE), "
                f"got {final_share!r}")
    return None


def olh_hash_range(epsilon: float) -> int:
    """OLH's g = round(e^ε + 1), at least 2, at most MAX_HASH_RANGE."""
    return int(min(MAX_HASH_RANGE, max(2, math.floor(math.exp(epsilon) + 1.5))))


@dataclass(frozen=True)
class PrefixExtension:
    """PEM over strings of at most `d` = max_bytes bytes, one level per byte, K = `pool`, a
    share `final_share` of the reports sent to level m beside the uniform draw."""

    epsilon: float
    d: int
    pool: int = DEFAULT_POOL
    final_share: float = 0.0
    g: int = field(init=False)

    name: ClassVar[str] = "pem"
    kind: ClassVar[str] = STRINGS
    payload_schema: ClassVar[dict] = {"type": "record", "name": "PemPayload", "fields": [
        {"name": "level", "type": "int",
         "doc": "Prefix length in bytes, in [1, max_bytes]: the reported level."},
        {"name": "hash", "type": "int",
         "doc": "Index of the level's hash function in the pool, in [0, pool)."},
        {"name": "y", "type": "int", "doc": "Perturbed hash of the prefix, in [0, g)."}]}
    payload_record: ClassVar[str] = "PemPayload"
    payload_rule: ClassVar[str] = ("prefix-extension level must lie in [1, max_bytes], hash in "
                                   "[0, pool) and y in [0, g)")
    server_cost: ClassVar[str] = "O(n) counting; O(m·K·candidates) per window to decode"
    estimators: ClassVar[tuple[str, ...]] = ("heavy-hitters",)

    def __post_init__(self) -> None:
        problem = epsilon_problem(self.epsilon)
        if problem:
            raise RegistryError(f"epsilon {problem}", "epsilon")
        domain_problem = string_domain_problem(self.d, self.pool)
        if domain_problem:
            field_name, why = domain_problem
            raise RegistryError(f"{field_name} {why}", f"domain.strings.{field_name}")
        share_problem = final_share_problem(self.final_share)
        if share_problem:
            raise RegistryError(f"final_share {share_problem}", "domain.strings.final_share")
        object.__setattr__(self, "final_share", float(self.final_share))
        object.__setattr__(self, "g", olh_hash_range(self.epsilon))
        if self.statistic_nbytes() > MAX_STATISTIC_BYTES:
            raise RegistryError(
                f"pool {self.pool} makes one window's statistic {self.statistic_nbytes():,} bytes "
                f"(max_bytes × pool × g × 8 with g = {self.g}), more than MAX_STATISTIC_BYTES "
                f"({MAX_STATISTIC_BYTES:,}): lower pool or max_bytes", "domain.strings.pool")

    @property
    def levels(self) -> int:
        return self.d

    @property
    def parameter(self) -> str:
        return f"g={self.g}, pool={self.pool}"

    @property
    def level_probabilities(self) -> np.ndarray:
        """P(level ℓ) for ℓ = 1..m: (1 − s)/m each, plus s at level m."""
        share = np.full(self.levels, (1.0 - self.final_share) / self.levels)
        share[-1] += self.final_share
        return share

    @property
    def p_star(self) -> float:
        """Probability that a report supports its own prefix: e^ε / (e^ε + g − 1)."""
        e = math.exp(self.epsilon)
        return e / (e + self.g - 1)

    @property
    def q_star(self) -> float:
        """Probability that a report supports another prefix, over the pool: 1/g."""
        return 1.0 / self.g

    @cached_property
    def pool_seeds(self) -> np.ndarray:
        """(m, K) uint64: seed j of level ℓ at [ℓ − 1, j]."""
        level = np.arange(1, self.levels + 1, dtype=np.uint64)[:, None] << np.uint64(32)
        return hashing.splitmix64(POOL_ROOT, level | np.arange(self.pool, dtype=np.uint64))

    # -- client -----------------------------------------------------------------------------
    def perturb(self, rows: np.ndarray, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """Randomise padded string rows ((n, max_bytes) uint8, string_keys.padded_rows) into
        payload columns: level, hash (pool index), y."""
        rows = np.asarray(rows, dtype=np.uint8)
        if rows.ndim != 2 or rows.shape[1] != self.d:
            raise ValueError(f"rows must have shape (n, {self.d}), got {rows.shape}")
        n = rows.shape[0]
        level = np.asarray(rng.integers(1, self.levels + 1, size=n))
        index = rng.integers(0, self.pool, size=n)
        if self.final_share > 0:  # no draw at 0: uniform levels' reports stay bit-identical
            level[rng.random(n) < self.final_share] = self.levels
        keys = prefix_keys(rows)[np.arange(n), level - 1]
        hashed = hashing.local_hash(self.pool_seeds[level - 1, index], keys, self.g)
        return {"level": np.asarray(level), "hash": np.asarray(index),
                "y": grr_perturb(hashed, self.g, self.p_star, rng)}

    # -- wire format ------------------------------------------------------------------------
    def payload_bytes(self) -> int:
        return (BRANCH_BYTES + varint_bytes(self.levels) + varint_bytes(self.pool - 1)
                + varint_bytes(self.g - 1))

    def payloads_to_avro(self, columns: Columns) -> Iterator[dict]:
        return ({"level": level, "hash": index, "y": y} for level, index, y in zip(
            columns["level"].tolist(), columns["hash"].tolist(), columns["y"].tolist(),
            strict=True))

    def payloads_from_avro(self, payloads: list[dict]
                           ) -> tuple[dict[str, np.ndarray], np.ndarray]:
        return self.check_payloads({key: int_column(payloads, key)
                                    for key in ("level", "hash", "y")})

    def check_payloads(self, columns: Columns) -> tuple[dict[str, np.ndarray], np.ndarray]:
        level, index, y = (np.asarray(columns[key], dtype=np.int64)
                           for key in ("level", "hash", "y"))
        invalid = ((level < 1) | (level > self.levels) | (index < 0) | (index >= self.pool)
                   | (y < 0) | (y >= self.g))
        return ({"level": np.where(invalid, 1, level), "hash": np.where(invalid, 0, index),
                 "y": np.where(invalid, 0, y)}, invalid)

    # -- server -----------------------------------------------------------------------------
    def statistic_nbytes(self) -> int:
        return 8 * (self.levels + self.levels * self.pool * self.g)

    def new_statistic(self) -> np.ndarray:
        return np.zeros(self.levels * (1 + self.pool * self.g), dtype=np.int64)

    def accumulate(self, statistic: np.ndarray, columns: Columns) -> None:
        level = np.asarray(columns["level"], dtype=np.int64) - 1
        if level.size == 0:
            return
        statistic[: self.levels] += np.bincount(level, minlength=self.levels)
        cell = (level * self.pool + np.asarray(columns["hash"], dtype=np.int64)) * self.g
        cell += np.asarray(columns["y"], dtype=np.int64)
        statistic[self.levels:] += np.bincount(cell, minlength=self.levels * self.pool * self.g)

    def level_reports(self, statistic: np.ndarray) -> np.ndarray:
        """n_ℓ, the reports of every level (length m)."""
        return np.asarray(statistic[: self.levels], dtype=np.int64)

    def level_table(self, statistic: np.ndarray, level: int) -> np.ndarray:
        """The (K, g) counts of level `level` (1-based)."""
        size = self.pool * self.g
        start = self.levels + (level - 1) * size
        return np.asarray(statistic[start: start + size]).reshape(self.pool, self.g)

    @cached_property
    def _pool_coefficients(self) -> tuple[np.ndarray, np.ndarray]:
        """(m, K) uint64 multiply-add words (a, b) of every pool seed (hash_coefficients)."""
        return hashing.hash_coefficients(self.pool_seeds)

    def prefix_support(self, statistic: np.ndarray, level: int, keys: np.ndarray) -> np.ndarray:
        """How many reports of `level` support each prefix key: Σ_j counts[j, H(s_{ℓ,j}, key)].

        O(K × len(keys)): the local hash of ldp_telemetry.ldp.protocols.hashing evaluated in
        place in one (block × K) buffer reused for every block (HASH_BLOCK_CELLS), then one
        gather from the level's table per cell into a second one.
        """
        keys = np.asarray(keys, dtype=np.uint64)
        table = self.level_table(statistic, level).ravel()
        a, b = (words[level - 1] for words in self._pool_coefficients)
        rows = np.arange(self.pool, dtype=np.uint64) * np.uint64(self.g)
        g, shift = np.uint64(self.g), np.uint64(32)
        out = np.zeros(keys.shape[0], dtype=np.int64)
        block = min(max(1, HASH_BLOCK_CELLS // self.pool), keys.shape[0])
        cells = np.empty((block, self.pool), dtype=np.uint64)
        counts = np.empty((block, self.pool), dtype=table.dtype)
        with np.errstate(over="ignore"):
            for start in range(0, keys.shape[0], block):
                chunk = hashing.value_keys(keys[start:start + block])
                t, got = cells[:chunk.size], counts[:chunk.size]
                np.multiply(chunk[:, None], a, out=t)
                t += b
                t >>= shift
                t *= g
                t >>= shift
                t += rows  # the cell's index in the level's (K, g) table: below K·g < 2^63
                np.take(table, t.view(np.int64), out=got, mode="wrap")  # in range: no check
                got.sum(axis=1, out=out[start:start + chunk.size])
        return out
