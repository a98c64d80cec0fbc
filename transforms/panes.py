"""A sink that streams: every window-estimate pane is written as soon as it fires.

Layout under the output directory OUT (what a dashboard follows while the job runs):

    OUT/panes/metric=<metric>/date=<YYYY-MM-DD of the window start>/<start>--<end>/
        pane-<index:05d>-<TIMING>.json     one window-estimate record (schemas/window_estimate.avsc)
        latest.json                        a copy of the window's pane with the highest index
    OUT/panes.log                          append-only index: one JSON line per pane written

Every file is written to a temporary name beginning with "." and renamed, so a reader never
sees half a pane; `panes.log` gets one whole line per pane (a single `write` in append mode),
after the pane's file exists. A log line holds metric, window_start, window_end, pane (timing,
index, is_last), n, path (relative to OUT) and written_at (UTC, milliseconds). The latest pane of
a window is the one with the highest `pane.index`; panes accumulate, so it is the window's
estimate so far. Remote outputs (gs://...) get the pane files (written through Beam's
filesystems and renamed) but no log and no latest.json: list the tree instead.
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

PANES_DIR = "panes"
PANE_LOG = "panes.log"
LATEST = "latest.json"

WindowKey = tuple  # (metric, window_start, window_end) as in the records

_LOCK = threading.Lock()
_LATEST_INDEX: dict[tuple[str, WindowKey], int] = {}  # (output, window) -> highest index written


def window_key(record: Mapping) -> WindowKey:
    return (record["metric"], record["window_start"], record["window_end"])


def pane_path(record: Mapping) -> str:
    """The pane file's path relative to the output directory."""
    metric = "".join(c if c.isalnum() or c in "-_." else "_" for c in record["metric"])
    start, end = (record[k].replace("-", "").replace(":", "")
                  for k in ("window_start", "window_end"))
    pane = record["pane"]
    return "/".join((PANES_DIR, f"metric={metric}", f"date={record['window_start'][:10]}",
                     f"{start}--{end}", f"pane-{pane['index']:05d}-{pane['timing']}.json"))


def read_pane_log(output_dir: str) -> list[dict]:
    """The log's complete lines in order (a last line cut short by a crash is ignored)."""
    path = os.path.join(output_dir, PANE_LOG)
    if not os.path.exists(path):
        return []
    entries = []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            if line.endswith("\n"):
                entries.append(json.loads(line))
    return entries


def truncate_torn_tail(path: str) -> None:
    """Cut an append-only log back to its last complete line (a crash may leave half a line)."""
    if not os.path.exists(path):
        return
    with open(path, "rb+") as handle:
        data = handle.read()
        if data and not data.endswith(b"\n"):
            handle.truncate(data.rfind(b"\n") + 1)


def latest_panes(output_dir: str) -> dict[WindowKey, dict]:
    """Per window, the log entry of its pane with the highest index."""
    latest: dict[WindowKey, dict] = {}
    for entry in read_pane_log(output_dir):
        key = window_key(entry)
        if key not in latest or entry["pane"]["index"] > latest[key]["pane"]["index"]:
            latest[key] = entry
    return latest


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


def format_pane(record: Mapping, k: int = 3) -> str:
    """One line per pane: window, pane, n and the k largest estimates with 95% error bars."""
    estimate, error, labels = record["estimate"], record["std_error"], record["labels"]
    top = sorted(range(len(estimate)), key=lambda i: -estimate[i])[:k]
    values = ", ".join(f"{labels[i]} {estimate[i]:.3f}±{1.96 * error[i]:.3f}" for i in top)
    pane = record["pane"]
    return (f"{record['metric']:<18} [{record['window_start']} .. {record['window_end']})  "
            f"{pane['timing']:<7} #{pane['index']:<3} n={record['n']:<7,} {values}")


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
