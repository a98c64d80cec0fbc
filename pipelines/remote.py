"""Live runs on a remote runner: `ldp run --source pubsub` (Dataflow) or
`--source match-continuously` (Flink): the live graph behind the source, submitted to the
streaming runner the Beam options name."""
from __future__ import annotations

import sys

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions

from ldp_telemetry.ldp.base.errors import ConfigError
from ldp_telemetry.pipelines.counters import run_and_count
from ldp_telemetry.pipelines.graph import build_streaming_pipeline, job_sinks
from ldp_telemetry.pipelines.job import EstimateJob, LiveConfig
from ldp_telemetry.runners import make_runner
from ldp_telemetry.transforms.sinks import PaneFiles, write_to_sinks
from ldp_telemetry.transforms.sources import make_source


def build_remote_pipeline(pipeline: beam.Pipeline, job: EstimateJob, live: LiveConfig):
    """The live graph behind the Pub/Sub or MatchContinuously source, written to the job's
    sinks (pane files, one file per dead letter, the store); returns (estimate records,
    dead-letter records)."""
    source = make_source(live.source, live.location, job.registry, job.windows.slice_ms,
                         job.windows.slice_offset_ms, limits=job.limits)
    estimates, dead_letters = build_streaming_pipeline(pipeline, job, source)
    write_to_sinks(job_sinks(job, panes=PaneFiles(job.output)), estimates, dead_letters)
    return estimates, dead_letters


def run_remote(job: EstimateJob, live: LiveConfig, beam_args: list[str],
               out=sys.stdout) -> dict[str, int]:
    """Submit the remote live graph to the runner of `beam_args` (streaming); print and return
    the counters when it ends. ConfigError (field `source`) when no runner is named."""
    options = PipelineOptions(list(beam_args))
    if options.view_as(StandardOptions).runner is None:
        raise ConfigError(f"source {live.source} needs a streaming runner named explicitly in "
                          f"the pipeline options: runner=DataflowRunner (pubsub) or "
                          f"runner=PortableRunner with job_endpoint=FLINK_JOB_SERVER "
                          f"(match-continuously)", field="source")
    options.view_as(StandardOptions).streaming = True
    pipeline = beam.Pipeline(runner=make_runner(options), options=options)
    build_remote_pipeline(pipeline, job, live)
    return run_and_count(pipeline, out)
