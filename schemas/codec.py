"""Avro report files -> validated columnar numpy batches, split by metric and time slice.

`ReportDecoder` reads a file's blocks (`ldp_telemetry.schemas.container`: framing, limits and
recovery), decodes each verified block's records (`ldp_telemetry.schemas.records`), gathers
them into chunks of about `CHUNK_RECORDS`, and turns each chunk into numpy columns at once:
metric codes, event times, and per metric the protocol's payload columns. Everything after that
is vectorised: the registry check, the payload validity rule and the split into time slices.

A file of report envelopes (`schemas/envelope.avsc`, `ldp_telemetry.schemas.envelopes`; the
writer schema in the header says which kind a file is) is decoded envelope by envelope: its
columns become numpy views with O(1) Python work per envelope, checked by the same rules (the
protocol's `check_payloads`, `_report_checks`), and counted in reports.

Each report is read under the configuration its fingerprint names
(`ldp_telemetry.ldp.config.fingerprint`; the registry's current configuration when it has none),
and its batches carry that version.

Nothing is lost: `records_read` grows by exactly the records that the batches and dead letters
of a file stand for, so that for every file read = accepted + dead-lettered. Dead letters stand
for (reason `undecodable` unless stated):

- what the container walk cannot read as blocks: see `ldp_telemetry.schemas.container` (a
  damaged block, a block beyond a limit: `block_too_large`, bytes without framing);
- a block whose records fail to decode, or do not fill it exactly: its announced record count;
- a path that is not a regular file (`not_a_regular_file`), a dangling link or a link loop
  (`broken_link`): 1 record, never opened; a file that cannot be opened or is not an Avro
  container: 1 record;
- a file written with a schema other than the report schema (reason `incompatible_schema`) or
  in a codec that cannot be read here: the record counts its blocks announce, walked by their
  framing without decompressing;
- a record larger than `max_record_bytes` (`record_too_large`), with a metric name longer than
  `max_metric_name_chars` (`metric_name_too_long`), for an unknown metric, with a
  configuration fingerprint that names none of the metric's versions (`config_mismatch`: an
  unknown configuration, another metric's, or a fingerprint of the wrong length), with a payload of
  another protocol, with a payload outside the protocol's output space, or with an event time
  outside `ldp_telemetry.ldp.base.validation`'s [`EVENT_TIME_MIN_MS`, `EVENT_TIME_END_MS`) =
  [1970-01-01T00:00:00Z, 2200-01-01T00:00:00Z) (reason `invalid_event_time`): 1 record each,
  with the report (cut to `max_dead_letter_report_chars`) and its encoded size;
- a malformed report envelope (layout version, count outside [0, `max_envelope_reports`],
  column sizes), one larger than `max_envelope_bytes` (`record_too_large`), or one whose metric,
  fingerprint or payload fails as above: one dead letter standing for its count (1 when the
  count is outside the limit); the reports of a sound envelope failing a per-report rule: one
  dead letter per rule and envelope standing for them; a block of an envelope file that cannot
  be read stands for its envelopes.

Only the failures that data can cause are caught (fastavro's decoding errors, the codecs', the
reader's own, OSError): an error in this code fails loudly rather than looking like bad data.
"""
from __future__ import annotations

import base64
import datetime as dt
import json
from collections.abc import Callable, Iterator
from operator import itemgetter, methodcaller
from typing import Any, BinaryIO

import numpy as np

from ldp_telemetry.ldp.base.errors import ConfigError
from ldp_telemetry.ldp.base.validation import (EVENT_TIME_END_MS, EVENT_TIME_MIN_MS,
                                               EVENT_TIME_SPAN_TEXT)
from ldp_telemetry.ldp.config.fingerprint import FINGERPRINT_BYTES
from ldp_telemetry.ldp.config.registry import MetricConfig, Registry
from ldp_telemetry.ldp.engine.batches import (MAX_DETAIL_CHARS, REPORT_ID, DeadLetter, ReportBatch,
                                              clip)
