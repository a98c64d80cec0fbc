"""The report simulator: real values from a CSV -> locally perturbed Avro report files.

This is what a fleet of devices would send: each value is perturbed by the metric's protocol
(ε-LDP) with an explicit numpy Generator and written as one Avro report.
"""
from __future__ import annotations

import csv
import datetime as dt
import gzip
import os
import sys
from dataclasses import dataclass

import numpy as np

from ldp.registry import MetricConfig
from schemas.codec import write_reports

DEFAULT_REPORTS_PER_FILE = 500_000


class InputError(ValueError):
    """The input CSV cannot be turned into reports; the message says why."""


@dataclass(frozen=True)
class TrueValues:
    """Domain indices and event times (epoch milliseconds) of the users' true values."""

    values: np.ndarray
    event_times_ms: np.ndarray


def read_true_values(path: str, config: MetricConfig, value_column: str, time_column: str
                     ) -> TrueValues:
    """Read a value column and an event-time column, mapping values into [0, d)."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", newline="") as handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        if header is None:
            raise InputError(f"{path} is empty")
        for column in (value_column, time_column):
            if column not in header:
                raise InputError(f"{path} has no column {column!r} (columns: {header})")
        value_at, time_at = header.index(value_column), header.index(time_column)
        raw_values, raw_times = [], []
        for row in reader:
            raw_values.append(row[value_at])
            raw_times.append(row[time_at])
    return TrueValues(map_to_domain(raw_values, config), parse_event_times(raw_times))


def map_to_domain(raw: list[str], config: MetricConfig) -> np.ndarray:
    """Labels (or integer indices for a sized domain) -> indices in [0, d).

    Raises InputError naming how many values fall outside the domain and one example.
    """
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
                         f"(for example {example!r})")
    return mapped[inverse]


def _index_or_missing(text: str, d: int) -> int:
    try:
        value = int(text)
    except ValueError:
        return -1
    return value if 0 <= value < d else -1


def parse_event_times(raw: list[str]) -> np.ndarray:
    """Epoch seconds (numbers) or ISO-8601 strings (naive ones are UTC) -> epoch milliseconds."""
    try:
        seconds = np.asarray(raw, dtype=np.float64)
        return np.round(seconds * 1000).astype(np.int64)
    except ValueError:
        pass
    millis = np.empty(len(raw), dtype=np.int64)
    for i, text in enumerate(raw):
        try:
            moment = dt.datetime.fromisoformat(text)
        except ValueError:
            raise InputError(f"row {i + 2}: event time {text!r} is neither epoch seconds "
                             "nor ISO-8601") from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=dt.timezone.utc)
        millis[i] = round(moment.timestamp() * 1000)
    return millis


def simulate_reports(config: MetricConfig, truth: TrueValues, out_dir: str, seed: int | None,
                     reports_per_file: int = DEFAULT_REPORTS_PER_FILE, progress=sys.stderr
                     ) -> list[str]:
    """Perturb every true value and write the reports to `out_dir`; returns the file paths."""
    rng = np.random.default_rng(seed)
    os.makedirs(out_dir, exist_ok=True)
    n = len(truth.values)
    paths = []
    for part, start in enumerate(range(0, max(n, 1), reports_per_file)):
        stop = min(start + reports_per_file, n)
        columns = config.protocol.perturb(truth.values[start:stop], rng)
        report_ids = rng.integers(0, np.iinfo(np.int64).max, size=stop - start)
        path = os.path.join(out_dir, f"{_file_stem(config.name)}-{part:05d}.avro")
        write_reports(path, config.name, config.protocol, report_ids,
                      truth.event_times_ms[start:stop], columns)
        paths.append(path)
        if progress is not None and n > reports_per_file:
            print(f"  {stop:,}/{n:,} reports written ({100 * stop / n:.0f}%)", file=progress)
    return paths


def _file_stem(metric: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in metric)
