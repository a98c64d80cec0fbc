"""Follow a directory of report files: the local live source and its watermark policy.

The collector's contract (atomic rename): a report file is written under a name the follower
ignores — ending in `.tmp` (e.g. `batch-0042.avro.tmp`) or starting with `.` — and renamed to
its final `*.avro` name once complete (`os.rename` / `mv` within one file system is atomic). A
file is read once, when its final name first appears; files are never modified after the rename
and stay in the directory while their windows may still change (they are the durable log a
restart recomputes open windows from). A collector may deliver a file more than once, under
another name (at-least-once delivery): its reports are duplicates and are counted once.

Each poll, `DirectoryFollower`
1. lists the directory once: the new complete files (oldest modification first, then by name; a
   file gone between the listing and its stat is skipped with a log line), at most
   `max_files_per_poll` of them, and the consumed files whose size, modification time or inode
   changed since they were read (a `file_changed` dead letter each, see below);
2. decodes each new file with the batch job's decoder (`ReportDecoder`): report batches per
   (metric, slice), dead letters;
3. decides lateness against the watermark it has announced: a batch whose slice ended more than
   `--allowed-lateness` before that watermark (watermark > slice end + lateness, Beam's rule)
   is TOO LATE — counted per (metric, window) for every window holding the slice, and per slice
   in the store's rejects, never sent; Beam never drops one silently;
4. deduplicates the other batches as the batch job does (`pipelines.slice_ids`): each report id
   is counted once per (metric, slice), across files, configuration versions and restarts; the
   other rows are `duplicate` dead letters (one per file and slice, `transforms.count.
   duplicate_letter`);
5. writes each file's dead letters (OUT/dead_letters/<file>.jsonl, whole) and the too-late
   log's lines (cumulative counts: a line written again says the same), then its checkpoint
   (`ldp_telemetry.pipelines.checkpoint`) once for the poll, then the store's reject totals
   (upserts of totals, never increments: `rejects`), then hands the poll's batches to the stream
   (`ldp_telemetry.pipelines.event_stream`) together;
6. moves the watermark (policy below), drops the report ids of the slices it closes, and
   advances processing time by the wall time elapsed.

Watermark policy (event time, announced to Beam, never moves back):
* after each poll: the largest slice start seen minus `--max-out-of-order` (the largest event
  time seen, rounded down to its slice, minus the lag): a window's ON_TIME pane fires once
  reports that far past its end have arrived;
* on idle: when no new file has arrived for `--idle-advance` seconds, the end of the latest
  slice seen (everything seen so far is taken as complete);
* at the end (`--until`, `--stop-when-idle`, SIGINT/SIGTERM): the stream ends and Beam moves the
  watermark to +infinity, which fires the ON_TIME pane of every window still open. The
  checkpoint keeps the last real watermark, so a restart re-opens those windows.

A collector that breaks the contract. A consumed file whose size, modification time or inode
changes (it grew, was rewritten, or its name was reused for other content) is not read again:
its new content becomes one `file_changed` dead letter (its records counted as read and
dead-lettered), once per change. What was counted from the original content stays counted while
the run goes on; if the run restarts, that content cannot be replayed, so the reports it gave to
windows not yet complete on disk are taken out of them and dead-lettered as `file_changed` too
(a consumed file gone at a restart likewise). A window is never recounted from other content.

Restart (the files are the log; the checkpoint says which were consumed): a run that finds a
checkpoint re-decodes, in the order they were consumed, the files that gave reports to a slice
with a window not complete on disk — complete meaning expired at the checkpoint's watermark with
a latest pane on disk counting all of the window's accepted reports — rebuilding the report ids
of those slices (so the same rows are kept as before) and replaying, before announcing the
checkpoint's watermark, every batch it had accepted whose window is not complete. Files whose
slices are all complete are not read again. Batches it had found too late stay too late (each
file's decision watermark is in the checkpoint). New files are then read as usual. So every pane
written after a restart counts each accepted report of its window exactly once, whatever moment
the previous run was killed at (a file consumed but not yet in a pane is replayed; a file not yet
checkpointed is new). Pane indices continue from the panes on disk; the store's reject totals
are written again whole.
"""
from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass

