"""Write window estimates and dead letters as JSON lines and Avro.

Records reach the sinks in batches of consecutive records of one bundle (`BatchRecordsFn`):
a batch crosses the runner once instead of once per record. A large record is a batch of its
own and is written in pieces (`json_line_pieces`; `FloatChunks` for Avro), so that its plain
form is never held whole.

With `num_shards=0` each bundle writes its own shard and nothing is grouped: a window's estimate
is made, written and dropped before the next one is made, and the job never holds every
window's record at once. A fixed number of shards groups every batch under one key first
(Beam's WriteImpl), which a runner such as FnApiRunner materialises whole: right for small
records such as dead letters, wrong for large-domain estimates. As the number of shards is the
runner's number of bundles, a run replaces every earlier set of shards of the same files,
whatever its count (`ReplacesEarlierShards`), not only a set of its own count.
"""
from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Sequence

import apache_beam as beam
import numpy as np
from apache_beam.io.filebasedsink import FileBasedSink
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.transforms import window as beam_window
from fastavro.write import Writer

from ldp_telemetry.output.compact import IndexLabels, avro_values, plain_record
from ldp_telemetry.schemas import load_schema

#: Items of an array written to JSON per piece: bounds the text held at once for a record of
#: d values to about 60 bytes x this, instead of the whole line (d x 60 bytes).
JSON_PIECE_ITEMS = 16_384
#: Most records in one batch.
MAX_BATCH_RECORDS = 1_000
#: Most array items and string characters in one batch (`record_weight`): a few MB of values.
#: A record heavier than this is a batch of its own.
MAX_BATCH_WEIGHT = 2 ** 18

_JSON = json.JSONEncoder(sort_keys=True)


#: The top-level values whose length counts in `record_weight` (exact types: an ABC check per
#: value would cost a third of the time of writing a small record).
_SIZED_TYPES = frozenset({list, tuple, str, np.ndarray, IndexLabels})


def record_weight(record: dict) -> int:
    """1 + the items of the record's top-level arrays and the characters of its strings."""
    return 1 + sum(len(value) for value in record.values() if type(value) in _SIZED_TYPES)


def json_line_pieces(record: dict, piece_items: int = JSON_PIECE_ITEMS) -> Iterator[str]:
    """The text of `json.dumps(plain_record(record), sort_keys=True) + "\n"`, in pieces.

    A record of at most `piece_items` weight is one piece. Otherwise top-level arrays (lists,
    tuples, numpy arrays, `IndexLabels`: any non-string Sequence) are written `piece_items`
    items at a time and every other value in one piece. The concatenation is exactly
    `json.dumps`'s text (same separators, float repr and escaping).
    """
    if record_weight(record) <= piece_items:
        yield _JSON.encode(plain_record(record)) + "\n"
        return
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
        if len(self._batch) >= MAX_BATCH_RECORDS or self._weight >= MAX_BATCH_WEIGHT:
            yield self._batch
            self._batch, self._weight = [], 0

    def finish_bundle(self):
        if self._batch:
            yield beam_window.GlobalWindows.windowed_value(self._batch)
        self._batch, self._weight = [], 0


class ReplacesEarlierShards(FileBasedSink):
    """A file sink whose run deletes the shards of earlier runs with another shard count
    (`<prefix>-SSSSS-of-MMMMM<suffix>`, M ≠ this run's N) before it renames its own into place.

    Beam's sink deletes only `-of-NNNNN` files of its own count, which the rename would replace
    anyway; with a shard per bundle the count changes from run to run, and readers of
    `<prefix>-*` would otherwise mix an earlier run's windows into this one's. Idempotent:
    a retried finalize finds nothing more to delete and never deletes this run's own names.
    """

    def pre_finalize(self, init_result, writer_results):
        writer_results = list(writer_results)
        super().pre_finalize(init_result, writer_results)
        # The finalize step adds empty shards up to the sink's count (at least one).
        num_shards = max(len(writer_results), self.num_shards or 1)
        prefix, suffix = self.file_path_prefix.get(), self.file_name_suffix.get()
        earlier = re.compile(re.escape(prefix) + r"-\d{5,}-of-(\d{5,})" + re.escape(suffix) + "$")
        stale = [metadata.path
                 for match in FileSystems.match([f"{prefix}-*-of-*{suffix}"])
                 for metadata in match.metadata_list
                 if (found := earlier.match(metadata.path)) and int(found[1]) != num_shards]
        if stale:
            FileSystems.delete(stale)


class JsonLinesSink(ReplacesEarlierShards):
    """Lists of records (plain or compact) -> one JSON object per line, keys sorted, UTF-8."""

    def __init__(self, file_path_prefix: str, num_shards: int):
        super().__init__(file_path_prefix, coder=None, file_name_suffix=".jsonl",
                         num_shards=num_shards, mime_type="application/json",
                         compression_type=CompressionTypes.UNCOMPRESSED)

    def write_record(self, file_handle, batch):
        for record in batch:
            for piece in json_line_pieces(record):
                file_handle.write(piece.encode("utf-8"))


class AvroBatchSink(ReplacesEarlierShards):
    """Lists of records (plain or compact) -> Avro container files (fastavro, deflate): the
    same files as `beam.io.WriteToAvro` writes from single records."""

    def __init__(self, file_path_prefix: str, schema, num_shards: int):
        super().__init__(file_path_prefix, coder=None, file_name_suffix=".avro",
                         num_shards=num_shards, mime_type="application/x-avro",
                         compression_type=CompressionTypes.UNCOMPRESSED)
        self._schema = schema

    def open(self, temp_path):
        handle = super().open(temp_path)
        return handle, Writer(handle, self._schema, "deflate")

    def write_record(self, file_writer, batch):
        writer = file_writer[1]
        for record in batch:
            writer.write(avro_values(record))

    def close(self, file_writer):
        handle, writer = file_writer
        writer.flush()
        handle.close()


class WriteRecords(beam.PTransform):
    """Records (plain or compact dicts, see `ldp_telemetry.output.compact`) ->
    `<prefix>-SSSSS-of-NNNNN.jsonl` and `.avro` with the named schema, the same records in both.

    `num_shards=0`: one shard per bundle, written as the records arrive (no grouping; use it
    for large records); `num_shards=N`: exactly N shards, after grouping every batch.
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
        batches | "WriteJsonLines" >> beam.io.Write(JsonLinesSink(self._prefix, self._num_shards))
        return batches | "WriteAvro" >> beam.io.Write(AvroBatchSink(
            self._prefix, load_schema(self._schema), self._num_shards))
