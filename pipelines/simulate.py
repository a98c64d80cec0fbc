"""The report simulator: real values from a CSV -> locally perturbed Avro report files.

This is what a fleet of devices would send: each value is perturbed by the metric's protocol
(ε-LDP) with an explicit numpy Generator and written as one Avro report carrying the
configuration's fingerprint, by the client library (ldp_telemetry.client): report files are
written under a temporary name and renamed.
"""
from __future__ import annotations

import csv
import glob
import gzip
import os
import re
import sys
import time
import zlib
from dataclasses import dataclass

import numpy as np

from ldp_telemetry.client import ReportFile, encode_points
from ldp_telemetry.ldp.errors import ConfigError, InputError
from ldp_telemetry.ldp.registry import MetricConfig
from ldp_telemetry.ldp.times import ms_from_iso
from ldp_telemetry.ldp.validation import EVENT_TIME_END_MS, EVENT_TIME_MIN_MS, EVENT_TIME_SPAN_TEXT
from ldp_telemetry.output.atomic import check_writable_folder
from ldp_telemetry.output.layout import metric_segment

DEFAULT_REPORTS_PER_FILE = 500_000
#: The fields of `ldp simulate` its errors name.
INPUT, OUT = "input", "out"


@dataclass(frozen=True)
class TrueValues:
    """Domain indices and event times (epoch milliseconds) of the users' true values."""

    values: np.ndarray
    event_times_ms: np.ndarray


def read_true_values(path: str, config: MetricConfig, value_column: str, time_column: str
                     ) -> TrueValues:
    """Read a value column and an event-time column, mapping values into [0, d).

    InputError (field ``input``, or the missing column's) naming the row of any problem.
    """
    opener = gzip.open if path.endswith(".gz") else open
    raw_values, raw_times = [], []
    reader = None
    try:
        with opener(path, "rt", encoding="utf-8", newline="") as handle:
            reader = csv.reader(handle)
            header = next(reader, None)
            if header is None:
                raise InputError(f"{path} is empty", INPUT)
            for column, field in ((value_column, "value_column"), (time_column, "time_column")):
                if column not in header:
                    raise InputError(f"{path} has no column {column!r} (columns: {header})",
                                     field)
            value_at, time_at = header.index(value_column), header.index(time_column)
            needed = max(value_at, time_at) + 1
            for row in reader:
                if len(row) < needed:
                    raise InputError(f"{path} row {reader.line_num}: {len(row)} fields, "
                                     f"the header has {len(header)}", INPUT)
                raw_values.append(row[value_at])
                raw_times.append(row[time_at])
    except csv.Error as error:
        raise InputError(f"{path} row {_row(reader)}: {error}", INPUT) from None
    except UnicodeDecodeError as error:
        raise InputError(f"{path} row {_row(reader)}: not UTF-8 text (byte "
                         f"{error.object[error.start]:#04x}: {error.reason})", INPUT) from None
    except (EOFError, zlib.error, gzip.BadGzipFile) as error:
        raise InputError(f"{path}: the gzip data is truncated or corrupt after row "
                         f"{_row(reader) - 1} ({type(error).__name__}: {error})", INPUT) from None
    except OSError as error:  # after BadGzipFile, an OSError too
        raise InputError(f"{path} cannot be read: {error.strerror or error}", INPUT) from None
    return TrueValues(map_to_domain(raw_values, config), parse_event_times(raw_times))


def _row(reader) -> int:
    """The row (1 = the header) a csv reader was reading when it failed."""
    return 1 if reader is None else reader.line_num + 1


def map_to_domain(raw: list[str], config: MetricConfig) -> np.ndarray:
    """Labels (or integer indices for a sized domain) -> indices in [0, d); for a numeric
    metric, numbers in [low, high] -> the unit interval, (x − low)/(high − low).

    Raises InputError naming how many values fall outside the domain and one example.
    """
    if config.kind == "numeric":
        return map_to_unit_interval(raw, config)
    distinct, inverse = np.unique(np.asarray(raw, dtype=object).astype(str), return_inverse=True)
    if config.labels is not None:
        position = {label: i for i, label in enumerate(config.labels)}
        mapped = np.array([position.get(label, -1) for label in distinct.tolist()], dtype=np.int64)
    else:
        mapped = np.array([_index_or_missing(text, config.d) for text in distinct.tolist()],
                          dtype=np.int64)
    outside = mapped < 0
    if outside.any():
        count = int(outside[inverse].sum())
        example = distinct[np.flatnonzero(outside)[0]]
        raise InputError(f"{count} values are outside the domain of metric {config.name!r} "
                         f"(for example {str(example)!r})", INPUT)
    return mapped[inverse]


