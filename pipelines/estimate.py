"""The windowed-estimation job: Avro reports in, per-window estimates with error bars out.

    files -> ReadReportBatches -+-> dead letters -> OUT/dead_letters-*.{jsonl,avro}
                                +-> CountSupport per (metric, slice) -> windows
                                    -> FinalizeEstimates -> OUT/estimates-*.{jsonl,avro}

`build_pipeline` is that batch job. `build_streaming_pipeline` is the same graph behind any
source of timestamped (metric, ReportBatch) elements and dead letters (e.g.
`ldp_telemetry.transforms.replay.ReplayReportFiles` locally), returning the estimate and dead-letter records
for the caller's sinks; the job's WindowSpec says which panes (early, on-time, late) it emits.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import tempfile
from dataclasses import dataclass

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions, TestOptions

from ldp_telemetry.ldp.registry import Registry, load_registry
from ldp_telemetry.pipelines.memory import DEFAULT_MEMORY_BUDGET_MB, check_memory_budget
from ldp_telemetry.output.compact import plain_record
from ldp_telemetry.output.reasons import Reason
from ldp_telemetry.runners import make_runner
from ldp_telemetry.schemas.limits import HELP as LIMITS_HELP, DecodeLimits
from ldp_telemetry.transforms.estimate_windows import FinalizeEstimatesFn, FinalizePanesFn
from ldp_telemetry.transforms.read import (BATCHES, COUNTER_NAMESPACE, DEAD_LETTERS, ReadReportBatches,
                             expand_file_patterns)
from ldp_telemetry.transforms.store import WriteToStore, check_store_url
from ldp_telemetry.transforms.windows import DUPLICATES, CountSupportPerWindow, WindowSpec
from ldp_telemetry.transforms.write import WriteRecords


@dataclass(frozen=True)
class EstimateJob:
    """Everything the job needs, validated before any report is read."""

    registry: Registry
    files: tuple[str, ...]
    output: str
    windows: WindowSpec
    store: str | None = None  # also write estimates and dead-letter counts here (docs/store.md)
    limits: DecodeLimits = DecodeLimits()


def build_pipeline(pipeline: beam.Pipeline, job: EstimateJob) -> None:
    """Add the batch estimation graph to `pipeline`: report files in, estimate files out.

    Raises ValueError for `--early-every`: a fixed set of files gives each window one ON_TIME
    pane (early panes need a streaming source, see `build_streaming_pipeline`).
    """
    if job.windows.early_every_ms is not None:
        raise ValueError("--early-every needs a streaming source: reading a fixed set of files "
                         "gives each window one on-time pane")
    read = (pipeline
            | "ListFiles" >> beam.Create(list(job.files))
            | "ReadReports" >> ReadReportBatches(job.registry, job.windows.slice_ms,
                                                slice_offset_ms=job.windows.slice_offset_ms,
                                                limits=job.limits))
    streaming = pipeline.options.view_as(StandardOptions).streaming
    # Compact records (numpy arrays, lazy labels) to the writers; plain ones to the store.
    estimates, dead_letters = _estimate(read, job, streaming, compact=True)
    # One shard per bundle: each window's record is written as it is made (transforms/write.py).
    estimates | "WriteEstimates" >> WriteRecords(job.output, "estimates", "window_estimate",
                                                 num_shards=0)
    dead_letters | "WriteDeadLetters" >> WriteRecords(job.output, "dead_letters", "dead_letter")
    if job.store is not None:
        plain = estimates | "PlainEstimates" >> beam.Map(plain_record)
        (plain, dead_letters) | "WriteStore" >> WriteToStore(
            job.store, job.windows.slice_ms, job.windows.slice_offset_ms)


def build_streaming_pipeline(pipeline: beam.Pipeline, job: EstimateJob, source: beam.PTransform
                             ) -> tuple[beam.PCollection, beam.PCollection]:
    """Add the estimation graph behind `source`; returns (estimate records, dead-letter records).

    `source` is applied to the pipeline's root and must give `batches`: (metric, ReportBatch)
    stamped with the batch's slice start, and `dead_letters`: DeadLetter (as `ReadReportBatches`
    and `ldp_telemetry.transforms.replay.ReplayReportFiles` do). Records are plain dicts in the
    window_estimate and dead_letter schemas, one estimate per (metric, window, pane), emitted in
    the windows they describe. `job.files` and `job.output` are not used.

    Raises ValueError for `--early-every` when the pipeline is not streaming (`--streaming`).
    """
    streaming = pipeline.options.view_as(StandardOptions).streaming
    if job.windows.early_every_ms is not None and not streaming:
        raise ValueError("--early-every needs a streaming pipeline (--streaming): processing-time "
                         "panes do not exist in a batch run")
    return _estimate(pipeline | "ReadReports" >> source, job, streaming)


def _estimate(read, job: EstimateJob, streaming: bool, compact: bool = False
              ) -> tuple[beam.PCollection, beam.PCollection]:
    counted = read[BATCHES] | "CountSupport" >> CountSupportPerWindow(job.registry, job.windows,
                                                                      streaming)
    finalize = (FinalizePanesFn if streaming or job.windows.has_pane_options
                else FinalizeEstimatesFn)
    estimates = counted["windows"] | "FinalizeEstimates" >> beam.ParDo(
        finalize(job.registry, compact))
    dead_letters = ((read[DEAD_LETTERS], counted[DUPLICATES])
                    | "AllDeadLetters" >> beam.Flatten()
                    | "DeadLetterRecords" >> beam.Map(lambda letter: letter.as_dict()))
    return estimates, dead_letters


def add_job_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--registry", required=True, help="metric registry JSON file")
    parser.add_argument("--input", action="append", default=None,
                        help="Avro report files: a glob such as 'reports/*.avro' (repeatable); "
                             "required unless the run is live (--follow)")
    parser.add_argument("--output", required=True, help="directory for estimates and dead letters")
    parser.add_argument("--window", required=True, type=float,
                        help="event-time window length in seconds")
    parser.add_argument("--period", type=float, default=None,
                        help="start a window every PERIOD seconds (sliding windows); "
                             "default: the window length (fixed windows)")
    parser.add_argument("--window-offset", type=float, default=0.0, metavar="SECONDS",
                        help="windows start at OFFSET + k * PERIOD seconds after the Unix epoch "
                             "(default 0: midnight UTC for daily windows, Thursday for weekly "
                             "ones; 345600 starts weekly windows on Monday)")
    parser.add_argument("--allowed-lateness", type=float, default=0.0, metavar="SECONDS",
                        help="keep counting a report while the watermark is at most SECONDS past "
                             "the end of its slice; each late batch fires a LATE pane (default 0)")
    parser.add_argument("--memory-budget", type=float, default=DEFAULT_MEMORY_BUDGET_MB,
                        metavar="MB",
                        help="memory for the accumulators of one slice of every metric and the "
                             "windows it feeds, plus one window being finalized and written, "
                             "checked before any report is read (default "
                             f"{DEFAULT_MEMORY_BUDGET_MB:g} MB)")
    parser.add_argument("--early-every", type=float, default=None, metavar="SECONDS",
                        help="streaming sources: an EARLY pane SECONDS of processing time after "
                             "new reports enter a window (default: none)")
    parser.add_argument("--store", default=None, metavar="URL",
                        help="also write each window's latest pane and the dead-letter counts to "
                             "an estimate store: sqlite:///FILE.db, postgresql://USER@HOST/DB or "
                             "bigquery://PROJECT/DATASET (docs/store.md)")
    add_limit_arguments(parser)


def add_limit_arguments(parser: argparse.ArgumentParser) -> None:
    """One flag per reader limit (`DecodeLimits`): --max-block-bytes and so on."""
    for field in dataclasses.fields(DecodeLimits):
        parser.add_argument("--" + field.name.replace("_", "-"), type=int, default=field.default,
                            metavar="N", help=f"{LIMITS_HELP[field.name]} "
                                              f"(default {field.default})")


def job_from_arguments(args: argparse.Namespace) -> EstimateJob:
    """Validate the job's arguments; raises ValueError (or RegistryError) naming the problem.

    Everything is checked before a report is read: the registry (post-processing included),
    the windows, the accumulators against the memory budget, the inputs, and that the output
    folder can be written (a local one is created where absent).
    """
    registry = load_registry(args.registry)
    windows = WindowSpec.from_seconds(args.window, args.period, args.allowed_lateness,
                                      args.early_every, args.window_offset)
    store = getattr(args, "store", None)
    check_memory_budget(registry, windows, getattr(args, "memory_budget",
                                                   DEFAULT_MEMORY_BUDGET_MB), store is not None)
    if store is not None:
        check_store_url(store)
    limits = DecodeLimits(**{field.name: getattr(args, field.name)
                             for field in dataclasses.fields(DecodeLimits)})
    if getattr(args, "follow", None) is not None:
        if args.input:
            raise ValueError("give either --input (a batch run) or --follow (a live run), not both")
        prepare_output(args.output)
        return EstimateJob(registry, (), args.output, windows, store, limits)
    if not args.input:
        raise ValueError("--input is required (or --follow DIR for a live run)")
    files = expand_file_patterns(args.input)
    prepare_output(args.output)
    return EstimateJob(registry, tuple(files), args.output, windows, store, limits)


def prepare_output(output: str) -> None:
    """Create a local output folder where absent and check that files can be written in it;
    ValueError naming the folder otherwise (remote folders are checked by the runner)."""
    if FileSystems.get_scheme(output) is not None:
        return
    try:
        os.makedirs(output, exist_ok=True)
        with tempfile.TemporaryFile(dir=output):
            pass
    except OSError as error:
        raise ValueError(f"--output {output!r} cannot be written: "
                         f"{error.strerror or error}") from None


def run_job(job: EstimateJob, beam_args: list[str], out=sys.stdout) -> dict[str, int]:
    """Run the job to completion; print and return the record counters.

    A dry run (`--dry_run=True`, e.g. on Dataflow) builds and validates the job without running
    it: nothing is counted, and the empty counters are returned.
    """
    prepare_output(job.output)
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


def accepted(counters: dict[str, int]) -> int:
    """Reports that passed the decoder's checks and were not duplicates of counted ones.

    The decoder counts `records_accepted`; a duplicate is found later, when its slice is
    counted, and moves from accepted to dead-lettered (`dead_letter.duplicate`).
    """
    return (counters.get("records_accepted", 0)
            - counters.get(f"dead_letter.{Reason.DUPLICATE}", 0))


def too_late(counters: dict[str, int]) -> int:
    """Accepted reports the runner dropped as later than the allowed lateness.

    Beam drops them without a trace; they are the accepted reports that never entered a slice.
    """
    return accepted(counters) - counters.get("records_counted", 0)


def summary_line(counters: dict[str, int]) -> str:
    """One line that adds up: read = accepted + dead-lettered; `too late` is part of accepted."""
    dead = {k.split(".", 1)[1]: v for k, v in sorted(counters.items())
            if k.startswith("dead_letter.")}
    dead_text = ", ".join(f"{reason}={count}" for reason, count in dead.items()) or "none"
    late = too_late(counters)
    return (f"records read: {counters.get('records_read', 0)}, "
            f"accepted: {accepted(counters)}, "
            f"dead-lettered: {sum(dead.values())} ({dead_text}), "
            f"windows: {counters.get('windows_finalized', 0)}"
            + (f", too late (dropped): {late}" if late else ""))
