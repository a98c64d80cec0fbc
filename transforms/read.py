"""Read report files into timestamped numpy batches, with dead letters on a side output.

With `pre_count`, each file's batches are counted where they are decoded, and the main output
holds partial statistics (`ldp_telemetry.ldp.engine.partials`) instead of batches;
`FileBatches` decodes a file's batches again when a slice's partials share report ids.
"""
from __future__ import annotations

import os
import re
from collections import OrderedDict

import apache_beam as beam
from apache_beam.io.filesystem import FileSystem
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics
from apache_beam.transforms.window import TimestampedValue
from apache_beam.utils.timestamp import Timestamp

from ldp_telemetry.ldp.base.errors import InputError
from ldp_telemetry.ldp.config.registry import Registry
from ldp_telemetry.ldp.engine.batches import DeadLetter, ReportBatch
from ldp_telemetry.ldp.engine.partials import PartialCount, PartialCounter, batches_at
from ldp_telemetry.schemas.codec import ReportDecoder
from ldp_telemetry.schemas.files import open_report_file
from ldp_telemetry.schemas.limits import DecodeLimits
from ldp_telemetry.transforms.dead_letters import MAX_VERBATIM_DEAD_LETTERS, DeadLetterCap
from ldp_telemetry.transforms.progress import PROGRESS

BATCHES = "batches"
DEAD_LETTERS = "dead_letters"
COUNTER_NAMESPACE = "ldp"
#: Namespace of the per-metric event-time distributions (their min and max: the inputs' range).
EVENT_TIME_NAMESPACE = "ldp.event_time"
#: Bytes of decoded columns `FileBatches` keeps of the files it decoded again.
MAX_REDECODED_BYTES = 256 * 2 ** 20


class DecodeReportFilesFn(beam.DoFn):
    """file path -> (metric, ReportBatch) stamped with its slice start; dead letters tagged.

    With `pre_count`: file path -> ((metric, slice start ms), PartialCount) stamped with its
    slice start instead, a file's batches of one slice counted into one partial statistic
    (`PartialCounter`, its ordinals numbering the file's batches as `FileBatches` does).

    Counters (namespace "ldp"): records_read, records_accepted, batches, and
    dead_letter.<reason> in records; per metric, a distribution (namespace
    `EVENT_TIME_NAMESPACE`, named by the metric) whose min and max are the first and last event
    time of its valid reports (`output.coverage`). Dead letters go through a `DeadLetterCap`
    per file: the first `verbatim` of each reason as they are, the others aggregated (counts
    exact).
    """

    def __init__(self, registry: Registry, slice_ms: int, slice_offset_ms: int = 0,
                 limits: DecodeLimits = DecodeLimits(),
                 verbatim: int = MAX_VERBATIM_DEAD_LETTERS, pre_count: bool = False):
        self._registry = registry
        self._slice_ms = slice_ms
        self._slice_offset_ms = slice_offset_ms
        self._limits = limits
        self._verbatim = verbatim
        self._pre_count = pre_count

    def setup(self):
        self._decoder = ReportDecoder(self._registry, self._slice_ms,
                                      slice_offset_ms=self._slice_offset_ms, limits=self._limits)
        self._read = Metrics.counter(COUNTER_NAMESPACE, "records_read")
        self._accepted = Metrics.counter(COUNTER_NAMESPACE, "records_accepted")
        self._batches = Metrics.counter(COUNTER_NAMESPACE, "batches")
        self._batch_sizes = Metrics.distribution(COUNTER_NAMESPACE, "batch_size")
        self._cap = DeadLetterCap(self._slice_ms, self._slice_offset_ms, self._verbatim)

    def process(self, path: str):
        return self.decode(path, _open_file)

    def decode(self, source: str, opener):
        """Decode the container `opener(source, mode)` gives: tagged outputs, counters."""
        before = self._decoder.records_read
        ranges = dict(self._decoder.event_ranges)
        partials = PartialCounter(self._registry, source) if self._pre_count else None
        for item in self._decoder.decode_file(source, opener=opener):
            if isinstance(item, DeadLetter):
                Metrics.counter(COUNTER_NAMESPACE, f"dead_letter.{item.reason}").inc(item.records)
                for letter in self._cap.admit(item):
                    yield beam.pvalue.TaggedOutput(DEAD_LETTERS, letter)
            else:
                self._accepted.inc(item.n)
                self._batches.inc()
                self._batch_sizes.update(item.n)
                if partials is None:
                    yield TimestampedValue((item.metric, item),
                                           Timestamp(micros=item.slice_start_ms * 1000))
                else:
                    yield from map(_stamped, partials.add(item))
        if partials is not None:
            yield from map(_stamped, partials.finish())
        for letter in self._cap.finish_file():
            yield beam.pvalue.TaggedOutput(DEAD_LETTERS, letter)
        self._read.inc(self._decoder.records_read - before)
        for metric, pair in self._decoder.event_ranges.items():
            if ranges.get(metric) != pair:  # min and max: the distribution's other fields unused
                distribution = Metrics.distribution(EVENT_TIME_NAMESPACE, metric)
                distribution.update(pair[0])
                distribution.update(pair[1])
        PROGRESS.add(1, self._decoder.records_read - before)


