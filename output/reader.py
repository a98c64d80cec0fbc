"""Read a job's output back: the one reader of a batch run's shards and of a live run's panes.

`read_estimates` is what `ldp show` and `ldp query` read, whichever layout the folder holds
(`ldp_telemetry.output.layout`), as typed records (`output.estimate.EstimateRecord`; a line
is one when `record_problem` finds nothing wrong with it); a restarted live run reads the pane
log (`read_pane_log`, `latest_panes`, `truncate_torn_tail`); a follower that reads what is
appended while a job runs (the dashboard) uses `ldp_telemetry.output.tail`, built on the same
functions.

A file that cannot be read, or a line that is not a window estimate, is an `InputError` (field
``output``) naming the file and the line.
"""
from __future__ import annotations

import glob
import json
import os
from collections.abc import Callable, Iterator, Mapping

from ldp_telemetry.ldp.base.errors import ConfigError, InputError
from ldp_telemetry.ldp.base.times import ms_from_iso
from ldp_telemetry.ldp.base.validation import is_int
from ldp_telemetry.output.estimate import EstimateRecord, Pane, version_problem
from ldp_telemetry.output.layout import (COMBINED, ESTIMATES, PANE_LOG, WindowKey,
                                         shard_pattern, window_key)

#: The field of a job's settings that names its output folder.
OUTPUT_FIELD = "output"


def read_estimates(output_dir: str, metric: str | None = None) -> list[EstimateRecord]:
    """Every window-estimate record under `output_dir` (only `metric`'s when given), sorted by
    metric, window start and pane index.

    A batch run's `estimates-*.jsonl` shards; when there are none, the output of a live run:
    the latest pane of each window written so far (`panes.log`). InputError when the folder
    holds neither, or a record cannot be read.
    """
    paths = estimate_shards(output_dir)
    if paths:
        records = [record for path in paths for record in read_estimate_file(path)]
    elif os.path.exists(os.path.join(output_dir, PANE_LOG)):
        records = [read_pane(output_dir, entry) for entry in latest_panes(output_dir).values()]
    else:
        raise InputError(f"no {shard_pattern(ESTIMATES)} files (nor a live run's {PANE_LOG}) "
                         f"in {output_dir}", OUTPUT_FIELD)
    if metric is not None:
        records = [r for r in records if r.metric == metric]
    return sorted(records, key=lambda r: (r.metric, r.start_ms, r.pane.index))


def estimate_shards(output_dir: str) -> list[str]:
    """The `estimates-*.jsonl` shards of a batch run in `output_dir`, sorted."""
    return sorted(glob.glob(os.path.join(glob.escape(output_dir), shard_pattern(ESTIMATES))))


def read_estimate_file(path: str) -> list[EstimateRecord]:
    """The window-estimate records of one JSON-lines file; InputError naming the file and line."""
    return [_estimate(raw, where) for raw, where in _lines(path) if raw.strip()]


def _lines(path: str) -> Iterator[tuple[bytes, str]]:
    """(raw line, "PATH line N") of a JSON-lines file, one at a time; InputError naming the file
    when it cannot be read."""
    try:
        with open(path, "rb") as handle:
            for number, raw in enumerate(handle, start=1):
                yield raw, f"{path} line {number}"
    except OSError as error:
        raise InputError(f"cannot read {path}: {error.strerror}", OUTPUT_FIELD) from None


def _checked(raw: bytes, where: str, problem_of: Callable[[object], str | None],
             what: str) -> dict:
    """The JSON value of one line, which `problem_of` (one that rejects any value but an
    object) finds nothing wrong with; InputError naming the line and `what` it should have been
    otherwise."""
    value = _json(raw, where)
    problem = problem_of(value)
    if problem:
        raise InputError(f"{where}: not {what}: {problem}", OUTPUT_FIELD)
    assert isinstance(value, dict)  # problem_of rejects a value that is not an object
    return value


def _estimate(raw: bytes, where: str) -> EstimateRecord:
    """The record of one line (checked once, by `EstimateRecord.from_value`)."""
    value = _json(raw, where)
    try:
        return EstimateRecord.from_value(value)
    except ValueError as error:  # from_value's own: what `record_problem` found
        raise InputError(f"{where}: {error}", OUTPUT_FIELD) from None


def _entry(raw: bytes, where: str) -> dict:
    return _checked(raw, where, pane_entry_problem, "a pane-log entry")


