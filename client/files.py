"""Report files as a collector writes them: under a temporary name, then renamed.

`ReportFile("inbox/batch-0042.avro")` writes `inbox/batch-0042.avro.tmp` and, once closed
without an error, flushes it to disk (fsync), renames it to `batch-0042.avro` (atomic within a
file system) and syncs the folder: a reader that skips `*.tmp` names (`ldp run --follow`,
docs/live.md "The collector's contract") sees the whole file or nothing. After an error the
temporary file is removed. The Avro encoding is ldp_telemetry.schemas.writer's.
"""
from __future__ import annotations

import os
from collections.abc import Iterable
from types import TracebackType
from typing import BinaryIO, Protocol

from ldp_telemetry.client.durable import sync_folder as _sync_folder
from ldp_telemetry.client.encoder import EncodedReports
from ldp_telemetry.ldp.base.errors import InputError
from ldp_telemetry.schemas.writer import BLOCK_BYTES, ReportWriter

#: Suffix of a report file's name while it is written.
TEMPORARY_SUFFIX = ".tmp"


class FileWriter(Protocol):
    """What a report file asks of its Avro writer beyond `write`: a per-report `ReportWriter`
    here, an `EnvelopeWriter` in `client.envelopes.EnvelopeFile` (whose `write` differs)."""

    def flush(self) -> None: ...


class ReportFile:
    """One report file, written as a context manager (or `open` ... `close` / `discard`).

    `write` takes `EncodedReports` or report records (`encode`'s dicts); `count` is the number
    written. `codec`: an Avro codec (null, deflate, snappy, ...); `block_bytes`: the size at
    which a block is closed.
    """

    def __init__(self, path: str | os.PathLike, codec: str = "null",
                 block_bytes: int = BLOCK_BYTES):
        self.path = os.fspath(path)
        if not self.path.endswith(".avro"):
            raise InputError(f"a report file's name must end with .avro, got {self.path!r}",
                             "path")
        self.temporary = self.path + TEMPORARY_SUFFIX
        self.codec, self.block_bytes = codec, block_bytes
        self._handle: BinaryIO | None = None
        self._writer: FileWriter | None = None
        self.count = 0

    def open(self) -> ReportFile:
        self._handle = open(self.temporary, "wb")  # noqa: SIM115 - closed by close / discard
        try:
            self._writer = self._new_writer(self._handle)
        finally:  # a failed header (an unknown codec) leaves no temporary file
            if self._writer is None:
                self.discard()
        return self

    def _new_writer(self, handle: BinaryIO) -> FileWriter:
        """The Avro writer of the file's records (per-report records here)."""
        return ReportWriter(handle, self.codec, self.block_bytes)

    def write(self, reports: EncodedReports | Iterable[dict]) -> int:
        """Append reports; returns how many."""
        writer = self._writer
        if writer is None:
            raise RuntimeError(f"report file {self.path} is not open")
        assert isinstance(writer, ReportWriter)  # _new_writer's (a subclass's overrides write)
        records = reports.records() if isinstance(reports, EncodedReports) else reports
        written = writer.write(records)
        self.count += written
        return written

    def close(self) -> str:
        """Finish the file: flush, fsync, rename to its final name; returns that path."""
        if self._writer is None or self._handle is None:
            raise RuntimeError(f"report file {self.path} is not open")
        renamed = False
        try:
            self._writer.flush()
            self._handle.flush()
            os.fsync(self._handle.fileno())
            self._handle.close()
            os.replace(self.temporary, self.path)
            renamed = True
        finally:  # after a failed write or rename the temporary file is removed
            if not renamed:
                self.discard()
        self._handle = self._writer = None
        _sync_folder(os.path.dirname(self.path) or ".")
        return self.path

    def discard(self) -> None:
        """Abandon the file: close and remove the temporary file; the final name is untouched."""
        if self._handle is not None:
            self._handle.close()
        self._handle = self._writer = None
        if os.path.exists(self.temporary):
            os.unlink(self.temporary)

    def __enter__(self) -> ReportFile:
        return self.open()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        if kind is None:
            self.close()
        else:
            self.discard()


def write_report_file(path: str | os.PathLike, reports: EncodedReports | Iterable[dict],
                      codec: str = "null", block_bytes: int = BLOCK_BYTES) -> str:
    """Write `reports` to the report file `path` (temporary name, then rename); returns path."""
    with ReportFile(path, codec, block_bytes) as out:
        out.write(reports)
    return out.path
