"""Walking an Avro container file block by block, checking its framing, recovering from damage.

A container file is a header (magic, metadata with the writer schema and codec, a 16-byte sync
marker), then blocks of [record count] [byte size] [data, compressed by the file's codec] [the
sync marker], counts and sizes as zigzag varints (Avro specification, Object Container Files).
This module trusts none of it: every count and size is checked against `DecodeLimits` before
anything is allocated, and what cannot be read is returned as `Lost` records instead of raised.

A block is a `Block` (verified framing, decompressed data) only if its framing is intact (its
sync marker follows its announced byte size), its announced record count is in
[1, max_block_records] and at most its decompressed byte size (every report takes at least one
byte), and its data decompresses to at most max_block_bytes. Otherwise it is `Lost`, standing for:

- a block with intact framing: its announced record count, clamped to [1, max_block_records]
  (reason `undecodable`, or `block_too_large` when only a limit was exceeded); the walk goes on
  with the next block;
- bytes without intact framing: 1 record, as the number of records they held cannot be known;
  the walk resumes after the next sync marker, or, with none left, they are the rest of the file
  ("unreadable from this point on"). A read that fails (OSError) ends the walk the same way.

Each `Lost` thus stands for at most max_block_records records, and each takes at least 19 bytes
of the file (two varints and a sync marker), so no input smaller than petabytes can bring a 64-bit
record counter near overflow.
"""
from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from collections.abc import Iterator
from typing import BinaryIO, Final, cast

import fastavro

from ldp_telemetry.ldp.engine.reasons import Reason
from ldp_telemetry.schemas.decompress import BlockTooLarge, CorruptBlock, decompress
from ldp_telemetry.schemas.limits import DecodeLimits

MAGIC = b"Obj\x01"
SYNC_SIZE = 16
_SEARCH_STEP = 1 << 20
# The header as the Avro specification defines it (Object Container Files).
HEADER_SCHEMA = fastavro.parse_schema({
    "type": "record", "name": "org.apache.avro.file.Header",
    "fields": [{"name": "magic", "type": {"type": "fixed", "name": "Magic", "size": 4}},
               {"name": "meta", "type": {"type": "map", "values": "bytes"}},
               {"name": "sync", "type": {"type": "fixed", "name": "Sync", "size": SYNC_SIZE}}]})
# What fastavro's decoder raises on bytes that are not data of the schema it reads.
FASTAVRO_DATA_ERRORS = (EOFError, StopIteration, IndexError, ValueError)


class NotAContainer(Exception):
    """The bytes do not start with a readable Avro container header."""


@dataclass(frozen=True)
class Header:
    """A container file's header: writer schema (its JSON text, parsed), codec, sync marker,
    length."""

    schema_text: str
    schema: object
    codec: str
    sync: bytes
    end: int


@dataclass(frozen=True)
class Block:
    """A block with verified framing: where it starts, its record count, its decompressed data."""

    offset: int
    records: int
    data: bytes


@dataclass(frozen=True)
class Lost:
    """Bytes of a file that could not be read as a block, standing for `records` records."""

    records: int
    detail: str
    reason: str = Reason.UNDECODABLE


def read_header(handle: BinaryIO, limits: DecodeLimits) -> Header:
    """The header at the start of `handle`, left positioned after it.

    Raises NotAContainer when the bytes are not a header of at most `limits.max_header_bytes`
    bytes holding a JSON writer schema; OSError when the file cannot be read.
    """
    if handle.read(len(MAGIC)) != MAGIC:
        raise NotAContainer("it does not start with the Avro magic bytes 'Obj\\x01'")
    handle.seek(0)
    stream = _Bounded(handle, limits.max_header_bytes)
    try:
        # _Bounded has the part of a binary file that the reader reads (read); the header
        # schema is a record
        header = cast(dict, fastavro.schemaless_reader(stream,  # type: ignore[arg-type]
                                                       HEADER_SCHEMA))
        meta = header["meta"]
        if "avro.schema" not in meta:
            raise NotAContainer("its header has no writer schema ('avro.schema')")
        schema_text = meta["avro.schema"].decode("utf-8")
        schema = json.loads(schema_text)
        codec = meta.get("avro.codec", b"null").decode("utf-8")
    except RecursionError:  # json.loads of a schema nested thousands deep
        raise NotAContainer("its writer schema is nested too deeply") from None
    except FASTAVRO_DATA_ERRORS as error:  # JSONDecodeError and UnicodeDecodeError included
        detail = f"{type(error).__name__}: {error}"
        if stream.exhausted:
            detail += (f" (or its header is longer than --max-header-bytes "
                       f"{limits.max_header_bytes})")
        raise NotAContainer(f"its header cannot be read: {detail}") from None
    return Header(schema_text, schema, codec, header["sync"], handle.tell())


class _Bounded:
    """Reads from `handle` that stop after `limit` bytes in all."""

    def __init__(self, handle: BinaryIO, limit: int) -> None:
        self._handle, self._left = handle, limit

    @property
    def exhausted(self) -> bool:
        return self._left <= 0

    def read(self, size: int = -1) -> bytes:
        size = self._left if size < 0 else min(size, self._left)
        data = self._handle.read(size) if size > 0 else b""
        self._left -= len(data)
        return data


