"""Through Beam (Pub/Sub, MatchContinuously, a replay) a report id counts once per (metric,
slice) across the panes of the slice: a file re-delivered after the slice already fired a pane
adds nothing to the window and is a `duplicate` dead letter (`transforms.dedupe`), as in the
batch job. BundleBasedDirectRunner, a TestStream replay with explicit steps."""
from __future__ import annotations

import shutil

import pytest

from ldp_telemetry.ldp.config.windows import WindowSpec
from ldp_telemetry.transforms.replay import FilesArrive, ProcessingTimePasses, WatermarkTo
from tests.pipelines.test_streaming_panes import (METRIC, T0, TRUTH_0, Reports, iso,
                                                  pane_checker, run_stream)

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


def test_streaming_rejects_reach_the_store_as_running_totals(tmp_path):
    """Dead letters of several panes and bundles: the store holds their totals (set from the
    runner's state, so a retried bundle would set the same totals again)."""
    from ldp_telemetry.store import open_store
    from tests.pipelines.test_store_streaming import run_into_store

    reports = Reports(tmp_path, seed=22)
    first = reports.write("first", TRUTH_0, 500, T0, 60)
    copy = str(tmp_path / "first-retry.avro")
    shutil.copy(first, copy)
    junk = [tmp_path / f"junk-{k}.avro" for k in range(3)]
    for path in junk:
        path.write_text("not avro\n")
    steps = [WatermarkTo(T0), FilesArrive((first, str(junk[0]))), ProcessingTimePasses(10),
             FilesArrive((copy, str(junk[1]))), WatermarkTo(T0 + 60),
             FilesArrive((str(junk[2]),)), WatermarkTo(T0 + 200)]
    windows = WindowSpec.from_seconds(60, allowed_lateness=120, early_every=5)
    url = run_into_store(tmp_path, windows, steps)
    with open_store(url) as store:
        assert store.unattributed_rejects() == {("", "undecodable"): 3, ("", "duplicate"): 500}
        [window] = store.windows(METRIC)
        assert window["n"] == 500


def test_a_slices_ids_are_cleared_when_it_expires_so_a_later_copy_is_too_late(tmp_path):
    """The ids are state of the slice's window; a timer at its expiry (end + allowed lateness)
    clears them (the direct runners never collect expired state). A copy arriving after that
    passes the step and is dropped by the runner as too late: no pane changes and it is not a
    `duplicate` dead letter."""
    reports = Reports(tmp_path, seed=23)
    first = reports.write("w0-first", TRUTH_0, 600, T0, 60)
    copy = str(tmp_path / "w0-first-retry.avro")
    shutil.copy(first, copy)
    steps = [WatermarkTo(T0), FilesArrive((first,)), WatermarkTo(T0 + 60 + 120 + 30),
             FilesArrive((copy,)), WatermarkTo(T0 + 600)]
    n, estimate = reports.unbiased([first], T0, T0 + 60)
    expected = {(iso(T0), iso(T0 + 60)): [("ON_TIME", 0, False, n, estimate, TRUTH_0)]}
    windows = WindowSpec.from_seconds(60, allowed_lateness=120)
    run_stream(windows, steps, pane_checker(expected), [])
