"""Write window estimates and dead letters as JSON lines and Avro.

Records travel to the files in batches (`BatchRecordsFn`): Beam's file sinks group their input
(a GroupByKey per shard), so each record would otherwise cross the runner on its own; a batch
crosses once, and is written with one JSON encoder and one Avro writer call per record.
"""
from __future__ import annotations

import json
import os

import apache_beam as beam
from apache_beam.io import filebasedsink
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.transforms import window as beam_window
from fastavro.write import Writer

from ldp_telemetry.schemas import load_schema

#: Most records in one batch.
MAX_BATCH_RECORDS = 1_000
#: Most list items and characters of text in one batch (about 30 MB of Python values), so that
#: a batch of large-domain estimates stays small (see `record_weight`).
MAX_BATCH_WEIGHT = 1_000_000


def record_weight(record: dict) -> int:
    """1 + the items of the record's lists and the characters of its strings (top level)."""
    return 1 + sum(len(value) for value in record.values() if isinstance(value, (list, str)))


class BatchRecordsFn(beam.DoFn):
    """Records -> lists of consecutive records of one bundle, in the global window.

    A list is emitted when it holds MAX_BATCH_RECORDS records or MAX_BATCH_WEIGHT of
    `record_weight`, and at the end of the bundle; a record heavier than the limit is a list of
    its own. Memory: one batch. The input must be in the global window (`WriteRecords` puts it
    there first).
    """

    def start_bundle(self):
        self._batch, self._weight = [], 0

    def process(self, record):
        weight = record_weight(record)
        if self._batch and self._weight + weight > MAX_BATCH_WEIGHT:
            yield self._batch
            self._batch, self._weight = [], 0
        self._batch.append(record)
        self._weight += weight
        if len(self._batch) >= MAX_BATCH_RECORDS:
            yield self._batch
            self._batch, self._weight = [], 0

    def finish_bundle(self):
        if self._batch:
            yield beam_window.GlobalWindows.windowed_value(self._batch)
        self._batch, self._weight = [], 0


_JSON = json.JSONEncoder(sort_keys=True)


def json_lines(batch: list[dict]) -> str:
    """The records of a batch as JSON lines (keys sorted), without the final newline."""
    return "\n".join(map(_JSON.encode, batch))


class AvroBatchSink(filebasedsink.FileBasedSink):
    """Beam file sink writing lists of records to Avro container files (fastavro, deflate).

    The same files as `beam.io.WriteToAvro` writes from single records.
    """

    def __init__(self, file_path_prefix: str, schema, file_name_suffix: str = ".avro",
                 num_shards: int = 1):
        super().__init__(file_path_prefix, coder=None, file_name_suffix=file_name_suffix,
                         num_shards=num_shards, mime_type="application/x-avro",
                         compression_type=CompressionTypes.UNCOMPRESSED)
        self._schema = schema

    def open(self, temp_path):
        handle = super().open(temp_path)
        return handle, Writer(handle, self._schema, "deflate")

    def write_record(self, file_writer, batch):
        writer = file_writer[1]
        for record in batch:
            writer.write(record)

    def close(self, file_writer):
        handle, writer = file_writer
        writer.flush()
        handle.close()


class WriteRecords(beam.PTransform):
    """Plain-dict records -> `<prefix>-SSSSS-of-NNNNN.jsonl` and `.avro` with the named schema.

    The JSON-lines file holds one record per line, keys sorted; the Avro file the same records.
    """

    def __init__(self, output_dir: str, name: str, schema: str, num_shards: int = 1):
        super().__init__()
        self._prefix = os.path.join(output_dir, name)
        self._schema = schema
        self._num_shards = num_shards

    def expand(self, records):
        if not isinstance(records.windowing.windowfn, beam_window.GlobalWindows):
            # The sinks write every window into the same files (as Beam's own sinks do).
            records = records | "OutOfWindows" >> beam.WindowInto(beam_window.GlobalWindows())
        batches = records | "Batch" >> beam.ParDo(BatchRecordsFn())
        batches | "AsJsonLines" >> beam.Map(json_lines) \
                | "WriteJsonLines" >> beam.io.WriteToText(self._prefix, file_name_suffix=".jsonl",
                                                          num_shards=self._num_shards)
        return batches | "WriteAvro" >> beam.io.Write(AvroBatchSink(
            self._prefix, load_schema(self._schema), num_shards=self._num_shards))
