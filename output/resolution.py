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
the same rate, a window n'/n times as long.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from ldp_telemetry.output.layout import window_key

#: P(Z > 2): the chance that noise puts a value of frequency 0 above the floor.
CHANCE_ABOVE_FLOOR = 0.5 * math.erfc(2 / math.sqrt(2))
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


def resolution(record: Mapping) -> Resolution | None:
    """The resolution of a frequency metric's window, or None (a numeric metric, no reports or
    no smallest resolvable frequency)."""
    floor = record.get("smallest_resolvable")
    n = record.get("n") or 0
    estimate = record.get("estimate") or []
    if floor is None or not n or not estimate or record.get("bucket_edges") is not None:
        return None
    ranked = sorted((float(v) for v in estimate), reverse=True)
    by_chance = CHANCE_ABOVE_FLOOR * len(ranked)
    needed = min(len(ranked), max(1, math.ceil(by_chance / NOISE_SHARE)))
    target = ranked[needed - 1]
    scale = (floor / target) ** 2 if target > 0 else math.inf
    scale = max(1.0, scale)
    return Resolution(floor, sum(v >= floor for v in ranked), by_chance, len(ranked),
                      n * scale, scale)


def duration_text(ms: float) -> str:
    """A duration in the largest unit that keeps it at least 1 (`36 h`, `2.5 d`)."""
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", 1000)):
        if ms >= size:
            return f"{ms / size:.3g} {unit}"
    return f"{ms:.3g} ms"


def warning_text(record: Mapping, found: Resolution) -> str:
    """One line: why the window is under-resolved and what window would do."""
    return (f"too few reports for d={found.values} at ε={record['epsilon']:g}: "
            f"n={record['n']:,}, smallest resolvable {found.floor:.3g}; "
            f"{found.resolved_values} value(s) above it, of which about {found.by_chance:.1f} "
            f"by chance alone; {_longer(record, found)}")


def _longer(record: Mapping, found: Resolution) -> str:
    if math.isinf(found.scale):
        return "no window length would do"
    _, start, end, _ = window_key(record)
    return (f"about {math.ceil(found.reports_needed):,} reports would (windows of about "
            f"{duration_text((end - start) * found.scale)} at this rate)")


def under_resolved_summary(records: list[Mapping]) -> list[str]:
    """Per metric with under-resolved windows, one line: how many, and what window would do
    (the longest needed over them)."""
    by_metric: dict[str, list[tuple[Mapping, Resolution]]] = {}
    total: dict[str, int] = {}
    for record in records:
        total[record["metric"]] = total.get(record["metric"], 0) + 1
        found = resolution(record)
        if found is not None and found.under_resolved:
            by_metric.setdefault(record["metric"], []).append((record, found))
    lines = []
    for metric, windows in sorted(by_metric.items()):
        record, worst = max(windows, key=lambda pair: pair[1].scale)
        lines.append(f"warning: {metric}: {len(windows)} of {total[metric]} window(s) have too "
                     f"few reports for d={worst.values} at ε={record['epsilon']:g}: more than "
                     f"{NOISE_SHARE:.0%} of the values above their smallest resolvable frequency "
                     f"are expected there by chance; {_longer(record, worst)}")
    return lines