def _stamped(element: tuple[tuple[str, int], PartialCount]) -> TimestampedValue:
    return TimestampedValue(element, Timestamp(micros=element[0][1] * 1000))


class FileBatches:
    """PartialCount -> the batches of its file it counted, decoded again as the reader with
    these settings decoded them (`merge_partials`' `batches_of`). Dead letters and counters
    are the first reading's; nothing is counted here.

    The batches of the files decoded last are kept, within `max_bytes` of columns (a file
    larger than that is not kept), so that a file whose partials of several slices need it
    is decoded again once per worker rather than once per slice.
    """

    def __init__(self, registry: Registry, slice_ms: int, slice_offset_ms: int = 0,
                 limits: DecodeLimits = DecodeLimits(), max_bytes: int = MAX_REDECODED_BYTES):
        self._registry = registry
        self._slice_ms = slice_ms
        self._slice_offset_ms = slice_offset_ms
        self._limits = limits
        self._max_bytes = max_bytes
        self._decoder = None
        self._kept: OrderedDict[str, tuple[list[ReportBatch], int]] = OrderedDict()
        self.decoded = 0  # files decoded again by this instance (in this process)

    def __getstate__(self):
        return {**self.__dict__, "_decoder": None, "_kept": OrderedDict(), "decoded": 0}

    def __call__(self, partial: PartialCount) -> list[ReportBatch]:
        kept = self._kept.get(partial.source)
        if kept is not None:
            self._kept.move_to_end(partial.source)
            return batches_at(kept[0], partial.ordinals)
        if self._decoder is None:
            self._decoder = ReportDecoder(self._registry, self._slice_ms,
                                          slice_offset_ms=self._slice_offset_ms,
                                          limits=self._limits)
        self.decoded += 1
        wanted = set(partial.ordinals.tolist())
        found, every, size = [], [], 0
        ordinal = 0
        for item in self._decoder.decode_file(partial.source, opener=_open_file):
            if not isinstance(item, ReportBatch):
                continue
            if ordinal in wanted:
                found.append(item)
            if every is not None:
                size += sum(column.nbytes for column in item.columns.values())
                if size <= self._max_bytes:
                    every.append(item)
                else:
                    every = None
            ordinal += 1
        if every is not None:
            self._kept[partial.source] = (every, size)
            while sum(held for _, held in self._kept.values()) > self._max_bytes:
                self._kept.popitem(last=False)
        return found


def _open_file(path: str, mode: str):
    """Open a local regular file (nothing else: see `open_report_file`), or a remote one
    (gs://, s3://, ...) through Beam's filesystems."""
    if FileSystems.get_scheme(path) is None:
        return open_report_file(path, mode)
    return FileSystems.open(path, compression_type="uncompressed")


