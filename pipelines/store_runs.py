"""A job's run in its SQL store: registered before the graph runs, its end recorded after.

    job, finish = start_store_run(job, "batch", job.files)   # job.store_run: its run_seq
    ...run the graph...
    finish(run_status(counters))

The run's identity (run_seq, run_id, start time, kind, inputs, output) is a row of `ldp_runs`
(`EstimateStore.begin_run`); its windows replace those of earlier runs (docs/store.md). A job
without a store, or with a BigQuery one (no runs kept), runs as run 0.
"""
from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Callable, Iterable
from urllib.parse import urlsplit

from ldp_telemetry.ldp.errors import StoreError
from ldp_telemetry.pipelines.job import EstimateJob
from ldp_telemetry.store.sql import CONNECTORS, open_store, shown_url

log = logging.getLogger(__name__)


def keeps_runs(url: str | None) -> bool:
    """Whether the store `url` keeps runs (the SQL stores)."""
    return url is not None and urlsplit(url).scheme in CONNECTORS


def start_store_run(job: EstimateJob, kind: str, inputs: Iterable[str], resume: bool = False
                    ) -> tuple[EstimateJob, Callable[[str], None]]:
    """Register the job's run (`resume`: continue the latest run of this kind and output, a live
    run restarted from its checkpoint); return the job carrying it and `finish(status)`, which
    records "finished", "incomplete" (the store failed during the run), "interrupted" or
    "failed" (a killed run's row stays "running")."""
    if not keeps_runs(job.store):
        return job, lambda status: None
    output = job.output if "://" in job.output else os.path.abspath(job.output)
    inputs = [path if "://" in path else os.path.abspath(path) for path in inputs]
    with open_store(job.store) as store:
        run = store.begin_run(kind, inputs, output, resume=resume)
    return (dataclasses.replace(job, store_run=run.seq),
            lambda status: _finish(job.store, run.seq, status))


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
