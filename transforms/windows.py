"""Slices and windows: count each report once per slice, then add slices into windows."""
from __future__ import annotations

import math
from dataclasses import dataclass

import apache_beam as beam
from apache_beam.transforms import window as beam_window

from ldp.registry import Registry
from transforms.count import CountSupportFn, MergeSupportFn


@dataclass(frozen=True)
class WindowSpec:
    """Event-time windows of `size_ms`, starting every `period_ms` (fixed when equal).

    Reports are counted per slice of gcd(size, period): every window is a union of whole slices,
    so a window that overlaps k others costs k additions of small statistics, not k passes over
    the reports.
    """

    size_ms: int
    period_ms: int

    def __post_init__(self):
        if self.size_ms <= 0:
            raise ValueError(f"--window must be positive, got {self.size_ms / 1000} s")
        if self.period_ms <= 0 or self.period_ms > self.size_ms:
            raise ValueError(f"--period must be in (0, window], got {self.period_ms / 1000} s")

    @classmethod
    def from_seconds(cls, window: float, period: float | None = None) -> "WindowSpec":
        return cls(round(window * 1000), round((period or window) * 1000))

    @property
    def slice_ms(self) -> int:
        return math.gcd(self.size_ms, self.period_ms)

    @property
    def is_fixed(self) -> bool:
        return self.size_ms == self.period_ms


class CountSupportPerWindow(beam.PTransform):
    """(metric, ReportBatch) stamped in its slice -> (metric, SupportStatistic) per window.

    One CombinePerKey per metric, labelled CountSupport[<metric>] so that step names are stable.
    """

    def __init__(self, registry: Registry, windows: WindowSpec):
        super().__init__()
        self._registry = registry
        self._windows = windows

    def expand(self, batches):
        metrics = [m.name for m in self._registry.metrics]
        index = {name: i for i, name in enumerate(metrics)}
        per_metric = (batches
                      | "IntoSlices" >> beam.WindowInto(
                          beam_window.FixedWindows(self._windows.slice_ms / 1000))
                      | "ByMetric" >> beam.Partition(lambda kv, _: index[kv[0]], len(metrics)))
        counted = []
        for name, batches_of_metric in zip(metrics, per_metric):
            protocol = self._registry[name].protocol
            statistics = (batches_of_metric
                          | f"CountSupport[{name}]" >> beam.CombinePerKey(CountSupportFn(protocol)))
            if not self._windows.is_fixed:
                statistics = (statistics
                              | f"IntoWindows[{name}]" >> beam.WindowInto(
                                  beam_window.SlidingWindows(self._windows.size_ms / 1000,
                                                             self._windows.period_ms / 1000))
                              | f"MergeSlices[{name}]" >> beam.CombinePerKey(
                                  MergeSupportFn(protocol)))
            counted.append(statistics)
        return counted | "AllMetrics" >> beam.Flatten()
