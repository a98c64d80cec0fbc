"""Count support per (metric, slice) with ONE CombineFn for every metric.

The accumulator is the protocol's sufficient statistic: the combine dispatches to the metric's
protocol object through `new_statistic()`, `accumulate(statistic, columns)` and the statistic's
addition (`+=`), and knows nothing else about any protocol. The metric is read from the input
(a ReportBatch, or a statistic for merges), so one step serves a registry of any size.

Duplicates. A slice's accumulator also keeps the report ids it has counted (`IdSet`, 8 bytes
per distinct report), so a report id seen again in the same slice is not counted: it is
reported as `duplicates` on the output statistic (the job turns them into `duplicate` dead
letters). The ids are dropped when the slice's statistic is extracted: deduplication holds
within a slice (for fixed windows, the window), not across slices or forever.
"""
from __future__ import annotations

import copy
from typing import Iterable

import apache_beam as beam
import numpy as np

from ldp_telemetry.ldp.registry import Registry
from ldp_telemetry.schemas.batches import REPORT_ID, ReportBatch

#: How many repeated report ids a statistic keeps as examples for its dead letter.
DUPLICATE_EXAMPLES = 5


class SupportStatistic:
    """Accumulator of one metric: report count n and the protocol's statistic (`table`).

    `metric` None (and `table` None) is the empty accumulator of a combine that has seen no
    input yet. Merging is addition, so the size never depends on the number of reports.
    `duplicates` counts reports not added because their id was already counted in the slice;
    `duplicate_ids` holds a few of their ids.
    """

    __slots__ = ("metric", "n", "table", "duplicates", "duplicate_ids")

    def __init__(self, metric: str | None, n: int, table, duplicates: int = 0,
                 duplicate_ids: tuple[int, ...] = ()):
        self.metric = metric
        self.n = n
        self.table = table
        self.duplicates = duplicates
        self.duplicate_ids = duplicate_ids

    def add(self, other: "SupportStatistic") -> "SupportStatistic":
        """Add `other` into this statistic (in place) and return it."""
        if other.metric is None:
            return self
        if self.metric is None:  # never add into an input: start from a copy
            self.metric, self.table = other.metric, copy.deepcopy(other.table)
        elif other.metric != self.metric:
            raise ValueError(f"cannot add a statistic of metric {other.metric!r} to one of "
                             f"{self.metric!r}")
        else:
            self.table += other.table
        self.n += other.n
        self.duplicates += other.duplicates
        self.duplicate_ids = (self.duplicate_ids + other.duplicate_ids)[:DUPLICATE_EXAMPLES]
        return self

    def __reduce__(self):
        return SupportStatistic, (self.metric, self.n, self.table, self.duplicates,
                                  self.duplicate_ids)

    def __repr__(self) -> str:
        shape = None if self.table is None else getattr(self.table, "shape", None)
        return (f"SupportStatistic(metric={self.metric!r}, n={self.n}, shape={shape}, "
                f"duplicates={self.duplicates})")


class IdSet:
    """Distinct 64-bit report ids, as a few sorted disjoint numpy arrays (levels).

    A new batch becomes a level; the last two levels are merged while the older is at most
    twice the newer, so there are O(log n) levels and each id is re-sorted O(log n) times.
    Memory: 8 bytes per distinct id (16 for a moment while two levels merge).
    """

    __slots__ = ("levels",)

    def __init__(self, levels: list[np.ndarray] | None = None):
        self.levels = levels or []

    def __len__(self) -> int:
        return sum(len(level) for level in self.levels)

    def __contains__(self, report_id: int) -> bool:
        return bool(self._seen(np.array([report_id], dtype=np.int64))[0])

    def _seen(self, ids: np.ndarray) -> np.ndarray:
        seen = np.zeros(len(ids), dtype=bool)
        for level in self.levels:
            at = np.searchsorted(level, ids)
            seen |= level[np.minimum(at, len(level) - 1)] == ids
        return seen

    def add_new(self, ids: np.ndarray) -> np.ndarray:
        """Add `ids`; return the mask of rows to count: the first row of each id not seen before."""
        ids = np.asarray(ids, dtype=np.int64)
        if not self.levels and len(ids) and (len(ids) == 1 or bool((ids[1:] > ids[:-1]).all())):
            # The first batch of a slice with increasing ids (e.g. a single report): all new.
            self.levels.append(ids.copy())
            return np.ones(len(ids), dtype=bool)
        distinct, first = np.unique(ids, return_index=True)
        new = ~self._seen(distinct)
        keep = np.zeros(len(ids), dtype=bool)
        keep[first[new]] = True
        if new.any():
            self.levels.append(distinct[new])
            while len(self.levels) > 1 and len(self.levels[-2]) <= 2 * len(self.levels[-1]):
                newer, older = self.levels.pop(), self.levels.pop()
                self.levels.append(np.sort(np.concatenate([older, newer]), kind="stable"))
        return keep

    def intersects(self, other: "IdSet") -> bool:
        return any(self._seen(level).any() for level in other.levels)

    def union(self, other: "IdSet") -> "IdSet":
        """Both sets, assumed disjoint (check with `intersects`)."""
        return IdSet(self.levels + other.levels)


