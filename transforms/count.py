"""Counting: reports into slice statistics, each report id once, and slices into windows.

The statistic is the protocol's sufficient statistic: counting dispatches to the metric's
protocol object through `new_statistic()`, `accumulate(statistic, columns)` and the statistic's
addition (`+=`), and knows nothing else about any protocol. The metric is read from the input,
so one step serves a registry of any size and step names never depend on the registry.

    (metric, ReportBatch) stamped in its slice
        -> "IntoSlices" -> "GroupSlices" (every batch of one slice together)
        -> "CountSupport": `CountSliceFn`, a `SliceCounter` per slice
        -> "CountReports": counter records_counted; duplicates split off as dead letters
        -> windows: "IntoWindows" -> "MergeSlices" (`MergeSupportFn`, a CombineFn)

Duplicates and which copy is counted: `ldp_telemetry.ldp.engine.counting` (a slice's
`SliceCounter` counts each report id once; `count_slice` counts a slice holding duplicates in
the order of its batches' content digests, `batch_digest`). A slice is counted by one plain
counter that sees every batch of the slice, after a GroupByKey, not by a CombineFn: Beam may
split a combine's inputs over partial accumulators, and two partial statistics that hold the
same id cannot be added exactly. A followed directory's follower counts the first copy it
reads instead (`pipelines.slice_ids`).

Counted before the shuffle. A batch job reading files (`ReadReportBatches` with `pre_count`)
counts each file's reports of a slice where it decodes them and sends only partial statistics
and their report ids through "GroupSlices"; "CountSupport" (`CountPartialsFn`) adds them by
`ldp_telemetry.ldp.engine.partials.merge_partials`, which decodes again the files whose
partials share report ids and counts their batches as `count_slice` would: the same statistic,
duplicates and copies counted as when every batch crosses the grouping.

Two transforms count windows, one per kind of run:

* `CountKeyedWindows` (batch runs without pane options): no Beam windows; slices and windows
  are plain keys (metric, start ms, end ms), each window one ON_TIME pane. Beam's windowed
  GroupByKey processes timers per window and key (about 10 ms per window in batch, growing with
  the number of windows), which plain keys avoid.
* `CountWindowPanes` (streaming runs, and batch runs with pane options): slices and windows are
  Beam windows with triggers (`ldp_telemetry.transforms.windows`), keyed by metric.

Late data is decided per slice: a report is either counted in every window that contains it or
in none. For fixed windows the slice is the window.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.transforms import window as beam_window

from ldp_telemetry.ldp.config.registry import Registry
from ldp_telemetry.ldp.config.windows import WindowSpec
from ldp_telemetry.ldp.engine.batches import ReportBatch
from ldp_telemetry.ldp.engine.counting import (DUPLICATES, SupportStatistic, count_slice,
                                               duplicate_letter)
from ldp_telemetry.ldp.engine.counting import (IdSet, SliceCounter,  # noqa: F401 (see below)
                                               VersionStatistic)
from ldp_telemetry.ldp.engine.partials import merge_partials
from ldp_telemetry.ldp.engine.reasons import Reason
from ldp_telemetry.transforms.coders import ReportBatchCoder  # noqa: F401 (registers it)
from ldp_telemetry.transforms.dedupe import DeduplicateSlicesFn
from ldp_telemetry.transforms.read import COUNTER_NAMESPACE
from ldp_telemetry.transforms.windows import into_slices, into_windows

# SupportStatistic, VersionStatistic, IdSet and SliceCounter moved to
# ldp_telemetry.ldp.engine.counting in 0.3. Beam pickles the first three under this module's name
# (accumulators and elements: SupportStatistic, VersionStatistic; DeduplicateSlicesFn's state:
# IdSet), so they stay importable from here for one release: a running streaming job can be
# updated. Remove in 0.4.


class MergeSupportFn(beam.CombineFn):
    """Adds slice statistics into window statistics (sliding windows reuse slices).

    Statistics are added in place into the accumulator, never into an input.
    """

    def create_accumulator(self) -> SupportStatistic:
        return SupportStatistic(None)

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


class CountSliceFn(beam.DoFn):
    """(key, every batch of one slice) -> (key, SupportStatistic), by `count_slice`."""

    def __init__(self, registry: Registry):
        self._registry = registry

    def process(self, element):
        key, batches = element
        yield key, count_slice(self._registry, batches)


class CountPartialsFn(beam.DoFn):
    """(key, every PartialCount of one slice) -> (key, SupportStatistic), by `merge_partials`;
    `batches_of` (a picklable callable, e.g. `transforms.read.FileBatches`) decodes a
    partial's batches again."""

    def __init__(self, registry: Registry, batches_of):
        self._registry = registry
        self._batches_of = batches_of

    def process(self, element):
        key, partials = element
        yield key, merge_partials(self._registry, partials, self._batches_of)