from ldp_telemetry.ldp.engine.reasons import Reason
from ldp_telemetry.ldp.protocols.base import Columns
from ldp_telemetry.schemas import payload_branch
from ldp_telemetry.schemas.compatibility import (FINGERPRINT, check_envelope_schema,
                                                 check_writer_schema, names_envelope,
                                                 without_logical_types)
from ldp_telemetry.schemas.container import (Block, Container, Header, Lost, NotAContainer,
                                             read_header)
from ldp_telemetry.schemas.decompress import CorruptBlock, codec_problem
from ldp_telemetry.schemas.envelopes import (MalformedEnvelope, check_header, decode_columns,
                                             envelope_count, envelope_stands)
from ldp_telemetry.schemas.files import RefusedInput, open_report_file
from ldp_telemetry.schemas.limits import DecodeLimits
from ldp_telemetry.schemas.records import BlockRecords
from ldp_telemetry.schemas.switches import collector_paused
from ldp_telemetry.schemas.writer import write_reports

__all__ = ["CHUNK_RECORDS", "EVENT_TIME", "ReportDecoder", "payload_branch", "report_as_json",
           "split_by_slice", "write_reports"]

CHUNK_RECORDS = 65_536
#: The column of event times (int64 epoch ms) in the batches of a decoder made with
#: `event_times=True`; the counting job never asks for it.
EVENT_TIME = "event_time"
# Valid event times are ldp.base.validation's [EVENT_TIME_MIN_MS, EVENT_TIME_END_MS). A device clock
# reset to the epoch gives times >= 0, which stay valid; times outside are not real (seconds or
# microseconds taken for milliseconds, NaN cast to int64 min) and would overflow the window
# arithmetic.
_NAME_IN_DETAIL_CHARS = 100
_SCHEMAS_KEPT = 16  # writer schemas whose check and record decoder a ReportDecoder keeps
_ROWS_IN_DETAIL = 5  # rows of an envelope named in the detail of its grouped dead letter
_GATHER_BELOW = 4096  # envelopes of fewer valid reports are gathered into a chunk's batches
_METRIC, _PAYLOAD, _EVENT_TIME, _REPORT_ID = (itemgetter(name) for name in (
    "metric", "payload", "event_time", REPORT_ID))
_BRANCH, _FIELDS = itemgetter(0), itemgetter(1)
_FINGERPRINT_OF = methodcaller("get", FINGERPRINT)


def report_as_json(record: dict, limit: int | None = None) -> str:
    """A decoded report as JSON text (bytes as base64, event time as ISO-8601).

    With `limit`, each string and bytes value is cut before encoding and the text is cut to
    `limit` characters (see `clip`), so that a huge report never becomes a huge text.
    """
    def plain(value: Any) -> Any:
        if isinstance(value, bytes):
            if limit is not None:
                value = value[:limit]
            return base64.b64encode(value).decode("ascii")
        if isinstance(value, str):
            return value if limit is None else value[:limit]
        if isinstance(value, tuple):
            return {"branch": plain(value[0]), **{k: plain(v) for k, v in value[1].items()}}
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items()}
        if isinstance(value, list):
            return [plain(v) for v in (value if limit is None else value[:limit])]
        if isinstance(value, dt.datetime):
            return value.isoformat()
        return value
    text = json.dumps({k: plain(v) for k, v in record.items()}, sort_keys=True)
    return text if limit is None else clip(text, limit)


