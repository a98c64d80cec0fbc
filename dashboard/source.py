"""Where the dashboard reads windows from: an estimate store, or a job's output folder.

Both give the same view of a metric: the latest pane of each window (the window-estimate record)
with what a page draws added, computed here once so that the page's script computes nothing:

* `lower95`, `upper95`, `half95`: per value, the 95% band and its half width
  (`ldp_telemetry.output.bands`; a store source sends the bands the store saved);
* `p_star`, `q_star`, `smallest_resolvable`: as the record (or the store's columns) gives them,
  None when it has none;
* `late_reports` (reports counted after the ON_TIME pane, None before one) and `rejects`
  ({reason: records} of dead letters whose event time falls in the window);
* `series`: which series of the metric the window belongs to (`series_of`), the one choice a
  page offers between windows of one metric that must not be drawn together;
* `mean_half95` and `quantile_half95` of a numeric metric (the ± of the mean's and each
  quantile's 95% band), and `warning`: why the window's reports are too few for its domain at
  its ε (`output.resolution`), or None;
* `integrity_flag`: the window's integrity flag as text (`output.integrity.flag_text`: the
  flagged statistics and the values they implicate), or None; the record's `integrity` section
  carries the jump test over the metric's earlier windows (`output.integrity.with_jump_tests`).

A `since` cursor: `windows(metric, since)` returns only the windows whose pane or rejects changed
after `since`, so a page that follows a live run never re-reads the whole history.
"""
from __future__ import annotations

import os
import threading

from ldp_telemetry.ldp.errors import ConfigError, InputError
from ldp_telemetry.ldp.validation import is_int
from ldp_telemetry.output.bands import band95, half_width95
from ldp_telemetry.output.integrity import flag_text, with_jump_tests
from ldp_telemetry.output.layout import (DEAD_LETTERS, ESTIMATES, PANE_LOG, WindowKey,
                                          shard_pattern, version_label, window_key)
from ldp_telemetry.output.reasons import UNATTRIBUTED_REASONS, Reason
from ldp_telemetry.output.reader import pane_of
from ldp_telemetry.output.resolution import resolution, warning_text
from ldp_telemetry.output.tail import OutputTail
from ldp_telemetry.store.records import dead_letter_origin

#: A page shows at most this many windows of a metric (the latest ones).
MAX_WINDOWS_PER_PAGE = 2000
#: Facts of the metric's protocol a record may carry (None when it does not).
SUPPORT_FIELDS = ("p_star", "q_star", "smallest_resolvable")


def series_of(record: dict) -> str:
    """The series a window belongs to: its length (`1 h`, `7 d`, `90 min`), so that a store or
    folder holding an hourly and a daily run of one metric shows them apart, and the
    configuration version its estimate is from (`1 d, v2`, `1 d, combined`;
    `output.layout.version_label`). The one place that decides it."""
    _, start, end, version = window_key(record)
    length = end - start
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", 1000)):
        if length >= size and length % size == 0:
            text = f"{length // size} {unit}"
            break
    else:
        text = f"{length} ms"
    return f"{text}, {version}" if version else text


def _view(record: dict, late_reports, rejects: dict, seq: int, lower: list, upper: list
          ) -> dict:
    view = dict(record)
    for name in SUPPORT_FIELDS:
        view.setdefault(name, None)
    view["late_reports"] = late_reports
    view["rejects"] = dict(sorted(rejects.items()))
    view["pane_seq"] = seq
    view["lower95"], view["upper95"] = lower, upper
    view["half95"] = [half_width95(error) for error in record.get("std_error") or ()]
    view["series"] = series_of(record)
    view["version"] = version_label(record)
    view["mean_half95"] = half_width95(record.get("mean_std_error"))
    view["quantile_half95"] = {level: half_width95(error) for level, error
                               in (record.get("quantile_std_errors") or {}).items()}
    found = resolution(record)
    view["warning"] = (warning_text(record, found)
                       if found is not None and found.under_resolved else None)
    view["integrity_flag"] = flag_text(record)
    return view


