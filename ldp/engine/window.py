"""One window counted and finalized in process, by the pipeline's own counting path.

`count_window` cuts a window's reports into batches as the reader does and counts them with
`count_slice` (ldp_telemetry.ldp.engine.counting: each report id once, the integrity sample
beside each version's table), exactly as a slice of a job is counted; `window_with_integrity`
then finalizes the window and runs its integrity tests. For evaluations, benchmarks and tests:
no Beam, no files.
"""
from __future__ import annotations

import numpy as np

from ldp_telemetry.ldp.config.registry import MetricConfig, Registry
from ldp_telemetry.ldp.engine.batches import REPORT_ID, ReportBatch
from ldp_telemetry.ldp.engine.counting import SupportStatistic, count_slice
from ldp_telemetry.ldp.engine.finalize import (NumericWindowResult, StringWindowResult,
                                               WindowResult, finalize_window)
from ldp_telemetry.ldp.integrity.accumulate import new_sample
from ldp_telemetry.ldp.integrity.statistics import window_integrity

#: What `finalize_window` gives, by the metric's kind.
AnyWindowResult = WindowResult | NumericWindowResult | StringWindowResult
#: Reports per batch, as the reader's batches.
BATCH_ROWS = 8192


def count_window(config: MetricConfig, columns: dict, report_ids: np.ndarray | None = None
                 ) -> SupportStatistic:
    """The statistic of the reports `columns` of the metric `config` (ids 0..n-1 when
    `report_ids` is None), counted in batches of BATCH_ROWS; a repeated id is counted once and
    shows in `duplicates`."""
    n = len(next(iter(columns.values())))
    if report_ids is None:
        ids = np.arange(n, dtype=np.int64)
    else:
        ids = np.asarray(report_ids, dtype=np.int64)
    if len(ids) != n:
        raise ValueError(f"{len(ids)} report ids for {n} reports")
    batches = [ReportBatch(config.name, 0, {**{k: v[start:start + BATCH_ROWS]
                                               for k, v in columns.items()},
                                            REPORT_ID: ids[start:start + BATCH_ROWS]},
                           config.version)
               for start in range(0, n, BATCH_ROWS)]
    return count_slice(Registry((config,)), batches)


def window_with_integrity(config: MetricConfig, columns: dict,
                          report_ids: np.ndarray | None = None, window_ms: int | None = None
                          ) -> tuple[AnyWindowResult, dict | None]:
    """(WindowResult, integrity section) of the reports `columns` of the metric `config`,
    counted by `count_window`, in a window of `window_ms` (statistics.window_integrity)."""
    statistic = count_window(config, columns, report_ids)
    part = statistic.parts.get(config.version)
    table = config.protocol.new_statistic() if part is None else part.table
    sample = new_sample(config) if part is None else part.sample
    result = finalize_window(config, table, statistic.n)
    return result, window_integrity(config, result, table, sample, window_ms)
