"""Hierarchical histograms over the B buckets of [0, 1] ([Li20] §4.2), estimated by HH-ADMM (§4.3).

The B = 4^h buckets are the leaves of a tree of branching factor 4 ([Li20] §6: β = 4, as in
[Li20]'s reference [21]). Depth ℓ = 1..h holds 4^ℓ nodes; node j of depth ℓ covers the buckets
[j·4^(h−ℓ), (j+1)·4^(h−ℓ)); depth h is the buckets themselves and the root (depth 0, frequency 1)
is never reported. The client divides the *population*, not the budget ([Li20] §4.2): it draws
its depth ℓ uniformly from 1..h and reports the depth and its ancestor node at that depth
through one frequency oracle at the full ε. Each depth uses GRR or OLH over its 4^ℓ nodes,
whichever has the lower analytical variance at ε ([Li20] §4.1's CFO choice; [Fang25] eq. 4).
The depth is public: ε-LDP holds because, for every depth, the oracle's output ratio is ≤ e^ε.

Payload `HhPayload` {level, seed, y}: `level` the depth ℓ in [1, h]; for an OLH depth, `seed` the
hash seed and `y` the perturbed hash value in [0, g); for a GRR depth, `y` the reported node in
[0, 4^ℓ) and `seed` is 0 (not read).

Statistic (int64, mergeable by addition): [n_1, …, n_h, support counts of the 4 depth-1 nodes,
of the 16 depth-2 nodes, …, of the B buckets]: h + (4B − 4)/3 counts.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from typing import ClassVar

import numpy as np

from ldp_telemetry.ldp.base.errors import RegistryError
from ldp_telemetry.ldp.protocols.base import (BRANCH_BYTES, LONG_BYTES, Columns, FrequencyOracle,
                                              int_column, varint_bytes)
from ldp_telemetry.ldp.protocols.grr import GRR
from ldp_telemetry.ldp.protocols.noise import unbiased_estimate
from ldp_telemetry.ldp.protocols.numeric import NumericProtocol, unit_buckets
from ldp_telemetry.ldp.protocols.olh import OLH

#: The tree's branching factor ([Li20] §6).
BRANCHING = 4


def tree_depth(buckets: int) -> int | None:
    """h with buckets = 4^h (h ≥ 1), or None when buckets is not such a power."""
    h, size = 0, 1
    while size < buckets:
        size *= BRANCHING
        h += 1
    return h if size == buckets and h >= 1 else None


def level_oracle(epsilon: float, nodes: int) -> FrequencyOracle:
    """GRR or OLH over `nodes` values, whichever has the lower n·MSE (ties: GRR)."""
    grr, olh = GRR(epsilon=epsilon, d=nodes), OLH(epsilon=epsilon, d=nodes)
    return grr if grr.n_mse() <= olh.n_mse() else olh


def node_counts(buckets: np.ndarray, depth: int, h: int) -> np.ndarray:
    """Sum of the last axis of `buckets` (4^h leaves) over the 4^depth nodes of `depth`."""
    buckets = np.asarray(buckets)
    shape = buckets.shape[:-1] + (BRANCHING ** depth, BRANCHING ** (h - depth))
    return buckets.reshape(shape).sum(axis=-1)


@dataclass(frozen=True)
class HierarchicalHistogram(NumericProtocol):
    """HH with branching factor 4 over B = 4^h buckets; the estimator is `admm`."""

    h: int = field(init=False)

    name: ClassVar[str] = "hh"
    payload_record: ClassVar[str] = "HhPayload"
    payload_schema: ClassVar[dict] = {"type": "record", "name": "HhPayload", "fields": [
        {"name": "level", "type": "int",
         "doc": "Depth of the reported tree level in [1, h] (B = 4^h buckets)."},
        {"name": "seed", "type": "long",
         "doc": "OLH hash seed (the uint64 as two's complement); 0 at a GRR level."},
        {"name": "y", "type": "int",
         "doc": "Perturbed hash value in [0, g) (OLH level) or node in [0, 4^level) (GRR level)."}]}
    payload_rule: ClassVar[str] = ("hierarchical-histogram level must lie in [1, h] and y in "
                                   "[0, that level's output range)")
    server_cost: ClassVar[str] = "O(n·B) at OLH levels, O(n + B) at GRR levels"
    estimators: ClassVar[tuple[str, ...]] = ("admm",)

    def __post_init__(self) -> None:
        super().__post_init__()
        h = tree_depth(self.d)
        if h is None:
            raise RegistryError(f"buckets of {self.name} must be a power of {BRANCHING} "
                                f"(4, 16, 64, ...), got {self.d}", "domain.buckets")
        if self.output_buckets not in (None, self.d):
            raise RegistryError(f"output_buckets of {self.name} is the number of buckets, "
                                f"{self.d}, got {self.output_buckets}", "domain.output_buckets")
        object.__setattr__(self, "output_buckets", self.d)
        object.__setattr__(self, "h", h)

    # -- the tree ---------------------------------------------------------------------------
    @cached_property
    def oracles(self) -> tuple[FrequencyOracle, ...]:
        """The frequency oracle of every depth 1..h (index ℓ − 1)."""
        return tuple(level_oracle(self.epsilon, BRANCHING ** depth)
                     for depth in range(1, self.h + 1))

    def output_range(self, oracle: FrequencyOracle) -> int:
        return oracle.g if isinstance(oracle, OLH) else oracle.d

    def offsets(self) -> np.ndarray:
        """Start of every depth's support counts in the statistic (length h + 1)."""
        sizes = BRANCHING ** np.arange(1, self.h + 1)
        return self.h + np.concatenate([[0], np.cumsum(sizes)])

    # -- client -----------------------------------------------------------------------------
    def perturb(self, values: np.ndarray, rng: np.random.Generator) -> dict[str, np.ndarray]:
        bucket = unit_buckets(values, self.d)
        level = rng.integers(1, self.h + 1, size=bucket.shape)
        seed = np.zeros(bucket.shape, dtype=np.int64)
        y = np.zeros(bucket.shape, dtype=np.int64)
        for depth, oracle in enumerate(self.oracles, start=1):
            rows = level == depth
            node = bucket[rows] // BRANCHING ** (self.h - depth)
            columns = oracle.perturb(node, rng)
            if isinstance(oracle, OLH):
                seed[rows], y[rows] = columns["seed"], columns["y"]
            else:
                y[rows] = columns["value"]
        return {"level": level, "seed": seed, "y": y}

    # -- wire format ------------------------------------------------------------------------
    def payload_bytes(self) -> int:
        widest = max(self.output_range(oracle) for oracle in self.oracles)
        return BRANCH_BYTES + varint_bytes(self.h) + LONG_BYTES + varint_bytes(widest - 1)

    def payloads_to_avro(self, columns: Columns) -> Iterator[dict]:
        return ({"level": level, "seed": seed, "y": y} for level, seed, y in zip(
            columns["level"].tolist(), columns["seed"].tolist(), columns["y"].tolist(),
            strict=True))

    def payloads_from_avro(self, payloads: list[dict]
                               ) -> tuple[dict[str, np.ndarray], np.ndarray]:
        return self.check_payloads({key: int_column(payloads, key)
                                    for key in ("level", "seed", "y")})

    def check_payloads(self, columns: Columns) -> tuple[dict[str, np.ndarray], np.ndarray]:
        level, seed, y = (np.asarray(columns[key], dtype=np.int64)
                          for key in ("level", "seed", "y"))
        ranges = np.array([0] + [self.output_range(o) for o in self.oracles] + [0])
        in_range = np.clip(level, 0, self.h + 1)
        invalid = (level < 1) | (level > self.h) | (y < 0) | (y >= ranges[in_range])
        return ({"level": np.where(invalid, 1, level), "seed": seed,
                 "y": np.where(invalid, 0, y)}, invalid)

    # -- server -----------------------------------------------------------------------------
    def new_statistic(self) -> np.ndarray:
        return np.zeros(int(self.offsets()[-1]), dtype=np.int64)

    def accumulate(self, statistic: np.ndarray, columns: Columns) -> None:
        level = np.asarray(columns["level"], dtype=np.int64)
        statistic[: self.h] += np.bincount(level - 1, minlength=self.h)
        offsets = self.offsets()
        for depth, oracle in enumerate(self.oracles, start=1):
            rows = level == depth
            if not rows.any():
                continue
            counts = statistic[offsets[depth - 1]: offsets[depth]]
            if isinstance(oracle, OLH):
                oracle.accumulate(counts, {"seed": columns["seed"][rows], "y": columns["y"][rows]})
            else:
                oracle.accumulate(counts, {"value": columns["y"][rows]})

    def level_estimates(self, statistic: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
        """(n_ℓ per depth, the unbiased node frequencies of every depth ([Wang20] journal
        eq. 2): (c/n_ℓ − q*)/(p* − q*), NaN at a depth without reports)."""
        statistic = np.asarray(statistic)
        reports = statistic[: self.h].astype(np.int64)
        offsets = self.offsets()
        estimates = [unbiased_estimate(statistic[offsets[i]: offsets[i + 1]],
                                       oracle.noise(int(reports[i])))
                     for i, oracle in enumerate(self.oracles)]
        return reports, estimates

    def resample(self, estimate: np.ndarray, n: int, rng: np.random.Generator, size: int
                 ) -> np.ndarray:
        """`size` statistics of n users holding `estimate`: depths ~ Multinomial(n, 1/h each);
        at a GRR depth the node histogram is Multinomial(n_ℓ, f p* + (1 − f) q*), at an OLH
        depth each support count is Binomial(n_ℓ, f_v p* + (1 − f_v) q*) (see CfoBinning)."""
        out = np.zeros((size, len(self.new_statistic())), dtype=np.int64)
        reports = rng.multinomial(int(n), np.full(self.h, 1.0 / self.h), size=size)
        out[:, : self.h] = reports
        offsets = self.offsets()
        for i, oracle in enumerate(self.oracles):
            f = node_counts(estimate, i + 1, self.h)
            support = np.clip(f * oracle.p_star + (1.0 - f) * oracle.q_star, 0.0, 1.0)
            if isinstance(oracle, OLH):
                draws = rng.binomial(reports[:, i, None], support)
            else:
                draws = rng.multinomial(reports[:, i], support / support.sum())
            out[:, offsets[i]: offsets[i + 1]] = draws
        return out
