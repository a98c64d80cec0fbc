"""One window counted and tested without a pipeline: what the pipeline's counting and
finalizing do for one configuration version, for tests and benchmarks."""
from __future__ import annotations

import numpy as np

from ldp_telemetry.ldp.finalize import finalize_window
from ldp_telemetry.ldp.integrity.accumulate import new_sample, observe
from ldp_telemetry.ldp.integrity.statistics import window_integrity

#: Reports counted per batch, as the reader's batches.
BATCH_ROWS = 8192


def window_with_integrity(config, columns: dict, report_ids: np.ndarray | None = None,
                          window_ms: int | None = None):
    """(WindowResult, integrity section) of the reports `columns` of the metric `config`,
    counted in batches of BATCH_ROWS (ids 0..n-1 when `report_ids` is None), in a window of
    `window_ms` (statistics.window_integrity)."""
    n = len(next(iter(columns.values())))
    ids = np.arange(n, dtype=np.int64) if report_ids is None else report_ids
    table, sample = config.protocol.new_statistic(), new_sample(config)
    for start in range(0, n, BATCH_ROWS):
        batch = {k: v[start:start + BATCH_ROWS] for k, v in columns.items()}
        config.protocol.accumulate(table, batch)
        observe(sample, config, batch, ids[start:start + BATCH_ROWS])
    result = finalize_window(config, table, n)
    return result, window_integrity(config, result, table, sample, window_ms)
