"""Writing reports to Avro: the one encoder of report records and files.

`report_records` turns payload columns into report records (the dicts fastavro writes, the payload
in tuple notation naming its union branch); `ReportWriter` appends them to an Avro container file
block by block; `write_reports` writes one metric's reports in one call. The client library's
atomic report files (ldp_telemetry.client.files) are a `ReportWriter` on a temporary file.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import BinaryIO

import numpy as np
from fastavro.write import Writer

from ldp_telemetry.ldp.protocols.base import Columns, FrequencyOracle
from ldp_telemetry.schemas import load_schema, payload_branch

#: A block is closed once it holds about this many bytes of encoded reports.
BLOCK_BYTES = 16_000


def report_records(metric: str, protocol: FrequencyOracle, report_ids: np.ndarray,
                   event_times_ms: np.ndarray, columns: Columns,
                   fingerprint: bytes | None = None) -> Iterator[dict]:
    """One report record per row of the payload columns; `fingerprint`: the configuration
    fingerprint every record carries (None: the field is null, read under the registry's
    current configuration)."""
    branch = payload_branch(protocol)
    for rid, t, payload in zip(np.asarray(report_ids).tolist(),
                               np.asarray(event_times_ms).tolist(),
                               protocol.payloads_to_avro(columns), strict=False):
        yield {"report_id": rid, "metric": metric, "event_time": t,
               "payload": (branch, payload), "fingerprint": fingerprint}


class ReportWriter:
    """An Avro container of reports on an open binary file: header at once, then blocks of about
    `block_bytes` bytes as records are appended; `flush` closes the current block."""

    def __init__(self, handle: BinaryIO, codec: str = "null", block_bytes: int = BLOCK_BYTES):
        self._writer = Writer(handle, load_schema("report"), codec=codec,
                              sync_interval=block_bytes)
        self.count = 0

    def write(self, records: Iterable[dict]) -> int:
        """Append report records; returns how many."""
        written = 0
        for record in records:
            self._writer.write(record)
            written += 1
        self.count += written
        return written

    def flush(self) -> None:
        self._writer.flush()


def write_reports(path: str | BinaryIO, metric: str, protocol: FrequencyOracle,
                  report_ids: np.ndarray, event_times_ms: np.ndarray, columns: Columns,
                  codec: str = "null", block_bytes: int = BLOCK_BYTES,
                  fingerprint: bytes | None = None) -> int:
    """Write one metric's reports to an Avro file (a path, or a binary file object); returns the
    number written. `fingerprint` as in `report_records`."""
    records = report_records(metric, protocol, report_ids, event_times_ms, columns, fingerprint)
    if not isinstance(path, str):
        return _write_all(path, records, codec, block_bytes)
    with open(path, "wb") as out:
        return _write_all(out, records, codec, block_bytes)


def _write_all(handle: BinaryIO, records: Iterable[dict], codec: str, block_bytes: int) -> int:
    writer = ReportWriter(handle, codec, block_bytes)
    writer.write(records)
    writer.flush()
    return writer.count
