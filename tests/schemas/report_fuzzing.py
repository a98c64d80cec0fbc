"""Fuzzing report files: damage real files written by the project and check nothing is lost.

A case is a seed file (one per codec the project can write here) and a plan of 1 to 6 edits,
each aimed at one part of the container: the header, a block's record count or byte size (bit
and byte flips, or a new value, 2^62 and negative ones included), its data, its sync marker, or
anywhere, by flipping a bit, setting, inserting or deleting bytes, or truncating the file. The
plan is drawn as bytes, 8 per edit. The property, checked on the decoder directly: no
exception, read = accepted + dead-lettered, every dead letter of bounded size, and memory
bounded by the limits.

Envelope files (docs/envelopes.md) are fuzzed twice: their containers with the same byte edits,
and their envelopes' fields with `envelope_plans` (truncated, extended or damaged columns, counts
that disagree with the columns, oversized and negative counts, fingerprints of the wrong length
or another metric's, unknown layout versions, another protocol's payload, unknown metrics),
the damaged envelopes written as a well-formed file; read and accepted are then in reports.
"""
from __future__ import annotations

import functools
import io
import tracemalloc
from dataclasses import dataclass

import fastavro
import numpy as np
from hypothesis import strategies as st

from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.ldp.engine.batches import MAX_DETAIL_CHARS, DeadLetter, ReportBatch
from ldp_telemetry.schemas import load_schema
from ldp_telemetry.schemas.codec import ReportDecoder
from ldp_telemetry.schemas.decompress import CODEC_MEMORY_LIMIT, codec_problem
from ldp_telemetry.schemas.envelopes import envelope_record, envelope_schema
from ldp_telemetry.schemas.limits import DecodeLimits
from ldp_telemetry.schemas.writer import write_reports
from tests.schemas.avro_blocks import decode_long, encode_long

REGISTRY = parse_registry({"metrics": [
    {"name": "fuzz.grr", "protocol": "grr", "epsilon": 1.0, "domain": {"size": 8}},
    {"name": "fuzz.oue", "protocol": "oue", "epsilon": 1.0, "domain": {"size": 12}},
    {"name": "fuzz.olh", "protocol": "olh", "epsilon": 1.0, "domain": {"size": 8}},
    {"name": "fuzz.ss", "protocol": "ss", "epsilon": 1.0, "domain": {"size": 8}},
]})
HOUR = 3_600_000
T0 = 1_717_200_000_000
LIMITS = DecodeLimits(max_block_bytes=256 << 10, max_block_records=5_000,
                      max_record_bytes=16 << 10, max_dead_letter_report_chars=512,
                      max_envelope_reports=1_000, max_envelope_bytes=64 << 10)
# Peak traced memory of one case: a few copies of the largest block (decompression output, its
# records' Python objects), plus, for xz and zstandard, the window their stream states (bounded
# apart by CODEC_MEMORY_LIMIT); far below what a bomb or a 2^62 count would take (gigabytes).
MEMORY_BOUND = 16 * LIMITS.max_block_bytes


def memory_bound(codec: str) -> int:
    return MEMORY_BOUND + (CODEC_MEMORY_LIMIT if codec in ("xz", "zstandard") else 0)
METRICS = ("fuzz.grr", "fuzz.oue", "fuzz.ss")


def _writable(codec: str) -> bool:
    """Whether the project can write (fastavro) and read (this reader) files of `codec` here."""
    try:
        fastavro.writer(io.BytesIO(), load_schema("report"), [{
            "report_id": 0, "metric": "m", "event_time": 0,
            "payload": ("ldp.telemetry.GrrPayload", {"value": 0})}], codec=codec)
    except ValueError:
        return False
    return codec_problem(codec) is None


CODECS = [codec for codec in ("null", "deflate", "snappy", "bzip2", "xz", "zstandard", "lz4")
          if _writable(codec)]


