"""Slices and windows: count each report once per slice, then add slices into windows."""
from __future__ import annotations

import math
from typing import Any
from dataclasses import dataclass

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.transforms import trigger as beam_trigger
from apache_beam.transforms import window as beam_window
from apache_beam.utils.timestamp import Duration, Timestamp

from ldp_telemetry.ldp.registry import Registry
from ldp_telemetry.output.reasons import Reason
from ldp_telemetry.output.times import iso_from_ms
from ldp_telemetry.schemas.batches import DeadLetter, ReportBatch
from ldp_telemetry.transforms.coders import ReportBatchCoder  # noqa: F401 (registers it)
from ldp_telemetry.transforms.count import CountSupportFn, MergeSupportFn, SupportStatistic
from ldp_telemetry.transforms.read import COUNTER_NAMESPACE

#: Most windows a report may be counted in (window / period): each slice statistic is added
#: into that many windows, so the cost of the window stage is slices x this ratio.
MAX_WINDOWS_PER_REPORT = 1_000
#: Longest window, period, offset or allowed lateness: the span of valid event times
#: [1970, 2200), about 230 years. Longer ones cannot hold two distinct windows of real data,
#: and 1e11 s or more leaves Beam's timestamp range.
MAX_DURATION_MS = 7_258_118_400_000
#: Shortest window and period: event times are in milliseconds.
MIN_DURATION_MS = 1