class ReadReportBatches(beam.PTransform):
    """PCollection of file paths -> tagged outputs: `batches` (metric, batch) and `dead_letters`.

    `spread` reshuffles the paths first so that files are decoded in parallel (batch jobs).
    `limits` bound what a file can make the reader allocate; ValueError when a registry metric
    name is longer than `limits.max_metric_name_chars` (its reports could never be read).
    `pre_count`: `batches` holds ((metric, slice start ms), PartialCount) instead
    (`DecodeReportFilesFn`), for `transforms.count.CountKeyedWindows` with `self.recount()`.
    """

    def __init__(self, registry: Registry, slice_ms: int, spread: bool = True,
                 slice_offset_ms: int = 0, limits: DecodeLimits = DecodeLimits(),
                 pre_count: bool = False):
        super().__init__()
        # The decoder checks the registry against the limits: now, before any file is read.
        ReportDecoder(registry, slice_ms, slice_offset_ms=slice_offset_ms, limits=limits)
        self._registry = registry
        self._slice_ms = slice_ms
        self._slice_offset_ms = slice_offset_ms
        self._limits = limits
        self._spread = spread
        self._pre_count = pre_count

    def recount(self) -> FileBatches:
        """What decodes a file's counted batches again, with this reader's settings."""
        return FileBatches(self._registry, self._slice_ms, self._slice_offset_ms, self._limits)

    def expand(self, paths):
        if self._spread:
            paths = paths | "SpreadFiles" >> beam.Reshuffle()
        return (paths
                | "DecodeReports" >> beam.ParDo(
                    DecodeReportFilesFn(self._registry, self._slice_ms, self._slice_offset_ms,
                                        self._limits, pre_count=self._pre_count))
                .with_outputs(DEAD_LETTERS, main=BATCHES))


def expand_file_patterns(patterns: list[str]) -> list[str]:
    """The files matching the glob patterns: by pattern, sorted, each file once (first seen).

    Local entries that are not regular files are kept (the reader turns each into a dead
    letter without opening it), including the dangling links and link loops that Beam's
    matching skips. InputError (field `input`) naming the pattern when it matches nothing or is
    a local directory. A local pattern without a folder (`*.avro`) matches in the current
    folder.
    """
    files: dict[str, str] = {}  # identity (the real path of a local file) -> path as matched
    for given in patterns:
        local = FileSystems.get_scheme(given) is None
        # Beam's local matching needs a folder: `*.avro` matches in the current one
        pattern = os.path.join(os.curdir, given) if local and not os.path.dirname(given) else given
        if local and os.path.isdir(pattern):
            raise InputError(f"input {given!r} is a directory; give its files, e.g. "
                             f"{os.path.join(given, '*.avro')!r}", field="input")
        matches = [m.path for r in FileSystems.match([pattern]) for m in r.metadata_list]
        if local:
            matches += _broken_links(pattern)
        if not matches:
            raise InputError(f"input {given!r} matches no file", field="input")
        for path in sorted(matches):
            files.setdefault(os.path.realpath(path) if local else path, path)
    return list(files.values())


def _broken_links(pattern: str) -> list[str]:
    """Symbolic links matching a local pattern that lead nowhere (dangling, or a loop).

    Beam's local matching lists the same entries (walking the directory before the first glob
    character, matching `FileSystem.translate_pattern`) but drops those it cannot stat.
    """
    prefix = re.match(r"^[^[*?]*", pattern).group(0)
    if prefix == pattern:
        candidates = [pattern]
    else:
        root = os.path.dirname(prefix)
        matcher = re.compile(FileSystem.translate_pattern(pattern))
        candidates = [os.path.join(folder, name) for folder, _, names in os.walk(root)
                      for name in names if matcher.match(os.path.join(folder, name))] \
            if root else []
    return [path for path in candidates if os.path.islink(path) and not os.path.exists(path)]
