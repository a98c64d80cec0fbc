"""Streaming panes: early, on-time and late estimates per window, on BundleBasedDirectRunner.

Report files (real GRR perturbation) arrive through `ReplayReportFiles`, a TestStream with
explicit watermark and processing-time steps. Every pane is checked against the reports that
had arrived by then: its n, and its unbiased estimate recomputed without the pipeline; reports
later than the allowed lateness are in no pane. Event times are in 2024 while the test clock's
processing time starts at 0 (see README, Streaming).

Beam counters are not asserted on this runner: BundleBasedDirectRunner's StateSampler keeps the
metrics container of a step's first bundle on each worker thread (statesampler.scoped_state
caches it by name), so counter updates of later bundles are lost. The `records_counted`
arithmetic is checked on FnApiRunner and as a pure function.
"""
from __future__ import annotations

import argparse
import datetime as dt
import io
import json

import apache_beam as beam
import numpy as np
import pytest
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions
from apache_beam.runners.direct.direct_runner import BundleBasedDirectRunner
from apache_beam.testing.util import assert_that, equal_to

from ldp_telemetry.ldp.base.errors import ConfigError
from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.ldp.config.windows import WindowSpec
from ldp_telemetry.ldp.protocols import make_protocol
from ldp_telemetry.ldp.protocols.noise import unbiased_estimate
from ldp_telemetry.pipelines.arguments import add_job_arguments
from ldp_telemetry.pipelines.batch import run_job
from ldp_telemetry.pipelines.counters import summary_line
from ldp_telemetry.output.estimate import EstimateRecord
from ldp_telemetry.pipelines.graph import build_pipeline, build_streaming_pipeline
from ldp_telemetry.pipelines.job import EstimateJob, job_from_arguments
from ldp_telemetry.schemas.codec import write_reports
from ldp_telemetry.transforms.replay import (FilesArrive, ProcessingTimePasses, ReplayReportFiles,
                                             WatermarkTo)

pytestmark = pytest.mark.slow  # streaming jobs
T0 = 1_709_251_200  # 2024-03-01T00:00:00Z, in seconds
METRIC = "s.grr"
PROTOCOL = make_protocol("grr", 2.0, 4)
REGISTRY = parse_registry({"metrics": [
    {"name": METRIC, "protocol": "grr", "epsilon": 2.0, "domain": {"labels": ["a", "b", "c", "d"]}},
]})
# ON_TIME panes: 6 windows × 4 values = 24 checks at 4.5 plug-in standard errors (6.8e-6 each,
# ≈ 1.6e-4 in all); the seeds are fixed.
K = 4.5