@dataclass(frozen=True)
class WindowSpec:
    """Event-time windows of `size_ms` starting at `offset_ms` + k * `period_ms` (fixed windows
    when size equals period; offset 0 aligns them to the Unix epoch), and their panes.

    Reports are counted per slice of gcd(size, period): every window is a union of whole slices,
    so a window that overlaps k others costs k additions of small statistics, not k passes over
    the reports.

    Panes. A batch run with the defaults (`allowed_lateness_ms` 0, `early_every_ms` None) gives
    each window one ON_TIME pane, as Beam's default trigger does. Streaming runs, and batch runs
    with either option set, ACCUMULATE panes: every pane is the window's estimate from all
    reports counted so far. `early_every_ms` (whole seconds; streaming runs only) adds EARLY
    panes that long in processing time after the first report not yet in a pane; the ON_TIME
    pane fires when the watermark passes the window's end; while the watermark is at most
    `allowed_lateness_ms` past the end of a report's slice, its batch is still counted and
    fires a LATE pane of every window whose end has passed. Later batches are dropped by the
    runner (see `CountSupportPerWindow`).
    """

    size_ms: int
    period_ms: int
    allowed_lateness_ms: int = 0
    early_every_ms: int | None = None
    offset_ms: int = 0

    def __post_init__(self):
        if self.size_ms < MIN_DURATION_MS:
            raise ValueError(f"--window must be at least 0.001 s (event times are in "
                             f"milliseconds), got {self.size_ms / 1000} s")
        if self.size_ms > MAX_DURATION_MS:
            raise ValueError(f"--window must be at most {MAX_DURATION_MS // 1000} s (230 years, "
                             f"the span of valid event times), got {self.size_ms / 1000:g} s")
        if self.period_ms < MIN_DURATION_MS or self.period_ms > self.size_ms:
            raise ValueError(f"--period must be in [0.001 s, window], got {self.period_ms / 1000} s")
        if self.size_ms > MAX_WINDOWS_PER_REPORT * self.period_ms:
            raise ValueError(
                f"--window / --period must be at most {MAX_WINDOWS_PER_REPORT} "
                f"(MAX_WINDOWS_PER_REPORT: each report is counted in that many windows), got "
                f"{self.size_ms / self.period_ms:g}; for a {self.size_ms / 1000:g} s window use "
                f"a period of at least {math.ceil(self.size_ms / MAX_WINDOWS_PER_REPORT) / 1000:g} s")
        if abs(self.offset_ms) > MAX_DURATION_MS:
            raise ValueError(f"--window-offset must be at most {MAX_DURATION_MS // 1000} s in "
                             f"size, got {self.offset_ms / 1000:g} s")
        if self.allowed_lateness_ms < 0 or self.allowed_lateness_ms > MAX_DURATION_MS:
            raise ValueError(f"--allowed-lateness must be in [0, {MAX_DURATION_MS // 1000}] s, "
                             f"got {self.allowed_lateness_ms / 1000:g} s")
        if self.early_every_ms is not None and (self.early_every_ms <= 0
                                                or self.early_every_ms % 1000):
            # Beam's Python AfterProcessingTime carries its delay in whole seconds.
            raise ValueError(f"--early-every must be a positive whole number of seconds, "
                             f"got {self.early_every_ms / 1000} s")

    @classmethod
    def from_seconds(cls, window: float, period: float | None = None,
                     allowed_lateness: float = 0.0, early_every: float | None = None,
                     offset: float = 0.0) -> "WindowSpec":
        for flag, value in (("--window", window), ("--period", period),
                            ("--allowed-lateness", allowed_lateness),
                            ("--early-every", early_every), ("--window-offset", offset)):
            if value is not None and not math.isfinite(value):
                raise ValueError(f"{flag} must be a finite number of seconds, got {value}")
        return cls(round(window * 1000), round((window if period is None else period) * 1000),
                   round(allowed_lateness * 1000),
                   None if early_every is None else round(early_every * 1000),
                   round(offset * 1000))

    @property
    def slice_ms(self) -> int:
        return math.gcd(self.size_ms, self.period_ms)

    @property
    def slice_offset_ms(self) -> int:
        """Slices start at slice_offset_ms + k * slice_ms, so that windows are unions of slices."""
        return self.offset_ms % self.slice_ms

    @property
    def windows_per_slice(self) -> int:
        """Most windows that hold one slice (and so one report): ceil(window / period)."""
        return -(-self.size_ms // self.period_ms)

    def window_starts(self, slice_start_ms: int) -> range:
        """Starts (ms) of the windows that hold the slice [a, a + slice), a = `slice_start_ms`.

        Windows [s, s + size) start at s = offset + k * period; the slice lies in one iff
        a + slice - size <= s <= a (size and period are multiples of the slice).
        """
        period, a = self.period_ms, slice_start_ms
        low = a + self.slice_ms - self.size_ms
        first = low + (self.offset_ms - low) % period
        last = a - (a - self.offset_ms) % period
        return range(first, last + 1, period)

    @property
    def is_fixed(self) -> bool:
        return self.size_ms == self.period_ms

    @property
    def has_pane_options(self) -> bool:
        """True when lateness or early firings are configured."""
        return self.allowed_lateness_ms > 0 or self.early_every_ms is not None

    def window_fn(self) -> beam_window.WindowFn:
        size, period = _duration(self.size_ms), _duration(self.period_ms)
        offset = Timestamp(micros=self.offset_ms * 1000)
        return (beam_window.FixedWindows(size, offset) if self.is_fixed
                else beam_window.SlidingWindows(size, period, offset))


def _duration(ms: int) -> Duration:
    """Exact Beam duration of `ms` milliseconds (Beam truncates float seconds * 1e6)."""
    return Duration(micros=ms * 1000)


class CountSliceFn(beam.DoFn):
    """(key, the batches of one slice) -> (key, SupportStatistic), by `CountSupportFn`.

    One accumulator adds the batches in turn (Beam's CombineValues would split them over
    three partial accumulators, which cannot be merged exactly when they share a report id).
    """

    def __init__(self, registry: Registry):
        self._combine = CountSupportFn(registry)

    def process(self, element):
        key, batches = element
        combine = self._combine
        accumulator = combine.create_accumulator()
        for batch in batches:
            accumulator = combine.add_input(accumulator, batch)
        yield key, combine.extract_output(accumulator)


@beam.typehints.with_output_types(tuple[Any, SupportStatistic])
class CountReportsFn(beam.DoFn):
    """Counts the reports of each slice statistic (counter `records_counted`) and passes it on;
    the reports it did not count because their id repeated one already counted in the slice
    become a `duplicate` dead letter (tagged output DUPLICATES, counter dead_letter.duplicate).

    Slice statistics never repeat a report (slice panes are discarding), so the counter is the
    number of reports that entered a window; records_accepted - duplicates - records_counted is
    the number the runner dropped as later than the allowed lateness. Beam's Python SDK drops
    those without a counter or a log line (trigger.GeneralTriggerDriver.process_elements skips
    expired windows), and a DoFn cannot read the watermark that decides it, so they cannot be
    dead-lettered one by one.

    This class serves the batch path, whose keys are (metric, slice start ms);
    `CountPaneReportsFn` the slices that are Beam windows.
    """

    def __init__(self, slice_ms: int, window_size_ms: int | None = None):
        self._slice_ms = slice_ms
        self._window_size_ms = window_size_ms

    def setup(self):
        self._counted = Metrics.counter(COUNTER_NAMESPACE, "records_counted")
        self._duplicates = Metrics.counter(COUNTER_NAMESPACE, f"dead_letter.{Reason.DUPLICATE}")

    def process(self, element):
        key, statistic = element
        return self._count(key, statistic, key[1])

    def _count(self, key, statistic: SupportStatistic, start_ms: int) -> list:
        self._counted.inc(statistic.n)
        out = []
        if statistic.duplicates:
            self._duplicates.inc(statistic.duplicates)
            out.append(beam.pvalue.TaggedOutput(DUPLICATES, _duplicate_letter(
                statistic, start_ms, self._slice_ms)))
            statistic = SupportStatistic(statistic.metric, statistic.n, statistic.table)
        if statistic.n:
            if self._window_size_ms is not None:  # fixed windows, fast path: slice = window
                metric, start_ms = key
                key = (metric, start_ms, start_ms + self._window_size_ms)
            out.append((key, statistic))
        return out


class CountPaneReportsFn(CountReportsFn):
    """`CountReportsFn` for slices that are Beam windows: keys are metrics."""

    def process(self, element, window=beam.DoFn.WindowParam):
        key, statistic = element
        return self._count(key, statistic, window.start.micros // 1000)


DUPLICATES = "duplicates"


def _duplicate_letter(statistic: SupportStatistic, start_ms: int, slice_ms: int) -> DeadLetter:
    where = (f"metric {statistic.metric!r}, slice [{iso_from_ms(start_ms)}, "
             f"{iso_from_ms(start_ms + slice_ms)})")
    examples = ", ".join(str(i) for i in statistic.duplicate_ids)
    return DeadLetter(where, Reason.DUPLICATE,
                      f"{statistic.duplicates} report(s) repeat a report id already counted in "
                      f"this slice (ids such as {examples}); each id is counted once",
                      records=statistic.duplicates)


class CountSupportPerWindow(beam.PTransform):
    """(metric, ReportBatch) stamped in its slice -> (key, SupportStatistic) per window pane,
    and, on the tagged output DUPLICATES, the `duplicate` dead letters.

    ONE combine for every metric: batches are keyed by (metric, slice), grouped ("GroupSlices")
    and counted by `CountSupportFn` ("CountSupport", one accumulator per slice, see
    `CountSliceFn`), which dispatches to each metric's protocol;
    step names never depend on the registry. Grouping before combining (no combiner lifting)
    lets one accumulator see every batch of a slice, so repeated report ids are found exactly.

    Batch runs without pane options (the fast path) never use Beam windows: slices are keys,
    each slice statistic is sent to the windows holding it ("IntoWindows", window / period of
    them) and added there ("MergeSlices"); keys are (metric, window start ms, window end ms) and
    each window gives one ON_TIME pane. Fixed windows are their own slices: "CountReports" keys
    them as windows, and there is no window stage. Beam's windowed GroupByKey processes timers per window
    and key (about 10 ms per window in batch, and growing with the number of windows), which
    plain keys avoid.

    Streaming runs, and runs with pane options, key by metric inside Beam's windows:

    * slices are FixedWindows firing a pane per arriving batch (Repeatedly(AfterCount(1))),
      DISCARDING, with the allowed lateness: each slice pane is a delta holding reports no
      other pane holds, and the runner drops a batch whose slice expired (watermark past slice
      end + allowed lateness); repeated ids are found within a pane;
    * windows carry the dashboard trigger, AfterWatermark(early=AfterProcessingTime(early
      every), late=AfterCount(1)), ACCUMULATING, with the same allowed lateness: each window
      pane adds every delta once. A window ends no earlier than any slice in it, so a delta
      accepted by the slice stage is never too late for the window stage. The late trigger is
      there even without lateness: a batch that arrives with the watermark exactly at its
      slice's end is still accepted, and must not meet a closed window. So no pane is marked
      last: a window expires silently.

    Late data is therefore decided per slice: a report is either counted in every window that
    contains it or in none. For fixed windows the slice is the window.
    """

    def __init__(self, registry: Registry, windows: WindowSpec, streaming: bool = False):
        super().__init__()
        self._registry = registry
        self._windows = windows
        self._panes = streaming or windows.has_pane_options

    def expand(self, batches):
        spec = self._windows
        if self._panes:
            keyed = batches | "IntoSlices" >> self._into_slices()
        else:
            # The reader's batches are in the global window already (timestamped, not windowed).
            keyed = batches | "IntoSlices" >> beam.Map(_slice_key).with_output_types(
                tuple[tuple[str, int], ReportBatch])  # so that batches use ReportBatchCoder
        # Fixed windows on the fast path: the slice is the window, keyed as such right away.
        window_size = spec.size_ms if not self._panes and spec.is_fixed else None
        counted = (keyed
                   | "GroupSlices" >> beam.GroupByKey()
                   | "CountSupport" >> beam.ParDo(CountSliceFn(self._registry))
                   | "CountReports" >> beam.ParDo(
                       (CountPaneReportsFn if self._panes else CountReportsFn)(spec.slice_ms,
                                                                               window_size))
                   .with_outputs(DUPLICATES, main="statistics"))
        statistics, duplicates = counted.statistics, counted[DUPLICATES]
        if self._panes:
            duplicates = duplicates | "DuplicatesOutOfTime" >> beam.WindowInto(
                beam_window.GlobalWindows())
            windows = (statistics
                       | "IntoWindows" >> self._into_windows()
                       | "MergeSlices" >> beam.CombinePerKey(MergeSupportFn()))
        elif spec.is_fixed:
            windows = statistics  # keyed (metric, window start, window end) by CountReports
        else:
            windows = (statistics
                       | "IntoWindows" >> beam.FlatMap(_sliding_window_keys, spec)
                       | "MergeSlices" >> beam.CombinePerKey(MergeSupportFn()))
        return {"windows": windows, DUPLICATES: duplicates}

    def _into_slices(self) -> beam.WindowInto:
        slices = beam_window.FixedWindows(_duration(self._windows.slice_ms),
                                          Timestamp(micros=self._windows.slice_offset_ms * 1000))
        return beam.WindowInto(
            slices, trigger=beam_trigger.Repeatedly(beam_trigger.AfterCount(1)),
            accumulation_mode=beam_trigger.AccumulationMode.DISCARDING,
            allowed_lateness=_duration(self._windows.allowed_lateness_ms))

    def _into_windows(self) -> beam.WindowInto:
        spec = self._windows
        early = (None if spec.early_every_ms is None
                 else beam_trigger.AfterProcessingTime(spec.early_every_ms // 1000))
        return beam.WindowInto(
            spec.window_fn(),
            trigger=beam_trigger.AfterWatermark(early=early, late=beam_trigger.AfterCount(1)),
            accumulation_mode=beam_trigger.AccumulationMode.ACCUMULATING,
            allowed_lateness=_duration(spec.allowed_lateness_ms))


def _slice_key(element: tuple[str, ReportBatch]) -> tuple[tuple[str, int], ReportBatch]:
    metric, batch = element
    return (metric, batch.slice_start_ms), batch


def _sliding_window_keys(element, spec: WindowSpec):
    (metric, slice_start_ms), statistic = element
    for start_ms in spec.window_starts(slice_start_ms):
        yield (metric, start_ms, start_ms + spec.size_ms), statistic
