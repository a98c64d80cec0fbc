"""Follow a directory of report files: the local live source and its durable state.

The collector's contract (atomic rename): a report file is written under a name the follower
ignores — ending in `.tmp` (e.g. `batch-0042.avro.tmp`) or starting with `.` — and renamed to
its final `*.avro` name once complete (`os.rename` / `mv` within one file system is atomic). A
file is read once, when its final name first appears; files are never modified after the rename
and stay in the directory while their windows may still change (they are the durable log a
restart recomputes open windows from).

Each poll, `DirectoryFollower`
1. lists the new complete files (oldest modification first, then by name) and decodes each with
   the batch job's decoder (`ReportDecoder`): report batches per (metric, slice), dead letters;
2. decides lateness against the watermark it has announced: a batch whose slice ended more than
   `--allowed-lateness` before that watermark (watermark > slice end + lateness, Beam's rule)
   is TOO LATE — counted per (metric, window) for every window holding the slice, never sent;
   the others are sent as elements, so Beam never drops one silently;
3. writes its checkpoint (consumed files with the watermark each was decided at, counters,
   per-window accepted and too-late counts) atomically, then hands the elements to the stream;
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
import queue
import socket
import threading
import time
from dataclasses import dataclass, field

from apache_beam.coders import FastPrimitivesCoder
from apache_beam.portability.api import beam_runner_api_pb2
from apache_beam.testing.test_stream_service import TestStreamServiceController
from apache_beam.transforms.window import WindowFn
from apache_beam.utils.timestamp import Timestamp

from ldp_telemetry.ldp.registry import Registry
from ldp_telemetry.output.atomic import write_atomically
from ldp_telemetry.output.layout import WindowKey
from ldp_telemetry.output.reader import latest_panes
from ldp_telemetry.output.times import iso_from_ms, ms_from_iso
from ldp_telemetry.schemas.batches import DeadLetter, ReportBatch
from ldp_telemetry.schemas.codec import ReportDecoder
from ldp_telemetry.schemas.limits import DecodeLimits
from ldp_telemetry.transforms.read import BATCHES, DEAD_LETTERS
from ldp_telemetry.transforms.windows import WindowSpec

LOG = logging.getLogger("ldp.follow")
CHECKPOINT = "live-checkpoint.json"
TOO_LATE_LOG = "too_late.jsonl"
DEAD_LETTER_DIR = "dead_letters"
REPORT_SUFFIX = ".avro"
# One stream element is at most this many bytes of payload columns: the TestStream service's
# client (inside Beam) accepts gRPC messages of at most 4 MiB.
MAX_ELEMENT_BYTES = 1 << 20
_Event = beam_runner_api_pb2.TestStreamPayload.Event
_Element = beam_runner_api_pb2.TestStreamPayload.TimestampedElement


def is_complete_report_file(name: str) -> bool:
    """True for a final report-file name (`*.avro`, not hidden, not a `.tmp`)."""
    return name.endswith(REPORT_SUFFIX) and not name.startswith(".")


# -- the stream: TestStream service events produced by the follower --------------------------

class EventStream:
    """A TestStream service on 127.0.0.1 whose events are whatever the follower puts in.

    Processing time is the wall time elapsed since `start()`: `tick()` advances it to now.
    Beam's TestStream client gives up after 30 s without an event, so a heartbeat thread ticks
    whenever no event was put for HEARTBEAT_S (e.g. while a large file is decoded).
    """

    HEARTBEAT_S = 5.0

    def __init__(self, clock=time.monotonic):
        self._events: queue.Queue = queue.Queue()
        self._coder = FastPrimitivesCoder()
        self._clock = clock
        self._lock = threading.Lock()
        self._last_tick = self._last_put = clock()
        self._closed = threading.Event()
        self.endpoint = None
        self._controller = None

    def start(self, attempts: int = 5) -> str:
        """Serve on a free 127.0.0.1 port; returns the endpoint (HOST:PORT)."""
        for _ in range(attempts):
            probe = socket.socket()
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
            probe.close()
            endpoint = f"127.0.0.1:{port}"
            try:
                controller = TestStreamServiceController(self, endpoint=endpoint)
            except RuntimeError:  # the port was taken in between
                continue
            controller.start()
            self._controller, self.endpoint = controller, endpoint
            self._last_tick = self._last_put = self._clock()
            threading.Thread(target=self._heartbeat, name="ldp-stream-heartbeat",
                             daemon=True).start()
            return endpoint
        raise OSError("no free 127.0.0.1 port for the TestStream service")

    def stop(self) -> None:
        self._closed.set()
        if self._controller is not None:
            self._controller.stop()
            self._controller = None

    def read_multiple(self, _tags):
        """The service's event reader: blocks for the next event; ends at `close()`."""
        while True:
            event = self._events.get()
            if event is None:
                return
            yield event

    def _put(self, event) -> None:
        with self._lock:
            self._events.put(event)
            self._last_put = self._clock()

    def _heartbeat(self) -> None:
        while not self._closed.wait(self.HEARTBEAT_S / 5):
            if self._clock() - self._last_put >= self.HEARTBEAT_S:
                self.tick()

    def tick(self) -> None:
        """Advance processing time by the wall time elapsed since the last tick."""
        with self._lock:
            now = self._clock()
            advance = max(1, round((now - self._last_tick) * 1e6))
            self._last_tick = now
            self._events.put(_Event(processing_time_event=_Event.AdvanceProcessingTime(
                advance_duration=advance)))
            self._last_put = now

    def add_batches(self, batches: list[ReportBatch]) -> None:
        for batch in batches:
            for piece in _split(batch):
                self._put(_Event(element_event=_Event.AddElements(tag=BATCHES, elements=[
                    _Element(encoded_element=self._coder.encode((piece.metric, piece)),
                             timestamp=piece.slice_start_ms * 1000)])))

    def add_dead_letters(self, letters: list[DeadLetter], at_ms: int) -> None:
        if letters:
            self._put(_Event(element_event=_Event.AddElements(tag=DEAD_LETTERS, elements=[
                _Element(encoded_element=self._coder.encode(letter), timestamp=at_ms * 1000)
                for letter in letters])))

    def advance_watermark(self, watermark_ms: int) -> None:
        for tag in (BATCHES, DEAD_LETTERS):
            self._put(_Event(watermark_event=_Event.AdvanceWatermark(
                tag=tag, new_watermark=watermark_ms * 1000)))

    def close(self) -> None:
        """End the stream: Beam then moves the watermark to +infinity and finishes."""
        self._closed.set()
        self._events.put(None)


