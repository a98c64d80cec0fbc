"""Slices and windows: count each report once per slice, then add slices into windows."""
from __future__ import annotations

import math
from dataclasses import dataclass

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.transforms import trigger as beam_trigger
from apache_beam.transforms import window as beam_window
from apache_beam.utils.timestamp import Duration, Timestamp

from ldp_telemetry.ldp.registry import Registry
from ldp_telemetry.transforms.count import CountSupportFn, MergeSupportFn, SupportStatistic
from ldp_telemetry.transforms.read import COUNTER_NAMESPACE


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
        if self.size_ms <= 0:
            raise ValueError(f"--window must be positive, got {self.size_ms / 1000} s")
        if self.period_ms <= 0 or self.period_ms > self.size_ms:
            raise ValueError(f"--period must be in (0, window], got {self.period_ms / 1000} s")
        if self.allowed_lateness_ms < 0:
            raise ValueError(f"--allowed-lateness must be >= 0 seconds, "
                             f"got {self.allowed_lateness_ms / 1000} s")
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


class CountReportsFn(beam.DoFn):
    """Counts the reports in each slice pane (counter `records_counted`) and passes it on.

    Slice panes never repeat a report (they are discarding), so the counter is the number of
    reports that entered a window; records_accepted - records_counted is the number the runner
    dropped as later than the allowed lateness. Beam's Python SDK drops those without a counter
    or a log line (trigger.GeneralTriggerDriver.process_elements skips expired windows), and a
    DoFn cannot read the watermark that decides it, so they cannot be dead-lettered one by one.
    """

    def setup(self):
        self._counted = Metrics.counter(COUNTER_NAMESPACE, "records_counted")

    def process(self, element: tuple[str, SupportStatistic]):
        self._counted.inc(element[1].n)
        yield element


class CountSupportPerWindow(beam.PTransform):
    """(metric, ReportBatch) stamped in its slice -> (metric, SupportStatistic) per window pane.

    One CombinePerKey per metric, labelled CountSupport[<metric>] so that step names are stable.

    Stage 1 combines batches per slice (FixedWindows of the slice length); stage 2, when there is
    one, adds slice statistics into the windows. A batch run without pane options uses Beam's
    default trigger, and fixed windows need no stage 2. Streaming runs, and runs with pane
    options, use both stages:

    * stage 1 fires a pane per arriving batch (Repeatedly(AfterCount(1))), DISCARDING, with the
      allowed lateness: each slice pane is a delta holding reports no other pane holds, and the
      runner drops a batch whose slice expired (watermark past slice end + allowed lateness);
    * stage 2 carries the dashboard trigger, AfterWatermark(early=AfterProcessingTime(early
      every), late=AfterCount(1)), ACCUMULATING, with the same allowed lateness: each window
      pane adds every delta once. A window ends no earlier than any slice in it, so a delta
      accepted by stage 1 is never too late for stage 2 (the slice pane holds stage 2's
      watermark until it is consumed). The late trigger is there even without lateness: a
      batch that arrives with the watermark exactly at its slice's end is still accepted, and
      must not meet a closed window. So no pane is marked last: a window expires silently.

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
        metrics = [m.name for m in self._registry.metrics]
        index = {name: i for i, name in enumerate(metrics)}
        per_metric = (batches
                      | "IntoSlices" >> self._into_slices()
                      | "ByMetric" >> beam.Partition(lambda kv, _: index[kv[0]], len(metrics)))
        counted = []
        for name, batches_of_metric in zip(metrics, per_metric):
            protocol = self._registry[name].protocol
            statistics = (batches_of_metric
                          | f"CountSupport[{name}]" >> beam.CombinePerKey(CountSupportFn(protocol))
                          | f"CountReports[{name}]" >> beam.ParDo(CountReportsFn()))
            if self._panes or not spec.is_fixed:
                statistics = (statistics
                              | f"IntoWindows[{name}]" >> self._into_windows()
                              | f"MergeSlices[{name}]" >> beam.CombinePerKey(
                                  MergeSupportFn(protocol)))
            counted.append(statistics)
        return counted | "AllMetrics" >> beam.Flatten()

    def _into_slices(self) -> beam.WindowInto:
        slices = beam_window.FixedWindows(_duration(self._windows.slice_ms),
                                          Timestamp(micros=self._windows.slice_offset_ms * 1000))
        if not self._panes:
            return beam.WindowInto(slices)
        return beam.WindowInto(
            slices, trigger=beam_trigger.Repeatedly(beam_trigger.AfterCount(1)),
            accumulation_mode=beam_trigger.AccumulationMode.DISCARDING,
            allowed_lateness=_duration(self._windows.allowed_lateness_ms))

    def _into_windows(self) -> beam.WindowInto:
        spec = self._windows
        if not self._panes:
            return beam.WindowInto(spec.window_fn())
        early = (None if spec.early_every_ms is None
                 else beam_trigger.AfterProcessingTime(spec.early_every_ms // 1000))
        return beam.WindowInto(
            spec.window_fn(),
            trigger=beam_trigger.AfterWatermark(early=early, late=beam_trigger.AfterCount(1)),
            accumulation_mode=beam_trigger.AccumulationMode.ACCUMULATING,
            allowed_lateness=_duration(spec.allowed_lateness_ms))
