"""What a metric page embeds and `/api/windows` answers: each window as one short row of what the
charts over windows draw, never a whole record.

    {"fields": FIELDS, "rows": [[...], ...], "series": [{...}, ...], "cursor": C, "t0": T,
     "unit": U, "timings": TIMINGS}

A row holds, in the order of `FIELDS`: the window's start (epoch ms T + start × U; its end is
the start plus its series' `length_ms`), the index of its series in `series`, n, late reports,
pane timing (an index into `TIMINGS`), index and last flag, the smallest resolvable frequency,
rejects by reason (or null), the estimates and 95% half widths of the series' top-k values (in
the series' `indices` order), the mean and the lower and upper bound of the record's 95% band
of it (numeric metrics; null where the record has none, `output.bands`), whether the window
has too few reports for its series (`output.resolution.SeriesResolution`), and its
integrity flag's text (or null). Chart values are rounded to `CHART_DIGITS` significant digits;
a chosen window's values come whole from `/api/window`. A series carries its name
(`source.series_of`), configuration version, window length, the indices and labels of its top-k
values, and the advice on its resolution, once.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from ldp_telemetry.output.resolution import SeriesResolution

FIELDS = ("start", "series", "n", "late", "timing", "pane", "last", "floor", "rejects", "top",
          "half", "mean", "mean_low", "mean_high", "few", "integrity")
TIMINGS = ("EARLY", "ON_TIME", "LATE", "UNKNOWN")
#: Significant digits of the values drawn over windows (the values table shows them whole; a
#: read-out of 4 decimals can differ from it in the last digit, about once in 200 values).
CHART_DIGITS = 6


@dataclass
class Series:
    """One series of a metric's windows (one window length and configuration version)."""

    name: str
    version: str
    length_ms: int
    indices: list[int] = field(default_factory=list)  # its top-k values
    labels: list[str] = field(default_factory=list)
    resolution: SeriesResolution | None = None
    windows: int = 0
    values: int = 0  # the domain's size (0: a numeric metric)

    def as_json(self) -> dict:
        found = self.resolution
        return {"name": self.name, "version": self.version, "length_ms": self.length_ms,
                "indices": self.indices, "labels": self.labels, "windows": self.windows,
                "advice": None if found is None else found.advice(),
                "all_few": None if found is None else found.all_under_resolved}


def rounded(value):
    """`value` to CHART_DIGITS significant digits; None for None, NaN and infinities."""
    if value is None:
        return None
    value = float(value)
    return float(f"{value:.{CHART_DIGITS}g}") if math.isfinite(value) else None


def pack(rows: list[dict], series: list[Series], cursor: int) -> dict:
    """The payload of `rows` (dicts as `store.reads.window_rows` gives them, with `rejects`,
    `top` {value index: (estimate, lower95, upper95)} and `integrity_flag` added)."""
    where = {(s.version, s.length_ms): position for position, s in enumerate(series)}
    t0 = min((row["window_start_ms"] for row in rows), default=0)
    unit = 1000 if all((row["window_start_ms"] - t0) % 1000 == 0 for row in rows) else 1
    packed = []
    for row in rows:
        start, end = row["window_start_ms"], row["window_end_ms"]
        position = where.get((row["version"], end - start))
        if position is None:
            continue
        chosen = series[position]
        top = row.get("top") or {}
        values = [top.get(i) for i in chosen.indices]
        floor = row.get("smallest_resolvable")
        few = (chosen.resolution is not None and floor is not None
               and chosen.resolution.under_resolved(floor))
        timing = row["pane_timing"]
        packed.append([
            (start - t0) // unit, position, row["n"], row.get("late_reports"),
            TIMINGS.index(timing) if timing in TIMINGS else len(TIMINGS) - 1,
            row["pane_index"], 1 if row["pane_is_last"] else 0,
            rounded(floor), row.get("rejects") or None,
            [None if v is None else rounded(v[0]) for v in values],
            [None if v is None or v[1] is None or v[2] is None
             else rounded((v[2] - v[1]) / 2) for v in values],
            rounded(row.get("mean")),
            *(rounded(bound) for bound in row.get("mean_band") or (None, None)),
            1 if few else 0, row.get("integrity_flag")])
    return {"fields": FIELDS, "rows": packed, "series": [s.as_json() for s in series],
            "cursor": cursor, "t0": t0, "unit": unit, "timings": TIMINGS}


def row_bounds(payload: dict, row: list) -> tuple[int, int, str]:
    """(start ms, end ms, configuration version) of one packed row of `payload`."""
    series = payload["series"][row[FIELDS.index("series")]]
    start = payload["t0"] + row[FIELDS.index("start")] * payload["unit"]
    return start, start + series["length_ms"], series["version"]
