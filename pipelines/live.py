"""The live run: `ldp run --follow LOCATION`, panes written as they fire until stopped.

    arriving reports ─▶ source (--source) ─▶ build_streaming_pipeline ─▶ WritePanesFn ─▶ OUT/panes/…

`--source directory` (the default) runs here, on BundleBasedDirectRunner with `--streaming`: no
unbounded source runs on Beam's local runners, so a `DirectoryFollower` (pipelines/follow.py)
feeds a `TestStream(endpoint=...)` through Beam's TestStream service on 127.0.0.1 with report
batches, watermark advances and processing-time advances as files appear; Beam's triggers then
fire EARLY, ON_TIME and LATE panes while the stream is still open. The follower decides late
data itself, against the watermark it announced, so every report is either in a pane or counted
as too late in its windows. `--source pubsub` and `--source match-continuously` build the same
graph behind Pub/Sub (Dataflow) or fileio.MatchContinuously (Flink) and hand it to the runner
named by the Beam options.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
import uuid
from dataclasses import dataclass

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions, TestOptions
from apache_beam.runners.direct.direct_runner import BundleBasedDirectRunner
from apache_beam.runners.runner import PipelineState

from ldp_telemetry.output.atomic import write_atomically
from ldp_telemetry.output.layout import PANE_LOG
from ldp_telemetry.output.reader import latest_panes, read_pane_log, truncate_torn_tail
from ldp_telemetry.pipelines.estimate import (EstimateJob, build_streaming_pipeline,
                                              record_counters, summary_line)
from ldp_telemetry.pipelines.follow import (TOO_LATE_LOG, DirectoryFollower, EventStream,
                                            WatermarkPolicy)
from ldp_telemetry.runners import make_runner
from ldp_telemetry.transforms.panes import WritePanesFn
from ldp_telemetry.transforms.sources import SOURCE_KINDS, make_source
from ldp_telemetry.transforms.store import WriteToStore

STATUS = "status.json"


@dataclass(frozen=True)
class LiveConfig:
    """How a live run follows its source and when it stops (seconds of wall time)."""

    source: str
    location: str
    policy: WatermarkPolicy = WatermarkPolicy()
    poll_s: float = 0.5
    until_s: float | None = None
    stop_when_idle_s: float | None = None
    echo: bool = False

    def __post_init__(self):
        if self.source not in SOURCE_KINDS:
            raise ValueError(f"--source must be one of {', '.join(SOURCE_KINDS)}, "
                             f"got {self.source!r}")
        if not 0 < self.poll_s <= 10:
            raise ValueError(f"--poll must be in (0, 10] seconds, got {self.poll_s}")
        for flag, value in (("--until", self.until_s), ("--stop-when-idle",
                                                        self.stop_when_idle_s)):
            if value is not None and value <= 0:
                raise ValueError(f"{flag} must be positive, got {value}")


def add_live_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("live run (--follow)")
    group.add_argument("--follow", metavar="LOCATION", default=None,
                       help="run live: follow this directory of report files (or Pub/Sub "
                            "subscription/topic, or file glob, per --source) and write each "
                            "pane as it fires under OUTPUT/panes/ (instead of --input)")
    group.add_argument("--source", choices=SOURCE_KINDS, default="directory",
                       help="what --follow names: a directory followed here (default), Pub/Sub "
                            "(Dataflow) or a directory matched continuously (Flink)")
    group.add_argument("--max-out-of-order", type=float, default=0.0, metavar="SECONDS",
                       help="the watermark trails the largest event time seen (rounded down to "
                            "its slice) by this much (default 0)")
    group.add_argument("--idle-advance", type=float, default=10.0, metavar="SECONDS",
                       help="after this long without a new file the watermark moves to the end "
                            "of the latest slice seen (default 10; 0 never)")
    group.add_argument("--until", type=float, default=None, metavar="SECONDS",
                       help="stop after this many seconds")
    group.add_argument("--stop-when-idle", type=float, default=None, metavar="SECONDS",
                       help="stop after this many seconds without a new file")
    group.add_argument("--poll", type=float, default=0.5, metavar="SECONDS",
                       help="how often the directory is listed (default 0.5)")
    group.add_argument("--print-panes", action="store_true",
                       help="print one line per pane as it is written")


def live_config_from_arguments(args: argparse.Namespace) -> LiveConfig:
    if args.max_out_of_order is None or not args.max_out_of_order >= 0:
        raise ValueError(f"--max-out-of-order must be >= 0 seconds, got {args.max_out_of_order}")
    if args.source == "directory" and not os.path.isdir(args.follow):
        raise ValueError(f"--follow {args.follow!r} is not a directory")
    policy = WatermarkPolicy(round(args.max_out_of_order * 1000),
                             args.idle_advance if args.idle_advance else None)
    return LiveConfig(args.source, args.follow, policy, args.poll, args.until,
                      args.stop_when_idle, args.print_panes)


def run_live(job: EstimateJob, live: LiveConfig, beam_args: list[str],
             out=sys.stdout) -> dict[str, int]:
    """Run until stopped; print and return the counters. Other sources: see `run_remote`."""
    if live.source != "directory":
        return run_remote(job, live, beam_args, out)
    runner = PipelineOptions(list(beam_args)).view_as(StandardOptions).runner
    if runner not in (None, "BundleBasedDirectRunner"):
        raise ValueError(f"--source directory runs here, on BundleBasedDirectRunner, not on "
                         f"{runner}: use --source match-continuously (Flink) or --source "
                         f"pubsub (Dataflow) on other runners")
    os.makedirs(job.output, exist_ok=True)
    stream = EventStream()
    stream.start()
    try:
        return _follow_directory(job, live, beam_args, stream, out)
    finally:
        stream.stop()


def _follow_directory(job, live, beam_args, stream, out) -> dict[str, int]:
    for log in (PANE_LOG, TOO_LATE_LOG):  # a killed run may have left half a line
        truncate_torn_tail(os.path.join(job.output, log))
    follower = DirectoryFollower(job.registry, job.windows, live.location, job.output, stream,
                                 live.policy, limits=job.limits)
    replay = follower.replay_after_restart()
    offsets = {key: entry["pane"]["index"] + 1 for key, entry in latest_panes(job.output).items()}
    panes_before = len(read_pane_log(job.output))

    options = PipelineOptions(list(beam_args))
    options.view_as(StandardOptions).streaming = True
    pipeline = beam.Pipeline(runner=BundleBasedDirectRunner(), options=options)
    estimates, dead_letters = build_streaming_pipeline(pipeline, job,
                                            make_source("directory", live.location, job.registry,
                                                        job.windows.slice_ms,
                                                        endpoint=stream.endpoint))
    written = estimates | "WritePanes" >> beam.ParDo(
        WritePanesFn(job.output, offsets, replay.complete_windows, live.echo))
    if job.store is not None:  # the panes as written (indices continued after a restart)
        (written, dead_letters) | "WriteToStore" >> WriteToStore(
            job.store, job.windows.slice_ms, job.windows.slice_offset_ms)

    if follower.restarted:
        print(f"restart: {len(follower.state.files)} file(s) consumed before; "
              f"{sum(b.n for b in replay.batches):,} accepted report(s) of open windows replayed",
              file=out, flush=True)
    stream.add_batches(replay.batches)
    follower.announce_restart_watermark()
    result = pipeline.run()

    stop = threading.Event()
    previous = {}
    if threading.current_thread() is threading.main_thread():  # only it may set handlers
        previous = {sig: signal.signal(sig, lambda *_: stop.set())
                    for sig in (signal.SIGINT, signal.SIGTERM)}
    started = time.monotonic()
    try:
        while not stop.is_set():
            follower.poll()
            _write_status(job.output, follower, finished=False)
            if result.state in (PipelineState.FAILED, PipelineState.CANCELLED):
                break
            if live.until_s is not None and time.monotonic() - started >= live.until_s:
                break
            if live.stop_when_idle_s is not None and follower.idle_for() >= live.stop_when_idle_s:
                break
            stop.wait(live.poll_s)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        stream.close()  # Beam moves the watermark to +infinity: every open window fires
    result.wait_until_finish()
    _write_status(job.output, follower, finished=True)
    counters = follower.state.counters()
    counters["windows_finalized"] = len(read_pane_log(job.output)) - panes_before
    print(summary_line(counters), file=out)
    for counts in sorted(follower.too_late_by_window(), key=lambda w: w.key):
        print(f"  too late: {counts.metric} [{counts.window_start} .. {counts.window_end}): "
              f"{counts.too_late}", file=out)
    print(f"panes: {job.output}/{PANE_LOG} (index), {job.output}/panes/ (one file per pane)",
          file=out)
    return counters


def _write_status(output: str, follower: DirectoryFollower, finished: bool) -> None:
    """OUT/status.json: the run's counters, watermark and per-window too-late counts."""
    state = follower.state
    write_atomically(os.path.join(output, STATUS), json.dumps({
        "finished": finished, "watermark_ms": state.watermark_ms,
        "files_consumed": len(state.files), "counters": state.counters(),
        "too_late": [{"metric": w.metric, "window_start": w.window_start,
                      "window_end": w.window_end, "too_late": w.too_late,
                      "accepted": w.accepted} for w in follower.too_late_by_window()]},
        sort_keys=True, indent=1))


