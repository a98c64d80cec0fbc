"""What a metric page embeds and `/api/windows` answers: each window as one short row of what the
charts over windows draw, never a whole record, sent by column.

    {"fields": FIELDS, "count": N, "columns": {field: column, ...}, "series": [{...}, ...],
     "cursor": C, "t0": T, "unit": U, "scale": FREQUENCY_SCALE, "timings": TIMINGS,
     "partials": PARTIAL_TEXTS}

A column is the list of its N rows' values, or `{"all": value}` when every row has the same one
(most columns of most metrics: series, late reports, pane, flags). Per row, in the order of
`FIELDS`: the window's start (`start`: the difference from the previous row's start, the first
from T, in units of U ms; its end is the start plus its series' `length_ms`), the index of its
series in `series`, n, late reports, pane timing (an index into `TIMINGS`), index and last flag,
the smallest resolvable frequency, rejects by reason (or null), the estimates of the series'
top-k values (in the series' `indices` order) and the lower and upper bound of each one's 95%
band as the record saved it (`output.bands.value_bands`: a post-processed value's band need not
be centred on its estimate, which may even lie outside it; null where the record declares none,
`store.records.value_rows`), sent as `low` = estimate − lower (negative where the estimate lies
below its band) and `skew` = (upper − estimate) − (estimate − lower), so upper = estimate + low
+ skew (0 for a band centred on its estimate; one number for the row when its bands' skews are
within `SKEW_SHARED` units of each other, as a post-processed row's score bands mostly are:
then each upper bound is read back within SKEW_SHARED / 2 units), the mean and the lower
and upper bound of the record's 95% band of it (numeric metrics; null where the record has
none, `output.bands`), whether the window has too few reports for its series
(`output.resolution.SeriesResolution`), its integrity flag's text (or null), and why it is
partial (an index into `partials`, `output.coverage.PARTIAL_TEXTS`; 0: it is not).
Frequencies (the smallest resolvable one, the top-k estimates, `low` and `skew`) are
integers in units of 1/`FREQUENCY_SCALE`, so each bound is read back to that unit; a mean and
its bounds are rounded to `CHART_DIGITS` significant digits. `unpack` reads a payload back into
rows, with each top value's bounds (`low`, `high`) as frequencies. A chosen window's values come
whole from `/api/window`. A series carries its name (`source.series_of`), configuration version,
window length, the indices and labels of its top-k values (control characters escaped:
`output.text.printable`), and the advice on its resolution, once. A series whose values are
found anew in each window (a string metric's heavy hitters, `store.records.labels_per_window`)
is keyed by label: `by_label` is true, `indices` is empty, `labels` are its top-k strings (the
largest mean estimate over its windows, 0 where a window lacks one) and a row's estimates are in
their order, null where the window's heavy hitters lack the string; `labels_cut` says the
top-k was chosen among the `store.reads.MAX_SERIES_LABELS` labels seen most recently.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from ldp_telemetry.output.coverage import NOT_PARTIAL, PARTIAL_TEXTS
from ldp_telemetry.output.resolution import SeriesResolution
from ldp_telemetry.output.names import printable

FIELDS = ("start", "series", "n", "late", "timing", "pane", "last", "floor", "rejects", "top",
          "low", "skew", "mean", "mean_low", "mean_high", "few", "integrity", "partial")
TIMINGS = ("EARLY", "ON_TIME", "LATE", "UNKNOWN")
#: Significant digits of a numeric metric's mean drawn over windows (the window's facts show
#: it whole).
CHART_DIGITS = 6
#: Frequencies drawn over windows are sent as integers in units of 1/FREQUENCY_SCALE (10⁻⁷): a
#: read-out of 4 decimals differs from the value's own rounding about once in 1,000 values.
FREQUENCY_SCALE = 10_000_000
#: A row's skews within this many units of 1/FREQUENCY_SCALE of each other are sent as one
#: number (their midpoint): 4·10⁻⁷, twice the rounding of three sent values, far below a
#: read-out's 4 decimals; it keeps the bands of 1,000 windows × 5 values under the page budget.
SKEW_SHARED = 4


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
    values: int = 0  # the domain's size (0: a numeric metric); by label: the labels ranked
    by_label: bool = False  # its top-k are labels, not value indices (see the module)
    labels_cut: bool = False  # by label: more labels than were ranked

    def top_keys(self) -> list:
        """What a row's `top` is keyed by: the top-k labels of a series by label, else the
        top-k value indices."""
        return self.labels if self.by_label else self.indices

    def as_json(self) -> dict:
        found = self.resolution
        return {"name": self.name, "version": self.version, "length_ms": self.length_ms,
                "indices": self.indices, "labels": [printable(str(label)) for label in self.labels],
                "by_label": self.by_label, "labels_cut": self.labels_cut,
                "windows": self.windows,
                "advice": None if found is None else found.advice(),
                "all_few": None if found is None else found.all_under_resolved}


def shown_view(view: dict) -> dict:
    """`view` as a page is sent it: its labels as text (`output.text.printable`), escaped here
    and only here, since escaping twice would double a backslash twice."""
    if not isinstance(view.get("labels"), list):
        return view
    return {**view, "labels": [printable(str(label)) for label in view["labels"]]}


def rounded(value):
    """`value` to CHART_DIGITS significant digits; None for None, NaN and infinities."""
    if value is None:
        return None
    value = float(value)
    return float(f"{value:.{CHART_DIGITS}g}") if math.isfinite(value) else None


def scaled(value):
    """A frequency in units of 1/FREQUENCY_SCALE; None for None, NaN and infinities."""
    if value is None:
        return None
    value = float(value)
    return round(value * FREQUENCY_SCALE) if math.isfinite(value) else None


def _band_columns(values: list) -> tuple[list, list | int | None]:
    """(low, skew) of a row (see the module) from its (estimate, lower95, upper95), in units of
    1/FREQUENCY_SCALE, from the scaled values so that each bound is read back exactly as
    `scaled` sends it: low is None where a value or its band is missing; skew is one number
    when the row's skews are within SKEW_SHARED of each other (None when the row has no band),
    else the list."""
    low, skew = [], []
    for value in values:
        sent = None if value is None else [scaled(part) for part in value]
        whole = sent is not None and None not in sent
        low.append(sent[0] - sent[1] if whole else None)
        skew.append(sent[2] + sent[1] - 2 * sent[0] if whole else None)
    found = [one for one in skew if one is not None]
    if not found:
        return low, None
    shared = max(found) - min(found) <= SKEW_SHARED
    return low, (max(found) + min(found)) // 2 if shared else skew


def _column(values: list):
    """A column as sent: `{"all": value}` when every row has the same value, else the list."""
    if values and all(v == values[0] and type(v) is type(values[0]) for v in values):
        return {"all": values[0]}
    return values


def pack(rows: list[dict], series: list[Series], cursor: int) -> dict:
    """The payload of `rows` (dicts as `store.reads.window_rows` gives them, with `rejects`,
    `top` {value index, or label for a series by label: (estimate, lower95, upper95)},
    `integrity_flag` and `partial`
    (`output.coverage.partial_code`) added)."""
    where = {(s.version, s.length_ms): position for position, s in enumerate(series)}
    t0 = min((row["window_start_ms"] for row in rows), default=0)
    unit = 1000 if all((row["window_start_ms"] - t0) % 1000 == 0 for row in rows) else 1
    packed = []
    previous = t0
    for row in rows:
        start, end = row["window_start_ms"], row["window_end_ms"]
        position = where.get((row["version"], end - start))
        if position is None:
            continue
        chosen = series[position]
        top = row.get("top") or {}
        values = [top.get(k) for k in chosen.top_keys()]
        floor = row.get("smallest_resolvable")
        few = (chosen.resolution is not None and floor is not None
               and chosen.resolution.under_resolved(floor))
        timing = row["pane_timing"]
        packed.append([
            (start - previous) // unit, position, row["n"], row.get("late_reports"),
            TIMINGS.index(timing) if timing in TIMINGS else len(TIMINGS) - 1,
            row["pane_index"], 1 if row["pane_is_last"] else 0,
            scaled(floor), row.get("rejects") or None,
            [None if v is None else scaled(v[0]) for v in values], *_band_columns(values),
            rounded(row.get("mean")),
            *(rounded(bound) for bound in row.get("mean_band") or (None, None)),
            1 if few else 0, row.get("integrity_flag"), row.get("partial", NOT_PARTIAL)])
        previous = start
    columns = {name: _column([row[at] for row in packed]) for at, name in enumerate(FIELDS)}
    return {"fields": FIELDS, "count": len(packed), "columns": columns,
            "series": [s.as_json() for s in series], "cursor": cursor, "t0": t0, "unit": unit,
            "scale": FREQUENCY_SCALE, "timings": TIMINGS, "partials": PARTIAL_TEXTS}


def unpack(payload: dict) -> list[dict]:
    """The rows of a payload as dicts by field, with `start_ms`, `end_ms` and `version` added,
    `start` absolute (ms) and the frequencies as floats (what the page's script reads)."""
    count = payload["count"]
    columns = {name: (column["all"],) * count if isinstance(column, dict) else column
               for name, column in payload["columns"].items()}
    scale = payload["scale"]

    def frequency(value):
        return None if value is None else value / scale

    def bounds(top: list, low: list, skew) -> tuple[list, list]:
        skews = skew if isinstance(skew, list) else [skew] * len(top)
        return ([None if d is None else frequency(e - d) for e, d in zip(top, low, strict=True)],
                [None if d is None else frequency(e + d + k)
                 for e, d, k in zip(top, low, skews, strict=True)])
    rows, start = [], payload["t0"]
    for k in range(count):
        row = {name: columns[name][k] for name in payload["fields"]}
        start += row["start"] * payload["unit"]
        series = payload["series"][row["series"]]
        row["low"], row["high"] = bounds(row["top"], row.pop("low"), row.pop("skew"))
        row.update(start=start, start_ms=start, end_ms=start + series["length_ms"],
                   version=series["version"], floor=frequency(row["floor"]),
                   top=[frequency(v) for v in row["top"]])
        rows.append(row)
    return rows


def last_bounds(payload: dict) -> tuple[int, int, str] | None:
    """(start ms, end ms, configuration version) of a payload's latest row, or None."""
    rows = unpack(payload) if payload["count"] else []
    return (rows[-1]["start_ms"], rows[-1]["end_ms"], rows[-1]["version"]) if rows else None
