"""The windowed-estimation job: Avro reports in, per-window estimates with error bars out.

    files -> ReadReportBatches -+-> dead letters -> OUT/dead_letters-*.{jsonl,avro}
                                +-> CountSupport[metric] per slice -> windows
                                    -> FinalizeEstimates -> OUT/estimates-*.{jsonl,avro}
"""
from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.options.pipeline_options import PipelineOptions, TestOptions

from ldp.registry import Registry, load_registry
from runners import make_runner
from transforms.finalize import FinalizeEstimatesFn
from transforms.read import COUNTER_NAMESPACE, DEAD_LETTERS, ReadReportBatches, expand_file_patterns
from transforms.windows import CountSupportPerWindow, WindowSpec
from transforms.write import WriteRecords


@dataclass(frozen=True)
class EstimateJob:
    """Everything the job needs, validated before any report is read."""

    registry: Registry
    files: tuple[str, ...]
    output: str
    windows: WindowSpec


def build_pipeline(pipeline: beam.Pipeline, job: EstimateJob) -> None:
    """Add the estimation graph to `pipeline`."""
    read = (pipeline
            | "ListFiles" >> beam.Create(list(job.files))
            | "ReadReports" >> ReadReportBatches(job.registry, job.windows.slice_ms))
    (read.batches
     | "CountSupport" >> CountSupportPerWindow(job.registry, job.windows)
     | "FinalizeEstimates" >> beam.ParDo(FinalizeEstimatesFn(job.registry))
     | "WriteEstimates" >> WriteRecords(job.output, "estimates", "window_estimate"))
    (read[DEAD_LETTERS]
     | "DeadLetterRecords" >> beam.Map(lambda letter: letter.as_dict())
     | "WriteDeadLetters" >> WriteRecords(job.output, "dead_letters", "dead_letter"))


def add_job_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--registry", required=True, help="metric registry JSON file")
    parser.add_argument("--input", required=True, action="append",
                        help="Avro report files: a glob such as 'reports/*.avro' (repeatable)")
    parser.add_argument("--output", required=True, help="directory for estimates and dead letters")
    parser.add_argument("--window", required=True, type=float,
                        help="event-time window length in seconds")
    parser.add_argument("--period", type=float, default=None,
                        help="start a window every PERIOD seconds (sliding windows); "
                             "default: the window length (fixed windows)")


def job_from_arguments(args: argparse.Namespace) -> EstimateJob:
    """Validate the job's arguments; raises ValueError (or RegistryError) naming the problem."""
    registry = load_registry(args.registry)
    windows = WindowSpec.from_seconds(args.window, args.period)
    files = expand_file_patterns(args.input)
    return EstimateJob(registry, tuple(files), args.output, windows)


def run_job(job: EstimateJob, beam_args: list[str], out=sys.stdout) -> dict[str, int]:
    """Run the job to completion; print and return the record counters.

    A dry run (`--dry_run=True`, e.g. on Dataflow) builds and validates the job without running
    it: nothing is counted, and the empty counters are returned.
    """
    if FileSystems.get_scheme(job.output) is None:  # a local path; gs:// and the like need none
        os.makedirs(job.output, exist_ok=True)
    options = PipelineOptions(beam_args)
    pipeline = beam.Pipeline(runner=make_runner(options), options=options)
    build_pipeline(pipeline, job)
    result = pipeline.run()
    result.wait_until_finish()
    if options.view_as(TestOptions).dry_run:
        print("dry run: the job was built and validated, and not run", file=out)
        return {}
    counters = record_counters(result)
    print(summary_line(counters), file=out)
    return counters


def record_counters(result) -> dict[str, int]:
    """The job's `ldp` counters by name, summed over steps.

    Committed values where the runner reports them (FnApiRunner, the local job service,
    Dataflow), else attempted ones (runners that report only those, such as Flink's job server);
    a committed 0 is a real 0, not a missing value.
    """
    query = result.metrics().query(MetricsFilter().with_namespace(COUNTER_NAMESPACE))
    totals: dict[str, int] = {}
    for counter in query["counters"]:
        name = counter.key.metric.name
        value = counter.committed if counter.committed is not None else counter.attempted
        totals[name] = totals.get(name, 0) + int(value or 0)
    return totals


def summary_line(counters: dict[str, int]) -> str:
    dead = {k.split(".", 1)[1]: v for k, v in sorted(counters.items())
            if k.startswith("dead_letter.")}
    dead_text = ", ".join(f"{reason}={count}" for reason, count in dead.items()) or "none"
    return (f"records read: {counters.get('records_read', 0)}, "
            f"accepted: {counters.get('records_accepted', 0)}, "
            f"dead-lettered: {sum(dead.values())} ({dead_text}), "
            f"windows: {counters.get('windows_finalized', 0)}")
