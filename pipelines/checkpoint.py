"""The live run's checkpoint: what the directory follower has consumed and counted.

OUT/live-checkpoint.json (`output.layout.CHECKPOINT`) is JSON, replaced whole at every change
(`output.atomic`): the files consumed with the watermark each was decided at, the counters, and
per window the reports accepted and found too late. A restarted run resumes from it (see
`ldp_telemetry.pipelines.follower`).
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

from ldp_telemetry.ldp.errors import InputError
from ldp_telemetry.ldp.times import ms_from_iso
from ldp_telemetry.output.atomic import write_atomically
from ldp_telemetry.output.layout import CHECKPOINT, WindowKey

#: The checkpoint format this version reads and writes.
VERSION = 1


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
    """What the checkpoint holds."""

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
            "version": VERSION, "watermark_ms": self.watermark_ms,
            "max_slice_start_ms": self.max_slice_start_ms, "files": self.files,
            "records_read": self.records_read, "records_accepted": self.records_accepted,
            "too_late": self.too_late, "dead_letters": self.dead_letters,
            "windows": [vars(w) for w in self.windows.values()]}, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> FollowState:
        """The state of a checkpoint's text; InputError (field `output`) for another version."""
        doc = json.loads(text)
        if doc.get("version") != VERSION:
            raise InputError(f"output holds a checkpoint of unknown version "
                             f"{doc.get('version')!r} (this version reads {VERSION})",
                             field="output")
        windows = [WindowCounts(**w) for w in doc["windows"]]
        return cls(doc["watermark_ms"], doc["max_slice_start_ms"], doc["files"],
                   doc["records_read"], doc["records_accepted"], doc["too_late"],
                   doc["dead_letters"], {w.key: w for w in windows})

    def counters(self) -> dict[str, int]:
        """The batch job's counter names (`pipelines.counters.summary_line` reads them)."""
        counters = {"records_read": self.records_read, "records_accepted": self.records_accepted,
                    "records_counted": self.records_accepted - self.too_late}
        counters.update({f"dead_letter.{reason}": n for reason, n in self.dead_letters.items()})
        return counters


def checkpoint_path(output_dir: str) -> str:
    return os.path.join(output_dir, CHECKPOINT)


def read_checkpoint(output_dir: str) -> FollowState | None:
    """The state checkpointed in `output_dir`, or None when there is none (a first run).

    InputError (field `output`) when the checkpoint cannot be read.
    """
    path = checkpoint_path(output_dir)
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except FileNotFoundError:
        return None
    except OSError as error:
        raise InputError(f"output {output_dir!r}: its checkpoint {CHECKPOINT} cannot be read: "
                         f"{error.strerror or error}", field="output") from None
    try:
        return FollowState.from_json(text)
    except json.JSONDecodeError as error:
        raise InputError(f"output {output_dir!r}: its checkpoint {CHECKPOINT} is not JSON: "
                         f"{error}", field="output") from None


def write_checkpoint(output_dir: str, state: FollowState) -> None:
    """Replace the checkpoint whole (flushed to disk before the rename)."""
    write_atomically(checkpoint_path(output_dir), state.to_json())
