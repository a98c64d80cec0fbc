"""A bottom-s report sample: the s reports of smallest priority, mergeable and bounded.

Each report's priority is splitmix64 of its report id under the sample's secret `key`
(ldp_telemetry.ldp.protocols.hashing), a pseudo-random 64-bit number a device cannot predict:
report ids come from the fleet, and with a public priority fake devices could pick ids that never
enter the sample. The key is drawn once per loaded registry (IntegritySpec.key) and travels with the
job, so every worker of a run ranks reports alike; samples of different keys (a restarted live
run) still merge into a uniform sample, since each report's priority stays an independent
uniform draw. The s smallest priorities of a union are the s smallest of the
parts' s smallest, so two samples merge exactly (the same reports whatever the order of
batches, slices or panes), the size never exceeds s, and the kept reports are a uniform sample
without replacement of the window's reports (a bottom-k sketch). Reports without ids (a batch
without the REPORT_ID column) get priorities from a per-sample counter mixed with a random
salt: still uniform, not reproducible.

Cost per batch: one hash per report and a comparison with the current s-th smallest priority;
only reports below it are copied (about s (1 + ln(n/s)) rows over a window of n).
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ldp_telemetry.ldp.protocols.hashing import splitmix64



class ReportSample:
    """The `capacity` reports of smallest priority seen so far.

    Offered rows below the threshold are appended to a pending list and the sample is cut back
    to `capacity` (a partition, not a sort) when it holds twice that, so each row is copied
    O(1) times; `rows()` cuts it and returns (priority ascending, columns).
    """

    __slots__ = ("capacity", "key", "_priority", "_columns", "_held", "_threshold", "_unnamed")

    def __init__(self, capacity: int, key: int, priority: np.ndarray | None = None,
                 columns: dict | None = None, unnamed: int = 0):
        self.capacity = int(capacity)
        self.key = np.uint64(key)
        self._priority: list[np.ndarray] = [] if priority is None else [priority]
        self._columns: list[dict] = [] if columns is None else [columns]
        self._held = sum(len(p) for p in self._priority)
        self._threshold = (priority.max() if priority is not None and len(priority)
                           and len(priority) >= self.capacity else None)
        self._unnamed = unnamed

    def __len__(self) -> int:
        return min(self._held, self.capacity)

    def __reduce__(self) -> tuple[type[ReportSample], tuple]:
        priority, columns = self.rows()
        return ReportSample, (self.capacity, int(self.key), priority, columns, self._unnamed)

    def offer(self, report_ids: np.ndarray | None, rows: int,
              take: Callable[[np.ndarray], dict]) -> None:
        """Offer `rows` reports: `report_ids` (int64, or None), `take(mask)` their sampled
        columns for the rows of a boolean mask."""
        if report_ids is None:
            salt = np.uint64(np.random.default_rng().integers(0, 2 ** 63))
            priority = splitmix64(salt, np.arange(self._unnamed, self._unnamed + rows))
            self._unnamed += rows
        else:
            priority = splitmix64(self.key, np.asarray(report_ids).view(np.uint64))
        threshold = self._threshold
        mask = np.ones(rows, dtype=bool) if threshold is None else priority < threshold
        if mask.any():
            self._hold(priority[mask], take(mask))

    def add(self, other: ReportSample) -> ReportSample:
        """Merge `other` into this sample (in place; `other` is not changed) and return it."""
        priority, columns = other.rows()
        if len(priority):
            self._hold(priority.copy(), {k: v.copy() for k, v in columns.items()})
        return self

    def _hold(self, priority: np.ndarray, columns: dict) -> None:
        self._priority.append(priority)
        self._columns.append(columns)
        self._held += len(priority)
        if self._held >= 2 * self.capacity:
            self._cut(sort=False)

    def _cut(self, sort: bool) -> None:
        if not self._held:
            return
        priority = np.concatenate(self._priority) if len(self._priority) > 1 else self._priority[0]
        columns = (self._columns[0] if len(self._columns) == 1 else
                   {k: np.concatenate([c[k] for c in self._columns]) for k in self._columns[0]})
        if len(priority) > self.capacity:
            keep = np.argpartition(priority, self.capacity - 1)[: self.capacity]
            priority, columns = priority[keep], {k: v[keep] for k, v in columns.items()}
            self._threshold = priority.max()
        if sort:
            order = np.argsort(priority, kind="stable")
            priority, columns = priority[order], {k: v[order] for k, v in columns.items()}
        self._priority, self._columns, self._held = [priority], [columns], len(priority)

    def rows(self) -> tuple[np.ndarray, dict]:
        """(priorities ascending, sampled columns): at most `capacity` rows."""
        self._cut(sort=True)
        if not self._held:
            return np.zeros(0, dtype=np.uint64), {}
        return self._priority[0], self._columns[0]

    def nbytes(self) -> int:
        return int(sum(p.nbytes for p in self._priority)
                   + sum(v.nbytes for c in self._columns for v in c.values()))
