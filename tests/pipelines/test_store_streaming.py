"""A streaming run writes every pane into the estimate store as it fires: the store ends with
each window's latest pane, the log of all panes and the late reports (BundleBasedDirectRunner,
a replayed TestStream)."""
from __future__ import annotations

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions
from apache_beam.runners.direct.direct_runner import BundleBasedDirectRunner

from ldp_telemetry.ldp.config.windows import WindowSpec
from ldp_telemetry.pipelines.graph import build_streaming_pipeline
from ldp_telemetry.pipelines.job import EstimateJob
from ldp_telemetry.store import open_store
from ldp_telemetry.transforms.replay import (FilesArrive, ProcessingTimePasses, ReplayReportFiles,
                                             WatermarkTo)
from ldp_telemetry.transforms.store import WriteToStore

from tests.pipelines.test_streaming_panes import METRIC, REGISTRY, T0, Reports, iso


def run_into_store(tmp_path, windows: WindowSpec, steps) -> str:
    """Run the streaming graph behind a replay of `steps` into a new SQLite store; its URL."""
    url = f"sqlite:///{tmp_path}/live.db"
    options = PipelineOptions([])
    options.view_as(StandardOptions).streaming = True
    pipeline = beam.Pipeline(runner=BundleBasedDirectRunner(), options=options)
    job = EstimateJob(REGISTRY, (), "", windows)
    estimates, dead_letters = build_streaming_pipeline(
        pipeline, job, ReplayReportFiles(REGISTRY, windows.slice_ms, steps))
    (estimates, dead_letters) | "WriteStore" >> WriteToStore(url, windows.slice_ms,
                                                             windows.slice_offset_ms)
    pipeline.run().wait_until_finish()
    return url


def test_each_pane_is_upserted_and_logged_as_it_fires(tmp_path):
    reports = Reports(tmp_path, seed=21)
    first = reports.write("first", [0.5, 0.3, 0.15, 0.05], 2000, T0, 60)
    second = reports.write("second", [0.5, 0.3, 0.15, 0.05], 2000, T0, 60)
    late = reports.write("late", [0.5, 0.3, 0.15, 0.05], 400, T0, 60)
    junk = tmp_path / "junk.avro"
    junk.write_text("not avro\n")
    steps = [WatermarkTo(T0), FilesArrive((first,)), ProcessingTimePasses(10),   # EARLY
             FilesArrive((second,)), WatermarkTo(T0 + 60),                       # ON_TIME
             FilesArrive((late, str(junk))), WatermarkTo(T0 + 200)]              # LATE
    windows = WindowSpec.from_seconds(60, allowed_lateness=120, early_every=5)
    url = run_into_store(tmp_path, windows, steps)

    with open_store(url) as store:
        [window] = store.windows(METRIC)
        assert (window["window_start"], window["window_end"]) == (iso(T0), iso(T0 + 60))
        assert window["pane"] == {"timing": "LATE", "index": 2, "is_last": False}
        assert window["n"] == 4400 and window["late_reports"] == 400
        n_latest, unbiased = reports.unbiased([first, second, late], T0, T0 + 60)
        assert window["unbiased_estimate"] == unbiased and n_latest == 4400
        logged = store._query("SELECT pane_index, pane_timing, n FROM ldp_panes ORDER BY seq")
        assert logged == [(0, "EARLY", 2000), (1, "ON_TIME", 4000), (2, "LATE", 4400)]
        assert store.unattributed_rejects() == {("", "undecodable"): 1}
