"""Read report files into timestamped numpy batches, with dead letters on a side output."""
from __future__ import annotations

import os

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics
from apache_beam.transforms.window import TimestampedValue
from apache_beam.utils.timestamp import Timestamp

from ldp_telemetry.ldp.registry import Registry
from ldp_telemetry.schemas.batches import DeadLetter
from ldp_telemetry.schemas.codec import ReportDecoder

BATCHES = "batches"
DEAD_LETTERS = "dead_letters"
COUNTER_NAMESPACE = "ldp"


class DecodeReportFilesFn(beam.DoFn):
    """file path -> (metric, ReportBatch) stamped with its slice start; dead letters tagged.

    Counters (namespace "ldp"): records_read, records_accepted, batches, and
    dead_letter.<reason> in records.
    """

    def __init__(self, registry: Registry, slice_ms: int, slice_offset_ms: int = 0):
        self._registry = registry
        self._slice_ms = slice_ms
        self._slice_offset_ms = slice_offset_ms

    def setup(self):
        self._decoder = ReportDecoder(self._registry, self._slice_ms,
                                      slice_offset_ms=self._slice_offset_ms)
        self._read = Metrics.counter(COUNTER_NAMESPACE, "records_read")
        self._accepted = Metrics.counter(COUNTER_NAMESPACE, "records_accepted")
        self._batches = Metrics.counter(COUNTER_NAMESPACE, "batches")
        self._batch_sizes = Metrics.distribution(COUNTER_NAMESPACE, "batch_size")

    def process(self, path: str):
        before = self._decoder.records_read
        for item in self._decoder.decode_file(path, opener=_open_file):
            if isinstance(item, DeadLetter):
                Metrics.counter(COUNTER_NAMESPACE, f"dead_letter.{item.reason}").inc(item.records)
                yield beam.pvalue.TaggedOutput(DEAD_LETTERS, item)
            else:
                self._accepted.inc(item.n)
                self._batches.inc()
                self._batch_sizes.update(item.n)
                yield TimestampedValue((item.metric, item),
                                       Timestamp(micros=item.slice_start_ms * 1000))
        self._read.inc(self._decoder.records_read - before)


def _open_file(path: str, mode: str):
    """Open local or remote files (gs://, s3://, ...) through Beam's filesystems."""
    return FileSystems.open(path, compression_type="uncompressed")


class ReadReportBatches(beam.PTransform):
    """PCollection of file paths -> tagged outputs: `batches` (metric, batch) and `dead_letters`.

    `spread` reshuffles the paths first so that files are decoded in parallel (batch jobs).
    """

    def __init__(self, registry: Registry, slice_ms: int, spread: bool = True,
                 slice_offset_ms: int = 0):
        super().__init__()
        self._registry = registry
        self._slice_ms = slice_ms
        self._slice_offset_ms = slice_offset_ms
        self._spread = spread

    def expand(self, paths):
        if self._spread:
            paths = paths | "SpreadFiles" >> beam.Reshuffle()
        return (paths
                | "DecodeReports" >> beam.ParDo(
                    DecodeReportFilesFn(self._registry, self._slice_ms, self._slice_offset_ms))
                .with_outputs(DEAD_LETTERS, main=BATCHES))


def expand_file_patterns(patterns: list[str]) -> list[str]:
    """The files matching the glob patterns: by pattern, sorted, each file once (first seen).

    ValueError naming the pattern when it matches no file or is a local directory.
    """
    files: dict[str, str] = {}  # identity (the real path of a local file) -> path as matched
    for pattern in patterns:
        local = FileSystems.get_scheme(pattern) is None
        if local and os.path.isdir(pattern):
            raise ValueError(f"--input {pattern!r} is a directory; give its files, e.g. "
                             f"{os.path.join(pattern, '*.avro')!r}")
        matches = [m.path for r in FileSystems.match([pattern]) for m in r.metadata_list]
        if not matches:
            raise ValueError(f"--input {pattern!r} matches no file")
        for path in sorted(matches):
            files.setdefault(os.path.realpath(path) if local else path, path)
    return list(files.values())
