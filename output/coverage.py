"""Whether a window is partial, decided from facts a run records: its inputs' event-time range
per metric and, for a live run, the watermark it had reached when it stopped.

A run records `RunInputs` at its end: per metric the first and last event time of the valid
reports it read (`first_ms`, `last_ms`), and `watermark_ms` (a live run's last watermark: every
report of event time before it had been read; None for a batch run, which reads its inputs
whole). They are a row per (run, metric) of the store's `ldp_run_inputs`, and a file of the
output folder (`INPUTS_FILE`, `write_inputs` / `read_inputs`).

`partial_code(start, end, n, timing, inputs)` says why the window [start, end) of n reports is
partial (`PARTIAL_TEXTS`), 0 when it is not:

* `OPEN`: its latest pane is EARLY, the watermark has not passed its end yet;
* `CUT_BY_RUN_END`: the run stopped before its watermark passed the window's end (a live run's
  last panes fire when it stops);
* `BEFORE_INPUTS` / `AFTER_INPUTS`: the window holds the first (last) report of the run's
  inputs, and too little of the window lies after (before) it. Reports of a window that the
  inputs cover whole fall uniformly over it, so the last of n lies in the window's first
  fraction u with probability u^n: the window is flagged when the part before its last report
  is below `FALSE_FLAG ** (1 / n)` of it, which flags a complete window with probability
  `FALSE_FLAG` (and, symmetrically, for the first report). An edge cut by less than that is
  indistinguishable from a complete window; a window cut by more is always flagged.

A window without recorded facts (written by a run that stopped before its end, or by a release
that recorded none) is not flagged: nothing is guessed from its n.
"""
from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

#: The output folder's record of a run's inputs (`write_inputs`).
INPUTS_FILE = "inputs.json"
#: The chance that a window the inputs cover whole is flagged at an edge of the inputs' range.
FALSE_FLAG = 1e-6

NOT_PARTIAL, OPEN, CUT_BY_RUN_END, BEFORE_INPUTS, AFTER_INPUTS = range(5)
#: What each partial code means, as the pages say it (index: the code).
PARTIAL_TEXTS = (
    "",
    "open: the watermark has not passed its end",
    "cut by the run's end: the run stopped before its watermark passed the window's end",
    "starts before the run's first report",
    "ends after the run's last report",
)


@dataclass
class RunInputs:
    """What a run read: per metric (first event ms, last event ms) of its valid reports, and a
    live run's watermark when it stopped (None: a batch run, or a live run with none yet)."""

    ranges: dict[str, tuple[int, int]] = field(default_factory=dict)
    watermark_ms: int | None = None

    def add(self, metric: str, first_ms: int, last_ms: int) -> None:
        """Widen `metric`'s range to hold [first_ms, last_ms]."""
        old = self.ranges.get(metric)
        if old is not None:
            first_ms, last_ms = min(first_ms, old[0]), max(last_ms, old[1])
        self.ranges[metric] = (int(first_ms), int(last_ms))

    def merge(self, ranges: Mapping[str, tuple[int, int]]) -> None:
        for metric, (first, last) in ranges.items():
            self.add(metric, first, last)

    def as_json(self) -> dict:
        return {"watermark_ms": self.watermark_ms,
                "ranges": {metric: list(pair) for metric, pair in sorted(self.ranges.items())}}

    @classmethod
    def from_json(cls, doc: Any) -> RunInputs:  # a decoded JSON document
        """ValueError for a document not of `as_json`'s shape."""
        try:
            watermark = doc["watermark_ms"]
            ranges = {str(metric): (int(pair[0]), int(pair[1]))
                      for metric, pair in doc["ranges"].items()}
        except (KeyError, TypeError, IndexError, AttributeError) as error:
            raise ValueError(f"not a record of a run's inputs ({type(error).__name__}: "
                             f"{error})") from None
        if watermark is not None and (isinstance(watermark, bool)
                                      or not isinstance(watermark, int)):
            raise ValueError(f"watermark_ms is {watermark!r}, not an integer or null")
        return cls(ranges, watermark)


@dataclass(frozen=True)
class MetricInputs:
    """One metric's facts in one run: its reports' event-time range and the run's watermark."""

    first_ms: int | None
    last_ms: int | None
    watermark_ms: int | None


def partial_code(start_ms: int, end_ms: int, n: int, timing: str,
                 facts: MetricInputs | None) -> int:
    """Why the window [start_ms, end_ms) of `n` reports, latest pane `timing`, is partial
    (an index of `PARTIAL_TEXTS`); `NOT_PARTIAL` when it is not or nothing is known."""
    if timing == "EARLY":
        return OPEN
    if facts is None:
        return NOT_PARTIAL
    if facts.watermark_ms is not None and end_ms > facts.watermark_ms:
        return CUT_BY_RUN_END
    if n <= 0 or facts.first_ms is None or facts.last_ms is None:
        return NOT_PARTIAL
    length = end_ms - start_ms
    least = FALSE_FLAG ** (1.0 / n) * length  # the share of the window a complete one exceeds
    if start_ms <= facts.first_ms < end_ms and end_ms - facts.first_ms < least:
        return BEFORE_INPUTS
    if start_ms <= facts.last_ms < end_ms and facts.last_ms + 1 - start_ms < least:
        return AFTER_INPUTS
    return NOT_PARTIAL


def write_inputs(output_dir: str, inputs: RunInputs) -> None:
    """Record a run's inputs in its output folder (whole or not at all)."""
    from ldp_telemetry.output.atomic import write_atomically
    write_atomically(os.path.join(output_dir, INPUTS_FILE),
                     json.dumps(inputs.as_json(), sort_keys=True, indent=1))


def read_inputs(output_dir: str) -> RunInputs | None:
    """The inputs recorded in an output folder, or None when none are (or the file is not one:
    a reader shows what it can)."""
    try:
        with open(os.path.join(output_dir, INPUTS_FILE), encoding="utf-8") as handle:
            return RunInputs.from_json(json.load(handle))
    except FileNotFoundError:
        return None
    except ValueError:  # json.JSONDecodeError is one
        return None