def seed_files(directory) -> dict[str, bytes]:
    """{"<metric> <codec>": bytes} of report files written by the project, several blocks each,
    the reports carrying their configuration's fingerprint (so that edits reach it too)."""
    rng = np.random.default_rng(7)
    seeds = {}
    for codec in CODECS:
        for metric in METRICS:
            protocol = REGISTRY[metric].protocol
            n = 24
            columns = protocol.perturb(rng.integers(0, protocol.d, n), rng)
            path = directory / f"{metric}-{codec}.avro"
            write_reports(str(path), metric, protocol, np.arange(n),
                          T0 + rng.integers(0, 3 * HOUR, n), columns, codec=codec,
                          block_bytes=150, fingerprint=REGISTRY[metric].fingerprint)
            seeds[f"{metric} {codec}"] = path.read_bytes()
    return seeds


#: Reports in each seed envelope file, and per envelope.
ENVELOPE_SEED_REPORTS, SEED_ENVELOPE_REPORTS = 24, 6


def seed_envelopes(metric: str) -> list[dict]:
    """The envelope records of `metric`'s envelope seed (fingerprints included)."""
    rng = np.random.default_rng(11)
    protocol, n = REGISTRY[metric].protocol, ENVELOPE_SEED_REPORTS
    columns = protocol.perturb(rng.integers(0, protocol.d, n), rng)
    times = T0 + rng.integers(0, 3 * HOUR, n)
    return [envelope_record(metric, protocol, np.arange(lo, lo + SEED_ENVELOPE_REPORTS),
                            times[lo:lo + SEED_ENVELOPE_REPORTS],
                            {k: v[lo:lo + SEED_ENVELOPE_REPORTS] for k, v in columns.items()},
                            REGISTRY[metric].fingerprint)
            for lo in range(0, n, SEED_ENVELOPE_REPORTS)]


def envelope_seed_files(directory) -> dict[str, bytes]:
    """{"<metric> <codec>": bytes} of envelope files written by the project, one envelope of
    SEED_ENVELOPE_REPORTS reports per block."""
    seeds = {}
    for codec in CODECS:
        for metric in METRICS:
            records = seed_envelopes(metric)
            path = directory / f"{metric}-{codec}-envelopes.avro"
            with open(path, "wb") as out:
                fastavro.writer(out, envelope_schema(), records, codec=codec, sync_interval=150)
            seeds[f"{metric} {codec}"] = path.read_bytes()
    return seeds


ENVELOPE_FIELDS = ("layout", "count", "metric", "fingerprint", "payload", "report_ids",
                   "event_times", "columns")
ENVELOPE_OPERATIONS = ("truncate", "extend", "flip", "value", "drop", "duplicate")


@dataclass(frozen=True)
class EnvelopeEdit:
    field: str
    operation: str
    which: int  # the envelope (modulo their number), or the column
    value: int


def envelope_plans():
    """Plans of 1 to 4 envelope edits, drawn as bytes (5 per edit): see `envelope_plan_of`."""
    return st.binary(min_size=5, max_size=20)


def envelope_plan_of(blob: bytes) -> list[EnvelopeEdit]:
    blob = blob + bytes(-len(blob) % 5)
    return [EnvelopeEdit(ENVELOPE_FIELDS[f % len(ENVELOPE_FIELDS)],
                         ENVELOPE_OPERATIONS[o % len(ENVELOPE_OPERATIONS)], w,
                         int.from_bytes(bytes([v0, v1]), "little", signed=True))
            for f, o, w, v0, v1 in (blob[at:at + 5] for at in range(0, len(blob), 5))]


