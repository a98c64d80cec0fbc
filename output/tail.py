"""Follow a job's output folder while it is written: what was appended since the last read.

`OutputTail(folder).read()` returns the records appended since the previous call, from the files
of either layout (`ldp_telemetry.output.layout`):

* window estimates (`EstimateRecord`s): the pane files named by new lines of a live run's
  `panes.log`, and new lines of `estimates-*.jsonl` (in the folder or below it);
* dead letters: new lines of `dead_letters-*.jsonl` (in the folder or below it) and of a live
  run's `dead_letters/*.jsonl`;
* too-late counts: new lines of a live run's `too_late.jsonl` (the cumulative count of reports
  dropped as too late per window).

Only complete lines are read (a line still being written waits for its newline), and files are
picked up as they appear. A follower shows what it can read: a line longer than
`max_line_bytes`, not JSON, or not a record of its file's kind (`reader.record_problem`) is
skipped, as is a pane-log entry naming no readable pane file inside the folder.
"""
from __future__ import annotations

import glob
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field

from ldp_telemetry.ldp.base.validation import is_int
from ldp_telemetry.output.layout import (DEAD_LETTER_DIR, DEAD_LETTERS, ESTIMATES, PANE_LOG,
                                         TOO_LATE_LOG, WindowKey, shard_pattern, window_key)
from ldp_telemetry.output.estimate import EstimateRecord
from ldp_telemetry.output.reader import pane_file

#: Longest line of a JSON-lines file, or pane file, a follower reads (longer: skipped).
MAX_LINE_BYTES = 64 * 1024 * 1024


@dataclass
class Appended:
    """What one `OutputTail.read` found, each list in the order it was written."""

    estimates: list[EstimateRecord] = field(default_factory=list)
    dead_letters: list[dict] = field(default_factory=list)
    too_late: list[tuple[WindowKey, int]] = field(default_factory=list)


class OutputTail:
    """The records appended to a job's output folder since the last `read` (see the module)."""

    def __init__(self, folder: str, max_line_bytes: int = MAX_LINE_BYTES):
        self.folder = folder
        self._max_line_bytes = max_line_bytes
        self._offsets: dict[str, int] = {}

    @property
    def found(self) -> bool:
        """True once any file of either layout has been read."""
        return bool(self._offsets)

    def read(self) -> Appended:
        appended = Appended()
        for entry in self._new_values(os.path.join(self.folder, PANE_LOG)):
            record = self._pane_record(entry)
            if record is not None:
                appended.estimates.append(record)
        for path in self._files(ESTIMATES):
            appended.estimates.extend(filter(None, map(_record_or_none, self._new_values(path))))
        dead_letter_files = self._files(DEAD_LETTERS) | set(
            glob.glob(os.path.join(glob.escape(self.folder), DEAD_LETTER_DIR, "*.jsonl")))
        for path in sorted(dead_letter_files):
            appended.dead_letters.extend(v for v in self._new_values(path) if isinstance(v, dict))
        for entry in self._new_values(os.path.join(self.folder, TOO_LATE_LOG)):
            count = _too_late_count(entry)
            if count is not None:
                appended.too_late.append(count)
        return appended

    def _files(self, name: str) -> set[str]:
        """A batch run's shards of `name`, in the folder or below it."""
        folder = glob.escape(self.folder)
        return (set(glob.glob(os.path.join(folder, shard_pattern(name))))
                | set(glob.glob(os.path.join(folder, "**", shard_pattern(name)), recursive=True)))

    def _new_values(self, path: str) -> Iterator:
        """The JSON values of the complete lines appended to `path` since the last call."""
        offset = self._offsets.get(path, 0)
        try:
            with open(path, "rb") as handle:
                handle.seek(offset)
                data = handle.read()
        except OSError:
            return
        end = data.rfind(b"\n") + 1  # a line still being written waits for its newline
        self._offsets[path] = offset + end
        for line in data[:end].splitlines():
            if line.strip() and len(line) <= self._max_line_bytes:
                try:
                    yield json.loads(line)
                except (ValueError, RecursionError):
                    continue

    def _pane_record(self, entry: object) -> EstimateRecord | None:
        """The window-estimate record a pane-log entry names, or None."""
        if not isinstance(entry, dict):
            return None
        path = pane_file(self.folder, entry)
        if path is None:
            return None
        try:
            if os.path.getsize(path) > self._max_line_bytes:
                return None
            with open(path, encoding="utf-8") as handle:
                record = json.load(handle)
        except (OSError, ValueError, RecursionError):
            return None
        return _record_or_none(record)


def _record_or_none(value: object) -> EstimateRecord | None:
    """The record of a decoded JSON value, or None when it is not one (`record_problem`)."""
    try:
        return EstimateRecord.from_value(value)
    except ValueError:
        return None


def _too_late_count(entry: object) -> tuple[WindowKey, int] | None:
    """(window, cumulative too-late count) of a `too_late.jsonl` line, or None."""
    if not isinstance(entry, dict) or not is_int(entry.get("too_late")):
        return None
    try:
        return window_key(entry), entry["too_late"]
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
