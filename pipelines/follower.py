"""Follow a directory of report files: the local live source and its watermark policy.

The collector's contract (atomic rename): a report file is written under a name the follower
ignores — ending in `.tmp` (e.g. `batch-0042.avro.tmp`) or starting with `.` — and renamed to
its final `*.avro` name once complete (`os.rename` / `mv` within one file system is atomic). A
file is read once, when its final name first appears; files are never modified after the rename
and stay in the directory while their windows may still change (they are the durable log a
restart recomputes open windows from).

Each poll, `DirectoryFollower`
1. lists the new complete files (oldest modification first, then by name) and decodes each with
   the batch job's decoder (`ReportDecoder`, which reads per-report files and report envelope
   files alike): report batches per (metric, slice), dead letters;
2. decides lateness against the watermark it has announced: a batch whose slice ended more than
   `--allowed-lateness` before that watermark (watermark > slice end + lateness, Beam's rule)
   is TOO LATE — counted per (metric, window) for every window holding the slice, never sent;
   the others are sent as elements, so Beam never drops one silently;
3. writes its checkpoint (`ldp_telemetry.pipelines.checkpoint`: consumed files with the
   watermark each was decided at, counters, per-window accepted and too-late counts)
   atomically, then hands the elements to the stream (`ldp_telemetry.pipelines.event_stream`);
4. moves the watermark (policy below) and advances processing time by the wall time elapsed.

Watermark policy (event time, announced to Beam, never moves back):
* after each poll: the largest slice start seen minus `--max-out-of-order` (the largest event
  time seen, rounded down to its slice, minus the lag): a window's ON_TIME pane fires once
  reports that far past its end have arrived;
* on idle: when no new file has arrived for `--idle-advance` seconds, the end of the latest
  slice seen (everything seen so far is taken as complete);
* at the end (`--until`, `--stop-when-idle`, SIGINT/SIGTERM): the stream ends and Beam moves the
  watermark to +infinity, which fires the ON_TIME pane of every window still open. The
  checkpoint keeps the last real watermark, so a restart re-opens those windows.

Restart (the files are the log; the checkpoint says which were consumed): a run that finds a
checkpoint re-decodes the consumed files and replays, before announcing the checkpoint's
watermark, every batch it had accepted whose window is not complete on disk — complete meaning
expired at the checkpoint's watermark with a latest pane on disk counting all of the window's
accepted reports. Batches it had found too late stay too late (each file's decision watermark is
in the checkpoint). New files are then read as usual. So every pane written after a restart
counts each accepted report of its window exactly once, whatever moment the previous run was
killed at (a file consumed but not yet in a pane is replayed; a file not yet checkpointed is
new). Pane indices continue from the panes on disk.
"""
from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass

from ldp_telemetry.ldp.errors import ConfigError
from ldp_telemetry.ldp.registry import Registry
from ldp_telemetry.ldp.windows import WindowSpec
from ldp_telemetry.output.atomic import write_atomically
from ldp_telemetry.output.layout import (COMBINED, DEAD_LETTER_DIR, TOO_LATE_LOG, WindowKey,
                                         window_key)
from ldp_telemetry.ldp.times import iso_from_ms
from ldp_telemetry.pipelines.checkpoint import (FollowState, WindowCounts, read_checkpoint,
                                                write_checkpoint)
from ldp_telemetry.output.reader import latest_panes
from ldp_telemetry.schemas.batches import DeadLetter, ReportBatch
from ldp_telemetry.schemas.codec import ReportDecoder
from ldp_telemetry.schemas.limits import DecodeLimits
from ldp_telemetry.transforms.dead_letters import DeadLetterCap

LOG = logging.getLogger("ldp.follow")
REPORT_SUFFIX = ".avro"


def is_complete_report_file(name: str) -> bool:
    """True for a final report-file name (`*.avro`, not hidden, not a `.tmp`)."""
    return name.endswith(REPORT_SUFFIX) and not name.startswith(".")


@dataclass(frozen=True)
class WatermarkPolicy:
    """See the module docstring. `idle_advance_s` None: the watermark never moves on idle."""

    max_out_of_order_ms: int = 0
    idle_advance_s: float | None = 10.0

    def __post_init__(self):
        if self.max_out_of_order_ms < 0:
            raise ConfigError(f"max_out_of_order must be >= 0 seconds, "
                              f"got {self.max_out_of_order_ms / 1000}", field="max_out_of_order")
        if self.idle_advance_s is not None and self.idle_advance_s <= 0:
            raise ConfigError(f"idle_advance must be positive, got {self.idle_advance_s}",
                              field="idle_advance")


