"""Write window estimates and dead letters as JSON lines and Avro shards.

`WriteRecords` writes `<prefix>-SSSSS-of-NNNNN.jsonl` and `.avro`, the same records in both
(`ShardWriter`: JSON lines in pieces, `json_line_pieces`, so that a large record's plain form is
never held whole; Avro with fastavro, deflate, `avro_values`). Writers write temporary files;
one finalize step renames them into place and removes every earlier run's shards of the same
files, whatever their count (`ldp_telemetry.transforms.shard_files`).

With `num_shards=0` each bundle writes its own shard as its records arrive, in a step fused
with the one that makes them, and nothing but the temporary names is grouped: a window's
estimate is made, written and dropped before the next one is made. A fixed number of shards
groups every batch of records (`BatchRecordsFn`) under one key first, which a runner such as
FnApiRunner materialises whole: right for small records such as dead letters, wrong for
large-domain estimates.

Why not Beam's writers: each `beam.io.Write(FileBasedSink)` expands to a DoOnce, side inputs, a
GroupByKey, pre-finalize and finalize steps; the four of them (two outputs, two formats) were
most of the start-up of a job over one report, and `fileio.WriteToFiles` in their place saved
little (and names its files otherwise). Here each output adds one grouping and one finalize
step, with declared output types (Beam's inference of a step's output from its bytecode costs
tens of ms per step). The figures are in the CHANGELOG and `benchmarks/job_start_up.py`.
"""
from __future__ import annotations

import json
from collections.abc import Iterator, Sequence

import apache_beam as beam
import numpy as np
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.transforms import window as beam_window
from fastavro.write import Writer

from ldp_telemetry.output.compact import IndexLabels, avro_values, plain_record
from ldp_telemetry.output.estimate import EstimateRecord
from ldp_telemetry.schemas import load_schema
from ldp_telemetry.transforms.shard_files import (check_output_path, finalize_shards, temp_dir,
                                                  temp_stem)

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


def record_weight(record: EstimateRecord | dict) -> int:
    """1 + the items of the record's top-level arrays and the characters of its strings."""
    fields = record.layout() if isinstance(record, EstimateRecord) else record
    return 1 + sum(len(value) for value in fields.values() if type(value) in _SIZED_TYPES)


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


#: The formats of every shard: (suffix, MIME type).
FORMATS = ((".jsonl", "application/json"), (".avro", "application/x-avro"))
SUFFIXES = tuple(suffix for suffix, _ in FORMATS)


class ShardWriter:
    """One shard in both formats, `<stem>.jsonl` and `<stem>.avro`, open until `close`: each
    record as its JSON line (`json_line_pieces`, UTF-8) and as an Avro record (fastavro,
    deflate, `avro_values`), the same files as `beam.io.WriteToText`/`WriteToAvro` would write.
    Created with no record, it writes an empty shard (an empty file, an Avro header)."""

    def __init__(self, stem: str, schema: dict):
        self.stem = stem
        self._json, self._avro_file = (
            FileSystems.create(stem + suffix, mime_type,
                               compression_type=CompressionTypes.UNCOMPRESSED)
            for suffix, mime_type in FORMATS)
        self._avro = Writer(self._avro_file, schema, "deflate")

    def write(self, record: EstimateRecord | dict) -> None:
        """Write a window estimate (its `layout`, the fields as written) or a dict record."""
        fields = record.layout() if isinstance(record, EstimateRecord) else record
        for piece in json_line_pieces(fields):
            self._json.write(piece.encode("utf-8"))
        self._avro.write(avro_values(fields))

    def close(self) -> str:
        """Close both files; returns the stem."""
        self._json.close()
        self._avro.flush()
        self._avro_file.close()
        return self.stem


class WriteBundleShardFn(beam.DoFn):
    """Records -> the bundle's shard under the run's temporary folder, written as they arrive
    (nothing is held but the writer's buffers); at the end of a bundle that had records, emits
    (None, the shard's temporary stem) in the global window, for `FinalizeShardsFn`. A retried
    bundle writes under a new stem; the failed attempt's files are never emitted."""

    def __init__(self, folder: str, schema: dict):
        self._folder, self._schema = folder, schema

    def start_bundle(self):
        self._writer = None

    def process(self, record):
        if self._writer is None:
            self._writer = ShardWriter(temp_stem(self._folder), self._schema)
        self._writer.write(record)

    def finish_bundle(self):
        if self._writer is not None:
            yield beam_window.GlobalWindows.windowed_value((None, self._writer.close()))
        self._writer = None


