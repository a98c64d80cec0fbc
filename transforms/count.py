"""Count support per (metric, window) with a CombineFn whose accumulator is a sufficient statistic."""
from __future__ import annotations

from typing import Iterable

import apache_beam as beam
import numpy as np

from ldp_telemetry.ldp.protocols.base import FrequencyOracle
from ldp_telemetry.schemas.batches import ReportBatch


class SupportStatistic:
    """Accumulator: report count n and the protocol's statistic (fixed shape, int64).

    Merging is element-wise addition, so the size never depends on the number of reports.
    """

    __slots__ = ("n", "table")

    def __init__(self, n: int, table: np.ndarray):
        self.n = n
        self.table = table

    def __reduce__(self):
        return SupportStatistic, (self.n, self.table)

    def __repr__(self) -> str:
        return f"SupportStatistic(n={self.n}, shape={self.table.shape})"


class CountSupportFn(beam.CombineFn):
    """ReportBatch inputs -> SupportStatistic of one metric's protocol.

    add_input adds a whole numpy batch; merge_accumulators adds into the first accumulator only.
    """

    def __init__(self, protocol: FrequencyOracle):
        self._protocol = protocol

    def create_accumulator(self) -> SupportStatistic:
        return SupportStatistic(0, self._protocol.new_statistic())

    def add_input(self, accumulator: SupportStatistic, batch: ReportBatch) -> SupportStatistic:
        if batch.n:
            self._protocol.accumulate(accumulator.table, batch.columns)
            accumulator.n += batch.n
        return accumulator

    def merge_accumulators(self, accumulators: Iterable[SupportStatistic]) -> SupportStatistic:
        accumulators = iter(accumulators)
        merged = next(accumulators)
        for other in accumulators:
            merged.table += other.table
            merged.n += other.n
        return merged

    def compact(self, accumulator: SupportStatistic) -> SupportStatistic:
        return accumulator  # nothing is buffered: the statistic is already minimal

    def extract_output(self, accumulator: SupportStatistic) -> SupportStatistic:
        return accumulator


class MergeSupportFn(CountSupportFn):
    """Combines per-slice SupportStatistics into windows (sliding windows reuse slices)."""

    def add_input(self, accumulator: SupportStatistic, statistic: SupportStatistic
                  ) -> SupportStatistic:
        return self.merge_accumulators([accumulator, statistic])
