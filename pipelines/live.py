"""The live run: `ldp run --follow LOCATION`, panes written as they fire until stopped.

    arriving reports ─▶ source (--source) ─▶ build_streaming_pipeline ─▶ job_sinks ─▶ OUT/panes/…

`--source directory` (the default) runs here, on BundleBasedDirectRunner with `--streaming`: no
unbounded source runs on Beam's local runners, so a `DirectoryFollower` (pipelines/follower.py)
feeds a `TestStream(endpoint=...)` through Beam's TestStream service on 127.0.0.1
(pipelines/event_stream.py) with report
batches, watermark advances and processing-time advances as files appear; Beam's triggers then
fire EARLY, ON_TIME and LATE panes while the stream is still open. The follower decides late
data itself, against the watermark it announced, so every report is either in a pane or counted
as too late in its windows. `--source pubsub` and `--source match-continuously` build the same
graph behind Pub/Sub (Dataflow) or fileio.MatchContinuously (Flink) and hand it to the runner
named by the Beam options (pipelines/remote.py).
"""
from __future__ import annotations

import os
import sys
import threading
import time

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions
from apache_beam.runners.direct.direct_runner import BundleBasedDirectRunner
from apache_beam.runners.runner import PipelineState

from ldp_telemetry.ldp.base.errors import ConfigError
from ldp_telemetry.output.layout import PANE_LOG, TOO_LATE_LOG, window_key
from ldp_telemetry.output.reader import latest_panes, read_pane_log, truncate_torn_tail
from ldp_telemetry.pipelines.counters import summary_line
from ldp_telemetry.pipelines.event_stream import EventStream
from ldp_telemetry.pipelines.follower import DirectoryFollower
from ldp_telemetry.pipelines.graph import build_streaming_pipeline, job_sinks
from ldp_telemetry.pipelines.job import EstimateJob, LiveConfig
from ldp_telemetry.pipelines.remote import run_remote
from ldp_telemetry.pipelines.slice_ids import merge_batches
from ldp_telemetry.pipelines.status import write_status
from ldp_telemetry.pipelines.stopping import StopSignals
from ldp_telemetry.pipelines.store_runs import start_store_run, store_counters
from ldp_telemetry.transforms.sinks import PaneFiles, write_to_sinks
from ldp_telemetry.transforms.sources import make_source
from ldp_telemetry.transforms.store import RejectTotals, follower_writes_rejects


def run_live(job: EstimateJob, live: LiveConfig, beam_args: list[str],
             out=sys.stdout, stop: threading.Event | None = None) -> dict[str, int]:
    """Run until stopped; print and return the counters. Other sources: see `run_remote`.

    `stop`: an event that ends the run (the caller's `pipelines.stopping.StopSignals`, held
    until the process ends); without it, SIGINT and SIGTERM end the run while it lasts."""
    if live.source != "directory":
        return run_remote(job, live, beam_args, out)
    runner = PipelineOptions(list(beam_args)).view_as(StandardOptions).runner
    if runner not in (None, "BundleBasedDirectRunner"):
        raise ConfigError(f"source directory runs here, on BundleBasedDirectRunner, not on "
                          f"{runner}: on other runners use the source match-continuously "
                          f"(Flink) or pubsub (Dataflow)", field="source")
    os.makedirs(job.output, exist_ok=True)
    signals = StopSignals() if stop is None else None  # Ctrl-C, SIGTERM: final panes, summary
    stream = EventStream()
    stream.start()
    try:
        return _follow_directory(job, live, beam_args, stream, out,
                                 stop if signals is None else signals.event)
    finally:
        stream.stop()
        if signals is not None:
            signals.restore()


def _follow_directory(job, live, beam_args, stream, out, stop) -> dict[str, int]:
    for log in (PANE_LOG, TOO_LATE_LOG):  # a killed run may have left half a line
        truncate_torn_tail(os.path.join(job.output, log))
    rejects = RejectTotals(job.store) if follower_writes_rejects(job.store) else None
    try:
        return _run_follower(job, live, beam_args, stream, out, rejects, stop)
    finally:
        if rejects is not None:
            rejects.close()


def _run_follower(job, live, beam_args, stream, out, rejects, stop) -> dict[str, int]:
    follower = DirectoryFollower(job.registry, job.windows, live.location, job.output, stream,
                                 live.policy, limits=job.limits, rejects=rejects)
    # The store run first: the follower's reject totals (rewritten whole by the replay) are rows
    # of this run, never of an earlier one that the run's panes would replace.
    job, store_run = start_store_run(job, "live", [live.location], resume=follower.restarted)
    if rejects is not None:
        rejects.run = job.store_run
    replay = follower.replay_after_restart()
    offsets = {window_key(entry): entry["pane"]["index"] + 1
               for entry in latest_panes(job.output).values()}
    panes_before = len(read_pane_log(job.output))

    options = PipelineOptions(list(beam_args))
    options.view_as(StandardOptions).streaming = True
    pipeline = beam.Pipeline(runner=BundleBasedDirectRunner(), options=options)
    source = make_source("directory", live.location, job.registry, job.windows.slice_ms,
                         endpoint=stream.endpoint)
    estimates, dead_letters = build_streaming_pipeline(pipeline, job, source, dedupe=False)
    # The follower writes the dead letters of each file itself (OUT/dead_letters/<file>.jsonl).
    panes = PaneFiles(job.output, offsets, replay.complete_windows, live.echo)
    write_to_sinks(job_sinks(job, panes=panes, dead_letters=False,
                             store_rejects=rejects is None), estimates, dead_letters)

    if follower.restarted:
        print(f"restart: {len(follower.state.files)} file(s) consumed before; "
              f"{sum(b.n for b in replay.batches):,} accepted report(s) of open windows replayed",
              file=out, flush=True)
    stream.add_batches(merge_batches(replay.batches))
    follower.announce_restart_watermark()
    result = pipeline.run()

    started = time.monotonic()
    try:
        while not stop.is_set():
            follower.poll()
            write_status(job.output, follower, finished=False)
            if result.state in (PipelineState.FAILED, PipelineState.CANCELLED):
                break
            if live.until_s is not None and time.monotonic() - started >= live.until_s:
                break
            if live.stop_when_idle_s is not None and follower.idle_for() >= live.stop_when_idle_s:
                break
            stop.wait(live.poll_s)
    finally:
        stream.close()  # Beam moves the watermark to +infinity: every open window fires
    result.wait_until_finish()
    write_status(job.output, follower, finished=True)
    counters = follower.state.counters()
    counters.update(store_counters(result))
    if rejects is not None:  # the follower's reject totals, not Beam's
        counters.update(rejects.counters())
    written = read_pane_log(job.output)[panes_before:]
    counters["windows_finalized"] = len({window_key(entry) for entry in written})
    counters["panes_written"] = len(written)
    print(summary_line(counters), file=out)
    for counts in sorted(follower.too_late_by_window(), key=lambda w: w.key):
        print(f"  too late: {counts.metric} [{counts.window_start} .. {counts.window_end}): "
              f"{counts.too_late}", file=out)
    print(f"panes: {job.output}/{PANE_LOG} (index), {job.output}/panes/ (one file per pane)",
          file=out)
    stored = store_run.end(counters, produced=counters["panes_written"],
                           inputs=follower.inputs())
    if stored is not None:
        print(stored, file=out)
    return counters
