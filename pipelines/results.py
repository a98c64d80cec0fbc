"""Read a job's window estimates back and present them."""
from __future__ import annotations

import datetime as dt
import glob
import json
import os

import numpy as np

from ldp_telemetry.ldp.errors import ConfigError, InputError
from ldp_telemetry.transforms.pane_log import PANE_LOG, latest_panes


def load_estimates(output_dir: str, metric: str | None = None) -> list[dict]:
    """Every window-estimate record under `output_dir`, sorted by metric and window start.

    For the output of a live run (`panes.log`, see ldp_telemetry.transforms.panes): the latest
    pane of each window written so far.
    """
    paths = sorted(glob.glob(os.path.join(output_dir, "estimates-*.jsonl")))
    records = []
    if not paths and os.path.exists(os.path.join(output_dir, PANE_LOG)):
        for entry in latest_panes(output_dir).values():
            with open(os.path.join(output_dir, *entry["path"].split("/")), encoding="utf-8") as f:
                records.append(json.loads(f.read()))
    elif not paths:
        raise InputError(f"no estimates-*.jsonl files (nor a live run's {PANE_LOG}) in "
                         f"{output_dir}", field="output")
    for path in paths:
        records.extend(_read_records(path))
    if metric is not None:
        records = [r for r in records if r["metric"] == metric]
    return sorted(records, key=lambda r: (r["metric"], r["window_start"], r["pane"]["index"]))


#: Fields `show` and `query` read from every estimate record, and their JSON types.
_COMMON_FIELDS = {"metric": str, "window_start": str, "window_end": str, "n": int,
                  "protocol": str, "epsilon": (int, float), "estimate": list, "pane": dict}
#: ... and from the record of a frequency metric (one without `bucket_edges`).
_FREQUENCY_FIELDS = {"labels": list, "std_error": list, "postprocess": dict}


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
                    raise InputError(f"{where}: not UTF-8 text ({error.reason})") from None
                except json.JSONDecodeError as error:
                    raise InputError(f"{where}: not valid JSON ({error.msg})") from None
                except RecursionError:
                    raise InputError(f"{where}: nested too deeply to be an estimate") from None
                problem = _record_problem(record)
                if problem:
                    raise InputError(f"{where}: not a window estimate: {problem}")
                records.append(record)
    except OSError as error:
        raise InputError(f"cannot read {path}: {error.strerror}") from None
    return records


def _is_numbers(values) -> bool:
    return isinstance(values, list) and all(
        isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)


def _record_problem(record) -> str | None:
    """Why a decoded JSON value is not a window estimate `show` and `query` can read, or None.

    `estimate` and `std_error` hold one number per value; `labels` names them (or is empty, for
    a numeric metric whose buckets are given by `bucket_edges`); `unbiased_estimate` is such a
    list, or null for a numeric metric.
    """
    if not isinstance(record, dict):
        return f"a JSON {type(record).__name__}, not an object"
    numeric = record.get("bucket_edges") is not None
    fields = _COMMON_FIELDS if numeric else {**_COMMON_FIELDS, **_FREQUENCY_FIELDS}
    for field, kind in fields.items():
        if not isinstance(record.get(field), kind) or isinstance(record.get(field), bool):
            return f"field {field!r} is missing or not a {getattr(kind, '__name__', 'number')}"
    size = len(record["estimate"])
    if not _is_numbers(record["estimate"]):
        return f"field 'estimate' must hold {size} numbers"
    if numeric:
        edges = record["bucket_edges"]
        if not _is_numbers(edges) or len(edges) != size + 1:
            return f"field 'bucket_edges' must hold {size + 1} numbers"
        return None if isinstance(record["pane"].get("index"), int) \
            else "field 'pane' has no integer 'index'"
    if len(record["std_error"]) != size or not _is_numbers(record["std_error"]):
        return f"field 'std_error' must hold {size} numbers"
    if record["labels"] and len(record["labels"]) != size:
        return f"field 'labels' must hold {size} labels, one per estimate"
    unbiased = record.get("unbiased_estimate")
    if unbiased is not None and (len(unbiased) != size if isinstance(unbiased, list) else True):
        return f"field 'unbiased_estimate' must be null or hold {size} numbers"
    if unbiased is not None and not _is_numbers(unbiased):
        return f"field 'unbiased_estimate' must be null or hold {size} numbers"
    if not isinstance(record["pane"].get("index"), int):
        return "field 'pane' has no integer 'index'"
    return None


def format_top(record: dict, k: int = 5) -> str:
    """One window as text: its header, then the k largest estimates with 95% error bars
    (for a numeric metric: its mean and quantiles with 95% error bars)."""
    if record.get("bucket_edges") is not None:
        return format_numeric(record)
    estimate = np.asarray(record["estimate"])
    error = np.asarray(record["std_error"])
    top = np.argsort(-estimate, kind="stable")[:k]
    method = record["postprocess"]["method"]
    estimator = (record.get("estimator") or {}).get("method", "unbiased")
    if estimator != "unbiased":
        method = f"{estimator} + {method}"
    lines = [f"{record['metric']}  [{record['window_start']} .. {record['window_end']})  "
             f"n={record['n']:,}  {record['protocol']} ε={record['epsilon']:g}  {method}"]
    for i in top.tolist():
        lines.append(f"    {record['labels'][i]:>12}  {estimate[i]:7.4f} ± {1.96 * error[i]:.4f}")
    return "\n".join(lines)


def format_numeric(record: dict) -> str:
    """A numeric metric's window: mean and quantiles, each ± 1.96 bootstrap standard errors."""
    estimator = record["estimator"]
    lines = [f"{record['metric']}  [{record['window_start']} .. {record['window_end']})  "
             f"n={record['n']:,}  {record['protocol']} ε={record['epsilon']:g}  "
             f"{estimator['method']}"
             + (f" ({estimator['iterations']} iterations)" if estimator.get("iterations") else "")]

    def bar(error):
        return "" if error is None or error != error else f" ± {1.96 * error:.4g}"
    lines.append(f"    {'mean':>12}  {record['mean']:.4g}{bar(record.get('mean_std_error'))}")
    errors = record.get("quantile_std_errors") or {}
    for level in ("0.1", "0.25", "0.5", "0.75", "0.9") if record.get("quantiles") else ():
        lines.append(f"    {'q' + level:>12}  {record['quantiles'][level]:.4g}"
                     f"{bar(errors.get(level))}")
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
        raise ConfigError(f"no estimates of metric {metric!r} (metrics: {', '.join(known)})",
                          field="metric")
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
    raise ConfigError(f"metric {metric!r} has no window {window!r}; its {len(starts)} window(s) "
                      f"start at: {listing}{more}", field="window")


def _parse_time(text: str, what: str = "window_start") -> dt.datetime:
    try:
        moment = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise InputError(f"{what} {text!r} is neither ISO-8601 nor an integer index") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.timezone.utc)