@dataclass(frozen=True)
class Replay:
    """What a restart must replay: batches, and the windows whose panes must not be rewritten."""

    batches: list
    complete_windows: frozenset


class DirectoryFollower:
    """Turns a directory of arriving report files into stream events (see the module docstring).

    `output_dir` holds the checkpoint, `too_late.jsonl` and `dead_letters/`. `stream` receives
    the events: an `ldp_telemetry.pipelines.event_stream.EventStream` (or anything with its
    `add_batches`, `add_dead_letters`, `advance_watermark` and `tick`). ConfigError (field
    `follow`) when `directory` is not a directory that can be listed.
    """

    def __init__(self, registry: Registry, windows: WindowSpec, directory: str, output_dir: str,
                 stream, policy: WatermarkPolicy = WatermarkPolicy(),
                 clock=time.monotonic, limits: DecodeLimits = DecodeLimits()):
        if not os.path.isdir(directory):
            raise ConfigError(f"follow {directory!r} is not a directory", field="follow")
        try:
            os.scandir(directory).close()
        except OSError as error:
            raise ConfigError(f"follow {directory!r} cannot be listed: "
                              f"{error.strerror or error}", field="follow") from None
        self._registry = registry
        self._windows = windows
        self._directory = directory
        self._output = output_dir
        self._stream = stream
        self._policy = policy
        self._clock = clock
        self._decoder = ReportDecoder(registry, windows.slice_ms,
                                      slice_offset_ms=windows.slice_offset_ms, limits=limits)
        os.makedirs(output_dir, exist_ok=True)
        checkpointed = read_checkpoint(output_dir)
        self.restarted = checkpointed is not None
        self.state = checkpointed if checkpointed is not None else FollowState()
        self._last_arrival = clock()

    # Restart -------------------------------------------------------------------------------

    def replay_after_restart(self) -> Replay:
        """The accepted batches of windows not complete on disk, re-decoded from the consumed
        files; and the complete windows those batches also touch (their panes are suppressed)."""
        if not self.restarted:
            return Replay([], frozenset())
        watermark = self.state.watermark_ms
        on_disk: dict[WindowKey, int] = {}  # reports in each window's latest panes, all versions
        for entry in latest_panes(self._output).values():
            key = window_key(entry)
            if key.version != COMBINED:
                on_disk[key.window] = on_disk.get(key.window, 0) + entry["n"]
        complete = {key for key, counts in self.state.windows.items()
                    if watermark is not None
                    and watermark > counts.end_ms + self._windows.allowed_lateness_ms
                    and on_disk.get(key) == counts.accepted}
        batches, touched = [], set()
        for name, decided_at in self.state.files.items():
            path = os.path.join(self._directory, name)
            if not os.path.exists(path):
                LOG.warning("consumed file %s is gone: its reports are missing from the windows "
                            "recomputed after this restart", path)
                continue
            for item in self._decoder.decode_file(path):
                if isinstance(item, DeadLetter) or self._is_too_late(item, decided_at):
                    continue
                keys = [key for key, _ in self._windows_of(item)]
                if all(key in complete for key in keys):
                    continue
                batches.append(item)
                touched.update(key for key in keys if key in complete)
        return Replay(batches, frozenset(touched))

    # Polling -------------------------------------------------------------------------------

    def new_files(self) -> list[str]:
        """Complete report files not consumed yet: oldest modification first, then by name."""
        found = []
        with os.scandir(self._directory) as entries:
            for entry in entries:
                if (is_complete_report_file(entry.name) and entry.name not in self.state.files
                        and entry.is_file()):
                    found.append((entry.stat().st_mtime_ns, entry.name))
        return [name for _, name in sorted(found)]

    def poll(self) -> int:
        """One step: read each new file (checkpoint, then hand its elements to the stream),
        then move the watermark and processing time. Returns the number of files read."""
        names = self.new_files()
        for name in names:
            self._read_file(name)
            self._stream.tick()
        now = self._clock()
        if names:
            self._last_arrival = now
        self._advance_watermark(now)
        self._stream.tick()
        return len(names)

    def _read_file(self, name: str) -> None:
        state = self.state
        accepted, letters, late_windows = [], [], {}
        before = self._decoder.records_read
        # The file's dead letters, capped as a batch run's (counts exact, memory bounded).
        cap = DeadLetterCap(self._decoder.slice_ms, self._decoder.slice_offset_ms)
        for item in self._decoder.decode_file(os.path.join(self._directory, name)):
            if isinstance(item, DeadLetter):
                letters.extend(cap.admit(item))
                state.dead_letters[item.reason] = (state.dead_letters.get(item.reason, 0)
                                                   + item.records)
                continue
            state.records_accepted += item.n
            state.max_slice_start_ms = max(item.slice_start_ms,
                                           state.max_slice_start_ms or item.slice_start_ms)
            late = self._is_too_late(item, state.watermark_ms)
            if late:
                state.too_late += item.n
            else:
                accepted.append(item)
            for key, counts in self._windows_of(item):
                if late:
                    counts.too_late += item.n
                    late_windows[key] = counts
                else:
                    counts.accepted += item.n
        letters.extend(cap.finish_file())
        state.records_read += self._decoder.records_read - before
        state.files[name] = state.watermark_ms
        if letters:
            self._write_dead_letters(name, letters)
        write_checkpoint(self._output, state)
        self._stream.add_batches(accepted)
        self._stream.add_dead_letters(letters, state.watermark_ms or 0)
        self._log_too_late(late_windows.values())

    def idle_for(self) -> float:
        """Seconds since the last new file (or since the start)."""
        return self._clock() - self._last_arrival

    def _advance_watermark(self, now: float) -> None:
        state = self.state
        if state.max_slice_start_ms is None:
            return
        target = state.max_slice_start_ms - self._policy.max_out_of_order_ms
        if (self._policy.idle_advance_s is not None
                and now - self._last_arrival >= self._policy.idle_advance_s):
            target = state.max_slice_start_ms + self._windows.slice_ms
        if state.watermark_ms is None or target > state.watermark_ms:
            state.watermark_ms = target
            write_checkpoint(self._output, state)
            self._stream.advance_watermark(target)

    def announce_restart_watermark(self) -> None:
        """After a restart's replay: announce the checkpoint's watermark again."""
        if self.state.watermark_ms is not None:
            self._stream.advance_watermark(self.state.watermark_ms)

    # Helpers -------------------------------------------------------------------------------

    def _is_too_late(self, batch: ReportBatch, watermark_ms: int | None) -> bool:
        """Beam's rule for the batch's slice: watermark > slice end + allowed lateness."""
        if watermark_ms is None:
            return False
        slice_end = batch.slice_start_ms + self._windows.slice_ms
        return watermark_ms > slice_end + self._windows.allowed_lateness_ms

    def _windows_of(self, batch: ReportBatch):
        """(key, WindowCounts) of every window holding the batch's slice (created as needed)."""
        size = self._windows.size_ms
        for start_ms in self._windows.window_starts(batch.slice_start_ms):
            key = WindowKey(batch.metric, start_ms, start_ms + size)
            counts = self.state.windows.get(key)
            if counts is None:
                counts = self.state.windows[key] = WindowCounts(
                    batch.metric, iso_from_ms(start_ms), iso_from_ms(key.end_ms), key.end_ms)
            yield key, counts

    def _write_dead_letters(self, name: str, letters: list[DeadLetter]) -> None:
        write_atomically(os.path.join(self._output, DEAD_LETTER_DIR, f"{name}.jsonl"),
                         "".join(json.dumps(letter.as_dict(), sort_keys=True) + "\n"
                                 for letter in letters))

    def _log_too_late(self, windows) -> None:
        """Append the cumulative too-late count of each window that just got some."""
        if not windows:
            return
        with open(os.path.join(self._output, TOO_LATE_LOG), "a", encoding="utf-8") as log:
            for counts in windows:
                log.write(json.dumps({
                    "metric": counts.metric, "window_start": counts.window_start,
                    "window_end": counts.window_end, "too_late": counts.too_late,
                    "accepted": counts.accepted, "watermark": iso_from_ms(
                        self.state.watermark_ms)},
                    sort_keys=True) + "\n")

    def too_late_by_window(self) -> list[WindowCounts]:
        return [w for w in self.state.windows.values() if w.too_late]
