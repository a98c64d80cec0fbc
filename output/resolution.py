"""Whether a window holds enough reports to say something about its distribution.

A frequency oracle's window resolves a value when its estimate is above the window's smallest
resolvable frequency, 2·sqrt(q*(1 − q*)/n)/(p* − q*) (the record's `smallest_resolvable`,
[Wang20] journal eq. 2 at f_v = 0): two standard errors of a value of frequency 0. Noise alone
puts a value of frequency 0 above it with probability P(Z > 2) = 2.3%, so of a domain of d
values about 0.023·d are expected above it by chance. A window is **under-resolved** when those
would be more than `NOISE_SHARE` of the values it shows above the floor: its ranking is then
largely noise (hourly windows of 700 reports at d = 200 and ε = 2 put a value of frequency 0.003
at rank 3).

The floor falls as 1/sqrt(n) (the planner's formula at a fixed ε and protocol), so the reports
that would do follow from the record: with r = (chance values)/`NOISE_SHARE` values needed above
the floor and f_r the r-th largest estimate, n' = n·(floor / f_r)²; with reports arriving at
the same rate, a window n'/n times as long. The floor of a pooled-hash oracle (CMS, HCMS, FLH:
records with `parameters`) also holds the pool's hash-collision term, which does not fall with n
(docs/large-domains.md): only its privacy part, 2·sqrt(q*(1 − q*)/n)/(p* − q*), does, so
n' = n·private²/(f_r² − collision²), and no n' resolves an f_r at or below the collision part.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ldp_telemetry.ldp.integrity.statistics import normal_sf
from ldp_telemetry.ldp.protocols.noise import smallest_resolvable
from ldp_telemetry.output.estimate import EstimateRecord

#: P(Z > 2): the chance that noise puts a value of frequency 0 above the floor.
CHANCE_ABOVE_FLOOR = normal_sf(2.0)
#: A window is under-resolved when the values expected above its floor by chance are more than
#: this share of the values above it.
NOISE_SHARE = 0.25


@dataclass(frozen=True)
class Resolution:
    """How well one window's reports resolve its distribution."""

    floor: float            # the smallest resolvable frequency
    resolved_values: int    # values whose estimate is at or above the floor
    by_chance: float        # values expected above the floor by noise alone
    values: int             # the domain's size
    reports_needed: float   # n' at which enough values are above the floor (inf: none would do)
    scale: float            # reports_needed / n (at least 1): how many times longer a window

    @property
    def under_resolved(self) -> bool:
        return self.by_chance > NOISE_SHARE * self.resolved_values


def resolution(record: EstimateRecord) -> Resolution | None:
    """The resolution of a frequency metric's window, or None (a numeric metric, no reports or
    no smallest resolvable frequency)."""
    floor, n = record.smallest_resolvable, record.n
    if floor is None or not n or not len(record.estimate) or record.numeric:
        return None
    ranked = sorted(record.estimate.tolist(), reverse=True)
    by_chance = CHANCE_ABOVE_FLOOR * len(ranked)
    needed = min(len(ranked), max(1, math.ceil(by_chance / NOISE_SHARE)))
    target = ranked[needed - 1]
    scale = max(1.0, _scale(record, floor, target))
    return Resolution(floor, sum(v >= floor for v in ranked), by_chance, len(ranked),
                      n * scale, scale)


def duration_text(ms: float) -> str:
    """A duration in the largest unit that keeps it at least 1 (`36 h`, `2.5 d`)."""
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", 1000)):
        if ms >= size:
            return f"{ms / size:.3g} {unit}"
    return f"{ms:.3g} ms"


def warning_text(record: EstimateRecord, found: Resolution) -> str:
    """One line: why the window is under-resolved and what window would do."""
    needed = min(found.values, max(1, math.ceil(found.by_chance / NOISE_SHARE)))
    return (f"too few reports for d={found.values} at ε={record.epsilon:g}: "
            f"n={record.n:,}, smallest resolvable {found.floor:.3g}; noise alone puts about "
            f"{found.by_chance:.1f} values of frequency 0 above it, so at least {needed} must "
            f"stand above it and {found.resolved_values} do; {_longer(record, found)}")


def _longer(record: EstimateRecord, found: Resolution) -> str:
    if math.isinf(found.scale):
        return "no window length would do"
    return (f"about {math.ceil(found.reports_needed):,} reports would (windows of about "
            f"{duration_text((record.end_ms - record.start_ms) * found.scale)} at this rate)")


def under_resolved_summary(records: list[EstimateRecord]) -> list[str]:
    """Per metric with under-resolved windows, one line: how many, and what window would do
    (the longest needed over them)."""
    by_metric: dict[str, list[tuple[EstimateRecord, Resolution]]] = {}
    total: dict[str, int] = {}
    for record in records:
        total[record.metric] = total.get(record.metric, 0) + 1
        found = resolution(record)
        if found is not None and found.under_resolved:
            by_metric.setdefault(record.metric, []).append((record, found))
    lines = []
    for metric, windows in sorted(by_metric.items()):
        record, worst = max(windows, key=lambda pair: pair[1].scale)
        lines.append(f"warning: {metric}: {len(windows)} of {total[metric]} window(s) have too "
                     f"few reports for d={worst.values} at ε={record.epsilon:g}: more than "
                     f"{NOISE_SHARE:.0%} of the values above their smallest resolvable frequency "
                     f"are expected there by chance; {_longer(record, worst)}")
    return lines