def build_remote_pipeline(pipeline: beam.Pipeline, job: EstimateJob, live: LiveConfig):
    """The live graph behind Pub/Sub or MatchContinuously, panes written to `job.output`."""
    source = make_source(live.source, live.location, job.registry, job.windows.slice_ms,
                         job.windows.slice_offset_ms, limits=job.limits)
    estimates, dead_letters = build_streaming_pipeline(pipeline, job, source)
    written = estimates | "WritePanes" >> beam.ParDo(WritePanesFn(job.output))
    dead_letters | "WriteDeadLetters" >> beam.ParDo(_WriteDeadLetterFn(job.output))
    if job.store is not None:
        (written, dead_letters) | "WriteToStore" >> WriteToStore(
            job.store, job.windows.slice_ms, job.windows.slice_offset_ms)
    return estimates, dead_letters


class _WriteDeadLetterFn(beam.DoFn):
    """Dead-letter record -> one small file under OUT/dead_letters/, written by rename."""

    def __init__(self, output: str):
        self._output = output

    def process(self, record: dict):
        name = FileSystems.join(self._output, "dead_letters", f"{uuid.uuid4().hex}.json")
        write_atomically(name, json.dumps(record, sort_keys=True) + "\n", fsync=False)


def run_remote(job: EstimateJob, live: LiveConfig, beam_args: list[str],
               out=sys.stdout) -> dict[str, int]:
    """Submit the Pub/Sub or MatchContinuously graph to the runner of `beam_args` (streaming)."""
    options = PipelineOptions(list(beam_args))
    if options.view_as(StandardOptions).runner is None:
        raise ValueError(f"--source {live.source} needs a streaming runner named explicitly: "
                         f"--runner=DataflowRunner (pubsub) or --runner=PortableRunner "
                         f"--job_endpoint=FLINK_JOB_SERVER (match-continuously)")
    options.view_as(StandardOptions).streaming = True
    pipeline = beam.Pipeline(runner=make_runner(options), options=options)
    build_remote_pipeline(pipeline, job, live)
    result = pipeline.run()
    if options.view_as(TestOptions).dry_run:
        result.wait_until_finish()
        print("dry run: the job was built and validated, and not run", file=out)
        return {}
    result.wait_until_finish()
    counters = record_counters(result)
    print(summary_line(counters), file=out)
    return counters
