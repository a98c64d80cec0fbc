"""A job's run in its SQL store: registered before the graph runs, its end recorded after.

    job, run = start_store_run(job, "batch", job.files)   # job.store_run: its run_seq
    ...run the graph...
    print(run.end(counters, produced=panes_made))

The run's identity (run_seq, run_id, start time, kind, inputs, output) is a row of `ldp_runs`
(`EstimateStore.begin_run`); its windows replace those of earlier runs (docs/store.md). A job
without a store, or with a BigQuery one (no runs kept), runs as run 0.
"""
from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Iterable
from urllib.parse import urlsplit

from ldp_telemetry.ldp.base.errors import StoreError
from ldp_telemetry.output.coverage import RunInputs
from ldp_telemetry.pipelines.job import EstimateJob
from ldp_telemetry.store.sql import CONNECTORS, open_store, shown_url

log = logging.getLogger(__name__)


def keeps_runs(url: str | None) -> bool:
    """Whether the store `url` keeps runs (the SQL stores)."""
    return url is not None and urlsplit(url).scheme in CONNECTORS


class RunInStore:
    """A job's run in its SQL store, from `start_store_run`: `end(counters, produced)` at the
    run's end, `finish(status)` on any other way out. Without a store both do nothing."""

    def __init__(self, job: EstimateJob, panes_before: int = 0):
        self._job = job
        self._before = panes_before  # panes the run had stored before (a resumed live run)

    def end(self, counters: dict[str, int], produced: int, inputs: RunInputs | None = None
            ) -> str | None:
        """The run reached its end having made `produced` panes: compare them with the panes
        the store holds for it (Beam's counters can miss a streaming run's last bundle), count
        the difference as `store_panes_failed` in `counters`, record what it read (`inputs`:
        `EstimateStore.record_inputs`) and "finished" or "incomplete", and return the line that
        says so (None without a store)."""
        job = self._job
        if not keeps_runs(job.store):
            return None
        try:
            with open_store(job.store) as store:
                stored = store.run_panes(job.store_run) - self._before
                if inputs is not None and inputs.ranges:
                    store.record_inputs(job.store_run, inputs)
        except StoreError:
            stored = counters.get("store_panes_written", 0)
        counters["store_panes_written"] = stored
        counters["store_panes_failed"] = max(counters.get("store_panes_failed", 0),
                                             produced - stored)
        self.finish(run_status(counters))
        return store_line(job, counters)

    def finish(self, status: str) -> None:
        if keeps_runs(self._job.store):
            _finish(self._job.store, self._job.store_run, status)


def start_store_run(job: EstimateJob, kind: str, inputs: Iterable[str], resume: bool = False
                    ) -> tuple[EstimateJob, RunInStore]:
    """Register the job's run (`resume`: continue the latest run of this kind and output, a live
    run restarted from its checkpoint); return the job carrying it and its `RunInStore`, which
    records "finished", "incomplete" (the store failed during the run), "interrupted" or
    "failed" (a killed run's row stays "running")."""
    if not keeps_runs(job.store):
        return job, RunInStore(job)
    output = job.output if "://" in job.output else os.path.abspath(job.output)
    inputs = [path if "://" in path else os.path.abspath(path) for path in inputs]
    with open_store(job.store) as store:
        run = store.begin_run(kind, inputs, output, resume=resume)
        before = store.run_panes(run.seq) if resume else 0
    job = dataclasses.replace(job, store_run=run.seq)
    return job, RunInStore(job, before)
def store_failed(counters: dict[str, int]) -> bool:
    """Whether a run's store sinks could not write something (`STORE_COUNTERS`)."""
    return counters.get("store_panes_failed", 0) + counters.get("store_rejects_failed", 0) > 0


def run_status(counters: dict[str, int]) -> str:
    """How a run that reached its end ended in the store: "finished", or "incomplete" when the
    store failed during it."""
    return "incomplete" if store_failed(counters) else "finished"


def store_counters(result) -> dict[str, int]:
    """The store sinks' counters (`STORE_COUNTERS`) of a finished Beam result."""
    from ldp_telemetry.pipelines.counters import record_counters
    return {name: count for name, count in record_counters(result).items()
            if name.startswith("store_")}


def store_line(job: EstimateJob, counters: dict[str, int]) -> str:
    """One line: what the run wrote to its store and, when the store failed, what it did not."""
    panes, rejects = (counters.get(f"store_{what}_written", 0) for what in ("panes", "rejects"))
    run = f"run {job.store_run}" if job.store_run else "the run"
    if not store_failed(counters):
        return (f"store: {run} wrote {panes:,} pane(s) and {rejects:,} reject count(s) "
                f"to {shown_url(job.store)}")
    lost_panes, lost_rejects = (counters.get(f"store_{what}_failed", 0)
                                for what in ("panes", "rejects"))
    return (f"store FAILED: {run} wrote {panes:,} of {panes + lost_panes:,} pane(s) and "
            f"{rejects:,} of {rejects + lost_rejects:,} reject count(s) to "
            f"{shown_url(job.store)} (the "
            f"error is above); the files in {job.output} are complete: once the store is "
            f"fixed, run again to store every window")


def _finish(url: str, run: int, status: str) -> None:
    try:
        with open_store(url) as store:
            store.finish_run(run, status)
    except StoreError as error:  # the run's outcome is reported; only its row is stale
        log.warning("could not record the end of run %d in the store: %s", run, error)
