"""Writing reports to Avro files (the simulator's and the tests' side of the codec)."""
from __future__ import annotations

from typing import BinaryIO

import fastavro
import numpy as np

from ldp_telemetry.ldp.protocols.base import Columns, FrequencyOracle
from ldp_telemetry.schemas import load_schema, payload_branch


def write_reports(path: str | BinaryIO, metric: str, protocol: FrequencyOracle,
                  report_ids: np.ndarray, event_times_ms: np.ndarray, columns: Columns,
                  codec: str = "null", block_bytes: int = 16_000) -> int:
    """Write one metric's reports to an Avro file (a path, or a binary file object); returns the
    number written.

    A block is closed once it holds about `block_bytes` bytes of encoded reports.
    """
    branch = payload_branch(protocol)
    records = (
        {"report_id": rid, "metric": metric, "event_time": t, "payload": (branch, payload)}
        for rid, t, payload in zip(np.asarray(report_ids).tolist(),
                                   np.asarray(event_times_ms).tolist(),
                                   protocol.payloads_to_avro(columns), strict=False))
    if not isinstance(path, str):
        fastavro.writer(path, load_schema("report"), records, codec=codec,
                        sync_interval=block_bytes)
        return len(report_ids)
    with open(path, "wb") as out:
        fastavro.writer(out, load_schema("report"), records, codec=codec,
                        sync_interval=block_bytes)
    return len(report_ids)
