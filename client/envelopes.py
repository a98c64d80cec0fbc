"""Envelope files as a collector writes them: batches of reports as columns, atomically.

A collector that receives many reports of one metric (an HTTP request of a device's pending
reports, a minute of traffic) writes them as report envelopes (schemas/envelope.avsc,
docs/envelopes.md): one Avro record per batch of up to `envelope_reports` reports of one metric
configuration, each column a little-endian array. The pipeline reads envelope files and
per-report files alike (a folder may mix them) and decodes an envelope with O(1) Python work.

    with EnvelopeFile("outbox/batch-0001.avro", envelope_reports=10_000) as out:
        out.write(encode_many(config, values, rng, event_times_ms=times))

The file is written under a temporary name and renamed, as `ReportFile`.
"""
from __future__ import annotations

import os
from collections.abc import Iterable
from typing import BinaryIO

from ldp_telemetry.client.encoder import EncodedReports
from ldp_telemetry.client.files import ReportFile
from ldp_telemetry.ldp.base.errors import InputError
from ldp_telemetry.schemas.envelopes import DEFAULT_ENVELOPE_REPORTS, EnvelopeWriter
from ldp_telemetry.schemas.writer import BLOCK_BYTES


class EnvelopeFile(ReportFile):
    """One envelope file, written as a context manager (or `open` ... `close` / `discard`).

    `write` takes `EncodedReports` (one configuration each) and appends them in envelopes of
    at most `envelope_reports` reports; `count` is the number of reports written.
    """

    def __init__(self, path: str | os.PathLike, codec: str = "null",
                 block_bytes: int = BLOCK_BYTES,
                 envelope_reports: int = DEFAULT_ENVELOPE_REPORTS):
        super().__init__(path, codec, block_bytes)
        self.envelope_reports = envelope_reports

    def _new_writer(self, handle: BinaryIO) -> EnvelopeWriter:
        return EnvelopeWriter(handle, self.codec, self.block_bytes, self.envelope_reports)

    def write(self, reports: EncodedReports | Iterable[dict]) -> int:
        """Append the reports of one configuration, in envelopes; returns how many. Typed as
        `ReportFile.write` (an EnvelopeFile is a ReportFile); report records are refused
        (InputError): an envelope is made of one configuration's columns."""
        writer = self._writer
        if writer is None:
            raise RuntimeError(f"envelope file {self.path} is not open")
        assert isinstance(writer, EnvelopeWriter)  # what _new_writer made
        if not isinstance(reports, EncodedReports):
            raise InputError(f"an envelope file takes EncodedReports (encode_many), got "
                             f"{type(reports).__name__}", "reports")
        config = reports.config
        written = writer.write(config.name, config.protocol, reports.report_ids,
                               reports.event_times_ms, reports.columns, config.fingerprint)
        self.count += written
        return written


def write_envelope_file(path: str | os.PathLike, reports: EncodedReports, codec: str = "null",
                        envelope_reports: int = DEFAULT_ENVELOPE_REPORTS) -> str:
    """Write `reports` to the envelope file `path` (temporary name, then rename); returns path."""
    with EnvelopeFile(path, codec, envelope_reports=envelope_reports) as out:
        out.write(reports)
    return out.path