from ldp_telemetry.client.durable import sync_folder
from ldp_telemetry.ldp.base.errors import ConfigError
from ldp_telemetry.ldp.base.times import iso_from_ms
from ldp_telemetry.ldp.base.validation import seconds_problem
from ldp_telemetry.ldp.config.registry import Registry
from ldp_telemetry.ldp.config.windows import WindowSpec
from ldp_telemetry.ldp.engine.batches import DeadLetter, ReportBatch
from ldp_telemetry.ldp.engine.counting import (DUPLICATE_EXAMPLES, SupportStatistic,
                                               duplicate_letter)
from ldp_telemetry.ldp.engine.reasons import Reason
from ldp_telemetry.output.atomic import write_atomically
from ldp_telemetry.output.coverage import RunInputs
from ldp_telemetry.output.layout import (COMBINED, DEAD_LETTER_DIR, TOO_LATE_LOG, WindowKey,
                                         window_key)
from ldp_telemetry.output.reader import latest_panes
from ldp_telemetry.pipelines.checkpoint import (FileRecord, FollowState, WindowCounts,
                                                read_checkpoint, sweep_temporary_files,
                                                write_checkpoint)
from ldp_telemetry.pipelines.slice_ids import SliceIds, merge_batches, select_rows
from ldp_telemetry.schemas.codec import ReportDecoder
from ldp_telemetry.schemas.limits import DecodeLimits
from ldp_telemetry.store.records import reject_slice
from ldp_telemetry.transforms.dead_letters import DeadLetterCap

LOG = logging.getLogger("ldp.follow")
REPORT_SUFFIX = ".avro"
#: Most new files one poll reads (the others wait for the next poll): bounds the reports a poll
#: holds before it hands them to Beam.
MAX_FILES_PER_POLL = 1000


def is_complete_report_file(name: str) -> bool:
    """True for a final report-file name (`*.avro`, not hidden, not a `.tmp`)."""
    return name.endswith(REPORT_SUFFIX) and not name.startswith(".")


def file_identity(stat: os.stat_result) -> list[int]:
    """What identifies a file's content for the follower: [size, mtime ns, inode]."""
    return [stat.st_size, stat.st_mtime_ns, stat.st_ino]


@dataclass(frozen=True)
class WatermarkPolicy:
    """See the module docstring. `idle_advance_s` None: the watermark never moves on idle."""

    max_out_of_order_ms: int = 0
    idle_advance_s: float | None = 10.0

    def __post_init__(self):
        if self.max_out_of_order_ms < 0:
            raise ConfigError(f"max_out_of_order must be >= 0 seconds, "
                              f"got {self.max_out_of_order_ms / 1000}", field="max_out_of_order")
        problem = None if self.idle_advance_s is None else seconds_problem(self.idle_advance_s)
        if problem:
            raise ConfigError(f"idle_advance {problem}", field="idle_advance")


@dataclass(frozen=True)
class Replay:
    """What a restart must replay: batches, and the windows whose panes must not be rewritten."""

    batches: list
    complete_windows: frozenset


