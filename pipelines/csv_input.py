"""The true values `ldp simulate` reads: a value column and an event-time column of a CSV file.

Every message names the file and the **line** of the problem, counted in the file's bytes
(line 1 is the header; a quoted field that spans lines counts each of them): lines are split and
decoded one at a time, so a byte that is not UTF-8 is reported on its own line, never on the
row the csv reader had reached when a decoder read ahead. A UTF-8 byte-order mark before the
header is dropped. Every row must have as many fields as the header (blank lines are skipped);
values outside the metric's domain and event times outside the valid span are reported with
how many there are and the lines of the first few.
"""
from __future__ import annotations

import csv
import gzip
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from ldp_telemetry.ldp.base.errors import InputError
from ldp_telemetry.ldp.base.times import ms_from_iso
from ldp_telemetry.ldp.base.validation import (EVENT_TIME_END_MS, EVENT_TIME_MIN_MS,
                                               EVENT_TIME_SPAN_TEXT)
from ldp_telemetry.ldp.config.registry import MetricConfig
from ldp_telemetry.ldp.protocols.base import STRINGS
from ldp_telemetry.ldp.protocols.string_keys import padded_rows, string_problem

#: The field of `ldp simulate` its errors name.
INPUT = "input"
#: Lines of the first wrong values a message lists.
EXAMPLES = 3


@dataclass(frozen=True)
class TrueValues:
    """Domain indices (unit-interval positions for a numeric metric) and event times (epoch
    milliseconds) of the users' true values."""

    values: np.ndarray
    event_times_ms: np.ndarray


class _Lines:
    """The decoded lines of a binary file, one at a time; `number` is the line last read."""

    def __init__(self, handle, path: str):
        self._handle, self._path = handle, path
        self.number = 0

    def __iter__(self) -> Iterator[str]:
        for raw in self._handle:
            self.number += 1
            if self.number == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]  # a UTF-8 byte-order mark
            try:
                yield raw.decode("utf-8")
            except UnicodeDecodeError as error:
                raise InputError(f"{self._path} line {self.number}: not UTF-8 text (byte "
                                 f"{raw[error.start]:#04x} at column {error.start + 1}: "
                                 f"{error.reason})", INPUT) from None