def _json(raw: bytes, where: str) -> object:
    try:
        return json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as error:
        raise InputError(f"{where}: not UTF-8 text ({error.reason})", OUTPUT_FIELD) from None
    except json.JSONDecodeError as error:
        raise InputError(f"{where}: not valid JSON ({error.msg})", OUTPUT_FIELD) from None
    except RecursionError:
        raise InputError(f"{where}: nested too deeply to be an estimate", OUTPUT_FIELD) from None


def pane_of(record: Mapping) -> dict:
    """A decoded JSON record's pane, defaulting to one ON_TIME pane (a record without one is a
    batch one); an `EstimateRecord` has it as `pane`."""
    return Pane.from_json(record.get("pane")).to_json()


# -- a live run's pane log ------------------------------------------------------------------------

def read_pane_log(output_dir: str) -> list[dict]:
    """The entries of `panes.log` in order ([] when there is none). A last line cut short by a
    crash is ignored; any other line that is not an entry is an InputError naming it."""
    path = os.path.join(output_dir, PANE_LOG)
    if not os.path.exists(path):
        return []
    return [_entry(raw, where) for raw, where in _lines(path) if raw.endswith(b"\n")]


def pane_entry_problem(entry: object) -> str | None:
    """Why a decoded JSON value is not a pane-log entry, or None. An entry holds `metric`,
    `window_start`, `window_end` (ISO-8601), `pane` (with an integer `index`), the integer `n`
    and the pane file's `path` relative to the output folder (checked when it is read)."""
    if not isinstance(entry, dict):
        return f"a JSON {type(entry).__name__}, not an object"
    for field in ("metric", "window_start", "window_end"):
        if not isinstance(entry.get(field), str):
            return f"field {field!r} is missing or not a str"
    problem = version_problem(entry)
    if problem is not None:
        return problem
    try:
        window_key(entry)
    except ValueError:
        return "its window bounds are not ISO-8601 times"
    if not isinstance(entry.get("pane"), dict) or not is_int(entry["pane"].get("index")):
        return "field 'pane' has no integer 'index'"
    if not is_int(entry.get("n")):
        return "field 'n' is missing or not a int"
    return None


def latest_panes(output_dir: str) -> dict[WindowKey, dict]:
    """Per window, the pane-log entry of its pane with the highest index (panes accumulate: it
    is the window's estimate so far)."""
    latest: dict[WindowKey, dict] = {}
    for entry in read_pane_log(output_dir):
        key = window_key(entry)
        if key not in latest or entry["pane"]["index"] > latest[key]["pane"]["index"]:
            latest[key] = entry
    return latest


def pane_file(output_dir: str, entry: Mapping) -> str | None:
    """The local path of the pane file a log entry names, or None when it names no file inside
    `output_dir` (the log is data: it cannot send a reader elsewhere)."""
    if not isinstance(entry.get("path"), str):
        return None
    root = os.path.realpath(output_dir)
    path = os.path.realpath(os.path.join(root, *entry["path"].split("/")))
    return path if os.path.commonpath([path, root]) == root else None


def read_pane(output_dir: str, entry: Mapping) -> EstimateRecord:
    """The window-estimate record a pane-log entry names; InputError when it cannot be read."""
    path = pane_file(output_dir, entry)
    if path is None:
        raise InputError(f"{os.path.join(output_dir, PANE_LOG)} names no pane file inside "
                         f"{output_dir}: {entry.get('path')!r}", OUTPUT_FIELD)
    try:
        with open(path, "rb") as handle:
            return _estimate(handle.read(), path)
    except OSError as error:
        raise InputError(f"cannot read {path}: {error.strerror}", OUTPUT_FIELD) from None


def truncate_torn_tail(path: str) -> None:
    """Cut an append-only log back to its last complete line (a crash may leave half a line)."""
    if not os.path.exists(path):
        return
    with open(path, "rb+") as handle:
        data = handle.read()
        if data and not data.endswith(b"\n"):
            handle.truncate(data.rfind(b"\n") + 1)


# -- choosing a window ----------------------------------------------------------------------------

def version_preference(record: EstimateRecord) -> tuple[int, int]:
    """How much a record stands for its window among the estimates of its configuration
    versions: a combined estimate first, then the highest version, then one without versions."""
    label = record.version
    if label == COMBINED:
        return 2, 0
    version = record.config_version  # None exactly when the label is ""
    return (0, 0) if version is None else (1, int(version))


