"""Avro report files <-> columnar numpy batches.

Reading walks a file block by block with fastavro, gathers records into chunks of about
`CHUNK_RECORDS`, and turns each chunk into numpy columns at once: metric codes, event times,
and per metric the protocol's payload columns. Everything after that is vectorised: the
registry check, the payload validity rule and the split into time slices.

Nothing is lost: `records_read` grows by exactly the records that the batches and dead letters
of a file stand for, so that for every file read = accepted + dead-lettered. An Avro container
file is a header (ending in a 16-byte sync marker), then blocks of [record count] [byte size]
[data, compressed by the file's codec] [the sync marker]. Dead letters (reason `undecodable`
unless stated) stand for:

- a block whose records fail to decode: the record count its framing announced;
- a block that fails to be read or decompressed, with intact framing (its sync marker right
  after its announced byte size): its announced record count; reading continues with the next
  block;
- bytes without intact framing: 1 record, as the number of records they held cannot be known;
  reading continues after the next sync marker, or, with none left, they are the rest of the
  file ("unreadable from this point on");
- a file that cannot be opened (OSError) or is not an Avro container: 1 record; reading that
  fails part way (OSError) is a block that fails to be read, as above;
- a file written with a schema other than the report schema (`schema_problem`; reason
  `incompatible_schema`) or in a codec that cannot be read here (unknown, or its library is not
  installed): the sum of the record counts its blocks announce, walked by their framing
  without decompressing (plus 1 record for each run of bytes without framing, as above);
- a report for an unknown metric, with a payload of another protocol, with a payload outside
  the protocol's output space, or with an event time outside [`EVENT_TIME_MIN_MS`,
  `EVENT_TIME_END_MS`) = [1970-01-01T00:00:00Z, 2200-01-01T00:00:00Z) (reason
  `invalid_event_time`): 1 record each.
"""
from __future__ import annotations

import base64
import contextlib
import datetime as dt
import gc
import json
import threading
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterator

import fastavro
import fastavro.read
import numpy as np

from ldp_telemetry.ldp.protocols.base import Columns, FrequencyOracle
from ldp_telemetry.ldp.registry import Registry
from ldp_telemetry.schemas import NAMESPACE, load_schema
from ldp_telemetry.schemas.batches import REPORT_ID, DeadLetter, Reason, ReportBatch

CHUNK_RECORDS = 65_536
# Valid event times, epoch milliseconds: [1970-01-01T00:00:00Z, 2200-01-01T00:00:00Z). A device
# clock reset to the epoch gives times >= 0, which stay valid; times outside are not real
# (seconds or microseconds taken for milliseconds, NaN cast to int64 min) and would overflow
# the window arithmetic.
EVENT_TIME_MIN_MS = 0
EVENT_TIME_END_MS = 7_258_118_400_000
_TIMESTAMP_READER = "long-timestamp-millis"
_raw_lock = threading.Lock()
_raw_users = 0
_saved_reader = None


@contextlib.contextmanager
def raw_timestamps():
    """Within the block, fastavro returns timestamp-millis as epoch milliseconds (int).

    fastavro turns timestamp-millis into timezone-aware datetimes through its documented
    `fastavro.read.LOGICAL_READERS` table; building a datetime per report would cost more than
    the rest of the decode. The identity reader is installed while any reader is inside this
    block (reference-counted, thread-safe) and the original is restored afterwards.
    """
    global _raw_users, _saved_reader
    with _raw_lock:
        if _raw_users == 0:
            _saved_reader = fastavro.read.LOGICAL_READERS[_TIMESTAMP_READER]
            fastavro.read.LOGICAL_READERS[_TIMESTAMP_READER] = _identity
        _raw_users += 1
    try:
        yield
    finally:
        with _raw_lock:
            _raw_users -= 1
            if _raw_users == 0:
                fastavro.read.LOGICAL_READERS[_TIMESTAMP_READER] = _saved_reader


def _identity(datum, *_):
    return datum


@contextlib.contextmanager
def gc_paused():
    """No cyclic garbage collection within the block (restored afterwards if it was on).

    Decoding allocates a dict per record, all freed by reference counting; while a chunk of them
    is alive the cyclic collector would scan them again and again for nothing (measured: decode
    runs ~1.5x faster without it).
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def payload_branch(protocol: FrequencyOracle) -> str:
    """Full Avro name of the protocol's payload record."""
    return f"{NAMESPACE}.{protocol.payload_record}"


