"""Each report id once per (metric, slice) across the panes of a streaming graph: a stateful step.

`DeduplicateSlicesFn` runs after the batches are put in their slice windows
(`transforms.windows.into_slices`) and before they are grouped per slice pane: keyed by metric,
in the slice's window, its state holds the report ids the slice has let through (`IdSet`, 8
bytes per distinct report). A batch's rows whose id the slice already let through — in this
pane or an earlier one — are taken out and become one `duplicate` dead letter per batch
(`transforms.count.duplicate_letter`, counter dead_letter.duplicate). State is per key and
window; an event-time timer at the slice's expiry (its end + allowed lateness, when the runner
drops the slice's late data) clears the ids, as not every runner collects the state of expired
windows (the Python direct runners keep it forever). A copy arriving after that is too late for
the slice anyway: it passes this step and the runner drops it at the slice's grouping, counted
as too late, not as a duplicate.

This gives the sources that go through Beam (Pub/Sub, MatchContinuously, a replay) the batch
job's deduplication across panes, with Beam's own guarantees on state (exactly once on Dataflow;
a retried bundle re-reads the committed ids). A followed directory deduplicates in its follower
instead (`pipelines.slice_ids`), so its graph does not hold the ids twice.
"""
from __future__ import annotations

import apache_beam as beam
from apache_beam.coders import PickleCoder
from apache_beam.metrics import Metrics
from apache_beam.transforms.timeutil import TimeDomain
from apache_beam.transforms.userstate import ReadModifyWriteStateSpec, TimerSpec, on_timer
from apache_beam.utils.timestamp import Duration

from ldp_telemetry.ldp.engine.batches import REPORT_ID, ReportBatch
from ldp_telemetry.ldp.engine.counting import (DUPLICATE_EXAMPLES, DUPLICATES, IdSet,
                                               SupportStatistic, duplicate_letter)
from ldp_telemetry.ldp.engine.reasons import Reason
from ldp_telemetry.transforms.read import COUNTER_NAMESPACE


#: The state of a slice: the ids it has let through (an IdSet).
IDS = ReadModifyWriteStateSpec("report_ids", PickleCoder())
_IDS_PARAM = beam.DoFn.StateParam(IDS)
#: Fires when the slice expires (its end + allowed lateness): its ids are cleared.
EXPIRY = TimerSpec("slice_expiry", TimeDomain.WATERMARK)
_EXPIRY_PARAM = beam.DoFn.TimerParam(EXPIRY)


class DeduplicateSlicesFn(beam.DoFn):
    """(metric, ReportBatch) in its slice window -> (metric, the batch's rows not seen before in
    the slice), and a `duplicate` DeadLetter (tagged DUPLICATES) for the others."""

    def __init__(self, slice_ms: int, allowed_lateness_ms: int):
        self._slice_ms = slice_ms
        self._lateness_ms = allowed_lateness_ms

    def setup(self):
        self._duplicates = Metrics.counter(COUNTER_NAMESPACE, Reason.DUPLICATE.counter)

    def process(self, element, window=beam.DoFn.WindowParam, ids=_IDS_PARAM,
                expiry=_EXPIRY_PARAM):
        metric, batch = element
        column = batch.columns.get(REPORT_ID)
        if column is None or not batch.n:
            yield element
            return
        seen = ids.read()
        if seen is None:
            seen = IdSet()
            expiry.set(window.max_timestamp() + Duration(micros=self._lateness_ms * 1000))
        keep = seen.add_new(column)
        ids.write(seen)
        if keep.all():
            yield element
            return
        repeated = column[~keep]
        self._duplicates.inc(len(repeated))
        start_ms = window.start.micros // 1000
        yield beam.pvalue.TaggedOutput(DUPLICATES, duplicate_letter(
            SupportStatistic(metric, None, len(repeated),
                             tuple(repeated[:DUPLICATE_EXAMPLES].tolist())),
            start_ms, self._slice_ms))
        if keep.any():
            yield metric, ReportBatch(batch.metric, batch.slice_start_ms,
                                      {k: v[keep] for k, v in batch.columns.items()},
                                      batch.version)

    @on_timer(EXPIRY)
    def expire(self, ids=_IDS_PARAM):
        """The slice expired: no report of it is counted any more, its ids are not needed."""
        ids.clear()
