"""Run the batch job: build the graph on the runner the Beam options name, run it to the end,
print the summary line."""
from __future__ import annotations

import sys

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions

from ldp_telemetry.output.coverage import RunInputs, write_inputs
from ldp_telemetry.pipelines.counters import run_and_count
from ldp_telemetry.pipelines.graph import build_pipeline
from ldp_telemetry.pipelines.job import EstimateJob
from ldp_telemetry.pipelines.stopping import interrupt_batch_on_sigint
from ldp_telemetry.pipelines.store_runs import start_store_run
from ldp_telemetry.runners import make_runner


def run_job(job: EstimateJob, beam_args: list[str], out=None) -> dict[str, int]:
    """Run the job to completion; print and return the record counters. A job with a SQL store
    is a run of its own there (`store_runs.start_store_run`): its windows replace earlier runs';
    a line says what it wrote there, and what it could not (`store_runs.store_line`).

    A dry run (`--dry_run=True`, e.g. on Dataflow) builds and validates the job without running
    it: nothing is counted, and the empty counters are returned.
    """
    out = sys.stdout if out is None else out
    options = PipelineOptions(beam_args)
    runner = make_runner(options)
    pipeline = beam.Pipeline(runner=runner, options=options)
    with interrupt_batch_on_sigint(lambda: job, type(runner).__name__) as held:  # Ctrl-C: 130
        with held():  # the run's row and the job naming it, together
            job, run = start_store_run(job, "batch", job.files)
        try:
            build_pipeline(pipeline, job)
            inputs = RunInputs()
            counters = run_and_count(pipeline, out, inputs)
        except KeyboardInterrupt:
            run.finish("interrupted")
            raise
        except BaseException:
            run.finish("failed")
            raise
    if counters:  # not a dry run: every estimate record reached the store sink, counted there
        write_inputs(job.output, inputs)  # what decides the partial windows (output.coverage)
        line = run.end(counters, produced=sum(counters.get(f"store_panes_{what}", 0)
                                              for what in ("written", "failed")), inputs=inputs)
        if line is not None:
            print(line, file=out)
    else:
        run.finish("finished")
    return counters