def write_reports(path: str, metric: str, protocol: FrequencyOracle, report_ids: np.ndarray,
                  event_times_ms: np.ndarray, columns: Columns, codec: str = "null") -> int:
    """Write one metric's reports to an Avro file; returns the number written."""
    branch = payload_branch(protocol)
    records = (
        {"report_id": rid, "metric": metric, "event_time": t, "payload": (branch, payload)}
        for rid, t, payload in zip(np.asarray(report_ids).tolist(),
                                   np.asarray(event_times_ms).tolist(),
                                   protocol.payloads_to_avro(columns)))
    with open(path, "wb") as out:
        fastavro.writer(out, load_schema("report"), records, codec=codec)
    return len(report_ids)


def schema_problem(writer_schema) -> str | None:
    """Why a file's writer schema (as fastavro parses it) does not hold reports; None if it does.

    It must be a record with exactly the fields of the report schema: report_id (long), metric
    (string), event_time (long, timestamp-millis) and payload, a union of payload records of the
    report schema (all of them or some, in any order), each by its full name and with the same
    fields. Checked once per file: decoding each record against a reader schema would halve the
    decode rate.
    """
    expected = _report_shapes()
    if not isinstance(writer_schema, dict) or writer_schema.get("type") != "record":
        return "not a record"
    fields = {field["name"]: field["type"] for field in writer_schema["fields"]}
    if fields.keys() != expected.keys():
        return f"fields {sorted(fields)}, expected {sorted(expected)}"
    for name in ("report_id", "metric", "event_time"):
        if _shape(fields[name]) != expected[name]:
            return f"field {name!r} is {json.dumps(fields[name])}, expected {expected[name]}"
    if not isinstance(fields["payload"], list):
        return "field 'payload' is not a union of payload records"
    for branch in fields["payload"]:
        if _shape(branch) not in expected["payload"]:
            name = branch.get("name") if isinstance(branch, dict) else branch
            return f"payload branch {name!r} is not a payload record of the report schema"
    return None


@lru_cache(maxsize=None)
def _report_shapes() -> dict:
    fields = {field["name"]: field["type"] for field in load_schema("report")["fields"]}
    shapes = {name: _shape(schema) for name, schema in fields.items()}
    shapes["payload"] = frozenset(shapes["payload"])
    return shapes


def _shape(schema):
    """What decoding depends on in a parsed schema: types, logical types, record names, fields."""
    if isinstance(schema, list):
        return tuple(_shape(branch) for branch in schema)
    if isinstance(schema, str):
        return schema
    kind = schema.get("type")
    if kind == "record":
        return ("record", schema.get("name"),
                tuple(sorted((field["name"], _shape(field["type"])) for field in schema["fields"])))
    if kind == "array":
        return ("array", _shape(schema.get("items")))
    if kind in ("null", "boolean", "int", "long", "float", "double", "bytes", "string"):
        logical = schema.get("logicalType")
        return kind if logical is None else f"{kind} ({logical})"
    return json.dumps(schema, sort_keys=True)


def report_as_json(record: dict) -> str:
    """A decoded report as JSON text (bytes as base64, event time as ISO-8601)."""
    def plain(value):
        if isinstance(value, bytes):
            return base64.b64encode(value).decode("ascii")
        if isinstance(value, tuple):
            return {"branch": value[0], **{k: plain(v) for k, v in value[1].items()}}
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items()}
        if isinstance(value, dt.datetime):
            return value.isoformat()
        return value
    return json.dumps({k: plain(v) for k, v in record.items()}, sort_keys=True)


