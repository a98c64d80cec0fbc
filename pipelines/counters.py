"""A job's record counters and the summary line that adds them up.

Counters (namespace "ldp", `transforms.read.COUNTER_NAMESPACE`): records_read,
records_accepted, batches, dead_letter.<reason>, records_counted, windows_finalized. A live run
keeps the same names in its checkpoint (`pipelines.checkpoint.FollowState.counters`).
"""
from __future__ import annotations

from apache_beam.metrics.metric import MetricsFilter
from apache_beam.options.pipeline_options import TestOptions

from ldp_telemetry.ldp.engine.partials import reported_source_change
from ldp_telemetry.ldp.engine.reasons import Reason
from ldp_telemetry.output.coverage import RunInputs
from ldp_telemetry.transforms.read import COUNTER_NAMESPACE, EVENT_TIME_NAMESPACE


def run_and_count(pipeline, out, inputs: RunInputs | None = None) -> dict[str, int]:
    """Run a built job to its end; print and return its record counters. `inputs`, when
    given, gets each metric's event-time range (`input_ranges`).

    A dry run (`--dry_run=True`, e.g. on Dataflow) builds and validates the job without running
    it: nothing is counted, and the empty counters are returned. An input file changed while
    the job ran is SourceChanged on every runner, also where the runner reports the workers'
    error only as text (`partials.reported_source_change`).
    """
    try:
        result = pipeline.run()
        result.wait_until_finish()
    except RuntimeError as error:  # a portable runner's failed job: a worker's error as text
        changed = reported_source_change(error)
        if changed is None:
            raise
        raise changed from None
    if pipeline.options.view_as(TestOptions).dry_run:
        print("dry run: the job was built and validated, and not run", file=out)
        return {}
    counters = record_counters(result)
    if inputs is not None:
        inputs.merge(input_ranges(result))
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


def input_ranges(result) -> dict[str, tuple[int, int]]:
    """Per metric, (first, last) event time in ms of the valid reports the job read: the min
    and max of its `EVENT_TIME_NAMESPACE` distribution (committed where reported, else
    attempted), over every step."""
    query = result.metrics().query(MetricsFilter().with_namespace(EVENT_TIME_NAMESPACE))
    ranges: dict[str, tuple[int, int]] = {}
    for found in query["distributions"]:
        value = found.committed if found.committed is not None else found.attempted
        if value is None or not value.count:
            continue
        metric, low, high = found.key.metric.name, int(value.min), int(value.max)
        if metric in ranges:
            low, high = min(low, ranges[metric][0]), max(high, ranges[metric][1])
        ranges[metric] = (low, high)
    return ranges


def accepted(counters: dict[str, int]) -> int:
    """Reports that passed the decoder's checks and were not duplicates of counted ones.

    The decoder counts `records_accepted`; a duplicate is found later, when its slice is
    counted, and moves from accepted to dead-lettered (`dead_letter.duplicate`).
    """
    return (counters.get("records_accepted", 0)
            - counters.get(Reason.DUPLICATE.counter, 0))


def too_late(counters: dict[str, int]) -> int:
    """Accepted reports the runner dropped as later than the allowed lateness.

    Beam drops them without a trace; they are the accepted reports that never entered a slice.
    """
    return accepted(counters) - counters.get("records_counted", 0)


def summary_line(counters: dict[str, int]) -> str:
    """One line that adds up: read = accepted + dead-lettered; `too late` is part of accepted.
    `windows` counts windows; a live run, whose windows fire several panes, adds `panes`
    (the counter `panes_written`)."""
    dead = {k.split(".", 1)[1]: v for k, v in sorted(counters.items())
            if k.startswith("dead_letter.")}
    dead_text = ", ".join(f"{reason}={count}" for reason, count in dead.items()) or "none"
    late = too_late(counters)
    return (f"records read: {counters.get('records_read', 0)}, "
            f"accepted: {accepted(counters)}, "
            f"dead-lettered: {sum(dead.values())} ({dead_text}), "
            f"windows: {counters.get('windows_finalized', 0)}"
            + (f", panes: {counters['panes_written']}" if "panes_written" in counters else "")
            + (f", too late (dropped): {late}" if late else ""))