def _split(batch: ReportBatch) -> list[ReportBatch]:
    """The batch in row ranges of at most MAX_ELEMENT_BYTES of columns each."""
    size = sum(column.nbytes for column in batch.columns.values())
    pieces = -(-size // MAX_ELEMENT_BYTES)
    if pieces <= 1:
        return [batch]
    step = -(-batch.n // pieces)
    return [ReportBatch(batch.metric, batch.slice_start_ms,
                        {k: v[lo:lo + step] for k, v in batch.columns.items()})
            for lo in range(0, batch.n, step)]


# -- durable state ------------------------------------------------------------------------------

@dataclass
class WindowCounts:
    """Reports of one (metric, window) the follower accepted, and those it found too late."""

    metric: str
    window_start: str
    window_end: str
    end_ms: int
    accepted: int = 0
    too_late: int = 0

    @property
    def key(self) -> WindowKey:
        return WindowKey(self.metric, ms_from_iso(self.window_start), self.end_ms)


@dataclass
class FollowState:
    """What the checkpoint holds (JSON, replaced atomically)."""

    watermark_ms: int | None = None
    max_slice_start_ms: int | None = None
    files: dict = field(default_factory=dict)  # name -> decision watermark (ms or None)
    records_read: int = 0
    records_accepted: int = 0
    too_late: int = 0
    dead_letters: dict = field(default_factory=dict)  # reason -> records
    windows: dict = field(default_factory=dict)  # WindowKey -> WindowCounts

    def to_json(self) -> str:
        return json.dumps({
            "version": 1, "watermark_ms": self.watermark_ms,
            "max_slice_start_ms": self.max_slice_start_ms, "files": self.files,
            "records_read": self.records_read, "records_accepted": self.records_accepted,
            "too_late": self.too_late, "dead_letters": self.dead_letters,
            "windows": [vars(w) for w in self.windows.values()]}, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "FollowState":
        doc = json.loads(text)
        if doc.get("version") != 1:
            raise ValueError(f"unknown checkpoint version {doc.get('version')!r}")
        windows = [WindowCounts(**w) for w in doc["windows"]]
        return cls(doc["watermark_ms"], doc["max_slice_start_ms"], doc["files"],
                   doc["records_read"], doc["records_accepted"], doc["too_late"],
                   doc["dead_letters"], {w.key: w for w in windows})

    def counters(self) -> dict[str, int]:
        """The batch job's counter names (`summary_line` reads them)."""
        counters = {"records_read": self.records_read, "records_accepted": self.records_accepted,
                    "records_counted": self.records_accepted - self.too_late}
        counters.update({f"dead_letter.{reason}": n for reason, n in self.dead_letters.items()})
        return counters


# -- the follower -------------------------------------------------------------------------------

@dataclass(frozen=True)
class WatermarkPolicy:
    """See the module docstring. `idle_advance_s` None: the watermark never moves on idle."""

    max_out_of_order_ms: int = 0
    idle_advance_s: float | None = 10.0

    def __post_init__(self):
        if self.max_out_of_order_ms < 0:
            raise ValueError(f"--max-out-of-order must be >= 0 seconds, "
                             f"got {self.max_out_of_order_ms / 1000}")
        if self.idle_advance_s is not None and self.idle_advance_s <= 0:
            raise ValueError(f"--idle-advance must be positive, got {self.idle_advance_s}")


@dataclass(frozen=True)
class Replay:
    """What a restart must replay: batches, and the windows whose panes must not be rewritten."""

    batches: list
    complete_windows: frozenset


class DirectoryFollower:
    """Turns a directory of arriving report files into stream events (see the module docstring).

    `output_dir` holds the checkpoint, `too_late.jsonl` and `dead_letters/`.
    """

    def __init__(self, registry: Registry, windows: WindowSpec, directory: str, output_dir: str,
                 stream: EventStream, policy: WatermarkPolicy = WatermarkPolicy(),
                 clock=time.monotonic, limits: DecodeLimits = DecodeLimits()):
        if not os.path.isdir(directory):
            raise ValueError(f"--follow {directory!r} is not a directory")
        self._registry = registry
        self._windows = windows
        self._window_fn = windows.window_fn()
        self._directory = directory
        self._output = output_dir
        self._stream = stream
        self._policy = policy
        self._clock = clock
        self._decoder = ReportDecoder(registry, windows.slice_ms,
                                      slice_offset_ms=windows.slice_offset_ms, limits=limits)
        self._checkpoint = os.path.join(output_dir, CHECKPOINT)
        os.makedirs(output_dir, exist_ok=True)
        self.state = (FollowState.from_json(open(self._checkpoint, encoding="utf-8").read())
                      if os.path.exists(self._checkpoint) else FollowState())
        self.restarted = os.path.exists(self._checkpoint)
        self._last_arrival = clock()

    # Restart -------------------------------------------------------------------------------

    def replay_after_restart(self) -> Replay:
        """The accepted batches of windows not complete on disk, re-decoded from the consumed
        files; and the complete windows those batches also touch (their panes are suppressed)."""
        if not self.restarted:
            return Replay([], frozenset())
        watermark = self.state.watermark_ms
        on_disk = latest_panes(self._output)
        complete = {key for key, counts in self.state.windows.items()
                    if watermark is not None
                    and watermark > counts.end_ms + self._windows.allowed_lateness_ms
                    and key in on_disk and on_disk[key]["n"] == counts.accepted}
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
        for item in self._decoder.decode_file(os.path.join(self._directory, name)):
            if isinstance(item, DeadLetter):
                letters.append(item)
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
        state.records_read += self._decoder.records_read - before
        state.files[name] = state.watermark_ms
        if letters:
            self._write_dead_letters(name, letters)
        write_atomically(self._checkpoint, state.to_json())
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
            write_atomically(self._checkpoint, state.to_json())
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
        context = WindowFn.AssignContext(Timestamp(micros=batch.slice_start_ms * 1000))
        for window in self._window_fn.assign(context):
            key = WindowKey(batch.metric, window.start.micros // 1000, window.end.micros // 1000)
            counts = self.state.windows.get(key)
            if counts is None:
                counts = self.state.windows[key] = WindowCounts(
                    batch.metric, iso_from_ms(key.start_ms), iso_from_ms(key.end_ms),
                    end_ms=key.end_ms)
            yield key, counts

    def _write_dead_letters(self, name: str, letters: list[DeadLetter]) -> None:
        folder = os.path.join(self._output, DEAD_LETTER_DIR)
        os.makedirs(folder, exist_ok=True)
        write_atomically(os.path.join(folder, f"{name}.jsonl"),
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
                    "accepted": counts.accepted,
                    "watermark": iso_from_ms(self.state.watermark_ms)},
                    sort_keys=True) + "\n")

    def too_late_by_window(self) -> list[WindowCounts]:
        return [w for w in self.state.windows.values() if w.too_late]