def apply_envelope_edits(records: list[dict], plan: list[EnvelopeEdit]) -> bytes:
    """An envelope file (codec null) of `records` with the edits applied to their fields."""
    records = [dict(r, columns=list(r["columns"])) for r in records]
    for edit in plan:
        record = records[edit.which % len(records)]
        name, value = edit.field, edit.value
        if name in ("layout", "count"):
            interesting = INTERESTING[value % len(INTERESTING)]
            if name == "layout":
                interesting = max(min(interesting, 2 ** 31 - 1), -2 ** 31)
            record[name] = (interesting if edit.operation == "value"
                            else max(min(record[name] + value % 7 - 3, 2 ** 63 - 1), -2 ** 63))
        elif name == "metric":
            record[name] = (METRICS + ("fuzz.olh", "nope", "m" * 300))[value % 6]
        elif name == "fingerprint":
            others = [REGISTRY[m].fingerprint for m in METRICS]
            record[name] = ([None, b"", bytes(15), bytes(17), bytes(16)] + others)[value % 8]
        elif name == "payload":
            record[name] = ("GrrPayload", "OuePayload", "OlhPayload", "SsPayload", "x")[value % 5]
        elif name == "columns" and edit.operation in ("drop", "duplicate"):
            columns = record[name]
            if edit.operation == "drop" and columns:
                columns.pop(value % len(columns))
            elif columns:
                columns.append(columns[value % len(columns)])
        else:
            if name == "columns":
                if not record[name]:
                    continue
                at = value % len(record[name])
                data = bytearray(record[name][at])
            else:
                data = bytearray(record[name])
            if edit.operation == "truncate":
                del data[len(data) - 1 - abs(value) % max(len(data), 1):]
            elif edit.operation == "extend":
                data += bytes([value % 256]) * (1 + abs(value) % 9)
            elif data:  # flip or set a byte: values out of range, padding bits, times
                data[abs(value) % len(data)] ^= 1 << (value % 8) if edit.operation == "flip" \
                    else 0xFF
            if name == "columns":
                record[name][at] = bytes(data)
            else:
                record[name] = bytes(data)
    out = io.BytesIO()
    fastavro.writer(out, envelope_schema(), records)
    return out.getvalue()


@dataclass(frozen=True)
class Layout:
    """Byte ranges of a well-formed container: header, and per block count, size, data, sync."""

    header: tuple[int, int]
    blocks: tuple[tuple[tuple[int, int], ...], ...]  # per block: count, size, data, sync ranges

    @classmethod
    def of(cls, data: bytes) -> Layout:
        sync = data[-16:]
        at = data.index(sync) + 16
        header, blocks = (0, at), []
        while at < len(data):
            _, size_at = decode_long(data, at)
            size, data_at = decode_long(data, size_at)
            end = data_at + size
            blocks.append(((at, size_at), (size_at, data_at), (data_at, end), (end, end + 16)))
            at = end + 16
        return cls(header, tuple(blocks))

    def region(self, target: str, which: int) -> tuple[int, int]:
        if target == "header":
            return self.header
        part = ("count", "size", "data", "sync").index(target)
        return self.blocks[which % len(self.blocks)][part]


TARGETS = ("header", "count", "size", "data", "sync", "anywhere")
OPERATIONS = ("flip", "set", "insert", "delete", "truncate", "value")
INTERESTING = (0, 1, -1, 2, 127, 128, 2 ** 31, 2 ** 62, 2 ** 63 - 1, -2 ** 63, -(2 ** 62))


@dataclass(frozen=True)
class Edit:
    target: str
    operation: str
    which: int  # block number (modulo the block count)
    position: int  # offset in the target region (modulo its length)
    value: int  # a byte, a bit number, a length, or an index into INTERESTING / a delta


EDIT_BYTES = 8


def plans():
    """Plans of 1 to 6 edits, drawn as bytes (cheap to draw and to shrink): see `plan_of`."""
    return st.binary(min_size=EDIT_BYTES, max_size=6 * EDIT_BYTES)