class ReportDecoder:
    """Decodes report files into `ReportBatch`es (per metric and slice) and `DeadLetter`s."""

    def __init__(self, registry: Registry, slice_ms: int, chunk_records: int = CHUNK_RECORDS,
                 slice_offset_ms: int = 0):
        if slice_ms <= 0:
            raise ValueError(f"slice length must be positive, got {slice_ms} ms")
        self.registry = registry
        self.slice_ms = int(slice_ms)
        self.slice_offset_ms = int(slice_offset_ms) % self.slice_ms
        self.chunk_records = chunk_records
        self.records_read = 0

    def decode_file(self, path: str, opener=open) -> Iterator[ReportBatch | DeadLetter]:
        """Every batch and dead letter of one file; `records_read` grows by its record count.

        A file that cannot be opened (OSError) is one `undecodable` dead letter of 1 record.
        """
        with raw_timestamps():
            try:
                handle = opener(path, "rb")
            except OSError as error:
                self.records_read += 1
                yield DeadLetter(path, Reason.UNDECODABLE, f"cannot open the file: {error}")
                return
            with handle:
                yield from self._decode_stream(handle, path)

    def _decode_stream(self, handle, source: str) -> Iterator[ReportBatch | DeadLetter]:
        try:
            reader = fastavro.block_reader(handle, return_record_name=True)
            blocks = _Blocks(handle, reader)
        except Exception as error:  # not an Avro file at all, or not readable
            self.records_read += 1
            yield DeadLetter(source, Reason.UNDECODABLE, f"not a readable Avro file: {error}")
            return
        problem, reason = schema_problem(reader.writer_schema), Reason.INCOMPATIBLE_SCHEMA
        if problem is not None:
            problem = f"the writer schema is not a report schema: {problem}"
        else:
            problem, reason = _codec_problem(reader.codec), Reason.UNDECODABLE
        if problem is not None:
            for lost in blocks.undecoded(problem, reason):
                self.records_read += lost.records
                yield DeadLetter(source, lost.reason, lost.detail, records=lost.records)
            return
        blocks = iter(blocks)
        finished = False
        while not finished:
            with gc_paused():
                chunk, letters, finished = self._read_chunk(blocks, source)
                outputs = list(self.decode_records(chunk, source)) if chunk else []
            yield from letters
            yield from outputs

    def _read_chunk(self, blocks, source: str) -> tuple[list[dict], list[DeadLetter], bool]:
        """Whole blocks until about `chunk_records` records: (records, dead letters, at end?)."""
        chunk: list[dict] = []
        letters: list[DeadLetter] = []
        while len(chunk) < self.chunk_records:
            block = next(blocks, None)
            if block is None:
                return chunk, letters, True
            if isinstance(block, _Lost):
                self.records_read += block.records
                letters.append(DeadLetter(source, block.reason, block.detail,
                                          records=block.records))
                continue
            self.records_read += block.num_records
            decoded_before = len(chunk)
            try:
                chunk.extend(block)
            except Exception as error:
                letters.append(DeadLetter(
                    source, Reason.UNDECODABLE,
                    f"block of {block.num_records} records failed to decode: "
                    f"{type(error).__name__}: {error}", records=block.num_records))
                del chunk[decoded_before:]  # the block counts as a whole, once
        return chunk, letters, False

    def decode_records(self, records: list[dict], source: str
                       ) -> Iterator[ReportBatch | DeadLetter]:
        """Validate decoded report records and split the valid ones by (metric, slice)."""
        names = [r["metric"] for r in records]
        distinct = set(names)
        if len(distinct) == 1:
            yield from self._decode_metric(names[0], records, source)
            return
        code_of = {name: code for code, name in enumerate(distinct)}
        codes = np.array([code_of[name] for name in names], dtype=np.intp)
        for name, code in code_of.items():
            rows = np.flatnonzero(codes == code).tolist()
            yield from self._decode_metric(name, [records[i] for i in rows], source)

    def _decode_metric(self, metric: str, records: list[dict], source: str
                       ) -> Iterator[ReportBatch | DeadLetter]:
        if metric not in self.registry:
            for record in records:
                yield DeadLetter(source, Reason.UNKNOWN_METRIC,
                                 f"metric {metric!r} is not in the registry",
                                 report=report_as_json(record))
            return
        protocol = self.registry[metric].protocol
        branch = payload_branch(protocol)
        wrong = np.fromiter((r["payload"][0] != branch for r in records), dtype=bool,
                            count=len(records))
        if wrong.any():
            for i in np.flatnonzero(wrong).tolist():
                yield DeadLetter(source, Reason.PROTOCOL_MISMATCH,
                                 f"metric {metric!r} uses {protocol.name} "
                                 f"but the payload is {records[i]['payload'][0]}",
                                 report=report_as_json(records[i]))
            records = [r for r, bad in zip(records, wrong.tolist()) if not bad]
        columns, invalid = protocol.payloads_from_avro([r["payload"][1] for r in records])
        times = np.array([r["event_time"] for r in records], dtype=np.int64)
        columns[REPORT_ID] = np.array([r["report_id"] for r in records], dtype=np.int64)
        untimely = (times < EVENT_TIME_MIN_MS) | (times >= EVENT_TIME_END_MS)
        not_before = self.registry[metric].not_before_ms
        early = (np.zeros(len(times), dtype=bool) if not_before is None
                 else (times < not_before) & ~untimely & ~invalid)
        if invalid.any() or untimely.any() or early.any():
            for i in np.flatnonzero(invalid).tolist():
                yield DeadLetter(source, Reason.INVALID_PAYLOAD,
                                 f"metric {metric!r}: {protocol.payload_rule}",
                                 report=report_as_json(records[i]))
            for i in np.flatnonzero(untimely & ~invalid).tolist():
                yield DeadLetter(source, Reason.INVALID_EVENT_TIME,
                                 f"event time {times[i]} ms since the epoch is outside "
                                 f"[1970-01-01T00:00:00Z, 2200-01-01T00:00:00Z)",
                                 report=report_as_json(records[i]))
            for i in np.flatnonzero(early).tolist():
                yield DeadLetter(source, Reason.BEFORE_NOT_BEFORE,
                                 f"metric {metric!r}: event time {times[i]} ms since the epoch "
                                 f"is before the metric's not_before "
                                 f"({self.registry[metric].not_before})",
                                 report=report_as_json(records[i]))
            keep = ~(invalid | untimely | early)
            columns = {name: column[keep] for name, column in columns.items()}
            times = times[keep]
        yield from split_by_slice(metric, times, columns, self.slice_ms, self.slice_offset_ms)