def latest_by_window(records: list[EstimateRecord], metric: str, version: str | None = None,
                     every_version: bool = False) -> list[EstimateRecord]:
    """The last pane of each window of `metric`, sorted by window start, end, then version (as
    `version_preference`; `records` sorted as `read_estimates` sorts them).

    Of a window's estimates from several configuration versions: the one of `version`
    (``v1``, ``combined``: `output.layout.version_label`) when given, each of them with
    `every_version`, else the one that stands for the window (`version_preference`).
    ConfigError (field ``metric`` or ``config_version``) listing the metrics or versions that exist
    when there is none."""
    mine = [r for r in records if r.metric == metric]
    if not mine:
        known = sorted({r.metric for r in records})
        raise ConfigError(f"no estimates of metric {metric!r} (metrics: {', '.join(known)})",
                          "metric")
    if version is not None:
        versions = sorted({r.version for r in mine} - {""})
        mine = [r for r in mine if r.version == version]
        if not mine:
            raise ConfigError(f"no estimates of metric {metric!r} from configuration version "
                              f"{version!r} (versions: {', '.join(versions) or 'none'})",
                              "config_version")
    by_window: dict[tuple, EstimateRecord] = {}
    # a stable sort: within a version, the last pane wins; across versions, the preferred one
    for record in sorted(mine, key=version_preference):
        key = record.key
        by_window[key[1:] if every_version else key[1:3]] = record
    return sorted(by_window.values(),
                  key=lambda record: (*record.key[1:3], version_preference(record)))


def windows_at(windows: list[EstimateRecord], metric: str, window: str
               ) -> list[EstimateRecord]:
    """The windows (of one metric, as `latest_by_window` gives them) that `window` names.

    `window` is an integer index into them (0 first, -1 last), or an ISO-8601 time (UTC if
    naive): the windows that start at that time when some do, else every window that holds it
    (start <= time < end; several when windows slide or differ in length). ConfigError (field
    ``window``) listing the windows that exist when nothing matches.
    """
    try:
        position = int(window)
    except ValueError:
        try:
            wanted = ms_from_iso(window)
        except ValueError:
            raise ConfigError(f"window {window!r} is neither ISO-8601 nor an integer index",
                              "window") from None
        bounds = [w.key[1:3] for w in windows]
        found = [w for w, (start, _) in zip(windows, bounds, strict=True) if start == wanted]
        found = found or [w for w, (start, end) in zip(windows, bounds, strict=True)
                          if start <= wanted < end]
        if found:
            return found
    else:
        if -len(windows) <= position < len(windows):
            return [windows[position]]
    listing = ", ".join(f"[{i}] {w.window_start}" for i, w in enumerate(windows[:20]))
    more = f", ... ({len(windows) - 20} more)" if len(windows) > 20 else ""
    raise ConfigError(f"metric {metric!r} has no window {window!r}; its {len(windows)} "
                      f"window(s) start at: {listing}{more}", "window")


def select_window(records: list[EstimateRecord], metric: str, window: str,
                  version: str | None = None) -> EstimateRecord:
    """The one record of `metric` that `window` names (`windows_at`): an index, the start of a
    window, or a time inside exactly one window; of its configuration versions, `version` or the
    one that stands for it (`latest_by_window`). When a window has several panes the last one is
    returned. ConfigError (field ``metric``, ``config_version`` or ``window``) lists the metrics,
    versions or windows that exist when nothing matches, or the windows that hold a time held
    by several.
    """
    found = windows_at(latest_by_window(records, metric, version), metric, window)
    if len(found) > 1:
        listing = ", ".join(f"[{w.window_start} .. {w.window_end})" for w in found[:10])
        raise ConfigError(f"time {window!r} lies in {len(found)} windows of metric {metric!r} "
                          f"({listing}): give one's start or index", "window")
    return found[0]


def select_windows(records: list[EstimateRecord], metric: str,
                   windows: list[str] | None = None, first: int | None = None,
                   last: int | None = None, version: str | None = None
                   ) -> list[EstimateRecord]:
    """The windows of `metric` to show, each its last pane, in order: those `windows` names
    (`windows_at`: indices or times; every window holding a time), else all; then the `first`
    N and the `last` N of them. Each window's estimates of every configuration version, or only
    `version`'s."""
    mine = latest_by_window(records, metric, version)
    if windows:
        chosen: dict[tuple[int, int], EstimateRecord] = {}
        for window in windows:
            for record in windows_at(mine, metric, window):
                chosen[record.key[1:3]] = record
        mine = [chosen[bounds] for bounds in sorted(chosen)]
    if first is not None:
        mine = mine[:first]
    if last is not None:
        mine = mine[len(mine) - last:] if last else []
    wanted = {record.key[1:3] for record in mine}
    return [record for record in latest_by_window(records, metric, version, every_version=True)
            if record.key[1:3] in wanted]