def plan_of(blob: bytes) -> list[Edit]:
    """The edits that each 8 bytes of `blob` stand for (a shorter tail is padded with zeros)."""
    blob = blob + bytes(-len(blob) % EDIT_BYTES)
    plan = []
    for at in range(0, len(blob), EDIT_BYTES):
        target, operation, which, p0, p1, p2, v0, v1 = blob[at:at + EDIT_BYTES]
        plan.append(Edit(TARGETS[target % len(TARGETS)], OPERATIONS[operation % len(OPERATIONS)],
                         which % 64, p0 | p1 << 8 | p2 << 16,
                         int.from_bytes(bytes([v0, v1]), "little", signed=True) % 601 - 300))
    return plan


def apply(data: bytes, layout: Layout, plan: list[Edit]) -> bytes:
    """`data` with the edits applied in order (regions as in the undamaged layout, clamped)."""
    out = bytearray(data)
    for edit in plan:
        if edit.target == "anywhere":
            lo, hi = 0, len(out)
        else:
            lo, hi = layout.region(edit.target, edit.which)
            lo, hi = min(lo, len(out)), min(hi, len(out))
        if hi <= lo:
            continue
        at = lo + edit.position % (hi - lo)
        if edit.operation == "flip":
            out[at] ^= 1 << (edit.value % 8)
        elif edit.operation == "set":
            out[at] = edit.value % 256
        elif edit.operation == "insert":
            out[at:at] = bytes([edit.value % 256]) * (1 + abs(edit.value) % 4)
        elif edit.operation == "delete":
            del out[at:at + 1 + abs(edit.value) % 8]
        elif edit.operation == "truncate":
            del out[at:]
        elif edit.target in ("count", "size"):  # "value": a new varint in place of the old one
            old, end = _varint_at(out, lo)
            if old is None:
                continue
            new = (INTERESTING[edit.value % len(INTERESTING)] if edit.value >= 0
                   else old + edit.value)
            out[lo:end] = encode_long(new)
        else:  # "value" elsewhere: a run of one byte
            out[at:at + 1 + edit.position % 16] = bytes([edit.value % 256]) * (
                1 + edit.position % 16)
    return bytes(out)


def _varint_at(data, at):
    try:
        value, end = decode_long(bytes(data[at:at + 10]), 0)
    except IndexError:
        return None, at
    return value, at + end


def check(data: bytes, source: str = "fuzz.avro", limits: DecodeLimits = LIMITS
          ) -> tuple[int, int, int]:
    """Decode `data` as a report file and check the property; (read, accepted, dead-lettered).

    One decoder serves every case with the same limits, as one serves every file of a job.
    """
    decoder = _decoder(limits)
    before = decoder.records_read
    accepted = dead = 0
    for item in decoder.decode_file(source, opener=lambda path, mode: io.BytesIO(data)):
        if isinstance(item, DeadLetter):
            # A block stands for at most max_block_records, and takes at least 19 bytes; an
            # envelope for at most max_envelope_reports.
            assert 1 <= item.records <= max(limits.max_block_records * (len(data) // 19 + 1),
                                             limits.max_envelope_reports), item
            assert len(item.detail) <= MAX_DETAIL_CHARS, item.detail
            assert item.report is None or len(item.report) <= \
                limits.max_dead_letter_report_chars, item.report
            dead += item.records
        else:
            assert isinstance(item, ReportBatch) and item.n > 0
            accepted += item.n
    read = decoder.records_read - before
    assert read == accepted + dead, (read, accepted, dead)
    return read, accepted, dead


@functools.lru_cache(maxsize=4)
def _decoder(limits: DecodeLimits) -> ReportDecoder:
    return ReportDecoder(REGISTRY, HOUR, limits=limits)


def check_with_memory(data: bytes, codec: str) -> tuple[int, int, int]:
    """`check`, with the peak of memory traced while decoding under the bound of `codec`.

    Tracing every allocation slows decoding several times: callers check a sample of cases.
    """
    tracemalloc.start()
    try:
        counts = check(data)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < memory_bound(codec), f"peak {peak} bytes, bound {memory_bound(codec)}"
    return counts
