"""Subset Selection ([Wang20] journal §2.4; [Fang25] §3.4).

The client reports a k-subset Y of [0, d): with p = k e^ε / (k e^ε + d - k) a subset that
contains v (v plus k - 1 values drawn uniformly without replacement from the others),
otherwise k values drawn uniformly from the others. Every subset with v has probability
e^ε / Z, every subset without v 1 / Z (Z = C(d-1, k-1)(k e^ε + d - k)/k), so the ratio of any
output's probabilities under two inputs is at most e^ε.

Y supports its members: p* = p, q* = p (k-1)/(d-1) + (1 - p) k/(d-1), with k chosen as for
every fixed-size subset protocol (ldp_telemetry.ldp.protocols.fixed_subset).

Payload: the k members as an Avro array<int>; valid when it holds exactly k distinct values
of [0, d). Statistic: the histogram of all members (one bincount per batch).
"""
from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ldp_telemetry.ldp.protocols.base import BRANCH_BYTES, Columns, varint_bytes
from ldp_telemetry.ldp.protocols.fixed_subset import FixedSizeSubset

#: (reports x d) keys drawn at once when perturbing: ~16 MiB of float64.
_PERTURB_CELLS = 1 << 21


@dataclass(frozen=True)
class SS(FixedSizeSubset):
    name: ClassVar[str] = "ss"
    payload_schema: ClassVar[dict] = {"type": "record", "name": "SsPayload", "fields": [
        {"name": "items", "type": {"type": "array", "items": "int"},
         "doc": "Exactly k distinct values in [0, d)."}]}
    aggregation_rank: ClassVar[float] = 30
    payload_rule: ClassVar[str] = "SS items must be exactly k distinct values in [0, d)"
    server_cost: ClassVar[str] = "O(n·k + d): histogram of the reported items"

    def perturb(self, values: np.ndarray, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """Draw the k members by sorting uniform keys; v's key is forced in front or behind."""
        values = np.asarray(values, dtype=np.int64)
        items = np.empty((len(values), self.k), dtype=np.int64)
        step = max(1, _PERTURB_CELLS // self.d)
        for start in range(0, len(values), step):
            rows = values[start:start + step]
            keys = rng.random((len(rows), self.d))
            keep = rng.random(len(rows)) < self.p_star
            keys[np.arange(len(rows)), rows] = np.where(keep, -1.0, 2.0)
            chosen = np.argpartition(keys, self.k - 1, axis=1)[:, : self.k]
            items[start:start + len(rows)] = chosen
        return {"items": items}

    def payload_bytes(self) -> int:
        # block count, k items, the closing zero-count block
        return BRANCH_BYTES + varint_bytes(self.k) + self.k * varint_bytes(self.d - 1) + 1

    def payloads_to_avro(self, columns: Columns) -> Iterator[dict]:
        return ({"items": row} for row in columns["items"].tolist())

    def payloads_from_avro(self, payloads: list[dict]
                               ) -> tuple[dict[str, np.ndarray], np.ndarray]:
        lists = [p["items"] for p in payloads]
        lengths = np.fromiter(map(len, lists), dtype=np.int64, count=len(lists))
        invalid = lengths != self.k
        placeholder = list(range(self.k))
        if invalid.any():
            lists = [placeholder if bad else items
                     for items, bad in zip(lists, invalid.tolist(), strict=True)]
        items = np.fromiter(itertools.chain.from_iterable(lists), dtype=np.int64,
                            count=len(lists) * self.k).reshape(len(lists), self.k)
        columns, out_of_space = self.check_payloads({"items": items})
        invalid |= out_of_space
        return columns, invalid

    def check_payloads(self, columns: Columns) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """`items`: (n, k) integers; invalid when one lies outside [0, d) or two are equal."""
        items = np.array(columns["items"], dtype=np.int64).reshape(-1, self.k)
        invalid = ((items < 0) | (items >= self.d)).any(axis=1)
        ordered = np.sort(items, axis=1)
        invalid |= (ordered[:, 1:] == ordered[:, :-1]).any(axis=1)
        items[invalid] = np.arange(self.k)
        return {"items": items}, invalid

    def accumulate(self, statistic: np.ndarray, columns: Columns) -> None:
        statistic += np.bincount(columns["items"].ravel(), minlength=self.d)
