"""The live run's checkpoint: what the directory follower has consumed and counted.

OUT/live-checkpoint.json (`output.layout.CHECKPOINT`) is JSON, replaced whole once per poll
(`output.atomic`): the files consumed — each with the watermark it was decided at, its size,
modification time and inode when it was read, and the reports it gave each slice — the
counters, per window the reports accepted and found too late, and the reject totals per
(metric, reason, slice) the store is given. A restarted run resumes from it (see
`ldp_telemetry.pipelines.follower`).
"""
from __future__ import annotations

import glob
import json
import os
import signal
from dataclasses import dataclass, field

from ldp_telemetry.ldp.base.errors import InputError
from ldp_telemetry.ldp.base.times import ms_from_iso
from ldp_telemetry.output.atomic import temporary_name, write_atomically
from ldp_telemetry.output.coverage import INPUTS_FILE
from ldp_telemetry.output.layout import CHECKPOINT, WindowKey

#: The checkpoint format this version reads and writes.
VERSION = 2

#: Test fault point: when this environment variable holds N, the Nth checkpoint write of the
#: process leaves a half-written temporary file and the process SIGKILLs itself before the
#: rename (what a kill inside a checkpoint write leaves behind). Unset in normal runs.
FAULT_ENV = "LDP_FAULT_KILL_IN_CHECKPOINT"


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
class FileRecord:
    """A consumed file: the watermark it was decided at (ms or None), what identified its content
    when it was read (size, mtime in ns, inode), the reports it gave each slice
    ([metric, slice start ms, reports counted]), and the identity under which a change of it was
    already dead-lettered (None: never)."""

    decided_at: int | None
    size: int
    mtime_ns: int
    inode: int
    slices: list = field(default_factory=list)
    changed: list | None = None

    @property
    def identity(self) -> list:
        return [self.size, self.mtime_ns, self.inode]


@dataclass
class FollowState:
    """What the checkpoint holds. `records_accepted` counts the reports that passed the decoder's
    checks (as the batch job's counter), duplicates included: `counters()` subtracts them."""

    watermark_ms: int | None = None
    max_slice_start_ms: int | None = None
    files: dict = field(default_factory=dict)  # name -> FileRecord, in consumption order
    records_read: int = 0
    records_accepted: int = 0
    too_late: int = 0
    dead_letters: dict = field(default_factory=dict)  # reason -> records
    windows: dict = field(default_factory=dict)  # WindowKey -> WindowCounts
    rejects: dict = field(default_factory=dict)  # (metric, reason, start, end) -> records
    #: metric -> (first, last) event time in ms of the valid reports read (output.coverage)
    event_ranges: dict = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps({  # files keep their order: the order they were consumed in
            "version": VERSION, "watermark_ms": self.watermark_ms,
            "max_slice_start_ms": self.max_slice_start_ms,
            "files": {name: vars(record) for name, record in self.files.items()},
            "records_read": self.records_read, "records_accepted": self.records_accepted,
            "too_late": self.too_late, "dead_letters": self.dead_letters,
            "windows": [vars(w) for w in self.windows.values()],
            "rejects": [[*key, n] for key, n in self.rejects.items()],
            "event_ranges": {m: list(pair) for m, pair in self.event_ranges.items()}})

    @classmethod
    def from_json(cls, text: str) -> FollowState:
        """The state of a checkpoint's text. ValueError naming what is wrong for a document of
        another version or shape (json.JSONDecodeError, a ValueError, for text that is not
        JSON)."""
        doc = json.loads(text)
        if not isinstance(doc, dict):
            raise ValueError(f"expected a JSON object, found {type(doc).__name__}")
        if doc.get("version") != VERSION:
            raise ValueError(f"it is of version {doc.get('version')!r} (this version reads "
                             f"{VERSION}): finish that run with the version that wrote it, "
                             f"or start this one with a new output folder")
        try:
            windows = [WindowCounts(**w) for w in doc["windows"]]
            files = {str(name): FileRecord(**record) for name, record in doc["files"].items()}
            rejects = {(str(m), str(r), int(s), int(e)): int(n) for m, r, s, e, n in doc["rejects"]}
            state = cls(doc["watermark_ms"], doc["max_slice_start_ms"], files,
                        int(doc["records_read"]), int(doc["records_accepted"]),
                        int(doc["too_late"]), {str(k): int(v) for k, v in
                                               doc["dead_letters"].items()},
                        {w.key: w for w in windows}, rejects,
                        {str(m): (int(first), int(last)) for m, (first, last)
                         in doc.get("event_ranges", {}).items()})
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            raise ValueError(f"it does not have the checkpoint's shape "
                             f"({type(error).__name__}: {error})") from None
        return state

    def counters(self) -> dict[str, int]:
        """The batch job's counter names (`pipelines.counters.summary_line` reads them)."""
        duplicates = self.dead_letters.get("duplicate", 0)
        counters = {"records_read": self.records_read, "records_accepted": self.records_accepted,
                    "records_counted": self.records_accepted - duplicates - self.too_late}
        counters.update({f"dead_letter.{reason}": n for reason, n in self.dead_letters.items()})
        return counters


def checkpoint_path(output_dir: str) -> str:
    return os.path.join(output_dir, CHECKPOINT)


def read_checkpoint(output_dir: str) -> FollowState | None:
    """The state checkpointed in `output_dir`, or None when there is none (a first run).

    InputError (field `output`) naming the checkpoint file when it cannot be read, is not JSON,
    or is not a checkpoint of this version.
    """
    path = checkpoint_path(output_dir)
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(f"output {output_dir!r}: its checkpoint {path} cannot be read: "
                         f"{getattr(error, 'strerror', None) or error}", field="output") from None
    try:
        return FollowState.from_json(text)
    except json.JSONDecodeError as error:
        raise InputError(f"output {output_dir!r}: its checkpoint {path} is not JSON: "
                         f"{error}", field="output") from None
    except ValueError as error:
        raise InputError(f"output {output_dir!r}: its checkpoint {path} cannot be used: "
                         f"{error}", field="output") from None


def sweep_temporary_files(output_dir: str) -> list[str]:
    """Remove the temporary files a killed run left beside its checkpoint, status and inputs
    files (`output.atomic` names them `.<name>.<unique>.tmp`); returns their paths."""
    swept = []
    for pattern in (f".{CHECKPOINT}.*.tmp", ".status.json.*.tmp", f".{INPUTS_FILE}.*.tmp",
                    os.path.join("dead_letters", ".*.tmp")):
        for path in sorted(glob.glob(os.path.join(glob.escape(output_dir), pattern))):
            try:
                os.unlink(path)
            except FileNotFoundError:
                continue
            swept.append(path)
    return swept


_writes = 0


def write_checkpoint(output_dir: str, state: FollowState) -> None:
    """Replace the checkpoint whole (flushed to disk before the rename)."""
    text = state.to_json()
    fault = os.environ.get(FAULT_ENV)
    if fault:
        global _writes
        _writes += 1
        if _writes == int(fault):  # a kill inside the write: a torn temporary file, no rename
            with open(os.path.join(output_dir, temporary_name(CHECKPOINT)), "w",
                      encoding="utf-8") as handle:
                handle.write(text[:len(text) // 2])
            os.kill(os.getpid(), signal.SIGKILL)
    write_atomically(checkpoint_path(output_dir), text)
