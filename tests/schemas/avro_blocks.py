"""Writing Avro files block by block, for tests that corrupt or mix blocks."""
from __future__ import annotations

import fastavro

from ldp_telemetry.schemas import load_schema


def write_blocks(path, blocks, codec="null", schema="report"):
    """One Avro block per list of records; returns the number of records written.

    `schema` is a project schema name or a schema dict.
    """
    schema = load_schema(schema) if isinstance(schema, str) else fastavro.parse_schema(schema)
    with open(path, "wb") as out:
        writer = fastavro.write.Writer(out, schema, codec=codec, sync_interval=1 << 30)
        for block in blocks:
            for record in block:
                writer.write(record)
            writer.flush()
    return sum(len(block) for block in blocks)


def encode_long(value: int) -> bytes:
    """An Avro long (zigzag varint) of any Python int, as a hostile writer could write it."""
    value = 2 * value if value >= 0 else -2 * value - 1  # zigzag, for ints of any size
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def decode_long(data: bytes, at: int) -> tuple[int, int]:
    """(value, offset after it) of the Avro long at `at`."""
    shift = value = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (value >> 1) ^ -(value & 1), at
        shift += 7


def split_container(data: bytes) -> tuple[bytes, list[tuple[int, bytes]], bytes]:
    """(header, [(record count, block data as stored)], sync marker) of a well-formed file."""
    sync = data[-16:]
    header_end = data.index(sync) + 16
    blocks, at = [], header_end
    while at < len(data):
        count, at = decode_long(data, at)
        size, at = decode_long(data, at)
        blocks.append((count, data[at:at + size]))
        at += size
        assert data[at:at + 16] == sync
        at += 16
    return data[:header_end], blocks, sync


def join_container(header: bytes, blocks, sync: bytes) -> bytes:
    """A container file of `header` and blocks of (announced count, stored data)."""
    return header + b"".join(encode_long(count) + encode_long(len(stored)) + stored + sync
                             for count, stored in blocks)