def split_by_slice(metric: str, times_ms: np.ndarray, columns: Columns, slice_ms: int,
                   offset_ms: int = 0) -> Iterator[ReportBatch]:
    """One ReportBatch per time slice present, in one vectorised pass.

    Slices are [offset + i * slice_ms, offset + (i + 1) * slice_ms), as Beam's
    FixedWindows(slice, offset).
    """
    if len(times_ms) == 0:
        return
    slices = (times_ms - offset_ms) // slice_ms
    first = slices[0]
    if (slices == first).all():
        yield ReportBatch(metric, int(first) * slice_ms + offset_ms, dict(columns))
        return
    order = np.argsort(slices, kind="stable")
    ordered = slices[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    bounds = np.r_[starts, len(order)]
    for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        rows = order[lo:hi]
        yield ReportBatch(metric, int(ordered[lo]) * slice_ms + offset_ms,
                          {name: column[rows] for name, column in columns.items()})


SYNC_SIZE = 16
_SEARCH_STEP = 1 << 20


@dataclass(frozen=True)
class _Lost:
    """Bytes of a file that could not be read as blocks, standing for `records` records."""

    records: int
    detail: str
    reason: str = Reason.UNDECODABLE


class _Blocks:
    """The blocks of one Avro container file: fastavro's, resumed after a block it cannot read.

    Iterating yields fastavro `Block`s and `_Lost` runs of bytes. fastavro reads (and
    decompresses) a block inside `next()`, and its reader is finished once that raises; then the
    bad block is skipped using the container framing (header, then blocks of [record count]
    [byte size] [data] [16-byte sync marker], counts and sizes as zigzag varints) and a new
    fastavro reader continues from the next block, reading the file's header followed by the
    remaining bytes.
    """

    def __init__(self, handle, reader):
        self._handle = handle
        self._reader = reader
        self._header_end = handle.tell()  # fastavro reads no further than it needs

    def __iter__(self):
        reader, shift = self._reader, 0  # shift: file offset minus the offset the reader sees
        position = self._header_end  # file offset of the next block
        while True:
            try:
                block = next(reader)
            except StopIteration:
                return
            except Exception as error:
                why = f"{type(error).__name__}: {error}"
                try:
                    lost, position = self._skip(position, why)
                    if position is not None:
                        reader, shift = self._resume(position)
                except Exception as failure:  # the file itself cannot be read any more
                    lost, position = _Lost(1, f"unreadable from this point on (byte {position}): "
                                              f"{why}; {type(failure).__name__}: {failure}"), None
                yield lost
                if position is None:
                    return
                continue
            position = block.offset + block.size + shift
            yield block

    def _header(self) -> bytes:
        self._handle.seek(0)
        header = self._handle.read(self._header_end)
        if len(header) != self._header_end:
            raise EOFError("the file is shorter than its header")
        return header

    def _skip(self, position: int, why: str) -> tuple[_Lost, int | None]:
        """The bad block at `position` as lost bytes, and the offset of the next block (if any).

        A block whose framing is intact (its sync marker follows its announced byte size)
        stands for its announced record count; otherwise the bytes up to the next sync marker
        stand for one record, since how many they held cannot be known.
        """
        sync = self._header()[-SYNC_SIZE:]
        frame = _frame(self._handle, position, sync)
        if frame is None or frame is _END:
            return self._unframed(position, sync, why)
        count, end = frame
        return _Lost(count, f"block of {count} records at byte {position} failed to read: "
                            f"{why}"), end

    def _unframed(self, position: int, sync: bytes, why: str) -> tuple[_Lost, int | None]:
        found = _find(self._handle, position, sync)
        if found is None:
            return _Lost(1, f"unreadable from this point on (byte {position}): {why}"), None
        return _Lost(1, f"bytes {position}-{found + SYNC_SIZE} are not a readable block (record "
                        f"count unknown, reading resumes after the next sync marker): {why}"), \
            found + SYNC_SIZE

    def undecoded(self, detail: str, reason: str = Reason.UNDECODABLE) -> Iterator[_Lost]:
        """All the file's records, counted from the block framing without decompressing.

        One `_Lost` with `detail` for the blocks with intact framing, and one of 1 record for
        each run of bytes without (as in `_skip`).
        """
        records = blocks = 0
        position = self._header_end
        try:
            sync = self._header()[-SYNC_SIZE:]
            while position is not None:
                frame = _frame(self._handle, position, sync)
                if frame is _END:
                    break
                if frame is None:
                    lost, position = self._unframed(position, sync, "no block framing")
                    yield lost
                    continue
                count, position = frame
                records, blocks = records + count, blocks + 1
        except Exception as error:  # the file itself cannot be read any more
            yield _Lost(1, f"unreadable from this point on (byte {position}): "
                           f"{type(error).__name__}: {error}")
        if records:
            yield _Lost(records, f"{detail} ({records} records in {blocks} blocks, not decoded)",
                        reason)

    def _resume(self, position: int):
        """A fastavro block reader of the file's header followed by its bytes from `position`."""
        header = self._header()
        self._handle.seek(position)
        reader = fastavro.block_reader(_Spliced(header, self._handle), return_record_name=True)
        return reader, position - len(header)


class _Spliced:
    """Read-only stream: `head`, then `rest` from its current position."""

    def __init__(self, head: bytes, rest):
        self._head, self._rest, self._offset = head, rest, 0

    def read(self, size: int = -1) -> bytes:
        data = b""
        if self._offset < len(self._head):
            stop = len(self._head) if size < 0 else min(len(self._head), self._offset + size)
            data = self._head[self._offset:stop]
            size = -1 if size < 0 else size - len(data)
        if size != 0:
            data += self._rest.read(size)
        self._offset += len(data)
        return data

    def tell(self) -> int:
        return self._offset


_END = object()


def _frame(handle, position: int, sync: bytes):
    """(record count, offset after the sync marker) of the block at `position`.

    `_END` at the end of the file; None when the bytes there are not a well-framed block.
    """
    handle.seek(position)
    first = handle.read(1)
    if not first:
        return _END
    count, size = _varint(handle, first), _varint(handle)
    if count is None or size is None or count < 0 or size < 0:
        return None
    try:
        handle.seek(size, 1)
    except (OSError, ValueError):  # some remote files refuse to seek past their end
        return None
    if handle.read(SYNC_SIZE) != sync:
        return None
    return count, handle.tell()


def _varint(handle, first: bytes = b""):
    """A zigzag varint (Avro long) read from `handle`, or None if it is not one."""
    shift, value = 0, 0
    for _ in range(10):
        byte = first or handle.read(1)
        first = b""
        if not byte:
            return None
        value |= (byte[0] & 0x7F) << shift
        if byte[0] < 0x80:
            return (value >> 1) ^ -(value & 1)
        shift += 7
    return None


def _find(handle, position: int, sync: bytes) -> int | None:
    """Offset of the first sync marker at or after `position`, or None."""
    handle.seek(position)
    window = b""
    while True:
        data = handle.read(_SEARCH_STEP)
        if not data:
            return None
        window = window[-(SYNC_SIZE - 1):] + data if window else data
        at = window.find(sync)
        if at >= 0:
            return handle.tell() - len(window) + at


def _codec_problem(codec: str) -> str | None:
    """Why fastavro cannot decompress blocks of `codec` here, or None when it can."""
    read_block = fastavro.read.BLOCK_READERS.get(codec)
    if read_block is None:
        return f"unknown codec {codec!r}"
    if "missing_codec_lib" in getattr(read_block, "__qualname__", ""):
        try:  # fastavro's stand-in for a codec whose library is not installed
            read_block(None)
        except ValueError as error:
            return f"codec {codec!r} cannot be read here: {error}"
    return None
