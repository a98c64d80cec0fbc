"""A job's run in its SQL store: registered before the graph runs, its end recorded after.

    with store_run(job, "batch", job.files) as job:   # job.store_run = the run's run_seq
        ...run the graph...

The run's identity (run_seq, run_id, start time, kind, inputs, output) is a row of `ldp_runs`
(`EstimateStore.begin_run`); its windows replace those of earlier runs (docs/store.md). A job
without a store, or with a BigQuery one (no runs kept), runs as run 0.
"""
from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit

from ldp_telemetry.ldp.errors import StoreError
from ldp_telemetry.pipelines.job import EstimateJob
from ldp_telemetry.store.sql import CONNECTORS, open_store

log = logging.getLogger(__name__)


def keeps_runs(url: str | None) -> bool:
    """Whether the store `url` keeps runs (the SQL stores)."""
    return url is not None and urlsplit(url).scheme in CONNECTORS


def start_store_run(job: EstimateJob, kind: str, inputs: Iterable[str], resume: bool = False
                    ) -> tuple[EstimateJob, Callable[[str], None]]:
    """Register the job's run (`resume`: continue the latest run of this kind and output, a live
    run restarted from its checkpoint); return the job carrying it and `finish(status)`, which
    records "finished", "interrupted" or "failed" (a killed run's row stays "running")."""
    if not keeps_runs(job.store):
        return job, lambda status: None
    output = job.output if "://" in job.output else os.path.abspath(job.output)
    with open_store(job.store) as store:
        run = store.begin_run(kind, inputs, output, resume=resume)
    return (dataclasses.replace(job, store_run=run.seq),
            lambda status: _finish(job.store, run.seq, status))


@contextmanager
def store_run(job: EstimateJob, kind: str, inputs: Iterable[str],
              resume: bool = False) -> Iterator[EstimateJob]:
    """`start_store_run` around a block: "finished", "interrupted" (KeyboardInterrupt) or
    "failed" (any other exception, which propagates)."""
    job, finish = start_store_run(job, kind, inputs, resume)
    status = "failed"
    try:
        yield job
        status = "finished"
    except KeyboardInterrupt:
        status = "interrupted"
        raise
    finally:
        finish(status)


def _finish(url: str, run: int, status: str) -> None:
    try:
        with open_store(url) as store:
            store.finish_run(run, status)
    except StoreError as error:  # the run's outcome is reported; only its row is stale
        log.warning("could not record the end of run %d in the store: %s", run, error)
