"""Where the dashboard reads windows from: an estimate store, or a job's output folder.

Both give the same view of a metric: the latest pane of each window (the window-estimate record)
with its accounting added — `late_reports` (reports counted after the ON_TIME pane, None before
one), `rejects` ({reason: records} of dead letters whose event time falls in the window) and
`smallest_resolvable` (2 standard errors at frequency 0 at the window's n, None when the
protocol has no p*/q*) — and a `since` cursor: `windows(metric, since)` returns only the windows
whose pane or rejects changed after `since`, so a page that follows a live run never re-reads
the whole history.
"""
from __future__ import annotations

import glob
import json
import os
import threading

from ldp_telemetry.ldp.errors import ConfigError, InputError
from ldp_telemetry.store.records import dead_letter_origin, describe_window, pane_of, window_key

#: A page shows at most this many windows of a metric (the latest ones).
MAX_WINDOWS_PER_PAGE = 2000

#: Longest line of a JSON-lines file, or pane file, the folder source reads (longer: skipped).
MAX_LINE_BYTES = 64 * 1024 * 1024

#: A live run's append-only pane index, and its log of too-late reports per window.
PANE_LOG = "panes.log"
TOO_LATE_LOG = "too_late.jsonl"


def _view(record: dict, late_reports, rejects: dict, seq: int) -> dict:
    view = dict(record)
    view["late_reports"] = late_reports
    view["rejects"] = dict(sorted(rejects.items()))
    view["smallest_resolvable"] = describe_window(record)["smallest_resolvable"]
    view["pane_seq"] = seq
    return view


class StoreSource:
    """Windows from an estimate store (`ldp_telemetry.store.open_store(url)`)."""

    def __init__(self, url: str):
        from ldp_telemetry.store import open_store
        self.description = url
        self._store = open_store(url)
        self._lock = threading.Lock()  # one connection, shared by the server's threads

    def metrics(self) -> list[str]:
        with self._lock:
            return self._store.metrics()

    def windows(self, metric: str, since: int = 0) -> tuple[int, list[dict]]:
        """(cursor, the latest pane of each window of `metric` changed after `since`)."""
        with self._lock:
            cursor = self._store.latest_seq()
            records = self._store.windows(metric, since)[-MAX_WINDOWS_PER_PAGE:]
            rejects = self._store.rejects(metric, [window_key(r)[1:] for r in records])
        views = []
        for record in records:
            late = record.pop("late_reports")
            seq = record.pop("pane_seq")
            views.append(_view(record, late, rejects.get(window_key(record)[1:], {}), seq))
        return cursor, views

    def unattributed_rejects(self) -> dict[tuple[str, str], int]:
        with self._lock:
            return self._store.unattributed_rejects()

    def close(self) -> None:
        self._store.close()