def _with_jumps(records: list[dict], every: list[dict]) -> list[dict]:
    """`records` with the jump test of their integrity sections, computed over `every` record of
    the metric (which holds them): the jump test needs the earlier windows too."""
    if not any(r.get("integrity") is not None for r in records):
        return records
    tested = {id(original): new for original, new in zip(every, with_jump_tests(every),
                                                           strict=True)}
    return [tested.get(id(r), r) for r in records]


def _bands(record: dict) -> tuple[list, list]:
    """The 95% band of each value of a record: (lower bounds, upper bounds)."""
    errors = record.get("std_error") or [None] * len(record["estimate"])
    bands = [band95(value, error) for value, error in zip(record["estimate"], errors,
                                                          strict=False)]
    return [low for low, _ in bands], [high for _, high in bands]


class StoreSource:
    """Windows from an estimate store (`ldp_telemetry.store.open_store(url)`)."""

    def __init__(self, url: str):
        from ldp_telemetry.store import open_store
        self.description = url
        self._store = open_store(url, create=False)  # a misspelt URL is an error
        self._lock = threading.Lock()  # one connection, shared by the server's threads

    def metrics(self) -> list[str]:
        with self._lock:
            return self._store.metrics()

    def windows(self, metric: str, since: int = 0) -> tuple[int, list[dict]]:
        """(cursor, the latest pane of each window of `metric` changed after `since`)."""
        with self._lock:
            cursor = self._store.latest_seq()
            records = self._store.windows(metric, since)[-MAX_WINDOWS_PER_PAGE:]
            rejects = self._store.rejects(metric, [window_key(r)[1:3] for r in records])
            if since and any(r.get("integrity") is not None for r in records):
                every = self._store.windows(metric, 0)
                changed = {window_key(r) for r in records}
                records = [r for r in _with_jumps(every, every) if window_key(r) in changed]
            else:
                records = _with_jumps(records, records)
        views = []
        for record in records:
            late = record.pop("late_reports")
            seq = record.pop("pane_seq")
            lower, upper = record.pop("lower95"), record.pop("upper95")
            views.append(_view(record, late, rejects.get(window_key(record)[1:3], {}), seq,
                               lower, upper))
        return cursor, views

    def window(self, metric: str, start_ms: int, end_ms: int, version: str = "") -> dict | None:
        """The latest pane of one window of `metric` from configuration `version`
        (`output.layout.version_label`), or None."""
        _, views = self.windows(metric)
        return next((v for v in views if window_key(v)[1:] == (start_ms, end_ms, version)),
                    None)

    def unattributed_rejects(self) -> dict[tuple[str, str], int]:
        with self._lock:
            return self._store.unattributed_rejects()

    def close(self) -> None:
        """Close the connection once no server thread is using it (closing an SQLite connection
        while another thread runs a query on it crashes the interpreter)."""
        with self._lock:
            self._store.close()


