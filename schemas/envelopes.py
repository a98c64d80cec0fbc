"""Report envelopes: a batch of reports of one metric configuration as little-endian columns.

One Avro record of `schemas/envelope.avsc` carries N reports made under one configuration: the
metric and the configuration fingerprint once, the count N, the report ids and event times as N
little-endian int64 each, and one `bytes` column per field of the protocol's payload record (the
record the per-report schema names in its payload union), in the record's field order:

    Avro type of the field   column bytes                      decoded as
    int                      N × 4, int32 little-endian        int32 view
    long                     N × 8, int64 little-endian        int64 view
    double                   N × 8, float64 little-endian      float64 view
    boolean                  ceil(N / 8), bit i of the vector  bool
                             at byte i // 8, bit i % 8 (least
                             significant first), unused bits 0
    bytes (a bit vector)     N × ceil(d / 8), row after row    (N, ceil(d / 8)) uint8 view
    array of int (k items)   N × k × 4, int32 little-endian    (N, k) int32 view

`ENVELOPE_LAYOUT` is the version of this layout; docs/envelopes.md describes it byte by byte.
Decoding is O(1) Python per envelope: `np.frombuffer` views of the columns. An envelope whose
layout, count or column sizes disagree is malformed as a whole (`MalformedEnvelope`); the payload
rule of each report is the protocol's `check_payloads`, as for per-report records.

A malformed envelope stands for its count only when its own columns hold that count
(`envelope_count`): a count its columns disagree with is evidence that the count is false, so
such an envelope stands for 1 report whatever it claims (16 bytes of ids and times per claimed
report are the least a file must carry for each report it makes a job count).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any, BinaryIO

import numpy as np
from fastavro.write import Writer

from ldp_telemetry.ldp.base.errors import ConfigError
from ldp_telemetry.ldp.base.validation import is_positive_int
from ldp_telemetry.ldp.protocols.base import Columns
from ldp_telemetry.schemas import SCHEMA_DIR, load_schema
from ldp_telemetry.schemas.compatibility import ENVELOPE_RECORD
from ldp_telemetry.schemas.limits import DecodeLimits
from ldp_telemetry.schemas.writer import BLOCK_BYTES

if TYPE_CHECKING:
    from ldp_telemetry.ldp.protocols.base import FrequencyOracle
    from ldp_telemetry.ldp.protocols.numeric import NumericProtocol

#: The layout version this module writes and reads.
ENVELOPE_LAYOUT = 1
#: Full Avro name of the envelope record: how a reader tells envelope files from report files.
ENVELOPE_NAME = ENVELOPE_RECORD
_ID_TIME = np.dtype("<i8")
_FIXED: dict[str, np.dtype] = {"int": np.dtype("<i4"), "long": np.dtype("<i8"),
                               "double": np.dtype("<f8")}


class MalformedEnvelope(ValueError):
    """An envelope whose structure is wrong (layout, count, column count or sizes); the message
    says which field. `count_held`: False when the columns disagree with the count (the envelope
    then stands for 1 report, `envelope_count`)."""

    def __init__(self, message: str, count_held: bool = True):
        super().__init__(message)
        self.count_held = count_held


@dataclass(frozen=True)
class Column:
    """One payload column: the field's `name`, its Avro `kind` (int, long, double, boolean,
    bytes, array) and `width`, the items per report (bytes per row of a bit vector, k of an
    array; 1 otherwise)."""

    name: str
    kind: str
    width: int = 1

    def size(self, count: int) -> int:
        """Bytes of the column for `count` reports."""
        if self.kind == "boolean":
            return (count + 7) // 8
        if self.kind == "bytes":
            return count * self.width
        item = _FIXED["int" if self.kind == "array" else self.kind].itemsize
        return count * self.width * item

    def decode(self, data: bytes, count: int) -> np.ndarray:
        """The column's numpy values (a read-only view, or the unpacked bits)."""
        if self.kind == "boolean":
            bits = np.unpackbits(np.frombuffer(data, np.uint8), bitorder="little")
            if bits[count:].any():
                raise MalformedEnvelope(f"column {self.name!r}: bits after the {count} reports "
                                        f"are set")
            return bits[:count].astype(bool)
        if self.kind == "bytes":
            return np.frombuffer(data, np.uint8).reshape(count, self.width)
        if self.kind == "array":
            return np.frombuffer(data, _FIXED["int"]).reshape(count, self.width)
        return np.frombuffer(data, _FIXED[self.kind])

    def encode(self, values: np.ndarray) -> bytes:
        if self.kind == "boolean":
            return np.packbits(np.asarray(values, dtype=bool), bitorder="little").tobytes()
        if self.kind == "bytes":
            return np.ascontiguousarray(values, dtype=np.uint8).tobytes()
        dtype = _FIXED["int" if self.kind == "array" else self.kind]
        return np.ascontiguousarray(values).astype(dtype, copy=False).tobytes()


