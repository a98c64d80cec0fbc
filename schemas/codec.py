"""Avro report files <-> columnar numpy batches.

Reading walks a file block by block with fastavro, gathers records into chunks of about
`CHUNK_RECORDS`, and turns each chunk into numpy columns at once: metric codes, event times,
and per metric the protocol's payload columns. Everything after that is vectorised: the
registry check, the payload validity rule and the split into time slices.

Nothing is lost. A block that fails to decode becomes one dead letter standing for the number
of records its header announced; a file that ends early or is not Avro becomes one dead letter
for the unreadable rest; reports for an unknown metric, with a payload of another protocol, or
with a payload outside the protocol's output space become one dead letter each.
"""
from __future__ import annotations

import base64
import contextlib
import datetime as dt
import gc
import json
import threading
from typing import Iterator

import fastavro
import fastavro.read
import numpy as np

from ldp.protocols.base import Columns, FrequencyOracle
from ldp.registry import Registry
from schemas import NAMESPACE, load_schema
from schemas.batches import DeadLetter, Reason, ReportBatch

CHUNK_RECORDS = 65_536
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
        """Every batch and dead letter of one file; `records_read` grows by its record count."""
        with raw_timestamps(), opener(path, "rb") as handle:
            yield from self._decode_stream(handle, path)

    def _decode_stream(self, handle, source: str) -> Iterator[ReportBatch | DeadLetter]:
        try:
            blocks = fastavro.block_reader(handle, return_record_name=True)
        except Exception as error:  # not an Avro file at all
            self.records_read += 1
            yield DeadLetter(source, Reason.UNDECODABLE, f"not a readable Avro file: {error}")
            return
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
            try:
                block = next(blocks)
            except StopIteration:
                return chunk, letters, True
            except Exception as error:  # truncated or unsynchronised: the rest is unreadable
                self.records_read += 1
                letters.append(DeadLetter(
                    source, Reason.UNDECODABLE,
                    f"unreadable from this point on: {type(error).__name__}: {error}"))
                return chunk, letters, True
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
        if invalid.any():
            for i in np.flatnonzero(invalid).tolist():
                yield DeadLetter(source, Reason.INVALID_PAYLOAD,
                                 f"metric {metric!r}: {protocol.payload_rule}",
                                 report=report_as_json(records[i]))
            keep = ~invalid
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
