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