@cache
def _payload_fields(record: str) -> tuple[tuple[str, str], ...]:
    """(field name, Avro kind) of the payload record `record` of schemas/report.avsc."""
    with open(SCHEMA_DIR / "report.avsc", encoding="utf-8") as handle:
        schema = json.load(handle)
    union = next(f for f in schema["fields"] if f["name"] == "payload")["type"]
    branch = next(b for b in union if b["name"] == record)
    return tuple((f["name"], f["type"] if isinstance(f["type"], str) else f["type"]["type"])
                 for f in branch["fields"])


def payload_columns(protocol: FrequencyOracle | NumericProtocol) -> tuple[Column, ...]:
    """The envelope columns of `protocol`'s payload, in the payload record's field order."""
    columns = []
    for name, kind in _payload_fields(protocol.payload_record):
        width = 1
        if kind == "bytes":
            width = _inner(protocol).n_bytes
        elif kind == "array":
            width = _inner(protocol).k
        columns.append(Column(name, kind, width))
    return tuple(columns)


def _inner(protocol: FrequencyOracle | NumericProtocol) -> Any:
    """The frequency oracle a numeric protocol bins into (itself otherwise). Typed Any: its
    width (`n_bytes` of a bit vector, `k` of a subset) follows from its payload record, which
    the types do not tie to the class."""
    return getattr(protocol, "inner", protocol)


def envelope_record(metric: str, protocol: FrequencyOracle | NumericProtocol,
                    report_ids: np.ndarray, event_times_ms: np.ndarray, columns: Columns,
                    fingerprint: bytes | None = None) -> dict:
    """The envelope record (schemas/envelope.avsc) of one batch of reports of `metric`."""
    ids = np.asarray(report_ids, dtype=np.int64)
    times = np.asarray(event_times_ms, dtype=np.int64)
    if len(times) != len(ids):
        raise ValueError(f"{len(ids)} report ids but {len(times)} event times")
    encoded = []
    for column in payload_columns(protocol):
        values = np.asarray(columns[column.name])
        if len(values) != len(ids):
            raise ValueError(f"payload column {column.name!r} has {len(values)} rows, "
                             f"expected {len(ids)}")
        encoded.append(column.encode(values))
    return {"layout": ENVELOPE_LAYOUT, "metric": metric, "fingerprint": fingerprint,
            "count": len(ids), "payload": protocol.payload_record,
            "report_ids": ids.astype(_ID_TIME, copy=False).tobytes(),
            "event_times": times.astype(_ID_TIME, copy=False).tobytes(),
            "columns": encoded}


def envelope_schema() -> dict:
    """The parsed fastavro schema of envelopes."""
    return load_schema("envelope")


def envelope_count(record: dict, max_reports: int) -> int:
    """How many reports an envelope record stands for: its count when in [1, max_reports] and
    its report ids and event times hold exactly that many (8 bytes each per report), else 1 (a
    count that cannot be trusted still stands for the envelope itself). The payload columns are
    checked against the count where the protocol is known (`decode_columns`: `count_held`)."""
    count = record.get("count")
    if not (isinstance(count, int) and 1 <= count <= max_reports):
        return 1
    width = count * _ID_TIME.itemsize
    held = all(isinstance(record.get(name), bytes) and len(record[name]) == width
               for name in ("report_ids", "event_times"))
    return count if held else 1


def envelope_stands(record: dict, stands: int) -> str:
    """How a dead letter's detail names a malformed envelope standing for `stands` reports,
    keeping the count it claims when that differs."""
    claimed = record.get("count")
    if claimed == stands:
        return f"report envelope of {stands} report(s)"
    return (f"report envelope claiming {claimed!r} reports, standing for {stands} (a count its "
            "columns do not hold, or outside the limit, is not trusted)")


def check_header(record: dict, max_reports: int) -> int:
    """The envelope's count after checking its layout version and count; MalformedEnvelope."""
    layout = record["layout"]
    if layout != ENVELOPE_LAYOUT:
        raise MalformedEnvelope(f"layout version {layout}; this reader reads layout "
                                f"{ENVELOPE_LAYOUT}")
    count: int = record["count"]  # the schema's long
    if not 0 <= count <= max_reports:
        raise MalformedEnvelope(f"count {count} is outside [0, --max-envelope-reports "
                                f"{max_reports}]")
    return count


