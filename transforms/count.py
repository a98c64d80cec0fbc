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

Duplicates. A slice's counter also keeps the report ids it has counted (`IdSet`, 8 bytes per
distinct report), so a report id seen again in the same slice is not counted: it is reported
as `duplicates` on the slice's statistic and becomes a `duplicate` dead letter. The ids are
dropped with the counter: deduplication holds within a slice (for fixed windows, the window),
not across slices or forever. This is why a slice is counted by one plain counter that sees
every batch of the slice, after a GroupByKey, and not by a CombineFn: Beam may split a
combine's inputs over partial accumulators, and two partial statistics that hold the same id
cannot be added exactly (a statistic cannot remove a report again).

Which copy is counted. When a slice holds duplicates, `CountSliceFn` counts its batches in the
order of their content digests (`batch_digest`), not in the order the runner grouped them, and
each batch's rows in order: copies that carry the same report (a retried file) give the same
statistic whichever is counted, and copies of an id that carry *different* reports give one
answer on every runner and every run (the copy in the batch of the smallest digest). A followed
directory's follower counts the first copy it reads instead (`pipelines.slice_ids`).

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

import copy
import hashlib
from collections.abc import Iterable
from typing import Any

import apache_beam as beam
import numpy as np
from apache_beam.metrics import Metrics
from apache_beam.transforms import window as beam_window

from ldp_telemetry.ldp.integrity import accumulate as integrity
from ldp_telemetry.ldp.registry import Registry
from ldp_telemetry.ldp.times import iso_from_ms
from ldp_telemetry.ldp.windows import WindowSpec
from ldp_telemetry.output.reasons import Reason
from ldp_telemetry.schemas.batches import REPORT_ID, DeadLetter, ReportBatch
from ldp_telemetry.transforms.coders import ReportBatchCoder  # noqa: F401 (registers it)
from ldp_telemetry.transforms.read import COUNTER_NAMESPACE
from ldp_telemetry.transforms.windows import into_slices, into_windows

#: How many repeated report ids a statistic keeps as examples for its dead letter.
DUPLICATE_EXAMPLES = 5
#: The tagged output of the `duplicate` dead letters.
DUPLICATES = "duplicates"


class VersionStatistic:
    """The report count n and the protocol's statistic (`table`) of one configuration version,
    and its integrity accumulator (`sample`: a ldp.integrity ReportSample, or None)."""

    __slots__ = ("n", "table", "sample")

    def __init__(self, n: int, table, sample=None):
        self.n = n
        self.table = table
        self.sample = sample

    def __reduce__(self):
        return VersionStatistic, (self.n, self.table, self.sample)


class SupportStatistic:
    """One metric's statistics, per configuration version (`parts`: version -> VersionStatistic).

    Reports made under different configurations of a metric are never added together: each
    version has its own table. `metric` None (and no parts) is the empty statistic that has seen
    no input yet. Adding is addition of the tables of each version, so the size never depends on
    the number of reports. `duplicates` counts reports not added because their id was already
    counted in the slice; `duplicate_ids` holds a few of their ids.
    """

    __slots__ = ("metric", "parts", "duplicates", "duplicate_ids")

    def __init__(self, metric: str | None, parts: dict[int, VersionStatistic] | None = None,
                 duplicates: int = 0, duplicate_ids: tuple[int, ...] = ()):
        self.metric = metric
        self.parts = {} if parts is None else parts
        self.duplicates = duplicates
        self.duplicate_ids = duplicate_ids

    @property
    def n(self) -> int:
        """Reports counted, over every version."""
        return sum(part.n for part in self.parts.values())

    def add(self, other: SupportStatistic) -> SupportStatistic:
        """Add `other` into this statistic (in place) and return it."""
        if other.metric is None:
            return self
        if self.metric is None:
            self.metric = other.metric
        elif other.metric != self.metric:
            raise ValueError(f"cannot add a statistic of metric {other.metric!r} to one of "
                             f"{self.metric!r}")
        for version, part in other.parts.items():
            mine = self.parts.get(version)
            if mine is None:  # never add into an input: start from a copy
                self.parts[version] = VersionStatistic(part.n, copy.deepcopy(part.table),
                                                       copy.deepcopy(part.sample))
            else:
                mine.table += part.table
                mine.n += part.n
                if mine.sample is not None and part.sample is not None:
                    mine.sample.add(part.sample)
        self.duplicates += other.duplicates
        self.duplicate_ids = (self.duplicate_ids + other.duplicate_ids)[:DUPLICATE_EXAMPLES]
        return self

    def __reduce__(self):
        return SupportStatistic, (self.metric, self.parts, self.duplicates, self.duplicate_ids)

    def __repr__(self) -> str:
        return (f"SupportStatistic(metric={self.metric!r}, n={self.n}, "
                f"versions={sorted(self.parts)}, duplicates={self.duplicates})")


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
        if len(ids) and (not self.levels or ids[0] > max(level[-1] for level in self.levels)) \
                and (len(ids) == 1 or bool((ids[1:] > ids[:-1]).all())):
            # Increasing ids above every id seen (a single report, batches in id order): all
            # new. A copy: the batch's column may be a view of a larger buffer (coders.py).
            self._add_level(ids.copy())
            return np.ones(len(ids), dtype=bool)
        distinct, first = np.unique(ids, return_index=True)
        new = ~self._seen(distinct)
        keep = np.zeros(len(ids), dtype=bool)
        keep[first[new]] = True
        if new.any():
            self._add_level(distinct[new])
        return keep

    def _add_level(self, level: np.ndarray) -> None:
        """Append a sorted level of new ids; merge the last two levels while the older is at
        most twice the newer (a concatenation when the newer lies above the older)."""
        self.levels.append(level)
        while len(self.levels) > 1 and len(self.levels[-2]) <= 2 * len(self.levels[-1]):
            newer, older = self.levels.pop(), self.levels.pop()
            merged = np.concatenate([older, newer])
            if older[-1] > newer[0]:
                merged.sort(kind="stable")
            self.levels.append(merged)


