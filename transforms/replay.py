"""A local streaming source: report files arriving in a scripted order, with event-time and
processing-time steps in between.

No unbounded source runs on Beam's local runners; a TestStream does, on BundleBasedDirectRunner
with `--streaming`. This source turns a script of arrivals into a TestStream of file paths and
decodes them with the same reader as the batch job, so batches, timestamps, dead letters and
counters are exactly those of a batch run. A batch whose slice is already behind the watermark
when its file arrives is late data.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import apache_beam as beam
from apache_beam.testing.test_stream import TestStream

from ldp_telemetry.ldp.config.registry import Registry
from ldp_telemetry.transforms.read import ReadReportBatches


@dataclass(frozen=True)
class FilesArrive:
    """These report files arrive now."""

    paths: tuple[str, ...]


@dataclass(frozen=True)
class WatermarkTo:
    """The watermark advances to this event time (epoch seconds); never backwards."""

    seconds: float


@dataclass(frozen=True)
class ProcessingTimePasses:
    """This many seconds of processing time pass (what early panes wait for)."""

    seconds: float


ReplayStep = FilesArrive | WatermarkTo | ProcessingTimePasses


class ReplayReportFiles(beam.PTransform):
    """PBegin -> tagged outputs `batches` and `dead_letters`, like reading the files in batch.

    After the last step the watermark advances to infinity, which closes every window.
    """

    def __init__(self, registry: Registry, slice_ms: int, steps: Sequence[ReplayStep],
                 slice_offset_ms: int = 0):
        super().__init__()
        self._registry = registry
        self._slice_ms = slice_ms
        self._slice_offset_ms = slice_offset_ms
        self._steps = tuple(steps)

    def expand(self, pbegin):
        stream = TestStream()
        for step in self._steps:
            if isinstance(step, FilesArrive):
                stream = stream.add_elements([str(path) for path in step.paths])
            elif isinstance(step, WatermarkTo):
                stream = stream.advance_watermark_to(step.seconds)
            elif isinstance(step, ProcessingTimePasses):
                stream = stream.advance_processing_time(step.seconds)
            else:
                raise TypeError(f"not a replay step: {step!r}")
        return (pbegin
                | "Arrivals" >> stream.advance_watermark_to_infinity()
                | "DecodeReports" >> ReadReportBatches(self._registry, self._slice_ms,
                                                       spread=False,
                                                       slice_offset_ms=self._slice_offset_ms))
