"""Through Beam (Pub/Sub, MatchContinuously, a replay) a report id counts once per (metric,
slice) across the panes of the slice: a file re-delivered after the slice already fired a pane
adds nothing to the window and is a `duplicate` dead letter (`transforms.dedupe`), as in the
batch job. BundleBasedDirectRunner, a TestStream replay with explicit steps."""
from __future__ import annotations

import shutil

import pytest

from ldp_telemetry.ldp.windows import WindowSpec
from ldp_telemetry.transforms.replay import FilesArrive, ProcessingTimePasses, WatermarkTo
from tests.pipelines.test_streaming_panes import (T0, TRUTH_0, Reports, iso, pane_checker,
                                                  run_stream)

pytestmark = pytest.mark.slow  # a streaming job


def test_a_copy_arriving_in_a_later_pane_of_its_slice_counts_once(tmp_path):
    reports = Reports(tmp_path, seed=21)
    first = reports.write("w0-first", TRUTH_0, 1000, T0, 60)
    second = reports.write("w0-second", TRUTH_0, 1000, T0, 60)
    copy = str(tmp_path / "w0-first-retry.avro")
    shutil.copy(first, copy)
    steps = [
        WatermarkTo(T0),
        FilesArrive((first,)),
        ProcessingTimePasses(10),             # an early pane counting the first file
        FilesArrive((copy, second)),          # its copy, in a later pane of the same slice
        WatermarkTo(T0 + 60),
    ]

    def pane(timing, index, paths):
        n, estimate = reports.unbiased(paths, T0, T0 + 60)
        return (timing, index, False, n, estimate, TRUTH_0)

    expected = {(iso(T0), iso(T0 + 60)): [pane("EARLY", 0, [first]),
                                          pane("ON_TIME", 1, [first, second])]}
    windows = WindowSpec.from_seconds(60, allowed_lateness=120, early_every=5)
    run_stream(windows, steps, pane_checker(expected), ["duplicate"])