class FolderSource:
    """Windows from a job's output folder, followed while a job writes it (what it reads:
    `ldp_telemetry.output.tail`). A live run's too-late counts per window are shown as the
    reject reason `too_late`. The cursor counts the changes seen.
    """

    def __init__(self, output_dir: str):
        if not os.path.isdir(output_dir):
            raise InputError(f"output folder {output_dir!r} does not exist", "output")
        self.description = output_dir
        self._tail = OutputTail(output_dir)
        self._lock = threading.Lock()
        self._seq = 0
        self._latest: dict[WindowKey, dict] = {}  # window -> latest record
        self._changed: dict[WindowKey, int] = {}  # window -> seq of its last change
        self._n_on_time: dict[WindowKey, int] = {}
        self._too_late: dict[WindowKey, int] = {}
        # metric -> {(reason, event time ms or None): records}
        self._dead: dict[str, dict[tuple[str, int | None], int]] = {}
        self._windows_of: dict[str, set[WindowKey]] = {}  # metric -> its windows
        self.refresh()
        if not self._tail.found:
            raise InputError(f"no {shard_pattern(ESTIMATES)}, {shard_pattern(DEAD_LETTERS)} or "
                             f"{PANE_LOG} in {output_dir!r}", "output")

    def refresh(self) -> None:
        """Read what was appended to the output files since the last refresh."""
        with self._lock:
            appended = self._tail.read()
            for record in appended.estimates:
                self._add_estimate(record)
            for letter in appended.dead_letters:
                self._add_dead_letter(letter)
            for key, count in appended.too_late:
                self._add_too_late(key, count)

    def metrics(self) -> list[str]:
        self.refresh()
        with self._lock:
            return sorted({key.metric for key in self._latest})

    def windows(self, metric: str, since: int = 0) -> tuple[int, list[dict]]:
        self.refresh()
        with self._lock:
            keys = sorted((key for key in self._latest
                           if key.metric == metric and self._changed[key] > since),
                          key=lambda key: key[1:])[-MAX_WINDOWS_PER_PAGE:]
            every = [record for key, record in self._latest.items() if key.metric == metric]
            tested = {window_key(r): r for r in _with_jumps(every, every)}
            views = []
            for key in keys:
                n_on_time = self._n_on_time.get(key)
                record = tested[key]
                late = None if n_on_time is None else int(record["n"]) - n_on_time
                views.append(_view(record, late, self._rejects_in(key), self._changed[key],
                                   *_bands(record)))
            return self._seq, views

    def window(self, metric: str, start_ms: int, end_ms: int, version: str = "") -> dict | None:
        """The latest pane of one window of `metric` from configuration `version`
        (`output.layout.version_label`), or None."""
        _, views = self.windows(metric)
        return next((v for v in views if window_key(v)[1:] == (start_ms, end_ms, version)),
                    None)

    def unattributed_rejects(self) -> dict[tuple[str, str], int]:
        self.refresh()
        with self._lock:
            totals: dict[tuple[str, str], int] = {}
            for metric, letters in self._dead.items():
                windows = self._windows_of.get(metric, ())
                for (reason, moment), count in letters.items():
                    inside = moment is not None and any(
                        key.start_ms <= moment < key.end_ms for key in windows)
                    if not inside:
                        totals[(metric, reason)] = totals.get((metric, reason), 0) + count
            return totals

    def close(self) -> None:
        pass

    # -- internals ----------------------------------------------------------------------------
    def _add_too_late(self, key: WindowKey, count: int) -> None:
        """Too-late counts are per window, whatever the version of its estimates."""
        self._too_late[key.window] = count  # cumulative: the last line is the count
        self._seq += 1
        for estimate in self._windows_of.get(key.metric, ()):
            if estimate.window == key.window:
                self._changed[estimate] = self._seq

    def _add_estimate(self, record: dict) -> None:
        key = window_key(record)
        pane = pane_of(record)
        if pane["timing"] == "ON_TIME":
            self._n_on_time.setdefault(key, int(record["n"]))
        current = self._latest.get(key)
        self._windows_of.setdefault(key.metric, set()).add(key)
        if current is None or pane_of(current)["index"] < pane["index"]:
            self._latest[key] = record
        self._seq += 1
        self._changed[key] = self._seq

    def _add_dead_letter(self, letter: dict) -> None:
        records = letter.get("records", 1)
        if not is_int(records):
            return  # not a dead letter: the page shows what it can read
        metric, moment = dead_letter_origin(letter)
        reason = str(letter.get("reason", ""))
        if reason in UNATTRIBUTED_REASONS:
            moment = None
        letters = self._dead.setdefault(metric, {})
        letters[(reason, moment)] = letters.get((reason, moment), 0) + records
        self._seq += 1
        if moment is not None:
            for key in self._windows_of.get(metric, ()):
                if key.start_ms <= moment < key.end_ms:
                    self._changed[key] = self._seq

    def _rejects_in(self, key: WindowKey) -> dict[str, int]:
        rejects: dict[str, int] = {}
        for (reason, moment), count in self._dead.get(key.metric, {}).items():
            if moment is not None and key.start_ms <= moment < key.end_ms:
                rejects[reason] = rejects.get(reason, 0) + count
        if self._too_late.get(key.window):
            rejects[Reason.TOO_LATE.value] = (rejects.get(Reason.TOO_LATE.value, 0)
                                              + self._too_late[key.window])
        return rejects


def open_source(store: str | None = None, output: str | None = None):
    """A StoreSource for a store URL or a FolderSource for an output folder (exactly one)."""
    if (store is None) == (output is None):
        raise ConfigError("give exactly one of a store URL or an output folder", "store")
    return StoreSource(store) if store is not None else FolderSource(output)