def _scale(record: EstimateRecord, floor: float, target: float) -> float:
    """n'/n: how many times the reports at which the record's floor falls to `target` (module
    docstring); inf when none would do."""
    if target <= 0:
        return math.inf
    if record.parameters is None or record.p_star is None or record.q_star is None:
        return (floor / target) ** 2
    private = smallest_resolvable(record.p_star, record.q_star, record.n)
    assert private is not None  # the record has reports (checked by `resolution`)
    collision = floor ** 2 - private ** 2
    return private ** 2 / (target ** 2 - collision) if target ** 2 > collision else math.inf


@dataclass(frozen=True)
class SeriesResolution:
    """How well the windows of one series (one metric, window length and configuration version)
    resolve its distribution, decided once from the whole run.

    The distribution is the mean estimate over the series' windows; r values must stand above
    the floor for the ranking to be more than noise (r = ceil(0.023·d / `NOISE_SHARE`), as
    `resolution`), so the threshold is f_r, the r-th largest mean estimate. A window's floor
    falls as 1/sqrt(n): floor = c/sqrt(n) with c = floor·sqrt(n) of any window at the series'
    protocol and ε. A window is under-resolved when its floor is above f_r; (c/f_r)² reports
    would do, and at the run's rate (Σn over Σ window length) a window of that many reports is
    (c/f_r)²/rate long."""

    values: int             # d
    needed: int             # r
    target: float           # f_r (0 or less: fewer than r values have a positive mean)
    constant: float         # c
    rate_per_ms: float      # reports per millisecond of window over the run
    epsilon: float
    window_ms: int          # the series' window length
    windows: int            # windows in the series
    under_resolved_windows: int  # of them, with a floor above f_r

    def under_resolved(self, floor: float | None) -> bool:
        return floor is not None and not floor <= self.target

    @property
    def all_under_resolved(self) -> bool:
        return self.windows > 0 and self.under_resolved_windows == self.windows

    @property
    def reports_needed(self) -> float:
        return (self.constant / self.target) ** 2 if self.target > 0 else math.inf

    def advice(self) -> str | None:
        """One paragraph for the series, or None when no window is under-resolved. Its figures
        follow from one threshold, so they cannot disagree: the windows it counts are exactly
        those whose floor is above f_r, and a window of the length it advises has a floor of
        f_r at the run's rate."""
        if not self.under_resolved_windows:
            return None
        which = ("every window" if self.all_under_resolved
                 else f"{self.under_resolved_windows:,} of {self.windows:,} windows")
        head = (f"Too few reports in {which} for d={self.values} at ε={self.epsilon:g}: noise "
                f"alone puts about {CHANCE_ABOVE_FLOOR * self.values:.1f} values of frequency 0 "
                f"above a window's smallest resolvable frequency, so the {self.needed} largest "
                f"values must stand above it; their smallest mean estimate over the run is ")
        if self.target <= 0:
            return head + (f"{max(self.target, 0.0):.3g}, which no number of reports resolves "
                           "(no window length would do).")
        needed = self.reports_needed
        rate_h = self.rate_per_ms * 3_600_000
        length = (needed / self.rate_per_ms if self.rate_per_ms > 0 else math.inf)
        longer = ("" if math.isinf(length) else
                  f"; at this run's {rate_h:,.0f} reports per hour, windows of about "
                  f"{duration_text(length)} (now {duration_text(self.window_ms)})")
        return head + (f"{self.target:.3g}, resolved from about {math.ceil(needed):,} reports "
                       f"per window{longer}.")


def series_resolution(mean_estimate: list[float], windows: list[tuple[int, float | None]],
                      epsilon: float, window_ms: int) -> SeriesResolution | None:
    """The resolution of a series from its mean estimate over windows and its windows'
    (n, smallest resolvable frequency); None without a floor (a numeric metric, or records
    without p*, q*) or without reports."""
    floors = [(n, floor) for n, floor in windows if floor is not None and n > 0]
    if not mean_estimate or not floors:
        return None
    ranked = sorted((float(v) for v in mean_estimate), reverse=True)
    needed = min(len(ranked), max(1, math.ceil(CHANCE_ABOVE_FLOOR * len(ranked) / NOISE_SHARE)))
    target = ranked[needed - 1]
    n, floor = floors[-1]
    reports = sum(n for n, _ in windows)
    rate = reports / (window_ms * len(windows)) if window_ms > 0 else 0.0
    found = SeriesResolution(len(ranked), needed, target, floor * math.sqrt(n), rate, epsilon,
                             window_ms, len(windows), 0)
    flagged = sum(found.under_resolved(floor) for _, floor in windows)
    return SeriesResolution(len(ranked), needed, target, floor * math.sqrt(n), rate, epsilon,
                            window_ms, len(windows), flagged)
