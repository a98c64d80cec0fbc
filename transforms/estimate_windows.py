"""The DoFns that turn each window's SupportStatistic into a window-estimate record.

The estimate is `ldp_telemetry.ldp.engine.finalize.finalize_window`; the record is built by
`ldp_telemetry.output.records.window_estimate_record`.
"""
from __future__ import annotations

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.utils.windowed_value import PaneInfoTiming

from ldp_telemetry.ldp.config.registry import Registry
from ldp_telemetry.ldp.engine.counting import SupportStatistic
from ldp_telemetry.ldp.engine.finalize import finalize_window
from ldp_telemetry.ldp.estimation.combine import combine_versions
from ldp_telemetry.ldp.integrity.statistics import window_integrity
from ldp_telemetry.output.estimate import EstimateRecord, Pane
from ldp_telemetry.output.records import (BATCH_PANE, combined_estimate_record,
                                          window_estimate_record)


class FinalizeEstimatesFn(beam.DoFn):
    """((metric, window start ms, window end ms), SupportStatistic) -> window-estimate records
    (one per configuration version, and a combined one; see `_records`) on the batch path:
    each window has one ON_TIME pane (`BATCH_PANE`). Records are
    `ldp_telemetry.output.estimate.EstimateRecord`s, their arrays numpy until written.

    Counter `windows_finalized`. For windows and panes given by the runner see
    `FinalizePanesFn`.
    """

    def __init__(self, registry: Registry):
        self._registry = registry

    def setup(self):
        self._windows = Metrics.counter("ldp", "windows_finalized")

    def process(self, element: tuple[tuple[str, int, int], SupportStatistic]):
        (metric, start_ms, end_ms), statistic = element
        yield from self._records(metric, statistic, start_ms, end_ms, BATCH_PANE)

    def _records(self, metric: str, statistic: SupportStatistic, start_ms: int, end_ms: int,
                 pane: Pane) -> list[EstimateRecord]:
        """One record per configuration version in the window, and the versions' combined
        estimate when there are several that share values (ldp_telemetry.ldp.estimation.combine).
        Each version's record carries its integrity section (ldp_telemetry.ldp.integrity.statistics;
        the jump test is added by readers, which have the earlier windows)."""
        parts, sections = [], []
        for version in sorted(statistic.parts):
            part = statistic.parts[version]
            config = self._registry.version(metric, version)
            result = finalize_window(config, part.table, part.n)
            parts.append((config, result))
            sections.append(window_integrity(config, result, part.table, part.sample,
                                             end_ms - start_ms))
        records = [window_estimate_record(config, result, start_ms, end_ms, pane,
                                          integrity=section)
                   for (config, result), section in zip(parts, sections, strict=True)]
        combined = combine_versions(parts) if len(parts) > 1 else None
        if combined is not None:
            records.append(combined_estimate_record([config for config, _ in parts], combined,
                                                    start_ms, end_ms, pane))
        self._windows.inc()
        return records


class FinalizePanesFn(FinalizeEstimatesFn):
    """(metric, SupportStatistic) inside a Beam window -> window-estimate record, with the
    window's bounds and the pane the runner gives (streaming runs, runs with pane options)."""

    def process(self, element: tuple[str, SupportStatistic], window=beam.DoFn.WindowParam,
                pane_info=beam.DoFn.PaneInfoParam):
        metric, statistic = element
        pane = Pane(PaneInfoTiming.to_string(pane_info.timing), int(pane_info.index),
                    bool(pane_info.is_last))
        yield from self._records(metric, statistic, window.start.micros // 1000,
                                 window.end.micros // 1000, pane)
