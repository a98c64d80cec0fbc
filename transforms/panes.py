"""A sink that streams: every window-estimate pane is written as soon as it fires.

The layout it writes (one file per pane, `latest.json`, the append-only `panes.log`) is
`ldp_telemetry.output.layout`'s; `ldp_telemetry.output.reader` reads it back without Beam.
Each pane file is written whole or not at all (`ldp_telemetry.output.atomic`); `panes.log` gets
one whole line per pane (a single `write` in append mode) after the pane's file exists. A log
line holds metric, window_start, window_end, pane (timing, index, is_last), n, path (relative to
the output folder) and written_at (UTC, milliseconds). Remote outputs (gs://...) get the pane
files but no log and no latest.json: list the tree instead.
"""
from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping
from dataclasses import replace

import apache_beam as beam

from ldp_telemetry.ldp.base.times import now_iso
from ldp_telemetry.output.atomic import is_remote, write_atomically
from ldp_telemetry.output.estimate import EstimateRecord
from ldp_telemetry.output.layout import LATEST, PANE_LOG, WindowKey, pane_path
from ldp_telemetry.output.text import format_pane

_LOCK = threading.Lock()
_LATEST_INDEX: dict[tuple[str, WindowKey], int] = {}  # (output, window) -> highest index written


class WritePanesFn(beam.DoFn):
    """Window-estimate record (`EstimateRecord`) -> its pane file, a log line and the window's
    latest.json.

    `index_offsets` shifts the pane indices of windows that already have panes on disk (a
    restarted run continues their numbering); panes of `suppressed` windows are not written (a
    restart replays their reports only for the sake of other windows). Offsets are keyed by
    `output.layout.window_key`, suppressed windows by its `window` (every version's estimate of
    a suppressed window, and their combination, is left alone). Yields the record as written.
    `echo` prints one line per pane to stdout.
    """

    def __init__(self, output_dir: str, index_offsets: Mapping[WindowKey, int] | None = None,
                 suppressed: frozenset = frozenset(), echo: bool = False):
        self._output = output_dir
        self._offsets = dict(index_offsets or {})
        self._suppressed = frozenset(suppressed)
        self._echo = echo

    def process(self, record: EstimateRecord):
        key = record.key
        if key.window in self._suppressed:
            return
        offset = self._offsets.get(key, 0)
        if offset:
            record = record.with_pane(replace(record.pane, index=record.pane.index + offset))
        relative = pane_path(record)
        text = record.to_json() + "\n"
        if is_remote(self._output):
            write_atomically(f"{self._output.rstrip('/')}/{relative}", text)
            yield record
            return
        path = os.path.join(self._output, *relative.split("/"))
        write_atomically(path, text, fsync=False)
        entry = {"metric": record.metric, "window_start": record.window_start,
                 "window_end": record.window_end, "pane": record.pane.to_json(), "n": record.n,
                 "config_version": record.config_version,
                 "combined_versions": (None if record.combined_versions is None
                                       else list(record.combined_versions)),
                 "path": relative, "written_at": now_iso()}
        with _LOCK:
            latest_key = (self._output, key)
            if record.pane.index > _LATEST_INDEX.get(latest_key, -1):
                _LATEST_INDEX[latest_key] = record.pane.index
                write_atomically(os.path.join(os.path.dirname(path), LATEST), text, fsync=False)
            with open(os.path.join(self._output, PANE_LOG), "a", encoding="utf-8") as log:
                log.write(json.dumps(entry, sort_keys=True) + "\n")
        if self._echo:
            print(format_pane(record), flush=True)
        yield record
