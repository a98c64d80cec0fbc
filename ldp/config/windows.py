"""Event-time windows and their panes, as a job is told to compute them (no Beam here).

A window is [start, start + size) with start = offset + k * period (fixed windows when size
equals period). Reports are counted per slice of gcd(size, period): every window is a union of
whole slices, so a window that overlaps k others costs k additions of small statistics, not k
passes over the reports. The Beam form of these windows and triggers is
`ldp_telemetry.transforms.windows`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ldp_telemetry.ldp.base.errors import ConfigError
from ldp_telemetry.ldp.base.validation import EVENT_TIME_END_MS, EVENT_TIME_MIN_MS

#: Most windows a report may be counted in (window / period): each slice statistic is added
#: into that many windows, so the cost of the window stage is slices x this ratio.
MAX_WINDOWS_PER_REPORT = 1_000
#: Longest window, period, offset or allowed lateness: the span of valid event times
#: (`ldp.base.validation`), about 230 years. Longer ones cannot hold two distinct windows of real
#: data, and 1e11 s or more leaves Beam's timestamp range.
MAX_DURATION_MS = EVENT_TIME_END_MS - EVENT_TIME_MIN_MS
#: Shortest window and period: event times are in milliseconds.
MIN_DURATION_MS = 1


@dataclass(frozen=True)
class WindowSpec:
    """Event-time windows of `size_ms` starting at `offset_ms` + k * `period_ms` (fixed windows
    when size equals period; offset 0 aligns them to the Unix epoch), and their panes.

    Panes. A batch run with the defaults (`allowed_lateness_ms` 0, `early_every_ms` None) gives
    each window one ON_TIME pane, as Beam's default trigger does. Streaming runs, and batch runs
    with either option set, ACCUMULATE panes: every pane is the window's estimate from all
    reports counted so far. `early_every_ms` (whole seconds; streaming runs only) adds EARLY
    panes that long in processing time after the first report not yet in a pane; the ON_TIME
    pane fires when the watermark passes the window's end; while the watermark is at most
    `allowed_lateness_ms` past the end of a report's slice, its batch is still counted and
    fires a LATE pane of every window whose end has passed. Later batches are dropped by the
    runner (see `ldp_telemetry.transforms.count.CountWindowPanes`).

    Invalid settings raise ConfigError naming the setting (`window`, `period`, `window_offset`,
    `allowed_lateness`, `early_every`).
    """

    size_ms: int
    period_ms: int
    allowed_lateness_ms: int = 0
    early_every_ms: int | None = None
    offset_ms: int = 0

    def __post_init__(self) -> None:
        if self.size_ms < MIN_DURATION_MS:
            raise ConfigError(f"window must be at least 0.001 s (event times are in "
                              f"milliseconds), got {self.size_ms / 1000} s", field="window")
        if self.size_ms > MAX_DURATION_MS:
            raise ConfigError(f"window must be at most {MAX_DURATION_MS // 1000} s (230 years, "
                              f"the span of valid event times), got {self.size_ms / 1000:g} s",
                              field="window")
        if self.period_ms < MIN_DURATION_MS or self.period_ms > self.size_ms:
            raise ConfigError(f"period must be in [0.001 s, window], got "
                              f"{self.period_ms / 1000} s", field="period")
        if self.size_ms > MAX_WINDOWS_PER_REPORT * self.period_ms:
            shortest = math.ceil(self.size_ms / MAX_WINDOWS_PER_REPORT) / 1000
            raise ConfigError(
                f"window / period must be at most {MAX_WINDOWS_PER_REPORT} "
                f"(MAX_WINDOWS_PER_REPORT: each report is counted in that many windows), got "
                f"{self.size_ms / self.period_ms:g}; for a {self.size_ms / 1000:g} s window use "
                f"a period of at least {shortest:g} s", field="period")
        if abs(self.offset_ms) > MAX_DURATION_MS:
            raise ConfigError(f"window_offset must be at most {MAX_DURATION_MS // 1000} s in "
                              f"size, got {self.offset_ms / 1000:g} s", field="window_offset")
        if self.allowed_lateness_ms < 0 or self.allowed_lateness_ms > MAX_DURATION_MS:
            raise ConfigError(f"allowed_lateness must be in [0, {MAX_DURATION_MS // 1000}] s, "
                              f"got {self.allowed_lateness_ms / 1000:g} s",
                              field="allowed_lateness")
        if self.early_every_ms is not None and (self.early_every_ms <= 0
                                                or self.early_every_ms % 1000):
            # Beam's Python AfterProcessingTime carries its delay in whole seconds.
            raise ConfigError(f"early_every must be a positive whole number of seconds, "
                              f"got {self.early_every_ms / 1000} s", field="early_every")

    @classmethod
    def from_seconds(cls, window: float, period: float | None = None,
                     allowed_lateness: float = 0.0, early_every: float | None = None,
                     offset: float = 0.0) -> WindowSpec:
        """The spec of settings in seconds (`period` None: fixed windows)."""
        for field, value in (("window", window), ("period", period),
                             ("allowed_lateness", allowed_lateness),
                             ("early_every", early_every), ("window_offset", offset)):
            if value is not None and not math.isfinite(value):
                raise ConfigError(f"{field} must be a finite number of seconds, got {value}",
                                  field=field)
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
        """Starts (ms) of the windows that hold the slice [a, a + slice), a = `slice_start_ms`,
        in increasing order: the windows Beam assigns to any instant of the slice.

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
