"""Write window estimates and dead letters as JSON lines and Avro."""
from __future__ import annotations

import json
import os

import apache_beam as beam

from ldp_telemetry.schemas import load_schema


class WriteRecords(beam.PTransform):
    """Plain-dict records -> `<prefix>-SSSSS-of-NNNNN.jsonl` and `.avro` with the named schema."""

    def __init__(self, output_dir: str, name: str, schema: str, num_shards: int = 1):
        super().__init__()
        self._prefix = os.path.join(output_dir, name)
        self._schema = schema
        self._num_shards = num_shards

    def expand(self, records):
        records | "AsJsonLines" >> beam.Map(lambda r: json.dumps(r, sort_keys=True)) \
                | "WriteJsonLines" >> beam.io.WriteToText(self._prefix, file_name_suffix=".jsonl",
                                                          num_shards=self._num_shards)
        return records | "WriteAvro" >> beam.io.WriteToAvro(
            self._prefix, load_schema(self._schema), file_name_suffix=".avro",
            num_shards=self._num_shards)