class SliceCounter:
    """Counts the report batches of ONE (metric, slice) into its SupportStatistic, each batch
    into the table of its configuration version.

    `add(batch)` for each batch of the slice, in any order, then `result()`. A report whose id
    the counter has already counted (under any version) is not counted again (see the module
    docstring): the first report of each id is the one counted, and the others are
    `duplicates` of the result.
    """

    __slots__ = ("_registry", "_statistic", "_ids")

    def __init__(self, registry: Registry):
        self._registry = registry
        self._statistic = SupportStatistic(None)
        self._ids = IdSet()

    def add(self, batch: ReportBatch) -> None:
        if not batch.n:
            return
        statistic = self._statistic
        config = self._registry.version(batch.metric, batch.version)
        if statistic.metric is None:
            statistic.metric = batch.metric
        columns = batch.columns
        ids = columns.get(REPORT_ID)
        if REPORT_ID in columns:
            keep = self._ids.add_new(columns[REPORT_ID])
            columns = {k: v for k, v in columns.items() if k != REPORT_ID}
            if not keep.all():
                repeated = batch.columns[REPORT_ID][~keep]
                statistic.duplicates += len(repeated)
                statistic.duplicate_ids = (statistic.duplicate_ids + tuple(
                    repeated[:DUPLICATE_EXAMPLES].tolist()))[:DUPLICATE_EXAMPLES]
                columns = {k: v[keep] for k, v in columns.items()}
                ids = ids[keep]
        kept = len(next(iter(columns.values())))
        if kept:  # a version has a table once a report of it is counted, never with n = 0
            part = statistic.parts.get(config.version)
            if part is None:
                part = statistic.parts[config.version] = VersionStatistic(
                    0, config.protocol.new_statistic(), integrity.new_sample(config))
            config.protocol.accumulate(part.table, columns)
            part.n += kept
            integrity.observe(part.sample, config, columns, ids)

    def result(self) -> SupportStatistic:
        """The slice's statistic so far (metric None when no report was counted)."""
        return self._statistic


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
    """(key, every batch of one slice) -> (key, SupportStatistic), by one `SliceCounter`."""

    def __init__(self, registry: Registry):
        self._registry = registry

    def process(self, element):
        key, batches = element
        if iter(batches) is batches:  # a one-shot iterator: it may be read twice below
            batches = list(batches)
        counter = SliceCounter(self._registry)
        for batch in batches:
            counter.add(batch)
        if counter.result().duplicates:  # which copy counts must not depend on the runner
            counter = SliceCounter(self._registry)
            for batch in sorted(batches, key=batch_digest):
                counter.add(batch)
        yield key, counter.result()


def batch_digest(batch: ReportBatch) -> bytes:
    """A digest of the batch's content (version, column names, types, shapes and values): the
    order a slice's batches are counted in once it holds duplicates (module docstring)."""
    digest = hashlib.blake2b(f"{batch.version}".encode(), digest_size=16)
    for name in sorted(batch.columns):
        column = np.ascontiguousarray(batch.columns[name])
        digest.update(f"|{name}|{column.dtype.str}|{column.shape}|".encode())
        digest.update(repr(column.tolist()).encode() if column.dtype.hasobject
                      else column.tobytes())
    return digest.digest()


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


def duplicate_letter(statistic: SupportStatistic, start_ms: int, slice_ms: int) -> DeadLetter:
    """The `duplicate` dead letter of a slice statistic's repeated report ids."""
    where = (f"metric {statistic.metric!r}, slice [{iso_from_ms(start_ms)}, "
             f"{iso_from_ms(start_ms + slice_ms)})")
    examples = ", ".join(str(i) for i in statistic.duplicate_ids)
    return DeadLetter(where, Reason.DUPLICATE,
                      f"{statistic.duplicates} report(s) repeat a report id already counted in "
                      f"this slice (ids such as {examples}); each id is counted once",
                      records=statistic.duplicates)


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
    """

    def __init__(self, registry: Registry, windows: WindowSpec):
        super().__init__()
        self._registry = registry
        self._windows = windows

    def expand(self, batches):
        spec = self._windows
        counted = (batches
                   | "IntoSlices" >> beam.Map(_slice_key).with_output_types(
                       tuple[tuple[str, int], ReportBatch])  # so that batches use ReportBatchCoder
                   | "GroupSlices" >> beam.GroupByKey()
                   | "CountSupport" >> beam.ParDo(CountSliceFn(self._registry))
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
            from ldp_telemetry.transforms.dedupe import DeduplicateSlicesFn  # it imports this
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
