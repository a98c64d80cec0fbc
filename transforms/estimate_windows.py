"""The DoFns that turn each window's SupportStatistic into a window-estimate record.

The estimate is `ldp_telemetry.ldp.finalize.finalize_window`; the record is built by
`ldp_telemetry.output.records.window_estimate_record`.
"""
from __future__ import annotations

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.utils.windowed_value import PaneInfoTiming

from ldp_telemetry.ldp.finalize import finalize_window
from ldp_telemetry.ldp.registry import Registry
from ldp_telemetry.ldp.times import iso_from_ms
from ldp_telemetry.output.records import BATCH_PANE, window_estimate_record
from ldp_telemetry.transforms.count import SupportStatistic


class FinalizeEstimatesFn(beam.DoFn):
    """((metric, window start ms, window end ms), SupportStatistic) -> window-estimate record
    on the batch path: each window has one ON_TIME pane (`BATCH_PANE`). Plain Python values, or
    compact ones with `compact` (see `window_estimate_record`).

    Counter `windows_finalized`. For windows and panes given by the runner see
    `FinalizePanesFn`.
    """

    def __init__(self, registry: Registry, compact: bool = False):
        self._registry = registry
        self._compact = compact

    def setup(self):
        self._windows = Metrics.counter("ldp", "windows_finalized")

    def process(self, element: tuple[tuple[str, int, int], SupportStatistic]):
        (metric, start_ms, end_ms), statistic = element
        yield self._record(metric, statistic, iso_from_ms(start_ms), iso_from_ms(end_ms),
                           dict(BATCH_PANE))

    def _record(self, metric: str, statistic: SupportStatistic, start: str, end: str,
                pane: dict) -> dict:
        config = self._registry[metric]
        result = finalize_window(config, statistic.table, statistic.n)
        self._windows.inc()
        return window_estimate_record(config, result, start, end, pane, self._compact)


class FinalizePanesFn(FinalizeEstimatesFn):
    """(metric, SupportStatistic) inside a Beam window -> window-estimate record, with the
    window's bounds and the pane the runner gives (streaming runs, runs with pane options)."""

    def process(self, element: tuple[str, SupportStatistic], window=beam.DoFn.WindowParam,
                pane_info=beam.DoFn.PaneInfoParam):
        metric, statistic = element
        pane = {"timing": PaneInfoTiming.to_string(pane_info.timing),
                "index": int(pane_info.index), "is_last": bool(pane_info.is_last)}
        yield self._record(metric, statistic, iso_from_ms(window.start.micros // 1000),
                           iso_from_ms(window.end.micros // 1000), pane)