@beam.typehints.with_output_types(tuple[Any, SupportStatistic])
class _SplitDuplicates(beam.DoFn):
    """Counts the reports of each slice statistic (counter `records_counted`) and passes the
    statistic on; the reports not counted because their id repeated one already counted in the
    slice become a `duplicate` dead letter (tagged output DUPLICATES, counter
    dead_letter.duplicate).

    Slice statistics never repeat a report (slice panes are discarding), so the counter is the
    number of reports that entered a window; records_accepted - duplicates - records_counted is
    the number the runner dropped as later than the allowed lateness. Beam's Python SDK drops
    those without a counter or a log line (trigger.GeneralTriggerDriver.process_elements skips
    expired windows), and a DoFn cannot read the watermark that decides it, so they cannot be
    dead-lettered one by one.
    """

    def __init__(self, slice_ms: int):
        self._slice_ms = slice_ms

    def setup(self):
        self._counted = Metrics.counter(COUNTER_NAMESPACE, "records_counted")
        self._duplicates = Metrics.counter(COUNTER_NAMESPACE, Reason.DUPLICATE.counter)

    def _split(self, key, statistic: SupportStatistic, slice_start_ms: int) -> list:
        self._counted.inc(statistic.n)
        out = []
        if statistic.duplicates:
            self._duplicates.inc(statistic.duplicates)
            out.append(beam.pvalue.TaggedOutput(DUPLICATES, duplicate_letter(
                statistic, slice_start_ms, self._slice_ms)))
            statistic = SupportStatistic(statistic.metric, statistic.parts)
        if statistic.n:
            out.append((key, statistic))
        return out


class SplitDuplicatesFn(_SplitDuplicates):
    """`_SplitDuplicates` on the batch path: ((metric, slice start ms), statistic) ->
    ((metric, slice start ms, slice end ms), statistic)."""

    def process(self, element):
        (metric, start_ms), statistic = element
        return self._split((metric, start_ms, start_ms + self._slice_ms), statistic, start_ms)