class FolderSource:
    """Windows from a job's output folder, followed while a job writes it:

    * a batch job's `estimates-*.jsonl` and `dead_letters-*.jsonl` (in the folder or below it);
    * a live run's `panes.log` (one JSON line per pane written, whose `path` names the pane's
      record file, relative to the folder), its `dead_letters/*.jsonl` and its `too_late.jsonl`
      (the cumulative count of reports dropped as too late per window, shown as the reject
      reason `too_late`).

    Each refresh reads only the complete lines appended since the last one, and new files as
    they appear. The cursor counts the changes seen.
    """

    def __init__(self, output_dir: str):
        if not os.path.isdir(output_dir):
            raise InputError(f"output folder {output_dir!r} does not exist", field="output")
        self.description = output_dir
        self._folder = output_dir
        self._root = os.path.realpath(output_dir)
        self._lock = threading.Lock()
        self._offsets: dict[str, int] = {}
        self._seq = 0
        self._latest: dict[tuple[str, int, int], dict] = {}  # window key -> latest record
        self._changed: dict[tuple[str, int, int], int] = {}  # window key -> seq of last change
        self._n_on_time: dict[tuple[str, int, int], int] = {}
        self._too_late: dict[tuple[str, int, int], int] = {}
        # metric -> {(reason, event time ms or None): records}
        self._dead: dict[str, dict[tuple[str, int | None], int]] = {}
        self._windows_of: dict[str, set[tuple[str, int, int]]] = {}  # metric -> window keys
        self.refresh()
        if not self._offsets:
            raise InputError(f"no estimates-*.jsonl, dead_letters-*.jsonl or {PANE_LOG} in "
                             f"{output_dir!r}", field="output")

    def refresh(self) -> None:
        """Read what was appended to the output files since the last refresh."""
        folder = self._folder
        with self._lock:
            for entry in self._new_lines(os.path.join(folder, PANE_LOG)):
                record = self._pane_file(entry)
                if record is not None:
                    self._add_estimate(record)
            for name, handle_line in (("estimates", self._add_estimate),
                                      ("dead_letters", self._add_dead_letter)):
                paths = set(glob.glob(os.path.join(folder, f"{name}-*.jsonl")))
                paths |= set(glob.glob(os.path.join(folder, "**", f"{name}-*.jsonl"),
                                       recursive=True))
                if name == "dead_letters":
                    paths |= set(glob.glob(os.path.join(folder, "dead_letters", "*.jsonl")))
                for path in sorted(paths):
                    for line in self._new_lines(path):
                        handle_line(line)
            for entry in self._new_lines(os.path.join(folder, TOO_LATE_LOG)):
                self._add_too_late(entry)

    def metrics(self) -> list[str]:
        self.refresh()
        with self._lock:
            return sorted({key[0] for key in self._latest})

    def windows(self, metric: str, since: int = 0) -> tuple[int, list[dict]]:
        self.refresh()
        with self._lock:
            keys = sorted((key for key in self._latest
                           if key[0] == metric and self._changed[key] > since),
                          key=lambda key: key[1:])[-MAX_WINDOWS_PER_PAGE:]
            views = []
            for key in keys:
                n_on_time = self._n_on_time.get(key)
                record = self._latest[key]
                late = None if n_on_time is None else int(record["n"]) - n_on_time
                views.append(_view(record, late, self._rejects_in(key), self._changed[key]))
            return self._seq, views

    def unattributed_rejects(self) -> dict[tuple[str, str], int]:
        self.refresh()
        with self._lock:
            totals: dict[tuple[str, str], int] = {}
            for metric, letters in self._dead.items():
                windows = self._windows_of.get(metric, ())
                for (reason, moment), count in letters.items():
                    inside = moment is not None and any(
                        start <= moment < end for _, start, end in windows)
                    if not inside:
                        totals[(metric, reason)] = totals.get((metric, reason), 0) + count
            return totals

    def close(self) -> None:
        pass

    # -- internals ----------------------------------------------------------------------------
    def _new_lines(self, path: str):
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
            if line.strip() and len(line) <= MAX_LINE_BYTES:
                try:
                    yield json.loads(line)
                except ValueError:
                    continue  # not a record: the dashboard shows what it can read

    def _pane_file(self, entry) -> dict | None:
        """The record a pane-log entry points to; None when the entry names no file inside the
        folder, or the file is missing or unreadable (the log is data: it cannot send the
        reader elsewhere)."""
        if not isinstance(entry, dict) or not isinstance(entry.get("path"), str):
            return None
        path = os.path.realpath(os.path.join(self._root, entry["path"]))
        if os.path.commonpath([path, self._root]) != self._root:
            return None
        try:
            if os.path.getsize(path) > MAX_LINE_BYTES:
                return None
            with open(path, encoding="utf-8") as handle:
                record = json.load(handle)
        except (OSError, ValueError):
            return None
        return record if isinstance(record, dict) else None

    def _add_too_late(self, entry) -> None:
        if not isinstance(entry, dict) or not isinstance(entry.get("too_late"), int):
            return
        try:
            key = window_key(entry)
        except (KeyError, TypeError, ValueError):
            return
        self._too_late[key] = entry["too_late"]  # cumulative: the last line is the count
        self._seq += 1
        if key in self._latest:
            self._changed[key] = self._seq

    def _add_estimate(self, record) -> None:
        if not isinstance(record, dict):
            return
        try:
            key = window_key(record)
            pane = pane_of(record)
            int(record["n"])
        except (KeyError, TypeError, ValueError):
            return  # not a window-estimate record: the page shows what it can read
        if pane["timing"] == "ON_TIME":
            self._n_on_time.setdefault(key, int(record["n"]))
        current = self._latest.get(key)
        self._windows_of.setdefault(key[0], set()).add(key)
        if current is None or pane_of(current)["index"] < pane["index"]:
            self._latest[key] = record
        self._seq += 1
        self._changed[key] = self._seq

    def _add_dead_letter(self, letter) -> None:
        if not isinstance(letter, dict):
            return
        metric, moment = dead_letter_origin(letter)
        if letter.get("reason") in ("invalid_event_time", "unknown_metric"):
            moment = None
        letters = self._dead.setdefault(metric, {})
        key = (str(letter.get("reason", "")), moment)
        letters[key] = letters.get(key, 0) + int(letter.get("records", 1))
        self._seq += 1
        if moment is not None:
            for window in self._windows_of.get(metric, ()):
                if window[1] <= moment < window[2]:
                    self._changed[window] = self._seq

    def _rejects_in(self, key: tuple[str, int, int]) -> dict[str, int]:
        metric, start, end = key
        rejects: dict[str, int] = {}
        for (reason, moment), count in self._dead.get(metric, {}).items():
            if moment is not None and start <= moment < end:
                rejects[reason] = rejects.get(reason, 0) + count
        if self._too_late.get(key):
            rejects["too_late"] = rejects.get("too_late", 0) + self._too_late[key]
        return rejects


def open_source(store: str | None = None, output: str | None = None):
    """A StoreSource for a store URL or a FolderSource for an output folder (exactly one)."""
    if (store is None) == (output is None):
        raise ConfigError("give exactly one of --store URL or --output DIR", field="store")
    return StoreSource(store) if store is not None else FolderSource(output)