def decode_columns(record: dict, protocol: FrequencyOracle | NumericProtocol, count: int
                   ) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """(report ids, event times, payload columns) of an envelope of `protocol`'s payload, as
    views of its bytes; MalformedEnvelope naming the field whose size disagrees with `count`."""
    for name in ("report_ids", "event_times"):
        if len(record[name]) != count * _ID_TIME.itemsize:
            raise MalformedEnvelope(f"{name} is {len(record[name])} bytes, expected "
                                    f"{count * _ID_TIME.itemsize} for {count} reports", False)
    layout = payload_columns(protocol)
    data = record["columns"]
    if len(data) != len(layout):
        raise MalformedEnvelope(f"{len(data)} payload columns, expected {len(layout)} "
                                f"({', '.join(c.name for c in layout)}) for "
                                f"{protocol.payload_record}", False)
    columns = {}
    for column, raw in zip(layout, data, strict=True):
        if len(raw) != column.size(count):
            raise MalformedEnvelope(f"column {column.name!r} is {len(raw)} bytes, expected "
                                    f"{column.size(count)} for {count} reports", False)
        columns[column.name] = column.decode(raw, count)
    return (np.frombuffer(record["report_ids"], _ID_TIME),
            np.frombuffer(record["event_times"], _ID_TIME), columns)


#: Reports per envelope that writers use unless told otherwise.
DEFAULT_ENVELOPE_REPORTS = 10_000
#: Most reports per envelope a writer makes: what a reader accepts by default
#: (DecodeLimits.max_envelope_reports), so that no writer makes envelopes a default job refuses.
MAX_WRITTEN_ENVELOPE_REPORTS = DecodeLimits().max_envelope_reports


def envelope_reports_problem(value: object) -> str | None:
    """Why `value` is not a number of reports per written envelope (a phrase), or None."""
    if not is_positive_int(value) or value > MAX_WRITTEN_ENVELOPE_REPORTS:
        return (f"must be an integer in [1, {MAX_WRITTEN_ENVELOPE_REPORTS:,}] "
                "(MAX_WRITTEN_ENVELOPE_REPORTS: a job's default --max-envelope-reports), got "
                f"{value!r}")
    return None


class EnvelopeWriter:
    """An Avro container of report envelopes on an open binary file: header at once, then one
    envelope per `envelope_reports` reports appended (the last one of a `write` may hold
    fewer); a block is closed once it holds about `block_bytes` bytes."""

    def __init__(self, handle: BinaryIO, codec: str = "null", block_bytes: int = BLOCK_BYTES,
                 envelope_reports: int = DEFAULT_ENVELOPE_REPORTS):
        problem = envelope_reports_problem(envelope_reports)
        if problem:
            raise ConfigError(f"envelope_reports {problem}", "envelope_reports")
        self._writer = Writer(handle, envelope_schema(), codec=codec, sync_interval=block_bytes)
        self.envelope_reports = envelope_reports
        self.count = 0
        self.envelopes = 0

    def write(self, metric: str, protocol: FrequencyOracle | NumericProtocol,
              report_ids: np.ndarray, event_times_ms: np.ndarray, columns: Columns,
              fingerprint: bytes | None = None) -> int:
        """Append the reports of one metric configuration, in envelopes; returns how many."""
        n = len(report_ids)
        for start in range(0, n, self.envelope_reports):
            rows = slice(start, start + self.envelope_reports)
            self._writer.write(envelope_record(
                metric, protocol, report_ids[rows], event_times_ms[rows],
                {name: column[rows] for name, column in columns.items()}, fingerprint))
            self.envelopes += 1
        self.count += n
        return n

    def flush(self) -> None:
        self._writer.flush()


def write_envelopes(path: str | BinaryIO, metric: str,
                    protocol: FrequencyOracle | NumericProtocol, report_ids: np.ndarray,
                    event_times_ms: np.ndarray, columns: Columns, codec: str = "null",
                    envelope_reports: int = DEFAULT_ENVELOPE_REPORTS,
                    fingerprint: bytes | None = None) -> int:
    """Write one metric's reports to an Avro file of envelopes (a path, or a binary file
    object); returns the number of reports written."""
    if not isinstance(path, str):
        return _write_all(path, metric, protocol, report_ids, event_times_ms, columns, codec,
                          envelope_reports, fingerprint)
    with open(path, "wb") as out:
        return _write_all(out, metric, protocol, report_ids, event_times_ms, columns, codec,
                          envelope_reports, fingerprint)


def _write_all(handle: BinaryIO, metric: str, protocol: FrequencyOracle | NumericProtocol,
               ids: np.ndarray, times: np.ndarray, columns: Columns, codec: str,
               envelope_reports: int, fingerprint: bytes | None) -> int:
    writer = EnvelopeWriter(handle, codec, envelope_reports=envelope_reports)
    writer.write(metric, protocol, np.asarray(ids), np.asarray(times), columns, fingerprint)
    writer.flush()
    return writer.count
