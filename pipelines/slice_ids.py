"""The report ids a live run over a directory has counted, per open (metric, slice).

The batch job counts each report id once per (metric, slice), across files and configuration
versions (`ldp.engine.counting.SliceCounter`: the first row of each id is counted, the others are
`duplicate` dead letters). `SliceIds` makes the same decision in the directory follower, before
a batch is handed to Beam, so that every pane of a live run counts the reports the batch job
counts over the same files: re-delivered files and ids repeated within a file add nothing.

Memory (`pipelines.memory.REPORT_ID_BYTES`): `IdSet`, 8 bytes per distinct report of each open
slice (16 for a moment while two of its levels merge). A slice's ids are dropped when the slice
closes (the watermark has passed its end by more than the allowed lateness): no later batch of
it is counted, so they are never needed again.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ldp_telemetry.ldp.engine.batches import REPORT_ID, ReportBatch
from ldp_telemetry.ldp.engine.counting import IdSet
from ldp_telemetry.pipelines.memory import report_id_bytes


class SliceIds:
    """Distinct report ids per (metric, slice start ms) of the slices still open."""

    __slots__ = ("_sets",)

    def __init__(self):
        self._sets: dict = {}  # (metric, slice start ms) -> ldp.engine.counting.IdSet

    def keep(self, batch: ReportBatch) -> np.ndarray | None:
        """The mask of the batch's rows to count (the first row of each id not counted before in
        its slice), remembering their ids; None when the batch has no report ids."""
        ids = batch.columns.get(REPORT_ID)
        if ids is None:
            return None
        key = (batch.metric, batch.slice_start_ms)
        seen = self._sets.get(key)
        if seen is None:
            seen = self._sets[key] = IdSet()
        return seen.add_new(ids)

    def drop(self, closed: Callable[[int], bool]) -> int:
        """Forget the ids of every slice whose start `closed(start_ms)` says is closed; returns
        the number of slices dropped."""
        gone = [key for key in self._sets if closed(key[1])]
        for key in gone:
            del self._sets[key]
        return len(gone)

    @property
    def ids(self) -> int:
        """Distinct ids held."""
        return sum(len(ids) for ids in self._sets.values())

    @property
    def slices(self) -> int:
        """Open slices with ids held."""
        return len(self._sets)

    @property
    def nbytes(self) -> int:
        return report_id_bytes(self.ids)


def select_rows(batch: ReportBatch, keep: np.ndarray) -> ReportBatch:
    """The batch restricted to the rows of `keep`."""
    return ReportBatch(batch.metric, batch.slice_start_ms,
                       {name: column[keep] for name, column in batch.columns.items()},
                       batch.version)


def merge_batches(batches: list[ReportBatch]) -> list[ReportBatch]:
    """The batches of one (metric, slice, version) concatenated into one, in the order given (a
    poll's files become a few stream elements rather than one per file)."""
    groups: dict[tuple, list[ReportBatch]] = {}
    for batch in batches:
        groups.setdefault((batch.metric, batch.slice_start_ms, batch.version), []).append(batch)
    merged = []
    for (metric, start_ms, version), group in groups.items():
        if len(group) == 1:
            merged.append(group[0])
            continue
        merged.append(ReportBatch(metric, start_ms, {
            name: np.concatenate([batch.columns[name] for batch in group])
            for name in group[0].columns}, version))
    return merged
