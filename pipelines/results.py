"""Read a job's window estimates back and present them."""
from __future__ import annotations

import datetime as dt
import glob
import json
import os

import numpy as np


def load_estimates(output_dir: str, metric: str | None = None) -> list[dict]:
    """Every window-estimate record under `output_dir`, sorted by metric and window start."""
    paths = sorted(glob.glob(os.path.join(output_dir, "estimates-*.jsonl")))
    if not paths:
        raise ValueError(f"no estimates-*.jsonl files in {output_dir}")
    records = []
    for path in paths:
        records.extend(_read_records(path))
    if metric is not None:
        records = [r for r in records if r["metric"] == metric]
    return sorted(records, key=lambda r: (r["metric"], r["window_start"], r["pane"]["index"]))


#: Fields `show` and `query` read from every estimate record, and their JSON types.
_RECORD_FIELDS = {"metric": str, "window_start": str, "window_end": str, "n": int,
                  "protocol": str, "epsilon": (int, float), "labels": list, "estimate": list,
                  "std_error": list, "unbiased_estimate": list, "postprocess": dict, "pane": dict}


def _read_records(path: str) -> list[dict]:
    """The estimate records of one JSON-lines file; ValueError naming the file and line."""
    records = []
    try:
        with open(path, "rb") as handle:
            for number, raw in enumerate(handle, start=1):
                if not raw.strip():
                    continue
                where = f"{path} line {number}"
                try:
                    record = json.loads(raw.decode("utf-8"))
                except UnicodeDecodeError as error:
                    raise ValueError(f"{where}: not UTF-8 text ({error.reason})") from None
                except json.JSONDecodeError as error:
                    raise ValueError(f"{where}: not valid JSON ({error.msg})") from None
                except RecursionError:
                    raise ValueError(f"{where}: nested too deeply to be an estimate") from None
                problem = _record_problem(record)
                if problem:
                    raise ValueError(f"{where}: not a window estimate: {problem}")
                records.append(record)
    except OSError as error:
        raise ValueError(f"cannot read {path}: {error.strerror}") from None
    return records


def _record_problem(record) -> str | None:
    if not isinstance(record, dict):
        return f"a JSON {type(record).__name__}, not an object"
    for field, kind in _RECORD_FIELDS.items():
        if not isinstance(record.get(field), kind) or isinstance(record.get(field), bool):
            return f"field {field!r} is missing or not a {getattr(kind, '__name__', 'number')}"
    d = len(record["labels"])
    for field in ("estimate", "std_error", "unbiased_estimate"):
        values = record[field]
        if len(values) != d or not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                       for v in values):
            return f"field {field!r} must hold {d} numbers, one per label"
    if not isinstance(record["pane"].get("index"), int):
        return "field 'pane' has no integer 'index'"
    return None


def format_top(record: dict, k: int = 5) -> str:
    """One window as text: its header, then the k largest estimates with 95% error bars."""
    estimate = np.asarray(record["estimate"])
    error = np.asarray(record["std_error"])
    top = np.argsort(-estimate, kind="stable")[:k]
    method = record["postprocess"]["method"]
    lines = [f"{record['metric']}  [{record['window_start']} .. {record['window_end']})  "
             f"n={record['n']:,}  {record['protocol']} ε={record['epsilon']:g}  {method}"]
    for i in top.tolist():
        lines.append(f"    {record['labels'][i]:>12}  {estimate[i]:7.4f} ± {1.96 * error[i]:.4f}")
    return "\n".join(lines)


def select_window(records: list[dict], metric: str, window: str) -> dict:
    """The record of `metric` whose window starts at `window` (ISO-8601, UTC if naive) or, when
    `window` is an integer, the one at that index of the metric's windows sorted by start.

    When a window has several panes the last one is returned. ValueError lists the metrics or the
    windows that exist when nothing matches.
    """
    mine = [r for r in records if r["metric"] == metric]
    if not mine:
        known = sorted({r["metric"] for r in records})
        raise ValueError(f"no estimates of metric {metric!r} (metrics: {', '.join(known)})")
    by_start: dict[str, dict] = {}
    for record in mine:  # sorted by pane index: the last pane wins
        by_start[record["window_start"]] = record
    starts = sorted(by_start, key=_parse_time)
    try:
        position = int(window)
    except ValueError:
        wanted = _parse_time(window, what="--window")
        for start in starts:
            if _parse_time(start) == wanted:
                return by_start[start]
    else:
        if -len(starts) <= position < len(starts):
            return by_start[starts[position]]
    listing = ", ".join(f"[{i}] {s}" for i, s in enumerate(starts[:20]))
    more = f", ... ({len(starts) - 20} more)" if len(starts) > 20 else ""
    raise ValueError(f"metric {metric!r} has no window {window!r}; its {len(starts)} window(s) "
                     f"start at: {listing}{more}")


def _parse_time(text: str, what: str = "window_start") -> dt.datetime:
    try:
        moment = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"{what} {text!r} is neither ISO-8601 nor an integer index") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.timezone.utc)