class SplitPaneDuplicatesFn(_SplitDuplicates):
    """`_SplitDuplicates` on the pane path: (metric, statistic) in its slice's Beam window."""

    def process(self, element, window=beam.DoFn.WindowParam):
        metric, statistic = element
        return self._split(metric, statistic, window.start.micros // 1000)


def _slice_key(element: tuple[str, ReportBatch]) -> tuple[tuple[str, int], ReportBatch]:
    metric, batch = element
    return (metric, batch.slice_start_ms), batch


def _window_keys(element, spec: WindowSpec):
    """((metric, slice start, slice end), statistic) -> one element per window holding it."""
    (metric, slice_start_ms, _), statistic = element
    for start_ms in spec.window_starts(slice_start_ms):
        yield (metric, start_ms, start_ms + spec.size_ms), statistic


class CountKeyedWindows(beam.PTransform):
    """Batch path: (metric, ReportBatch) -> {"windows": ((metric, start ms, end ms),
    SupportStatistic), DUPLICATES: DeadLetter}, one statistic per window, no Beam windows.

    Slices are keys (metric, slice start ms). Fixed windows are their own slices, keyed as
    windows by "CountReports", and there is no window stage; otherwise each slice statistic is
    sent to the windows holding it ("IntoWindows", window / period of them) and added there
    ("MergeSlices"). The reader's batches are in the global window already (timestamped, not
    windowed).

    With `batches_of` (`ReadReportBatches.recount()`), the input is the pre-counting reader's
    ((metric, slice start ms), PartialCount) instead, added by `CountPartialsFn`.
    """

    def __init__(self, registry: Registry, windows: WindowSpec, batches_of=None):
        super().__init__()
        self._registry = registry
        self._windows = windows
        self._batches_of = batches_of

    def expand(self, batches):
        spec = self._windows
        if self._batches_of is None:
            sliced = (batches
                      | "IntoSlices" >> beam.Map(_slice_key).with_output_types(
                          tuple[tuple[str, int], ReportBatch]))  # batches use ReportBatchCoder
            count = CountSliceFn(self._registry)
        else:
            sliced, count = batches, CountPartialsFn(self._registry, self._batches_of)
        counted = (sliced
                   | "GroupSlices" >> beam.GroupByKey()
                   | "CountSupport" >> beam.ParDo(count)
                   | "CountReports" >> beam.ParDo(SplitDuplicatesFn(spec.slice_ms))
                   .with_outputs(DUPLICATES, main="statistics"))
        windows = counted.statistics
        if not spec.is_fixed:
            windows = (windows
                       | "IntoWindows" >> beam.FlatMap(_window_keys, spec)
                       | "MergeSlices" >> beam.CombinePerKey(MergeSupportFn()))
        return {"windows": windows, DUPLICATES: counted[DUPLICATES]}


class CountWindowPanes(beam.PTransform):
    """Pane path: (metric, ReportBatch) stamped in its slice -> {"windows": (metric,
    SupportStatistic) per window pane, in the window, DUPLICATES: DeadLetter in the global
    window}.

    Slices are Beam windows (`transforms.windows.into_slices`): each slice pane is a delta
    holding reports no other pane holds. Repeated ids are found within a pane, and across the
    panes of a slice by "DeduplicateSlices" (`transforms.dedupe`, a stateful step) unless
    `dedupe` is False (a followed directory's follower has deduplicated already). Windows
    (`into_windows`) accumulate: each window pane adds every delta once.
    """

    def __init__(self, registry: Registry, windows: WindowSpec, dedupe: bool = True):
        super().__init__()
        self._registry = registry
        self._windows = windows
        self._dedupe = dedupe

    def expand(self, batches):
        spec = self._windows
        sliced = batches | "IntoSlices" >> into_slices(spec)
        letters = []
        if self._dedupe:
            deduped = (sliced | "DeduplicateSlices" >> beam.ParDo(
                DeduplicateSlicesFn(spec.slice_ms, spec.allowed_lateness_ms))
                .with_outputs(DUPLICATES, main="batches"))
            sliced = deduped.batches
            letters.append(deduped[DUPLICATES] | "RepeatsOutOfTime" >> beam.WindowInto(
                beam_window.GlobalWindows()))
        counted = (sliced
                   | "GroupSlices" >> beam.GroupByKey()
                   | "CountSupport" >> beam.ParDo(CountSliceFn(self._registry))
                   | "CountReports" >> beam.ParDo(SplitPaneDuplicatesFn(spec.slice_ms))
                   .with_outputs(DUPLICATES, main="statistics"))
        duplicates = counted[DUPLICATES] | "DuplicatesOutOfTime" >> beam.WindowInto(
            beam_window.GlobalWindows())
        if letters:
            duplicates = (duplicates, *letters) | "AllDuplicates" >> beam.Flatten()
        windows = (counted.statistics
                   | "IntoWindows" >> into_windows(spec)
                   | "MergeSlices" >> beam.CombinePerKey(MergeSupportFn()))
        return {"windows": windows, DUPLICATES: duplicates}