def read_true_values(path: str, config: MetricConfig, value_column: str, time_column: str
                     ) -> TrueValues:
    """Read a value column and an event-time column, mapping values into the metric's domain.

    InputError (field ``input``, or the missing column's) naming the file and the line of any
    problem.
    """
    raw_values, raw_times, line_numbers = [], [], []
    lines = None
    try:
        with (gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb")) as handle:
            lines = _Lines(handle, path)
            reader = csv.reader(lines)
            header = next(reader, None)
            if header is None:
                raise InputError(f"{path} is empty", INPUT)
            for column, field in ((value_column, "value_column"), (time_column, "time_column")):
                if column not in header:
                    raise InputError(f"{path} has no column {column!r} (columns: {header})",
                                     field)
            value_at, time_at = header.index(value_column), header.index(time_column)
            first_line = lines.number + 1
            for row in reader:
                if not row:  # a blank line
                    first_line = lines.number + 1
                    continue
                if len(row) != len(header):
                    raise InputError(f"{path} line {first_line}: {len(row)} field(s), the "
                                     f"header has {len(header)}", INPUT)
                raw_values.append(row[value_at])
                raw_times.append(row[time_at])
                line_numbers.append(first_line)
                first_line = lines.number + 1
    except csv.Error as error:
        raise InputError(f"{path} line {_line(lines)}: {error}", INPUT) from None
    except (EOFError, zlib.error, gzip.BadGzipFile) as error:
        raise InputError(f"{path}: the gzip data is truncated or corrupt after line "
                         f"{_line(lines) - 1} ({type(error).__name__}: {error})", INPUT) from None
    except OSError as error:  # after BadGzipFile, an OSError too
        raise InputError(f"{path} cannot be read: {error.strerror or error}", INPUT) from None
    where = np.asarray(line_numbers, dtype=np.int64)
    return TrueValues(map_to_domain(raw_values, config, where, path),
                      parse_event_times(raw_times, where, path))


def _line(lines: _Lines | None) -> int:
    """The line being read when reading failed (1 before the first)."""
    return 1 if lines is None else max(1, lines.number)


def _rows_text(bad: np.ndarray, lines: np.ndarray | None) -> str:
    """'lines 4, 9, 12, …' of the first wrong values (`bad`: a boolean mask over the values)."""
    first = np.flatnonzero(bad)[:EXAMPLES]
    if lines is None:
        lines = np.arange(len(bad)) + 2  # one line per row after the header
    shown = ", ".join(str(int(lines[i])) for i in first)
    more = ", …" if int(bad.sum()) > len(first) else ""
    return f"line{'s' if len(first) > 1 else ''} {shown}{more}"


def _prefix(path: str | None) -> str:
    return f"{path}: " if path else ""


def map_to_domain(raw: list[str], config: MetricConfig, lines: np.ndarray | None = None,
                  path: str | None = None) -> np.ndarray:
    """Labels (or integer indices for a sized domain) -> indices in [0, d); for a numeric
    metric, numbers in [low, high] -> the unit interval, (x − low)/(high − low).

    `lines` gives each value's line in its file (default: the value at position i is on line
    i + 2, after a header). InputError naming how many values fall outside the domain, and the
    values and lines of the first few.
    """
    if config.kind == "numeric":
        return map_to_unit_interval(raw, config, lines, path)
    if config.kind == STRINGS:
        return map_to_string_rows(raw, config, lines, path)
    distinct, inverse = np.unique(np.asarray(raw, dtype=object).astype(str), return_inverse=True)
    if config.labels is not None:
        position = {label: i for i, label in enumerate(config.labels)}
        mapped = np.array([position.get(label, -1) for label in distinct.tolist()], dtype=np.int64)
    else:
        mapped = np.array([_index_or_missing(text, config.d) for text in distinct.tolist()],
                          dtype=np.int64)
    outside = mapped < 0
    if outside.any():
        bad = outside[inverse.reshape(-1)]
        examples = _examples(raw, bad)
        raise InputError(f"{_prefix(path)}{int(bad.sum())} value(s) outside the domain of metric "
                         f"{config.name!r} (first at {_rows_text(bad, lines)}: {examples})",
                         INPUT)
    return mapped[inverse.reshape(-1)]


def map_to_string_rows(raw: list[str], config: MetricConfig, lines: np.ndarray | None = None,
                       path: str | None = None) -> np.ndarray:
    """Strings -> padded byte rows (ldp.protocols.string_keys); a string longer than the
    metric's max_bytes in UTF-8, or holding NUL, is an InputError naming how many, where and
    the first few."""
    encoded = [str(value).encode("utf-8") for value in raw]
    bad = np.array([string_problem(value, config.d) is not None for value in encoded],
                   dtype=bool)
    if bad.any():
        first = encoded[int(np.flatnonzero(bad)[0])]
        raise InputError(f"{_prefix(path)}{int(bad.sum())} value(s) cannot be reported by string "
                         f"metric {config.name!r} (first at {_rows_text(bad, lines)}: "
                         f"{_examples(raw, bad)}; it {string_problem(first, config.d)})", INPUT)
    return padded_rows(encoded, config.d)


def _examples(raw: list[str], bad: np.ndarray) -> str:
    return ", ".join(repr(str(raw[i])) for i in np.flatnonzero(bad)[:EXAMPLES])


def map_to_unit_interval(raw: list[str], config: MetricConfig, lines: np.ndarray | None = None,
                         path: str | None = None) -> np.ndarray:
    """Numbers in [low, high] -> [0, 1]; anything else (outside, NaN, not a number) is an
    InputError with how many and the values and lines of the first few, never a report."""
    text = np.asarray(raw, dtype=object).astype(str)
    try:
        numbers = text.astype(np.float64)
    except ValueError:  # some entry is not a number: find them one by one
        numbers = np.array([_number_or_nan(t) for t in text.tolist()])
    bad = ~((numbers >= config.low) & (numbers <= config.high))  # NaN too
    if bad.any():
        raise InputError(f"{_prefix(path)}{int(bad.sum())} value(s) outside the domain "
                         f"[{config.low:g}, {config.high:g}] of metric {config.name!r} (first at "
                         f"{_rows_text(bad, lines)}: {_examples(raw, bad)})", INPUT)
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


def parse_event_times(raw: list[str], lines: np.ndarray | None = None,
                      path: str | None = None) -> np.ndarray:
    """Epoch seconds (numbers) or ISO-8601 strings (naive ones are UTC) -> epoch milliseconds.

    One format per column. Times outside [1970-01-01, 2200-01-01) UTC, which the job would
    dead-letter (`ldp_telemetry.ldp.base.validation.EVENT_TIME_MIN_MS` .. `EVENT_TIME_END_MS`), are
    an InputError naming the first such lines: epoch milliseconds mistaken for seconds land in year
    ~45,000. `lines` as for `map_to_domain`.
    """
    where = np.arange(len(raw)) + 2 if lines is None else lines
    try:
        seconds = np.asarray(raw, dtype=np.float64)
    except ValueError:
        millis = np.array([_iso_millis(text, int(line), path)
                           for text, line in zip(raw, where.tolist(), strict=True)],
                          dtype=np.int64)
    else:
        millis = np.round(seconds * 1000)
    outside = ~((millis >= EVENT_TIME_MIN_MS) & (millis < EVENT_TIME_END_MS))  # NaN too
    if outside.any():
        first = int(np.flatnonzero(outside)[0])
        raise InputError(f"{_prefix(path)}line {int(where[first])}: event time {raw[first]!r} "
                         f"is outside {EVENT_TIME_SPAN_TEXT} (epoch seconds are expected, not "
                         f"milliseconds; {int(outside.sum())} such time(s), at "
                         f"{_rows_text(outside, where)})", INPUT)
    return millis.astype(np.int64)


def _iso_millis(text: str, line: int, path: str | None) -> int:
    """One ISO-8601 time (a trailing Z means UTC; naive times are UTC) in epoch milliseconds."""
    try:
        return ms_from_iso(text.strip())
    except ValueError:
        raise InputError(f"{_prefix(path)}line {line}: event time {text!r} is neither epoch "
                         "seconds nor ISO-8601 (one format per column)", INPUT) from None