class DirectoryFollower:
    """Turns a directory of arriving report files into stream events (see the module docstring).

    `output_dir` holds the checkpoint, `too_late.jsonl` and `dead_letters/`. `stream` receives
    the events: an `ldp_telemetry.pipelines.event_stream.EventStream` (or anything with its
    `add_batches`, `add_dead_letters`, `advance_watermark` and `tick`). `rejects`, when given,
    is called with {(metric, reason, slice start ms, slice end ms): total records} after each
    checkpoint that changed them (and with all of them after a restart): the store's
    `write_rejects`, which sets totals. ConfigError (field `follow`) when `directory` is not a
    directory that can be listed; InputError (field `output`) for a checkpoint that cannot be
    used.
    """

    def __init__(self, registry: Registry, windows: WindowSpec, directory: str, output_dir: str,
                 stream, policy: WatermarkPolicy = WatermarkPolicy(),
                 clock=time.monotonic, limits: DecodeLimits = DecodeLimits(), rejects=None,
                 max_files_per_poll: int = MAX_FILES_PER_POLL):
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
        self._rejects = rejects
        self._max_files = max_files_per_poll
        self._decoder = ReportDecoder(registry, windows.slice_ms,
                                      slice_offset_ms=windows.slice_offset_ms, limits=limits)
        self._ids = SliceIds()
        self._dirty: set = set()  # reject keys changed since the store was last given them
        self._unsynced = False  # dead-letter files renamed since their folder was last synced
        os.makedirs(output_dir, exist_ok=True)
        checkpointed = read_checkpoint(output_dir)
        for path in sweep_temporary_files(output_dir):
            LOG.info("removed %s, a temporary file a killed run left", path)
        self.restarted = checkpointed is not None
        self.state = checkpointed if checkpointed is not None else FollowState()
        self._last_arrival = clock()

    # Restart -------------------------------------------------------------------------------

    def replay_after_restart(self) -> Replay:
        """The accepted batches of windows not complete on disk, re-decoded from the consumed
        files (their report ids rebuilt, so the same rows are kept), and the complete windows
        those batches also touch (their panes are suppressed). Consumed content that changed or
        is gone is taken out of those windows as `file_changed` (module docstring). Gives the
        store every reject total."""
        if not self.restarted:
            return Replay([], frozenset())
        state = self.state
        watermark = state.watermark_ms
        on_disk: dict[WindowKey, int] = {}  # reports in each window's latest panes, all versions
        for entry in latest_panes(self._output).values():
            key = window_key(entry)
            if key.version != COMBINED:
                on_disk[key.window] = on_disk.get(key.window, 0) + entry["n"]
        complete = {key for key, counts in state.windows.items()
                    if watermark is not None
                    and watermark > counts.end_ms + self._windows.allowed_lateness_ms
                    and on_disk.get(key) == counts.accepted}

        def needed(metric: str, slice_start_ms: int) -> bool:
            return any(key not in complete for key in self._window_keys(metric, slice_start_ms))

        batches, touched, changed = [], set(), False
        for name, record in state.files.items():
            wanted = {(m, s) for m, s, _ in record.slices if needed(m, s)}
            if not wanted:
                continue  # nothing of it is open or missing on disk: not read again
            path = os.path.join(self._directory, name)
            if self._identity(path) != record.identity:
                self._take_out(name, record, wanted, complete)
                changed = True
                continue
            for item in self._decoder.decode_file(path):
                if (isinstance(item, DeadLetter) or self._is_too_late(item, record.decided_at)
                        or (item.metric, item.slice_start_ms) not in wanted):
                    continue
                keep = self._ids.keep(item)
                if keep is not None and not keep.all():
                    item = select_rows(item, keep)
                if not item.n:
                    continue
                keys = list(self._window_keys(item.metric, item.slice_start_ms))
                batches.append(item)
                touched.update(key for key in keys if key in complete)
        if watermark is not None:
            self._ids.drop(lambda start_ms: self._slice_closed(start_ms, watermark))
        if changed:
            self._checkpoint()
        self._dirty = set(state.rejects)
        self._give_rejects()
        return Replay(batches, frozenset(touched))

    def _take_out(self, name: str, record: FileRecord, wanted: set, complete: set) -> None:
        """A consumed file changed or gone at a restart: the reports it gave to slices of
        windows not complete on disk cannot be replayed; take them out of those windows and
        dead-letter them (`file_changed`)."""
        lost = 0
        for metric, start_ms, n in record.slices:
            if (metric, start_ms) not in wanted:
                continue
            lost += n
            for key, counts in self._windows_of(metric, start_ms):
                if key not in complete:
                    counts.accepted -= n
        record.slices = [s for s in record.slices if (s[0], s[1]) not in wanted]
        state = self.state
        gone = not os.path.exists(os.path.join(self._directory, name))
        what = "is gone" if gone else "changed after it was read"
        LOG.warning("consumed file %s %s: %d report(s) it gave to windows still open cannot be "
                    "replayed and are dead-lettered as file_changed", name, what, lost)
        if not lost:
            return
        state.records_accepted -= lost
        letter = DeadLetter(os.path.join(self._directory, name), Reason.FILE_CHANGED,
                            f"the file {what} while the run was stopped: the {lost} report(s) "
                            f"it gave to windows not complete on disk cannot be read again and "
                            f"are taken out of those windows", records=lost)
        self._count_letters([letter])
        self._write_letters(f"{name}.lost-{'-'.join(map(str, record.identity))}", [letter])

    # Polling -------------------------------------------------------------------------------

    def new_files(self) -> list[str]:
        """Complete report files not consumed yet: oldest modification first, then by name."""
        return self._scan()[0]

    def _scan(self) -> tuple[list[str], list[tuple[str, list[int]]]]:
        """(new complete files, oldest first; consumed files whose identity changed since they
        were read and since their change was last dead-lettered, with their identity)."""
        found, changed = [], []
        files = self.state.files
        with os.scandir(self._directory) as entries:
            for entry in entries:
                if not is_complete_report_file(entry.name):
                    continue
                try:
                    if not entry.is_file():
                        continue
                    stat = entry.stat()
                except FileNotFoundError:
                    LOG.info("%s was removed before it was read: skipped", entry.path)
                    continue
                record = files.get(entry.name)
                if record is None:
                    found.append((stat.st_mtime_ns, entry.name))
                    continue
                identity = file_identity(stat)
                if identity != record.identity and identity != record.changed:
                    changed.append((entry.name, identity))
        return [name for _, name in sorted(found)], changed

    def poll(self) -> int:
        """One step: read the new files (at most `max_files_per_poll`) and dead-letter the
        consumed files that changed; checkpoint once, give the store its reject totals, hand the
        batches to the stream; then move the watermark and processing time. Returns the number
        of files read."""
        names, changed = self._scan()
        names = names[:self._max_files]
        accepted, letters, late_windows = [], [], {}
        for name, identity in changed:
            letters.extend(self._file_changed(name, identity))
        read = 0
        for name in names:
            got = self._read_file(name, accepted, late_windows)
            if got is None:
                continue
            letters.extend(got)
            read += 1
        now = self._clock()
        if read:
            self._last_arrival = now
        watermark = self._next_watermark(now)
        if read or changed or watermark is not None:
            decided_at = self.state.watermark_ms
            if watermark is not None:
                self.state.watermark_ms = watermark
            # before the checkpoint: a replay after a kill appends the same cumulative counts
            self._log_too_late(late_windows.values(), decided_at)
            self._checkpoint()
            self._give_rejects()
            self._stream.add_batches(merge_batches(accepted))
            self._stream.add_dead_letters(letters, decided_at or 0)
            self._stream.tick()
            if watermark is not None:
                self._stream.advance_watermark(watermark)
                self._ids.drop(lambda start_ms: self._slice_closed(start_ms, watermark))
        self._stream.tick()
        return read

    def _read_file(self, name: str, accepted: list, late_windows: dict
                   ) -> list[DeadLetter] | None:
        """Decode one new file: its accepted (deduplicated) batches into `accepted`, its
        too-late windows into `late_windows`; writes its dead letters and records it in the
        state. Returns its dead letters, or None when the file is gone."""
        state = self.state
        path = os.path.join(self._directory, name)
        try:
            stat = os.stat(path)
        except FileNotFoundError:
            LOG.info("%s was removed before it was read: skipped", path)
            return None
        letters, slices, duplicates = [], {}, {}
        before = self._decoder.records_read
        # The file's dead letters, capped as a batch run's (counts exact, memory bounded).
        cap = DeadLetterCap(self._decoder.slice_ms, self._decoder.slice_offset_ms)
        for item in self._decoder.decode_file(path):
            if isinstance(item, DeadLetter):
                letters.extend(cap.admit(item))
                continue
            state.records_accepted += item.n
            state.max_slice_start_ms = max(item.slice_start_ms,
                                           state.max_slice_start_ms or item.slice_start_ms)
            if self._is_too_late(item, state.watermark_ms):
                state.too_late += item.n
                for key, counts in self._windows_of(item.metric, item.slice_start_ms):
                    counts.too_late += item.n
                    late_windows[key] = counts
                self._add_reject((item.metric, Reason.TOO_LATE.value, item.slice_start_ms,
                                  item.slice_start_ms + self._windows.slice_ms), item.n)
                continue
            keep = self._ids.keep(item)
            if keep is not None and not keep.all():
                where = (item.metric, item.slice_start_ms)
                count, examples = duplicates.get(where, (0, ()))
                repeated = item.columns["report_id"][~keep]
                examples += tuple(int(i) for i in repeated[:DUPLICATE_EXAMPLES])
                duplicates[where] = (count + len(repeated), examples)
                item = select_rows(item, keep)
            if not item.n:
                continue
            where = (item.metric, item.slice_start_ms)
            slices[where] = slices.get(where, 0) + item.n
            for _, counts in self._windows_of(item.metric, item.slice_start_ms):
                counts.accepted += item.n
            accepted.append(item)
        letters.extend(cap.finish_file())
        for metric, (first, last) in self._decoder.event_ranges.items():
            known = state.event_ranges.get(metric)
            state.event_ranges[metric] = ((first, last) if known is None else
                                          (min(first, known[0]), max(last, known[1])))
        for (metric, start_ms), (count, examples) in duplicates.items():
            letters.append(duplicate_letter(
                SupportStatistic(metric, None, count, examples[:DUPLICATE_EXAMPLES]), start_ms,
                self._windows.slice_ms))
        state.records_read += self._decoder.records_read - before
        state.files[name] = FileRecord(state.watermark_ms, *file_identity(stat),
                                       slices=[[m, s, n] for (m, s), n in slices.items()])
        self._count_letters(letters)
        if letters:
            self._write_letters(name, letters)
        else:  # a run killed before its checkpoint may have decided otherwise (a file gone since)
            self._remove_letters(name)
        return letters

    def _file_changed(self, name: str, identity: list[int]) -> list[DeadLetter]:
        """A consumed file whose content changed: its new content, decoded only to count its
        records, becomes one `file_changed` dead letter (counted as read and dead-lettered)."""
        path = os.path.join(self._directory, name)
        before = self._decoder.records_read
        try:
            for _ in self._decoder.decode_file(path):
                pass
        except FileNotFoundError:
            return []
        records = max(1, self._decoder.records_read - before)
        record = self.state.files[name]
        record.changed = identity
        self.state.records_read += records
        LOG.warning("consumed file %s changed after it was read (size, mtime, inode %s, now %s): "
                    "its new content is not counted (dead letter file_changed)", path,
                    record.identity, identity)
        letter = DeadLetter(path, Reason.FILE_CHANGED,
                            f"the file changed after it was read (size, mtime ns, inode "
                            f"{record.identity}, now {identity}): a report file must not change "
                            f"after its rename; its new content ({records} record(s)) is not "
                            f"counted, what was counted from it before stays", records=records)
        self._count_letters([letter])
        self._write_letters(f"{name}.changed-{'-'.join(map(str, identity))}", [letter])
        return [letter]

    def inputs(self) -> RunInputs:
        """What the run has read (`output.coverage`): its metrics' event-time ranges and its
        watermark."""
        return RunInputs(dict(self.state.event_ranges), self.state.watermark_ms)

    def idle_for(self) -> float:
        """Seconds since the last new file (or since the start)."""
        return self._clock() - self._last_arrival

    def _next_watermark(self, now: float) -> int | None:
        """The watermark to announce after this poll, or None when it does not move."""
        state = self.state
        if state.max_slice_start_ms is None:
            return None
        target = state.max_slice_start_ms - self._policy.max_out_of_order_ms
        if (self._policy.idle_advance_s is not None
                and now - self._last_arrival >= self._policy.idle_advance_s):
            target = state.max_slice_start_ms + self._windows.slice_ms
        if state.watermark_ms is None or target > state.watermark_ms:
            return target
        return None

    def announce_restart_watermark(self) -> None:
        """After a restart's replay: announce the checkpoint's watermark again."""
        if self.state.watermark_ms is not None:
            self._stream.advance_watermark(self.state.watermark_ms)

    # Helpers -------------------------------------------------------------------------------

    @property
    def ids_held(self) -> int:
        """Distinct report ids held for the open slices (8 bytes each)."""
        return self._ids.ids

    def _identity(self, path: str) -> list[int] | None:
        try:
            return file_identity(os.stat(path))
        except FileNotFoundError:
            return None

    def _slice_closed(self, slice_start_ms: int, watermark_ms: int) -> bool:
        """Beam's rule: the slice takes no more reports once watermark > end + lateness."""
        return (watermark_ms > slice_start_ms + self._windows.slice_ms
                + self._windows.allowed_lateness_ms)

    def _is_too_late(self, batch: ReportBatch, watermark_ms: int | None) -> bool:
        """Beam's rule for the batch's slice: watermark > slice end + allowed lateness."""
        return watermark_ms is not None and self._slice_closed(batch.slice_start_ms,
                                                               watermark_ms)

    def _window_keys(self, metric: str, slice_start_ms: int):
        size = self._windows.size_ms
        for start_ms in self._windows.window_starts(slice_start_ms):
            yield WindowKey(metric, start_ms, start_ms + size)

    def _windows_of(self, metric: str, slice_start_ms: int):
        """(key, WindowCounts) of every window holding the slice (created as needed)."""
        for key in self._window_keys(metric, slice_start_ms):
            counts = self.state.windows.get(key)
            if counts is None:
                counts = self.state.windows[key] = WindowCounts(
                    metric, iso_from_ms(key.start_ms), iso_from_ms(key.end_ms), key.end_ms)
            yield key, counts

    def _count_letters(self, letters: list[DeadLetter]) -> None:
        """Add dead letters to the counters and to the store's reject totals."""
        state = self.state
        for letter in letters:
            state.dead_letters[letter.reason] = (state.dead_letters.get(letter.reason, 0)
                                                 + letter.records)
            self._add_reject(reject_slice(letter.as_dict(), self._windows.slice_ms,
                                          self._windows.slice_offset_ms), letter.records)

    def _add_reject(self, key: tuple, records: int) -> None:
        key = (key[0], str(key[1]), int(key[2]), int(key[3]))
        self.state.rejects[key] = self.state.rejects.get(key, 0) + records
        self._dirty.add(key)

    def _give_rejects(self) -> None:
        """Hand the store the reject totals changed since it last had them (set, not added:
        writing a total twice changes nothing)."""
        if self._rejects is not None and self._dirty:
            self._rejects({key: self.state.rejects[key] for key in sorted(self._dirty)})
        self._dirty = set()

    def _write_letters(self, name: str, letters: list[DeadLetter]) -> None:
        """OUT/dead_letters/<name>.jsonl, written whole (a replay writes the same file again)."""
        write_atomically(os.path.join(self._output, DEAD_LETTER_DIR, f"{name}.jsonl"),
                         "".join(json.dumps(letter.as_dict(), sort_keys=True) + "\n"
                                 for letter in letters))
        self._unsynced = True

    def _remove_letters(self, name: str) -> None:
        """Remove OUT/dead_letters/<name>.jsonl, written for a file by a run killed before the
        checkpoint that would have counted it, when this reading of the file has none."""
        try:
            os.unlink(os.path.join(self._output, DEAD_LETTER_DIR, f"{name}.jsonl"))
        except FileNotFoundError:
            return
        self._unsynced = True

    def _checkpoint(self) -> None:
        """Write the checkpoint, after making the dead-letter files and too-late lines it
        counts durable: a checkpoint that survives a power cut never counts a dead letter whose
        file's rename did not (the files are fsynced, then their folder)."""
        if self._unsynced:
            sync_folder(os.path.join(self._output, DEAD_LETTER_DIR))
            self._unsynced = False
        write_checkpoint(self._output, self.state)

    def _log_too_late(self, windows, watermark_ms: int | None) -> None:
        """Append the cumulative too-late count of each window that just got some, and the
        watermark they were decided at."""
        if not windows:
            return
        with open(os.path.join(self._output, TOO_LATE_LOG), "a", encoding="utf-8") as log:
            for counts in windows:
                log.write(json.dumps({
                    "metric": counts.metric, "window_start": counts.window_start,
                    "window_end": counts.window_end, "too_late": counts.too_late,
                    "accepted": counts.accepted, "watermark": iso_from_ms(watermark_ms)},
                    sort_keys=True) + "\n")
            log.flush()
            os.fsync(log.fileno())  # before the checkpoint that counts them

    def too_late_by_window(self) -> list[WindowCounts]:
        return [w for w in self.state.windows.values() if w.too_late]

