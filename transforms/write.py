"""Write window estimates and dead letters as JSON lines and Avro, one record at a time.

Records are written in the step that makes them (no grouping before the write): with
`num_shards=0` each bundle writes its own shard, so a window's estimate record is produced,
written and dropped before the next one is made, and the job never holds every window's
record at once. A fixed number of shards would group every record under one key first
(Beam's WriteImpl), which a runner such as FnApiRunner materialises whole.
"""
from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence

import apache_beam as beam
import numpy as np
from apache_beam.io.filebasedsink import FileBasedSink
from apache_beam.io.filesystem import CompressionTypes

from ldp_telemetry.schemas import load_schema
from ldp_telemetry.transforms.compact import avro_values

#: Items of an array written to JSON per piece: bounds the text held at once for a record of
#: d values to about 60 bytes x this, instead of the whole line (d x 60 bytes).
JSON_PIECE_ITEMS = 16_384


def json_line_pieces(record: dict, piece_items: int = JSON_PIECE_ITEMS) -> Iterator[str]:
    """The text of `json.dumps(plain_record(record), sort_keys=True) + "\n"`, in pieces.

    Top-level arrays (lists, tuples, numpy arrays, `IndexLabels`: any non-string Sequence) are
    written `piece_items` items at a time, every other value in one piece. The concatenation is
    exactly `json.dumps`'s text (same separators, float repr and escaping).
    """
    yield "{"
    for i, key in enumerate(sorted(record)):
        value = record[key]
        yield (", " if i else "") + json.dumps(key) + ": "
        if isinstance(value, np.ndarray) or (isinstance(value, Sequence)
                                             and not isinstance(value, str)):
            yield from _array_pieces(value, piece_items)
        else:
            yield json.dumps(value, sort_keys=True)
    yield "}\n"


def _array_pieces(values, piece_items: int) -> Iterator[str]:
    if len(values) == 0:
        yield "[]"
        return
    yield "["
    for start in range(0, len(values), piece_items):
        part = values[start:start + piece_items]
        text = json.dumps(part.tolist() if isinstance(part, np.ndarray) else list(part),
                          sort_keys=True)
        yield (", " if start else "") + text[1:-1]
    yield "]"


class JsonLinesSink(FileBasedSink):
    """Records (plain or compact) -> one JSON object per line (`json_line_pieces`), UTF-8."""

    def __init__(self, file_path_prefix: str, num_shards: int):
        super().__init__(file_path_prefix, coder=None, file_name_suffix=".jsonl",
                         num_shards=num_shards, mime_type="application/json",
                         compression_type=CompressionTypes.UNCOMPRESSED)

    def write_record(self, file_handle, value):
        for piece in json_line_pieces(value):
            file_handle.write(piece.encode("utf-8"))


class WriteRecords(beam.PTransform):
    """Records (plain or compact dicts, see `ldp_telemetry.transforms.compact`) ->
    `<prefix>-SSSSS-of-NNNNN.jsonl` and `.avro` with the named schema.

    `num_shards=0`: one shard per bundle, written as the records arrive (no grouping; use it
    for large records); `num_shards=N`: exactly N shards, after grouping every record.
    """

    def __init__(self, output_dir: str, name: str, schema: str, num_shards: int = 1):
        super().__init__()
        self._prefix = os.path.join(output_dir, name)
        self._schema = schema
        self._num_shards = num_shards

    def expand(self, records):
        records | "WriteJsonLines" >> beam.io.Write(JsonLinesSink(self._prefix, self._num_shards))
        return (records
                | "AvroValues" >> beam.Map(avro_values)
                | "WriteAvro" >> beam.io.WriteToAvro(self._prefix, load_schema(self._schema),
                                                     file_name_suffix=".avro",
                                                     num_shards=self._num_shards))