class ReportDecoder:
    """Decodes report files into `ReportBatch`es (per metric and slice) and `DeadLetter`s."""

    def __init__(self, registry: Registry, slice_ms: int, chunk_records: int = CHUNK_RECORDS,
                 slice_offset_ms: int = 0, limits: DecodeLimits = DecodeLimits(),
                 event_times: bool = False):
        if slice_ms <= 0:
            raise ValueError(f"slice length must be positive, got {slice_ms} ms")
        long_names = [metric.name for metric in registry.metrics
                      if len(metric.name) > limits.max_metric_name_chars]
        if long_names:
            raise ConfigError(f"metric {clip(long_names[0], _NAME_IN_DETAIL_CHARS)!r} is longer "
                              f"than max_metric_name_chars ({limits.max_metric_name_chars})",
                              "max_metric_name_chars")
        self.registry = registry
        self.slice_ms = int(slice_ms)
        self.slice_offset_ms = int(slice_offset_ms) % self.slice_ms
        self.chunk_records = chunk_records
        self.limits = limits
        self.records_read = 0
        self.event_times = event_times  # batches carry an EVENT_TIME column (the converter's)
        #: metric -> (first, last) event time in ms of the valid reports decoded so far
        self.event_ranges: dict[str, tuple[int, int]] = {}
        self._schemas: dict[str, tuple[str | None, BlockRecords | None, bool]] = {}
        self._block_records: BlockRecords | None = None  # of the file being decoded

    def decode_file(self, path: str, opener: Callable[[str, str], BinaryIO] = open_report_file
                    ) -> Iterator[ReportBatch | DeadLetter]:
        """Every batch and dead letter of one file; `records_read` grows by its record count.

        `opener(path, "rb")` returns a binary stream, raises `RefusedInput` for a path that must
        not be read, or OSError for a file that cannot be opened.
        """
        try:
            handle = opener(path, "rb")
        except RefusedInput as refused:
            self.records_read += 1
            yield self._letter(path, refused.reason, str(refused))
            return
        except OSError as error:
            self.records_read += 1
            yield self._letter(path, Reason.UNDECODABLE, f"cannot open the file: {error}")
            return
        with handle:
            yield from self._decode_stream(handle, path)

    def _letter(self, source: str, reason: str, detail: str, records: int = 1,
                record: dict | None = None, size: int | None = None) -> DeadLetter:
        """A dead letter, its detail and report cut to their limits (counting is the caller's)."""
        report = None
        if record is not None:
            report = report_as_json(record, self.limits.max_dead_letter_report_chars)
        return DeadLetter(source, reason, clip(detail, MAX_DETAIL_CHARS), records, report, size)

    def _decode_stream(self, handle: BinaryIO, source: str) -> Iterator[ReportBatch | DeadLetter]:
        try:
            header = read_header(handle, self.limits)
        except (NotAContainer, OSError) as error:
            self.records_read += 1
            yield self._letter(source, Reason.UNDECODABLE, f"not a readable Avro file: {error}")
            return
        container = Container(handle, header, self.limits)
        problem, block_records, envelopes = self._schema(header)
        reason = Reason.INCOMPATIBLE_SCHEMA
        if problem is None:
            problem, reason = codec_problem(header.codec), Reason.UNDECODABLE
        if problem is not None:
            for lost in container.undecoded(problem, reason):
                self.records_read += lost.records
                yield self._letter(source, lost.reason, lost.detail, lost.records)
            return
        blocks = container.blocks()
        decode = self.decode_envelopes if envelopes else self.decode_records
        finished = False
        while not finished:
            with collector_paused():
                self._block_records = block_records
                chunk, letters, finished = self._read_chunk(blocks, source, envelopes)
                outputs = list(decode(chunk, source)) if chunk else []
                # Freed while the collector is paused: re-enabled, it would first scan them.
                del chunk
                self._block_records = None
            yield from letters
            yield from outputs

    def _schema(self, header: Header) -> tuple[str | None, BlockRecords | None, bool]:
        """(why the writer schema holds no reports, or None; its record decoder; whether its
        records are report envelopes), kept per schema text: files of one writer share them."""
        if header.schema_text not in self._schemas:
            if len(self._schemas) >= _SCHEMAS_KEPT:
                self._schemas.clear()
            envelopes = names_envelope(header.schema)
            if envelopes:
                verdict, kind = check_envelope_schema(header.schema), "report envelope"
            else:
                verdict, kind = check_writer_schema(header.schema), "report"
            self._schemas[header.schema_text] = (
                (f"the writer schema is not a {kind} schema: {verdict.problem}", None, envelopes)
                if verdict.problem is not None
                else (None, BlockRecords(without_logical_types(verdict.canonical)), envelopes))
        return self._schemas[header.schema_text]

    def _read_chunk(self, blocks: Iterator[Block | Lost], source: str, envelopes: bool = False
                    ) -> tuple[list[dict], list[DeadLetter], bool]:
        """Whole blocks until about `chunk_records` records, `max_block_bytes` bytes of data or
        `chunk_records` dead letters, whichever comes first: (records, dead letters, at end?).

        The last two bound a chunk's memory whatever its blocks hold (huge records, or millions
        of damaged blocks of a few bytes each). With `envelopes` the records are report
        envelopes and a chunk ends after about `chunk_records` of their reports (so that its
        batches are as large as a per-report chunk's, and its memory as bounded);
        a block that cannot be read stands for its envelopes (what the reports in
        them were cannot be known); a decoded envelope is counted in reports by
        `decode_envelopes`, or here when it is larger than `max_envelope_bytes`.
        """
        assert self._block_records is not None, "set by _decode_stream for the file's blocks"
        chunk: list[dict] = []
        letters: list[DeadLetter] = []
        max_record = (self.limits.max_envelope_bytes if envelopes
                      else self.limits.max_record_bytes)
        data_bytes = reports = 0
        while (reports < self.chunk_records and len(letters) < self.chunk_records
               and data_bytes < self.limits.max_block_bytes):
            block = next(blocks, None)
            if block is None:
                return chunk, letters, True
            if isinstance(block, Lost):
                self.records_read += block.records
                letters.append(self._letter(source, block.reason, block.detail, block.records))
                continue
            if not envelopes:
                self.records_read += block.records
            data_bytes += len(block.data)
            may_hold_large = len(block.data) > max_record
            try:
                records, sizes = self._block_records.decode(block.records, block.data,
                                                            sizes=may_hold_large)
            except CorruptBlock as error:
                if envelopes:
                    self.records_read += block.records
                letters.append(self._letter(
                    source, Reason.UNDECODABLE, f"block of {block.records} records failed to "
                    f"decode (at byte {block.offset}): {error}", block.records))
                continue
            if sizes is not None and max(sizes) > max_record:  # sizes: when it may hold large
                for record, size in zip(records, sizes, strict=True):
                    if size > max_record and envelopes:
                        stands = envelope_count(record, self.limits.max_envelope_reports)
                        self.records_read += stands
                        letters.append(self._letter(
                            source, Reason.RECORD_TOO_LARGE, f"{envelope_stands(record, stands)}"
                            f" of {size} bytes, more than --max-envelope-bytes {max_record}",
                            stands, record=record, size=size))
                    elif size > max_record:
                        letters.append(self._letter(
                            source, Reason.RECORD_TOO_LARGE, f"a record of {size} bytes, more "
                            f"than --max-record-bytes {max_record}", record=record, size=size))
                records = [record for record, size in zip(records, sizes, strict=True)
                           if size <= max_record]
            chunk.extend(records)
            reports += (sum(envelope_count(r, self.limits.max_envelope_reports) for r in records)
                        if envelopes else len(records))
        return chunk, letters, False

    def decode_records(self, records: list[dict], source: str
                       ) -> Iterator[ReportBatch | DeadLetter]:
        """Validate decoded report records and split the valid ones by (metric, slice).

        The records are already counted in `records_read`; their dead letters are not counted
        again.
        """
        distinct = set(map(_METRIC, records))
        if len(distinct) == 1:
            yield from self._decode_metric(next(iter(distinct)), records, source)
            return
        names = list(map(_METRIC, records))
        code_of = {name: code for code, name in enumerate(distinct)}
        codes = np.fromiter(map(code_of.__getitem__, names), dtype=np.intp, count=len(names))
        for name, code in code_of.items():
            rows = np.flatnonzero(codes == code).tolist()
            yield from self._decode_metric(name, [records[i] for i in rows], source)

    def decode_envelopes(self, envelopes: list[dict], source: str
                         ) -> Iterator[ReportBatch | DeadLetter]:
        """Validate decoded report envelopes and split their valid reports by slice.

        Each envelope is counted in `records_read` here, in reports: its count, or, when it is
        malformed as a whole (one dead letter), the count it announces within
        [1, max_envelope_reports], else 1. The valid reports of the chunk's small envelopes
        (fewer than `_GATHER_BELOW`) are gathered per configuration before the split, so that
        envelopes of a device's few reports each still make one batch per (metric, version,
        slice), never one per envelope; a larger envelope is split on its own (no copy).
        """
        valid: dict[tuple[str, int | None], list[tuple]] = {}
        for envelope in envelopes:
            for item in self._decode_envelope(envelope, source):
                if isinstance(item, DeadLetter):
                    yield item
                elif len(item[1]) >= _GATHER_BELOW:
                    self._widen_range(item[0].name, item[1])
                    yield from split_by_slice(item[0].name, item[1], item[2], self.slice_ms,
                                              self.slice_offset_ms, item[0].version)
                else:
                    valid.setdefault((item[0].name, item[0].version), []).append(item)
        for parts in valid.values():
            config, times, columns = parts[0]
            if len(parts) > 1:
                times = np.concatenate([part[1] for part in parts])
                columns = {name: np.concatenate([part[2][name] for part in parts])
                           for name in columns}
            self._widen_range(config.name, times)
            yield from split_by_slice(config.name, times, columns, self.slice_ms,
                                      self.slice_offset_ms, config.version)

    def _decode_envelope(self, envelope: dict, source: str) -> Iterator:
        """An envelope's dead letters, and (config, event times, columns) of its valid
        reports."""
        max_reports = self.limits.max_envelope_reports

        def whole(reason: str, detail: str, count_held: bool = True) -> DeadLetter:
            stands = envelope_count(envelope, max_reports) if count_held else 1
            self.records_read += stands
            return self._record_letter(source, reason, f"{envelope_stands(envelope, stands)}: "
                                       f"{detail}", envelope, stands)

        try:
            count = check_header(envelope, max_reports)
        except MalformedEnvelope as error:
            yield whole(Reason.UNDECODABLE, str(error))
            return
        metric = envelope["metric"]
        shown = repr(clip(metric, _NAME_IN_DETAIL_CHARS))
        if len(metric) > self.limits.max_metric_name_chars:
            yield whole(Reason.METRIC_NAME_TOO_LONG,
                        f"metric name of {len(metric)} characters, more than "
                        f"--max-metric-name-chars {self.limits.max_metric_name_chars}: {shown}")
            return
        if metric not in self.registry:
            yield whole(Reason.UNKNOWN_METRIC, f"metric {shown} is not in the registry")
            return
        config, problem = self._configuration(metric, envelope[FINGERPRINT])
        if problem is not None:
            yield whole(Reason.CONFIG_MISMATCH, f"metric {shown}: {problem}")
            return
        assert config is not None, "a configuration, or the problem with it"
        protocol = config.protocol
        if envelope["payload"] != protocol.payload_record:
            yield whole(Reason.PROTOCOL_MISMATCH,
                        f"metric {shown} uses {protocol.name} ({protocol.payload_record}) but "
                        f"the envelope's payload is {clip(envelope['payload'], 100)!r}")
            return
        try:
            ids, times, raw = decode_columns(envelope, protocol, count)
        except MalformedEnvelope as error:
            yield whole(Reason.UNDECODABLE, str(error), error.count_held)
            return
        self.records_read += count
        if not count:
            return
        columns, invalid = protocol.check_payloads(raw)
        columns[REPORT_ID] = ids
        checks = self._report_checks(config, shown, times, invalid)
        for reason, rows, detail in checks:
            first = rows[:_ROWS_IN_DETAIL].tolist()
            yield self._letter(source, reason, f"{len(rows)} of the {count} reports of a report "
                               f"envelope (rows {first}{', ...' if len(rows) > len(first) else ''}"
                               f"): {detail(first[0])}", len(rows))
        yield (config, *self._kept(times, columns, checks))

    def _report_checks(self, config: MetricConfig, shown: str, times: np.ndarray,
                       invalid: np.ndarray) -> list:
        """The rules each report of `config` must pass besides its protocol's (`invalid`, from
        `check_payloads`): [(reason, failing rows, detail of row i)] of the rules that fail,
        each row under one reason. Per-record and envelope paths both call it."""
        untimely = (times < EVENT_TIME_MIN_MS) | (times >= EVENT_TIME_END_MS)
        not_before = config.not_before_ms
        if not_before is None and not invalid.any() and not untimely.any():
            return []
        early = (np.zeros(len(times), dtype=bool) if not_before is None
                 else (times < not_before) & ~untimely & ~invalid)
        rule = config.protocol.payload_rule
        checks = [
            (Reason.INVALID_PAYLOAD, invalid, lambda i: f"metric {shown}: {rule}"),
            (Reason.INVALID_EVENT_TIME, untimely & ~invalid,
             lambda i: f"event time {times[i]} ms since the epoch is outside "
                       f"{EVENT_TIME_SPAN_TEXT}"),
            (Reason.BEFORE_NOT_BEFORE, early,
             lambda i: f"metric {shown}: event time {times[i]} ms since the epoch is before "
                       f"the metric's not_before ({config.not_before})")]
        return [(reason, np.flatnonzero(mask), detail) for reason, mask, detail in checks
                if mask.any()]

    def _kept(self, times: np.ndarray, columns: dict, checks: list
              ) -> tuple[np.ndarray, dict]:
        """(event times, columns) of the reports that pass every check (`_report_checks`)."""
        if self.event_times:
            columns[EVENT_TIME] = times
        if checks:
            keep = np.ones(len(times), dtype=bool)
            for _, rows, _ in checks:
                keep[rows] = False
            columns = {name: column[keep] for name, column in columns.items()}
            times = times[keep]
        return times, columns

    def _widen_range(self, metric: str, times: np.ndarray) -> None:
        """Widen `event_ranges[metric]` to hold the valid reports' event times `times`."""
        if not len(times):
            return
        first, last = int(times.min()), int(times.max())
        old = self.event_ranges.get(metric)
        if old is not None:
            first, last = min(first, old[0]), max(last, old[1])
        self.event_ranges[metric] = (first, last)

    def _split(self, config: MetricConfig, times: np.ndarray, columns: dict, checks: list
               ) -> Iterator[ReportBatch]:
        """The reports that pass every check (`_report_checks`), split by slice."""
        times, columns = self._kept(times, columns, checks)
        self._widen_range(config.name, times)
        yield from split_by_slice(config.name, times, columns, self.slice_ms,
                                  self.slice_offset_ms, config.version)

    def _record_letter(self, source: str, reason: str, detail: str, record: dict,
                       records: int = 1) -> DeadLetter:
        """A dead letter of one decoded record (a report, or an envelope standing for
        `records` reports) with its text and its encoded size in bytes."""
        size = None
        if self._block_records is not None:
            size = self._block_records.encoded_size(record)
        return self._letter(source, reason, detail, records, record=record, size=size)

    def _decode_metric(self, metric: str, records: list[dict], source: str
                       ) -> Iterator[ReportBatch | DeadLetter]:
        shown = repr(clip(metric, _NAME_IN_DETAIL_CHARS))
        if len(metric) > self.limits.max_metric_name_chars:
            for record in records:
                yield self._record_letter(
                    source, Reason.METRIC_NAME_TOO_LONG,
                    f"metric name of {len(metric)} characters, more than "
                    f"--max-metric-name-chars {self.limits.max_metric_name_chars}: {shown}",
                    record)
            return
        if metric not in self.registry:
            for record in records:
                yield self._record_letter(source, Reason.UNKNOWN_METRIC,
                                          f"metric {shown} is not in the registry", record)
            return
        for config, problem, group in self._by_configuration(metric, records):
            if problem is not None:
                for record in group:
                    yield self._record_letter(source, Reason.CONFIG_MISMATCH,
                                              f"metric {shown}: {problem}", record)
            else:
                assert config is not None, "a configuration, or the problem with it"
                yield from self._decode_configuration(config, group, source, shown)

    def _by_configuration(self, metric: str, records: list[dict]
                          ) -> Iterator[tuple[MetricConfig | None, str | None, list[dict]]]:
        """The records of one metric grouped by the configuration their fingerprint names:
        (MetricConfig, None, records) per version present, (None, why, records) per fingerprint
        that names no version of the metric. A report without a fingerprint is read under the
        metric's current configuration."""
        distinct = set(map(_FINGERPRINT_OF, records))
        if len(distinct) == 1:
            yield (*self._configuration(metric, next(iter(distinct))), records)
            return
        fingerprints = list(map(_FINGERPRINT_OF, records))
        groups: dict[bytes | None, list[dict]] = {}
        for fingerprint, record in zip(fingerprints, records, strict=True):
            groups.setdefault(fingerprint, []).append(record)
        for fingerprint, group in groups.items():
            yield (*self._configuration(metric, fingerprint), group)

    def _configuration(self, metric: str, fingerprint: bytes | None
                       ) -> tuple[MetricConfig | None, str | None]:
        """(the configuration a report of `metric` with `fingerprint` was made under, None) or
        (None, why it names none of the metric's versions)."""
        if fingerprint is None:
            return self.registry[metric], None
        if len(fingerprint) != FINGERPRINT_BYTES:
            return None, (f"the report's configuration fingerprint is {len(fingerprint)} bytes "
                          f"long, not {FINGERPRINT_BYTES}")
        config = self.registry.by_fingerprint.get(fingerprint)
        if config is None:
            known = ", ".join(f"{c.version_label} {c.fingerprint.hex()}"
                              for c in self.registry.versions(metric))
            return None, (f"the report was made under configuration {fingerprint.hex()}, which "
                          f"is none of the metric's versions in the registry ({known})")
        if config.name != metric:
            return None, (f"the report's configuration fingerprint {fingerprint.hex()} is that "
                          f"of metric {clip(config.name, _NAME_IN_DETAIL_CHARS)!r} "
                          f"{config.version_label}")
        return config, None

    def _decode_configuration(self, config: MetricConfig, records: list[dict], source: str,
                              shown: str) -> Iterator[ReportBatch | DeadLetter]:
        """Validate the reports of one configuration and split the valid ones by slice."""
        protocol = config.protocol
        branch = payload_branch(protocol)
        payloads = list(map(_PAYLOAD, records))
        if set(map(_BRANCH, payloads)) != {branch}:
            wrong = np.fromiter((p[0] != branch for p in payloads), dtype=bool,
                                count=len(payloads))
            for i in np.flatnonzero(wrong).tolist():
                yield self._record_letter(
                    source, Reason.PROTOCOL_MISMATCH, f"metric {shown} uses {protocol.name} "
                    f"but the payload is {payloads[i][0]}", records[i])
            records = [r for r, bad in zip(records, wrong.tolist(), strict=True) if not bad]
            payloads = list(map(_PAYLOAD, records))
        n = len(records)
        columns, invalid = protocol.payloads_from_avro(list(map(_FIELDS, payloads)))
        times = np.fromiter(map(_EVENT_TIME, records), dtype=np.int64, count=n)
        columns[REPORT_ID] = np.fromiter(map(_REPORT_ID, records), dtype=np.int64, count=n)
        checks = self._report_checks(config, shown, times, invalid)
        for reason, rows, detail in checks:
            for i in rows.tolist():
                yield self._record_letter(source, reason, detail(i), records[i])
        yield from self._split(config, times, columns, checks)


def split_by_slice(metric: str, times_ms: np.ndarray, columns: Columns, slice_ms: int,
                   offset_ms: int = 0, version: int | None = None) -> Iterator[ReportBatch]:
    """One ReportBatch per time slice present, in one vectorised pass (of the metric's
    configuration `version`).

    Slices are [offset + i * slice_ms, offset + (i + 1) * slice_ms), as Beam's
    FixedWindows(slice, offset).
    """
    if len(times_ms) == 0:
        return
    slices = (times_ms - offset_ms) // slice_ms
    first = slices[0]
    if (slices == first).all():
        yield ReportBatch(metric, int(first) * slice_ms + offset_ms, dict(columns), version)
        return
    order = np.argsort(slices, kind="stable")
    ordered = slices[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    bounds = np.r_[starts, len(order)]
    for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        rows = order[lo:hi]
        yield ReportBatch(metric, int(ordered[lo]) * slice_ms + offset_ms,
                          {name: column[rows] for name, column in columns.items()}, version)
