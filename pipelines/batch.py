"""Run the batch job: build the graph on the runner the Beam options name, run it to the end,
print the summary line."""
from __future__ import annotations

import sys

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions

from ldp_telemetry.pipelines.counters import run_and_count
from ldp_telemetry.pipelines.graph import build_pipeline
from ldp_telemetry.pipelines.job import EstimateJob
from ldp_telemetry.runners import make_runner


def run_job(job: EstimateJob, beam_args: list[str], out=sys.stdout) -> dict[str, int]:
    """Run the job to completion; print and return the record counters.

    A dry run (`--dry_run=True`, e.g. on Dataflow) builds and validates the job without running
    it: nothing is counted, and the empty counters are returned.
    """
    options = PipelineOptions(beam_args)
    pipeline = beam.Pipeline(runner=make_runner(options), options=options)
    build_pipeline(pipeline, job)
    return run_and_count(pipeline, out)