class Container:
    """The blocks of one container file, read from `handle` after its `header`."""

    def __init__(self, handle: BinaryIO, header: Header, limits: DecodeLimits) -> None:
        self._handle = handle
        self._header = header
        self._limits = limits

    def blocks(self) -> Iterator[Block | Lost]:
        """Every block, decompressed and checked, or `Lost` (see the module's rules)."""
        limits, codec = self._limits, self._header.codec
        for frame in self._frames(read_data=True):
            if isinstance(frame, Lost):
                yield frame
                continue
            offset, count, size, data = frame
            where = f"block of {count} records at byte {offset}"
            if count <= 0 or count > limits.max_block_records:
                yield self._bad_count(offset, count)
                continue
            if data is None:  # not read: larger than the limit
                yield Lost(count, f"{where} is {size} bytes, more than --max-block-bytes "
                                  f"{limits.max_block_bytes}", Reason.BLOCK_TOO_LARGE)
                continue
            try:
                data = decompress(codec, data, limits.max_block_bytes)
            except BlockTooLarge as error:
                yield Lost(count, f"{where} decompresses to {error}, more than --max-block-bytes "
                                  f"{limits.max_block_bytes}", Reason.BLOCK_TOO_LARGE)
                continue
            except CorruptBlock as error:
                yield Lost(count, f"{where} failed to decompress ({codec}): {error}")
                continue
            if count > len(data):
                yield Lost(count, f"{where} has only {len(data)} bytes of data: its record "
                                  f"count is damaged")
                continue
            yield Block(offset, count, data)

    def undecoded(self, detail: str, reason: str = Reason.UNDECODABLE) -> Iterator[Lost]:
        """All the file's records, counted from the block framing without reading the data.

        One `Lost` with `detail` for the blocks with intact framing (each count clamped as in
        `blocks`), and one of 1 record for each run of bytes without.
        """
        records = blocks = 0
        for frame in self._frames(read_data=False):
            if isinstance(frame, Lost):
                yield frame
                continue
            records += _clamp(frame[1], self._limits.max_block_records)
            blocks += 1
        if records:
            yield Lost(records, f"{detail} ({records} records in {blocks} blocks, not decoded)",
                       reason)

    def _bad_count(self, offset: int, count: int) -> Lost:
        limit = self._limits.max_block_records
        if count > limit:
            return Lost(limit, f"block at byte {offset} announces {count} records, more than "
                               f"--max-block-records {limit}; it stands for {limit}",
                        Reason.BLOCK_TOO_LARGE)
        stands = _clamp(count, limit)
        return Lost(stands, f"block at byte {offset} announces {count} records: its record count "
                            f"is damaged; it stands for {stands}")

    def _frames(self, read_data: bool) -> Iterator[tuple[int, int, int, bytes | None] | Lost]:
        """(offset, count, size, data or None) of each block with intact framing, or `Lost`.

        `data` is read only when asked and when `size` is within the limit.
        """
        position: int | None = self._header.end
        while position is not None:
            try:
                frame = self._frame(position, read_data)
                if frame is _END:
                    return
                if frame is None:
                    lost, position = self._unframed(position)
                    yield lost
                    continue
            except OSError as error:  # the file itself cannot be read any more
                yield Lost(1, f"unreadable from this point on (byte {position}): "
                              f"{type(error).__name__}: {error}")
                return
            yield frame[:4]
            position = frame[4]

    def _frame(self, position: int, read_data: bool
               ) -> tuple[int, int, int, bytes | None, int] | _End | None:
        """(offset, count, size, data, next offset) of an intact block at `position`.

        `_END` at the end of the file; None when the bytes there are not a well-framed block.
        """
        handle, sync = self._handle, self._header.sync
        handle.seek(position)
        first = handle.read(1)
        if not first:
            return _END
        count, size = _varint(handle, first), _varint(handle)
        if count is None or size is None or size < 0:
            return None
        data = None
        if read_data and size <= self._limits.max_block_bytes:
            data = handle.read(size)
            if len(data) != size:
                return None
        else:
            try:
                handle.seek(size, 1)
            except (OSError, ValueError, OverflowError):  # past what the stream can seek to
                return None
        if handle.read(SYNC_SIZE) != sync:
            return None
        return position, count, size, data, handle.tell()

    def _unframed(self, position: int) -> tuple[Lost, int | None]:
        """The bytes from `position` to the next sync marker as 1 lost record; where to resume."""
        found = _find(self._handle, position, self._header.sync)
        if found is None:
            return Lost(1, f"unreadable from this point on (byte {position}): no block framing "
                           f"and no further sync marker"), None
        return Lost(1, f"bytes {position}-{found + SYNC_SIZE} are not a readable block (record "
                       f"count unknown, reading resumes after the next sync marker)"), \
            found + SYNC_SIZE


class _End(enum.Enum):
    """The end of the file, as `Container._frame` says it."""
    END = "end"


_END: Final = _End.END


def _clamp(count: int, limit: int) -> int:
    """What a block announcing `count` records stands for: |count| within [1, limit]."""
    return min(max(abs(count), 1), limit)


def _varint(handle: BinaryIO, first: bytes = b"") -> int | None:
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


def _find(handle: BinaryIO, position: int, sync: bytes) -> int | None:
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