class _SliceAccumulator:
    """A statistic being counted, with the ids it holds."""

    __slots__ = ("statistic", "ids")

    def __init__(self, statistic: SupportStatistic, ids: IdSet):
        self.statistic = statistic
        self.ids = ids

    def __reduce__(self):
        return _restore_accumulator, (self.statistic, self.ids.levels)


def _restore_accumulator(statistic: SupportStatistic, levels: list) -> _SliceAccumulator:
    return _SliceAccumulator(statistic, IdSet(levels))


class CountSupportFn(beam.CombineFn):
    """ReportBatch inputs of one (metric, slice) -> its SupportStatistic, for every metric.

    Reports whose id the accumulator already holds are not counted (see the module doc).
    Use it WITHOUT combiner lifting (GroupByKey, then CombineValues): partial accumulators of
    one slice that hold the same id cannot be merged exactly, as the statistic cannot remove a
    report again, and merge_accumulators raises ValueError when that happens.
    """

    def __init__(self, registry: Registry):
        self._registry = registry

    def create_accumulator(self) -> _SliceAccumulator:
        return _SliceAccumulator(SupportStatistic(None, 0, None), IdSet())

    def add_input(self, accumulator: _SliceAccumulator, batch: ReportBatch) -> _SliceAccumulator:
        if not batch.n:
            return accumulator
        statistic = accumulator.statistic
        if statistic.metric is None:
            statistic.metric = batch.metric
            statistic.table = self._registry[batch.metric].protocol.new_statistic()
        columns = batch.columns
        if REPORT_ID in columns:
            keep = accumulator.ids.add_new(columns[REPORT_ID])
            columns = {k: v for k, v in columns.items() if k != REPORT_ID}
            if not keep.all():
                repeated = batch.columns[REPORT_ID][~keep]
                statistic.duplicates += len(repeated)
                statistic.duplicate_ids = (statistic.duplicate_ids + tuple(
                    repeated[:DUPLICATE_EXAMPLES].tolist()))[:DUPLICATE_EXAMPLES]
                columns = {k: v[keep] for k, v in columns.items()}
        kept = len(next(iter(columns.values())))
        if kept:
            self._registry[batch.metric].protocol.accumulate(statistic.table, columns)
            statistic.n += kept
        return accumulator

    def merge_accumulators(self, accumulators: Iterable[_SliceAccumulator]) -> _SliceAccumulator:
        accumulators = iter(accumulators)
        merged = next(accumulators)
        for other in accumulators:
            if merged.ids.intersects(other.ids):
                raise ValueError("partial accumulators of one slice hold the same report id: "
                                 "combine a slice's batches without combiner lifting")
            merged.statistic.add(other.statistic)
            merged.ids = merged.ids.union(other.ids)
        return merged

    def compact(self, accumulator: _SliceAccumulator) -> _SliceAccumulator:
        return accumulator  # nothing is buffered beyond the statistic and the ids

    def extract_output(self, accumulator: _SliceAccumulator) -> SupportStatistic:
        return accumulator.statistic  # the ids are dropped with the accumulator


class MergeSupportFn(beam.CombineFn):
    """Adds slice statistics into window statistics (sliding windows reuse slices).

    Statistics are added in place into the accumulator, never into an input.
    """

    def create_accumulator(self) -> SupportStatistic:
        return SupportStatistic(None, 0, None)

    def add_input(self, accumulator: SupportStatistic, statistic: SupportStatistic
                  ) -> SupportStatistic:
        return accumulator.add(statistic)

    def merge_accumulators(self, accumulators: Iterable[SupportStatistic]) -> SupportStatistic:
        accumulators = iter(accumulators)
        merged = next(accumulators)
        for other in accumulators:
            merged.add(other)
        return merged

    def extract_output(self, accumulator: SupportStatistic) -> SupportStatistic:
        return accumulator
