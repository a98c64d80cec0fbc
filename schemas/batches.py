"""The elements that flow through the pipeline: report batches and dead letters."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np

#: The column of a ReportBatch holding each report's id (int64); protocols never read it.
REPORT_ID = "report_id"


@dataclass(frozen=True)
class ReportBatch:
    """Valid reports of one metric inside one time slice, as payload columns.

    `slice_start_ms` is the start of the slice (epoch milliseconds); every report in the batch
    has an event time in [slice_start_ms, slice_start_ms + slice length). `columns` holds the
    protocol's payload columns and, from the decoder, the reports' ids (`REPORT_ID`).
    """

    metric: str
    slice_start_ms: int
    columns: Mapping[str, np.ndarray]

    @property
    def n(self) -> int:
        return len(next(iter(self.columns.values()))) if self.columns else 0


@dataclass(frozen=True)
class DeadLetter:
    """Input that was not counted: where it came from, why, and how many records it holds."""

    source: str
    reason: str
    detail: str
    records: int = 1
    report: str | None = None

    def as_dict(self) -> dict:
        return {"source": self.source, "reason": self.reason, "detail": self.detail,
                "records": self.records, "report": self.report}


class Reason:
    """Dead-letter reason codes (also the names of their counters)."""

    UNDECODABLE = "undecodable"
    UNKNOWN_METRIC = "unknown_metric"
    PROTOCOL_MISMATCH = "protocol_mismatch"
    INVALID_PAYLOAD = "invalid_payload"
    INCOMPATIBLE_SCHEMA = "incompatible_schema"
    INVALID_EVENT_TIME = "invalid_event_time"
    BEFORE_NOT_BEFORE = "before_not_before"
    DUPLICATE = "duplicate"
