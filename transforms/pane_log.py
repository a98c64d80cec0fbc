"""The layout of a live run's panes on disk, and how to read it back (no Beam needed).

Written by `ldp_telemetry.transforms.panes.WritePanesFn` as each pane fires; read by `ldp show`
and by a restarted live run.

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

import json
import os
from typing import Mapping

PANES_DIR = "panes"
PANE_LOG = "panes.log"
LATEST = "latest.json"

WindowKey = tuple  # (metric, window_start, window_end) as in the records


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


def format_pane(record: Mapping, k: int = 3) -> str:
    """One line per pane: window, pane, n and the k largest estimates with 95% error bars."""
    estimate, error, labels = record["estimate"], record["std_error"], record["labels"]
    top = sorted(range(len(estimate)), key=lambda i: -estimate[i])[:k]
    values = ", ".join(f"{labels[i]} {estimate[i]:.3f}±{1.96 * error[i]:.3f}" for i in top)
    pane = record["pane"]
    return (f"{record['metric']:<18} [{record['window_start']} .. {record['window_end']})  "
            f"{pane['timing']:<7} #{pane['index']:<3} n={record['n']:<7,} {values}")