def map_to_unit_interval(raw: list[str], config: MetricConfig) -> np.ndarray:
    """Numbers in [low, high] -> [0, 1]; anything else (outside, NaN, not a number) is an
    InputError with how many and one example, never a report."""
    text = np.asarray(raw, dtype=object).astype(str)
    try:
        numbers = text.astype(np.float64)
        bad = ~((numbers >= config.low) & (numbers <= config.high))  # NaN too
    except ValueError:  # some entry is not a number: find them one by one
        numbers = np.array([_number_or_nan(t) for t in text.tolist()])
        bad = ~((numbers >= config.low) & (numbers <= config.high))
    if bad.any():
        example = str(text[np.flatnonzero(bad)[0]])
        raise InputError(f"{int(bad.sum())} values are outside the domain [{config.low:g}, "
                         f"{config.high:g}] of metric {config.name!r} (for example {example!r})",
                         INPUT)
    return np.clip(config.to_unit(numbers), 0.0, 1.0)


def _number_or_nan(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return float("nan")


def _index_or_missing(text: str, d: int) -> int:
    try:
        value = int(text)
    except ValueError:
        return -1
    return value if 0 <= value < d else -1


def parse_event_times(raw: list[str]) -> np.ndarray:
    """Epoch seconds (numbers) or ISO-8601 strings (naive ones are UTC) -> epoch milliseconds.

    One format per column. Times outside [1970-01-01, 2200-01-01) UTC, which the job would
    dead-letter (`ldp_telemetry.ldp.validation.EVENT_TIME_MIN_MS` .. `EVENT_TIME_END_MS`), are an
    InputError naming the first such row: epoch milliseconds mistaken for seconds land in year
    ~45,000.
    """
    try:
        seconds = np.asarray(raw, dtype=np.float64)
    except ValueError:
        millis = np.array([_iso_millis(text, row) for row, text in enumerate(raw, start=2)],
                          dtype=np.int64)
    else:
        millis = np.round(seconds * 1000)
    outside = ~((millis >= EVENT_TIME_MIN_MS) & (millis < EVENT_TIME_END_MS))  # NaN too
    if outside.any():
        first = int(np.flatnonzero(outside)[0])
        raise InputError(f"row {first + 2}: event time {raw[first]!r} is outside "
                         f"{EVENT_TIME_SPAN_TEXT} (epoch seconds are expected, not milliseconds)",
                         INPUT)
    return millis.astype(np.int64)


def _iso_millis(text: str, row: int) -> int:
    """One ISO-8601 time (a trailing Z means UTC; naive times are UTC) in epoch milliseconds."""
    try:
        return ms_from_iso(text.strip())
    except ValueError:
        raise InputError(f"row {row}: event time {text!r} is neither epoch seconds nor ISO-8601 "
                         "(one format per column)", INPUT) from None


def simulate_reports(config: MetricConfig, truth: TrueValues, out_dir: str, seed: int | None,
                     reports_per_file: int = DEFAULT_REPORTS_PER_FILE, progress=sys.stderr,
                     overwrite: bool = False) -> list[str]:
    """Perturb every true value and write the reports to `out_dir`; returns the file paths.

    The files are `<segment>-NNNNN.avro`, `<segment>` the metric's name as
    `output.layout.metric_segment` encodes it (injective: no two metrics share files). If
    `out_dir` already holds such files of this metric (an earlier run, perhaps split
    differently) that is an InputError, since a job reading the folder would count both runs;
    `overwrite` deletes them first instead.
    """
    rng = np.random.default_rng(seed)
    check_writable_folder(out_dir, OUT)
    earlier = metric_report_files(out_dir, config.name)
    if earlier and not overwrite:
        raise InputError(f"overwrite is not set and {out_dir} already holds {len(earlier)} report "
                         f"file(s) of metric {config.name!r} (e.g. "
                         f"{os.path.basename(earlier[0])}); a job reading the folder would count "
                         "both runs: overwrite them or choose another output folder", "overwrite")
    for path in earlier:
        os.remove(path)
    n = len(truth.values)
    paths = []
    for part, start in enumerate(range(0, max(n, 1), reports_per_file)):
        stop = min(start + reports_per_file, n)
        reports = encode_points(config, truth.values[start:stop], rng,
                                event_times_ms=truth.event_times_ms[start:stop])
        path = os.path.join(out_dir, f"{metric_segment(config.name)}-{part:05d}.avro")
        with ReportFile(path) as out:
            out.write(reports)
        paths.append(path)
        if progress is not None and n > reports_per_file:
            print(f"  {stop:,}/{n:,} reports written ({100 * stop / n:.0f}%)", file=progress)
    return paths


def metric_report_files(out_dir: str, metric: str) -> list[str]:
    """The report files `simulate` wrote for `metric` in `out_dir`, and no other metric's."""
    pattern = re.compile(re.escape(metric_segment(metric)) + r"-\d{5,}\.avro")
    return sorted(os.path.join(out_dir, name) for name in os.listdir(out_dir)
                  if pattern.fullmatch(name))


def live_schedule(event_times_ms: np.ndarray, speedup: float | None = None,
                  rate: float | None = None) -> np.ndarray:
    """Seconds after the start at which each report (in event-time order) is due.

    `speedup`: event times are replayed that many times faster than real time (the first
    report is due at once); `rate`: reports are due at `rate` per second, in event-time order.
    """
    if (speedup is None) == (rate is None):
        raise ConfigError("give exactly one of speedup or rate", "speedup")
    if speedup is not None:
        if not speedup > 0:
            raise ConfigError(f"speedup must be positive, got {speedup}", "speedup")
        return (event_times_ms - event_times_ms.min()) / 1000.0 / speedup
    if not rate > 0:
        raise ConfigError(f"rate must be positive (reports per second), got {rate}", "rate")
    return np.arange(len(event_times_ms)) / rate


def simulate_live(config: MetricConfig, truth: TrueValues, out_dir: str, seed: int | None,
                  speedup: float | None = None, rate: float | None = None,
                  file_every_s: float = 1.0, overwrite: bool = False,
                  sleep=time.sleep, clock=time.monotonic, progress=sys.stderr) -> list[str]:
    """Write the perturbed reports into `out_dir` over time, as a collector would.

    Reports are sorted by event time and each is due at `live_schedule(...)`; every
    `file_every_s` seconds the reports that came due are written to one file
    `<segment>-live-NNNNN.avro` (`output.layout.metric_segment`) as a `client.ReportFile`
    (written as `....avro.tmp`, then renamed), so a follower never sees a partial file. Returns
    the paths, in the order written.
    """
    if not file_every_s > 0:
        raise ConfigError(f"file_every must be positive, got {file_every_s}", "file_every")
    rng = np.random.default_rng(seed)
    check_writable_folder(out_dir, OUT)
    stem = metric_segment(config.name)
    earlier = sorted(glob.glob(os.path.join(glob.escape(out_dir),
                                            f"{glob.escape(stem)}-live-*.avro")))
    if earlier and not overwrite:
        raise InputError(f"overwrite is not set and {out_dir} already holds {len(earlier)} live "
                         f"report file(s) of {config.name}: overwrite them or choose another "
                         "output folder", "overwrite")
    for path in earlier:
        os.remove(path)
    order = np.argsort(truth.event_times_ms, kind="stable")
    times = truth.event_times_ms[order]
    reports = encode_points(config, truth.values[order], rng, event_times_ms=times)
    due = live_schedule(times, speedup, rate)
    started, written, paths, ticks = clock(), 0, [], 0
    while written < len(times):
        ticks += 1
        sleep(max(0.0, started + ticks * file_every_s - clock()))
        upto = int(np.searchsorted(due, clock() - started, side="right"))
        if upto == written:
            continue
        name = f"{stem}-live-{len(paths):05d}.avro"
        with ReportFile(os.path.join(out_dir, name)) as out:
            out.write(reports.rows(slice(written, upto)))
        paths.append(os.path.join(out_dir, name))
        written = upto
        if progress is not None:
            print(f"  {config.name}: {written:,}/{len(times):,} reports, file {name}",
                  file=progress, flush=True)
    return paths
