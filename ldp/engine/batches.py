"""The elements that flow through the pipeline: report batches and dead letters (whose reasons
are `ldp_telemetry.ldp.engine.reasons.Reason`)."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

#: The column of a ReportBatch holding each report's id (int64); protocols never read it.
REPORT_ID = "report_id"


@dataclass(frozen=True)
class ReportBatch:
    """Valid reports of one configuration of one metric inside one time slice, as payload
    columns.

    `slice_start_ms` is the start of the slice (epoch milliseconds); every report in the batch
    has an event time in [slice_start_ms, slice_start_ms + slice length). `columns` holds the
    protocol's payload columns and, from the decoder, the reports' ids (`REPORT_ID`).
    `version`: the registry version of the metric's configuration the reports were made under
    (None: the metric's current configuration).
    """

    metric: str
    slice_start_ms: int
    columns: Mapping[str, np.ndarray]
    version: int | None = None

    @property
    def n(self) -> int:
        return len(next(iter(self.columns.values()))) if self.columns else 0


@dataclass(frozen=True)
class DeadLetter:
    """Input that was not counted: where it came from, why, and how many records it holds.

    `report` is the decoded report as JSON text when there is one, cut to the reader's
    `max_dead_letter_report_chars` (a cut text ends with `CUT_MARK`); `report_bytes` is the size
    of the report as encoded in its file, cut or not.
    """

    source: str
    reason: str
    detail: str
    records: int = 1
    report: str | None = None
    report_bytes: int | None = None

    def as_dict(self) -> dict:
        return {"source": self.source, "reason": self.reason, "detail": self.detail,
                "records": self.records, "report": self.report, "report_bytes": self.report_bytes}


CUT_MARK = "…[cut]"
MAX_DETAIL_CHARS = 1000


def clip(text: str, limit: int) -> str:
    """`text`, or its first characters ending with CUT_MARK so that it is `limit` long."""
    if len(text) <= limit:
        return text
    return text[:max(limit - len(CUT_MARK), 0)] + CUT_MARK

