"""Decoding the records of a verified block with fastavro, checking they fill it exactly.

fastavro decodes a block's records lazily from its data; nothing in it checks that the block's
records end where its bytes end, so a record count damaged to a smaller number would drop the
rest of the block silently. Here each block is handed to one fastavro block reader per file as a
plain (codec "null") block through a `_Feed`, its records are decoded one by one while the
position in its data is followed, and a block is accepted only if exactly its announced records
consume exactly its bytes.
"""
from __future__ import annotations

import io
import json
from typing import Any

import fastavro

from ldp_telemetry.schemas.container import FASTAVRO_DATA_ERRORS, HEADER_SCHEMA, MAGIC, SYNC_SIZE
from ldp_telemetry.schemas.decompress import CorruptBlock

_SYNC = bytes(SYNC_SIZE)


class BlockRecords:
    """Decodes blocks of records of one writer schema (canonical JSON of a report schema, see
    `ldp_telemetry.schemas.compatibility`)."""

    def __init__(self, schema: dict) -> None:
        header = io.BytesIO()
        fastavro.schemaless_writer(header, HEADER_SCHEMA, {
            "magic": MAGIC, "sync": _SYNC,
            "meta": {"avro.schema": json.dumps(schema).encode(), "avro.codec": b"null"}})
        self._feed = _Feed(header.getvalue())
        # _Feed has the part of a binary file that block_reader reads (read)
        self._reader = fastavro.block_reader(self._feed,  # type: ignore[arg-type]
                                             return_record_name=True)

    def decode(self, records: int, data: bytes, sizes: bool = False
               ) -> tuple[list[dict], list[int] | None]:
        """The `records` records of a block's decompressed `data`, and with `sizes` each one's
        size in bytes (None without: decoding runs at fastavro's own pace).

        Raises CorruptBlock when they fail to decode or do not end exactly at the end of `data`.
        """
        self._feed.put(_long(records) + _long(len(data)), data, _SYNC)
        block = next(self._reader)
        # the block's data, as fastavro reads it (tests/test_dependency_contract.py)
        stream = block.bytes_  # type: ignore[attr-defined]
        decoded: list[Any] = []  # the report schema's records: dicts
        record_sizes: list[int] | None = None
        try:
            if sizes:
                record_sizes, position = [], 0
                for record in block:
                    decoded.append(record)
                    record_sizes.append(stream.tell() - position)
                    position += record_sizes[-1]
            else:
                decoded.extend(block)
        except FASTAVRO_DATA_ERRORS as error:
            raise CorruptBlock(f"record {len(decoded) + 1} of {records} fails to decode (byte "
                               f"{stream.tell()}): {type(error).__name__}: {error}") from None
        if stream.tell() != len(data):
            raise CorruptBlock(f"its {records} records end at byte {stream.tell()} of its "
                               f"{len(data)}: its record count or data is damaged")
        return decoded, record_sizes

    def encoded_size(self, record: dict) -> int:
        """Size in bytes of a decoded record encoded again (as every standard writer stores it)."""
        buffer = io.BytesIO()
        fastavro.schemaless_writer(buffer, self._reader.writer_schema, record)
        return buffer.tell()


class _Feed:
    """The stream the fastavro reader reads: a header, then the pieces of each block put in."""

    def __init__(self, header: bytes):
        self._pieces = [header]
        self._offset = 0

    def put(self, *pieces: bytes) -> None:
        self._pieces.extend(pieces)

    def read(self, size: int = -1) -> bytes:
        out = []
        while self._pieces and size != 0:
            piece = self._pieces[0]
            if 0 <= size < len(piece):
                out.append(piece[:size])
                self._pieces[0] = piece[size:]
                size = 0
            else:
                out.append(piece)
                self._pieces.pop(0)
                size -= len(piece) if size > 0 else 0
        data = out[0] if len(out) == 1 else b"".join(out)
        self._offset += len(data)
        return data

    def tell(self) -> int:
        return self._offset


def _long(value: int) -> bytes:
    """An Avro long: zigzag varint."""
    value = (value << 1) ^ (value >> 63)
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