def iso(seconds: int) -> str:
    return dt.datetime.fromtimestamp(seconds, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class Reports:
    """Report files written from known true values; remembers each file's payloads."""

    def __init__(self, tmp_path, seed):
        self._dir = tmp_path
        self._rng = np.random.default_rng(seed)
        self.files: dict[str, tuple[np.ndarray, dict]] = {}
        self._next_id = 0  # report ids are distinct across files: repeated ones count once

    def write(self, name: str, truth, n: int, start_s: int, span_s: int) -> str:
        values = np.repeat(np.arange(4), np.round(np.asarray(truth) * n).astype(int))
        assert len(values) == n
        times = (start_s * 1000 + self._rng.integers(0, span_s * 1000, n)).astype(np.int64)
        columns = PROTOCOL.perturb(self._rng.permutation(values), self._rng)
        path = str(self._dir / f"{name}.avro")
        write_reports(path, METRIC, PROTOCOL, self._next_id + np.arange(n), times, columns)
        self._next_id += n
        self.files[path] = (times, columns)
        return path

    def unbiased(self, paths, start_s: int, end_s: int) -> tuple[int, list[float]]:
        """n and the unbiased estimate of the reports of `paths` inside [start, end)."""
        statistic, n = PROTOCOL.new_statistic(), 0
        for path in paths:
            times, columns = self.files[path]
            inside = (times >= start_s * 1000) & (times < end_s * 1000)
            PROTOCOL.accumulate(statistic, {k: v[inside] for k, v in columns.items()})
            n += int(inside.sum())
        return n, unbiased_estimate(PROTOCOL.support_counts(statistic), PROTOCOL.noise(n)).tolist()


def run_stream(windows: WindowSpec, steps, check_estimates, expected_dead_reasons=None,
               registry=REGISTRY) -> None:
    """Run the streaming graph of `registry` behind a replay, checking its estimates and, unless
    `expected_dead_reasons` is None, its dead letters."""
    options = PipelineOptions([])
    options.view_as(StandardOptions).streaming = True
    pipeline = beam.Pipeline(runner=BundleBasedDirectRunner(), options=options)
    job = EstimateJob(registry, (), "", windows)
    estimates, dead_letters = build_streaming_pipeline(
        pipeline, job, ReplayReportFiles(registry, windows.slice_ms, steps))
    assert_that(estimates, check_estimates, label="CheckEstimates")
    if expected_dead_reasons is not None:
        assert_that(dead_letters | beam.Map(lambda letter: letter["reason"]),
                    equal_to(expected_dead_reasons), label="CheckDeadLetters")
    pipeline.run().wait_until_finish()


def pane_checker(expected):
    """Matcher: the panes are exactly `expected`, {(window_start, window_end): [(timing, index,
    is_last, n, unbiased estimate, truth), ...]}, and every ON_TIME estimate is near its truth."""
    def check(records):
        got = {}
        for record in map(EstimateRecord.json_value, records):
            assert record["metric"] == METRIC
            pane = record["pane"]
            got.setdefault((record["window_start"], record["window_end"]), []).append(
                (pane["timing"], pane["index"], pane["is_last"], record["n"],
                 record["unbiased_estimate"], record["std_error"]))
        assert sorted(got) == sorted(expected), (sorted(got), sorted(expected))
        for window, panes in expected.items():
            actual = sorted(got[window], key=lambda pane: pane[1])
            assert [p[:4] for p in actual] == [p[:4] for p in panes], (window, actual)
            for (_, _, _, _, estimate, se), (timing, _, _, _, want, truth) in zip(
                    actual, panes, strict=True):
                np.testing.assert_allclose(estimate, want, rtol=1e-12, err_msg=str(window))
                if timing == "ON_TIME":
                    assert np.all(np.abs(np.array(estimate) - truth) <= K * np.array(se)), window
    return check


# -- fixed windows: early, on-time, late within the lateness, and too late ----------------------

TRUTH_0 = [0.5, 0.3, 0.15, 0.05]
TRUTH_1 = [0.1, 0.2, 0.3, 0.4]


def test_fixed_windows_early_on_time_late_and_too_late(tmp_path):
    reports = Reports(tmp_path, seed=11)
    w0_first = reports.write("w0-first", TRUTH_0, 2000, T0, 60)
    w1 = reports.write("w1", TRUTH_1, 1000, T0 + 60, 60)
    w0_second = reports.write("w0-second", TRUTH_0, 2000, T0, 60)
    w0_late = reports.write("w0-late", TRUTH_0, 400, T0, 60)
    w0_too_late = reports.write("w0-too-late", TRUTH_0, 300, T0, 60)
    junk = tmp_path / "junk.avro"
    junk.write_text("not avro\n")
    steps = [
        WatermarkTo(T0),
        FilesArrive((w0_first, w1)),
        ProcessingTimePasses(10),             # early panes of both windows, 5 s after their data
        FilesArrive((w0_second,)),
        WatermarkTo(T0 + 60),                 # W0 on time, with both of its on-time files
        FilesArrive((w0_late,)),              # W0 is 0 s late of 120 s allowed: a LATE pane
        WatermarkTo(T0 + 200),                # W1 on time; W0 expired at T0 + 60 + 120
        FilesArrive((w0_too_late, str(junk))),  # dropped by the runner; junk is a dead letter
    ]

    def pane(timing, index, paths, start, truth):
        n, estimate = reports.unbiased(paths, start, start + 60)
        return (timing, index, False, n, estimate, truth)

    expected = {
        (iso(T0), iso(T0 + 60)): [
            pane("EARLY", 0, [w0_first], T0, TRUTH_0),
            pane("ON_TIME", 1, [w0_first, w0_second], T0, TRUTH_0),
            pane("LATE", 2, [w0_first, w0_second, w0_late], T0, TRUTH_0)],
        (iso(T0 + 60), iso(T0 + 120)): [
            pane("EARLY", 0, [w1], T0 + 60, TRUTH_1),
            pane("ON_TIME", 1, [w1], T0 + 60, TRUTH_1)],
    }
    assert [p[3] for p in expected[(iso(T0), iso(T0 + 60))]] == [2000, 4000, 4400]

    windows = WindowSpec.from_seconds(60, allowed_lateness=120, early_every=5)
    run_stream(windows, steps, pane_checker(expected), ["undecodable"])


# -- sliding windows: each slice delta is added once to every window that contains it -----------

def test_sliding_windows_add_each_slice_pane_once(tmp_path):
    reports = Reports(tmp_path, seed=12)
    truth = [0.4, 0.3, 0.2, 0.1]
    s0 = reports.write("slice0", truth, 1000, T0, 60)
    s1 = reports.write("slice1", truth, 800, T0 + 60, 60)
    s0_late = reports.write("slice0-late", truth, 200, T0, 60)
    s0_too_late = reports.write("slice0-too-late", truth, 150, T0, 60)
    s1_late = reports.write("slice1-late", truth, 100, T0 + 60, 60)
    steps = [
        WatermarkTo(T0),
        FilesArrive((s0,)),
        ProcessingTimePasses(10),       # early panes of the two windows holding slice 0
        FilesArrive((s1,)),
        WatermarkTo(T0 + 60),           # [T0-60, T0+60) on time
        FilesArrive((s0_late,)),        # slice 0 is late but within 60 s
        WatermarkTo(T0 + 130),          # [T0, T0+120) on time; slice 0 expired at T0 + 120
        # Slice 0 is too late although [T0, T0+120) could take late data until T0 + 180: a
        # report counts in all of its windows or in none. Slice 1 is late within the lateness.
        FilesArrive((s0_too_late, s1_late)),
    ]
    everything = [s0, s1, s0_late, s1_late]

    def pane(timing, index, paths, start):
        n, estimate = reports.unbiased(paths, start, start + 120)
        return (timing, index, False, n, estimate, truth)

    expected = {
        (iso(T0 - 60), iso(T0 + 60)): [
            pane("EARLY", 0, [s0], T0 - 60),
            pane("ON_TIME", 1, [s0], T0 - 60),
            pane("LATE", 2, [s0, s0_late], T0 - 60)],
        (iso(T0), iso(T0 + 120)): [
            pane("EARLY", 0, [s0], T0),
            pane("ON_TIME", 1, [s0, s1, s0_late], T0),
            pane("LATE", 2, everything, T0)],
        (iso(T0 + 60), iso(T0 + 180)): [
            pane("ON_TIME", 0, everything, T0 + 60)],
    }
    assert [p[3] for p in expected[(iso(T0), iso(T0 + 120))]] == [1000, 2000, 2100]
    assert expected[(iso(T0 + 60), iso(T0 + 180))][0][3] == 900

    windows = WindowSpec.from_seconds(120, 60, allowed_lateness=60, early_every=5)
    run_stream(windows, steps, pane_checker(expected), [])


def test_without_lateness_only_data_at_the_window_end_is_late(tmp_path):
    """Streaming with the defaults: accumulating panes; a batch is accepted while the watermark
    is at most 0 s past its window's end, so one arriving exactly at the end fires a LATE
    pane, and one arriving after it is dropped."""
    reports = Reports(tmp_path, seed=13)
    on_time = reports.write("on-time", TRUTH_1, 1500, T0, 60)
    at_end = reports.write("at-end", TRUTH_1, 100, T0, 60)
    after_end = reports.write("after-end", TRUTH_1, 70, T0, 60)
    steps = [WatermarkTo(T0), FilesArrive((on_time,)), WatermarkTo(T0 + 60),
             FilesArrive((at_end,)), WatermarkTo(T0 + 61), FilesArrive((after_end,))]
    n, estimate = reports.unbiased([on_time], T0, T0 + 60)
    n_late, estimate_late = reports.unbiased([on_time, at_end], T0, T0 + 60)
    expected = {(iso(T0), iso(T0 + 60)): [("ON_TIME", 0, False, n, estimate, TRUTH_1),
                                          ("LATE", 1, False, n_late, estimate_late, TRUTH_1)]}
    run_stream(WindowSpec.from_seconds(60), steps, pane_checker(expected), [])


# -- batch runs, options -----------------------------------------------------------------------

@pytest.mark.parametrize("window, period", [(3600, 3600), (7200, 3600)])
def test_batch_results_do_not_depend_on_the_allowed_lateness(tmp_path, window, period):
    reports = Reports(tmp_path, seed=14)
    files = [reports.write(f"hour{k}", TRUTH_0, 500, T0 + 3600 * k, 3600) for k in range(3)]
    results = []
    for lateness in (0, 600):
        job = EstimateJob(REGISTRY, tuple(files), str(tmp_path / f"out{lateness}"),
                          WindowSpec.from_seconds(window, period, allowed_lateness=lateness))
        printed = io.StringIO()
        counters = run_job(job, [], out=printed)
        assert counters["records_counted"] == counters["records_accepted"] == 1500
        assert "too late" not in printed.getvalue()
        lines = [json.loads(line) for path in sorted((tmp_path / f"out{lateness}").glob(
            "estimates-*.jsonl")) for line in path.read_text().splitlines()]
        results.append(sorted((r["window_start"], r["n"], r["pane"]["timing"], r["pane"]["index"],
                               r["unbiased_estimate"]) for r in lines))
    assert results[0] == results[1]
    assert all(timing == "ON_TIME" and index == 0 for _, _, timing, index, _ in results[0])
    assert len(results[0]) == (3 if window == period else 4)


def test_summary_line_reports_accepted_reports_that_no_window_counted():
    counters = {"records_read": 5701, "records_accepted": 5700, "records_counted": 5400,
                "dead_letter.undecodable": 1, "windows_finalized": 5}
    assert summary_line(counters) == (
        "records read: 5701, accepted: 5700, dead-lettered: 1 (undecodable=1), windows: 5, "
        "too late (dropped): 300")
    counters["records_counted"] = 5700
    assert summary_line(counters) == (
        "records read: 5701, accepted: 5700, dead-lettered: 1 (undecodable=1), windows: 5")


def parse(*argv):
    parser = argparse.ArgumentParser()
    add_job_arguments(parser)
    return parser.parse_args(["--registry", "r.json", "--input", "x", "--output", "o", *argv])


def test_pane_options_are_parsed_and_validated_naming_the_setting():
    args = parse("--window", "60", "--allowed-lateness", "30.5", "--early-every", "2")
    spec = WindowSpec.from_seconds(args.window, args.period, args.allowed_lateness,
                                   args.early_every)
    assert spec == WindowSpec(60_000, 60_000, 30_500, 2_000) and spec.has_pane_options
    defaults = parse("--window", "60")
    assert (defaults.allowed_lateness, defaults.early_every) == (0.0, None)
    assert not WindowSpec.from_seconds(60, None, 0.0, None).has_pane_options
    for kwargs, field in (({"allowed_lateness": -1}, "allowed_lateness"),
                          ({"allowed_lateness": float("inf")}, "allowed_lateness"),
                          ({"early_every": 0}, "early_every"),
                          ({"early_every": 2.5}, "early_every"),
                          ({"early_every": float("nan")}, "early_every")):
        with pytest.raises(ConfigError, match=f"^{field} must be") as error:
            WindowSpec.from_seconds(60, **kwargs)
        assert error.value.field == field


def test_early_panes_need_a_streaming_pipeline(tmp_path):
    registry = tmp_path / "registry.json"
    registry.write_text(json.dumps({"metrics": [
        {"name": METRIC, "protocol": "grr", "epsilon": 2.0, "domain": {"size": 4}}]}))
    (tmp_path / "r.avro").write_bytes(b"")
    args = parse("--window", "60", "--early-every", "5")
    args.registry, args.input = str(registry), [str(tmp_path / "r.avro")]
    job = job_from_arguments(args)
    with pytest.raises(ConfigError, match="^early_every needs a streaming source") as error:
        build_pipeline(beam.Pipeline(), job)
    assert error.value.field == "early_every"
    with pytest.raises(ConfigError, match="^early_every needs a streaming pipeline") as error:
        build_streaming_pipeline(beam.Pipeline(), job, ReplayReportFiles(REGISTRY, 60_000, []))
    assert error.value.field == "early_every"
