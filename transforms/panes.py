"""A sink that streams: every window-estimate pane is written as soon as it fires.

The layout it writes (one file per pane, `latest.json`, the append-only `panes.log`) is
described in `ldp_telemetry.transforms.pane_log`, which also reads it back without Beam.
"""
from __future__ import annotations

import datetime as dt
import json
import os
import threading
import time
from typing import Mapping

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from ldp_telemetry.output.layout import WindowKey, window_key
from ldp_telemetry.transforms.pane_log import LATEST, PANE_LOG, format_pane, pane_path

_LOCK = threading.Lock()
_LATEST_INDEX: dict[tuple[str, WindowKey], int] = {}  # (output, window) -> highest index written


class WritePanesFn(beam.DoFn):
    """Window-estimate record -> its pane file, a log line and the window's latest.json.

    `index_offsets` shifts the pane indices of windows that already have panes on disk (a
    restarted run continues their numbering); panes of `suppressed` windows are not written (a
    restart replays their reports only for the sake of other windows). Yields the record as
    written. `echo` prints one line per pane to stdout.
    """

    def __init__(self, output_dir: str, index_offsets: Mapping[WindowKey, int] | None = None,
                 suppressed: frozenset = frozenset(), echo: bool = False):
        self._output = output_dir
        self._offsets = dict(index_offsets or {})
        self._suppressed = frozenset(suppressed)
        self._echo = echo

    def process(self, record: dict):
        key = window_key(record)
        if key in self._suppressed:
            return
        offset = self._offsets.get(key, 0)
        if offset:
            record = dict(record, pane=dict(record["pane"], index=record["pane"]["index"] + offset))
        relative = pane_path(record)
        text = json.dumps(record, sort_keys=True) + "\n"
        if FileSystems.get_scheme(self._output) is not None:
            _write_remote(FileSystems.join(self._output, relative), text)
            yield record
            return
        path = os.path.join(self._output, *relative.split("/"))
        _write_atomically(path, text)
        entry = {"metric": record["metric"], "window_start": record["window_start"],
                 "window_end": record["window_end"], "pane": record["pane"], "n": record["n"],
                 "path": relative, "written_at": _now_iso()}
        with _LOCK:
            latest_key = (self._output, key)
            if record["pane"]["index"] > _LATEST_INDEX.get(latest_key, -1):
                _LATEST_INDEX[latest_key] = record["pane"]["index"]
                _write_atomically(os.path.join(os.path.dirname(path), LATEST), text)
            with open(os.path.join(self._output, PANE_LOG), "a", encoding="utf-8") as log:
                log.write(json.dumps(entry, sort_keys=True) + "\n")
        if self._echo:
            print(format_pane(record), flush=True)
        yield record


def _write_atomically(path: str, text: str) -> None:
    folder = os.path.dirname(path)
    os.makedirs(folder, exist_ok=True)
    temporary = os.path.join(folder, f".{os.path.basename(path)}.{threading.get_ident()}.tmp")
    with open(temporary, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(temporary, path)


def _write_remote(path: str, text: str) -> None:
    folder, name = path.rsplit("/", 1)
    temporary = f"{folder}/.{name}.tmp"
    with FileSystems.create(temporary) as handle:
        handle.write(text.encode("utf-8"))
    FileSystems.rename([temporary], [path])


def _now_iso() -> str:
    now = time.time()
    text = dt.datetime.fromtimestamp(now, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{text}.{int(now * 1000) % 1000:03d}Z"
