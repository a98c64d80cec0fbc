"""The integrity accumulator of one configuration version: a `ReportSample` of its reports.

Counting keeps one beside each version's statistic (transforms/count.py): `new_sample` when
the version's first report is counted, `observe` for every batch of kept reports, and the
samples of slices merge by `ReportSample.add` as the statistics add. None where the metric has
integrity off, or its protocol no sampled test (GRR, HR, numeric protocols): the sum test needs
only the support counts.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ldp_telemetry.ldp.integrity.sample import ReportSample
from ldp_telemetry.ldp.integrity.statistics import MIN_SAMPLE
from ldp_telemetry.ldp.integrity.support import SingleModel, support_model
from ldp_telemetry.ldp.protocols.base import Columns


def sample_capacity(config: Any) -> int | None:
    """Rows of the report sample of a version of the metric `config`, None when it keeps none:
    also when fewer than MIN_SAMPLE rows fit in its `sample_bytes` (a unary encoding of a very
    large domain), as the sampled tests would not run on them."""
    spec = getattr(config, "integrity", None)
    if spec is None or config.kind != "frequency":
        return None
    model = support_model(config.protocol)
    if model is None or isinstance(model, SingleModel):
        return None
    rows = spec.sample_rows(model.row_bytes())
    return rows if rows >= MIN_SAMPLE else None


def sample_nbytes(config: Any) -> int:
    """Largest bytes of one version's sample while it counts (the memory model's term): twice
    its rows x row bytes, as offered rows wait until they are cut back at twice the capacity
    (ReportSample); a merged or pickled sample holds at most half of it."""
    rows = sample_capacity(config)
    if rows is None:
        return 0
    model = support_model(config.protocol)
    assert model is not None, "a metric that keeps a sample has a support model"
    return 2 * rows * model.row_bytes()


def new_sample(config: Any) -> ReportSample | None:
    """An empty sample for a version of the metric `config`, or None (see the module doc)."""
    rows = sample_capacity(config)
    return None if rows is None else ReportSample(rows, config.integrity.key)


def observe(sample: ReportSample | None, config: Any, columns: Columns,
            report_ids: np.ndarray | None) -> None:
    """Offer the counted reports (payload `columns`, their ids or None) to `sample`."""
    if sample is None:
        return
    model = support_model(config.protocol)
    assert model is not None, "a metric that keeps a sample has a support model"
    rows = len(next(iter(columns.values())))
    sample.offer(report_ids, rows, lambda mask: model.sampled(
        {k: v[mask] for k, v in columns.items()}))