class FinalizeShardsFn(beam.DoFn):
    """(None, [None, temporary stems...]) -> the shards in place (`finalize_shards`): one shard
    per stem, or one empty shard when there is none (an empty output is one empty file of each
    format, which readers of `<prefix>-*` read as no record). Yields the shards' paths."""

    def __init__(self, prefix: str, folder: str, schema: dict):
        self._prefix, self._folder, self._schema = prefix, folder, schema

    def process(self, keyed):
        stems = [stem for stem in keyed[1] if stem is not None]
        if not stems:
            stems = [ShardWriter(temp_stem(self._folder), self._schema).close()]
        yield from finalize_shards(self._prefix, SUFFIXES, stems, self._folder)


class WriteFixedShardsFn(beam.DoFn):
    """(None, [None, batches...]) -> exactly `num_shards` shards, the batches dealt round-robin
    in their order, then in place (`finalize_shards`). Yields the shards' paths."""

    def __init__(self, prefix: str, folder: str, schema: dict, num_shards: int):
        self._prefix, self._folder, self._schema = prefix, folder, schema
        self._num_shards = num_shards

    def process(self, keyed):
        writers = [ShardWriter(temp_stem(self._folder), self._schema)
                   for _ in range(self._num_shards)]
        batches = (batch for batch in keyed[1] if batch is not None)
        for index, batch in enumerate(batches):
            for record in batch:
                writers[index % self._num_shards].write(record)
        stems = [writer.close() for writer in writers]
        yield from finalize_shards(self._prefix, SUFFIXES, stems, self._folder)


#: What reaches the finalize step: (None, a temporary stem, a batch or None). Declared types
#: spare Beam's inference of each step's output from its bytecode (tens of ms per step).
_KEYED = beam.typehints.Tuple[None, beam.typehints.Any]


class WriteRecords(beam.PTransform):
    """Records (`EstimateRecord`s; dicts, plain or compact: `ldp_telemetry.output.compact`) ->
    `<prefix>-SSSSS-of-NNNNN.jsonl` and `.avro` with the named schema, the same records in both;
    returns the shards' paths. A run replaces every earlier run's shards of the same files,
    whatever their count (`finalize_shards`).

    `num_shards=0`: one shard per bundle, written as the records arrive (no grouping; use it
    for large records, or for many: nothing is held but a writer's buffers), one empty shard if
    there is no record; `num_shards=N`: exactly N shards, after grouping every batch of records
    under one key (a runner such as FnApiRunner holds them all). `records` may be a tuple of
    PCollections, written into the same shards: with `num_shards=0` each is written in the
    step that makes it, never flattened first.
    """

    def __init__(self, output_dir: str, name: str, schema: str, num_shards: int = 1):
        super().__init__()
        if num_shards < 0:
            raise ValueError(f"num_shards must be 0 (one per bundle) or more, got {num_shards}")
        check_output_path(output_dir)
        self._prefix = FileSystems.join(output_dir, name)
        self._folder = temp_dir(output_dir, name)
        self._schema = schema
        self._num_shards = num_shards

    def expand(self, records):
        parts = tuple(records) if isinstance(records, (tuple, list)) else (records,)
        pipeline = parts[0].pipeline
        schema = load_schema(self._schema)
        if self._num_shards:
            records = _global(parts[0] if len(parts) == 1
                              else parts | "Records" >> beam.Flatten(), "")
            written = [records | "Batch" >> beam.ParDo(BatchRecordsFn()).with_output_types(list)
                       | "Key" >> beam.Map(lambda batch: (None, batch)).with_output_types(_KEYED)]
            finalize = WriteFixedShardsFn(self._prefix, self._folder, schema, self._num_shards)
        else:
            # Each part is written by the step that makes it (no Flatten before: a runner
            # that cannot fuse a Flatten with all of its inputs materialises one of them).
            written = [_global(part, suffix) | f"WriteBundles{suffix}" >> beam.ParDo(
                WriteBundleShardFn(self._folder, schema)).with_output_types(_KEYED)
                for part, suffix in zip(parts, _suffixes(len(parts)), strict=True)]
            finalize = FinalizeShardsFn(self._prefix, self._folder, schema)
        # A (None, None) from an impulse: the finalize step runs even when no record came.
        start = (pipeline | "Start" >> beam.Impulse()
                 | "StartKey" >> beam.Map(lambda _: (None, None)).with_output_types(_KEYED))
        return ((*written, start) | "Together" >> beam.Flatten()
                | "Group" >> beam.GroupByKey()
                | "Finalize" >> beam.ParDo(finalize).with_output_types(str))


def _suffixes(count: int) -> list[str]:
    """Step label suffixes of `count` parts: none for the first (the labels of a single
    PCollection stay as they were), then "1", "2", ..."""
    return [""] + [str(i) for i in range(1, count)]


def _global(records, suffix: str):
    """`records` in the global window: the shards hold every window's records (as Beam's own
    sinks do)."""
    if isinstance(records.windowing.windowfn, beam_window.GlobalWindows):
        return records
    return records | f"OutOfWindows{suffix}" >> beam.WindowInto(beam_window.GlobalWindows())
