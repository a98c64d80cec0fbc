"""A window-estimate record through Avro both ways: fastavro's container file and Apache's
reference `avro` decoding fastavro's bytes, under today's schema."""
from __future__ import annotations

import io
import json

import avro.io
import avro.schema
import fastavro

from ldp_telemetry.output.estimate import EstimateRecord
from ldp_telemetry.schemas import load_schema


def through_avro(record: EstimateRecord) -> tuple[EstimateRecord, dict]:
    """(the record fastavro writes to a container file and reads back, the Avro value Apache's
    reference `avro` decodes from fastavro's schemaless bytes of it)."""
    schema = load_schema("window_estimate")
    parsed = fastavro.parse_schema(schema)
    buffer = io.BytesIO()
    fastavro.writer(buffer, parsed, [record.to_avro()])
    buffer.seek(0)
    (again,) = list(fastavro.reader(buffer))
    writer = io.BytesIO()
    fastavro.schemaless_writer(writer, parsed, record.to_avro())
    reference = avro.io.DatumReader(avro.schema.parse(json.dumps(schema)))
    decoded = reference.read(avro.io.BinaryDecoder(io.BytesIO(writer.getvalue())))
    return EstimateRecord.from_avro(again), decoded
