"""Partial windows from facts (output/coverage.py): the watermark a run stopped at, and the
inputs' event-time range, with the false-flag rate of a complete window at the inputs' edges."""
from __future__ import annotations

import numpy as np
import pytest

from ldp_telemetry.output import coverage
from ldp_telemetry.output.coverage import (AFTER_INPUTS, BEFORE_INPUTS, CUT_BY_RUN_END,
                                           NOT_PARTIAL, OPEN, MetricInputs, RunInputs,
                                           partial_code, read_inputs, write_inputs)

HOUR = 3_600_000
START = 1_709_251_200_000


def test_an_early_pane_is_open_and_a_window_without_facts_is_never_guessed():
    assert partial_code(START, START + HOUR, 10, "EARLY", None) == OPEN
    # few reports, but nothing recorded: not flagged (no heuristic on n)
    assert partial_code(START, START + HOUR, 1, "ON_TIME", None) == NOT_PARTIAL


def test_a_window_the_run_stopped_inside_is_cut_by_its_end():
    facts = MetricInputs(START, START + 5 * HOUR - 1, watermark_ms=START + 4 * HOUR + 600_000)
    assert partial_code(START + 4 * HOUR, START + 5 * HOUR, 5000, "ON_TIME", facts) \
        == CUT_BY_RUN_END
    # the watermark passed the window before: complete
    assert partial_code(START + 3 * HOUR, START + 4 * HOUR, 5000, "ON_TIME", facts) \
        == NOT_PARTIAL


def test_a_complete_last_window_with_fewer_reports_is_not_partial():
    # 1,000 reports where the others have 100,000; its last report 3 s before its end
    facts = MetricInputs(START, START + 10 * HOUR - 3000, None)
    assert partial_code(START + 9 * HOUR, START + 10 * HOUR, 1000, "ON_TIME", facts) \
        == NOT_PARTIAL


def test_windows_cut_by_the_inputs_range_are_flagged_at_either_edge():
    # the inputs start 20 minutes into the first window and end 40 minutes into the last one
    facts = MetricInputs(START + 1_200_000, START + 9 * HOUR + 2_400_000, None)
    assert partial_code(START, START + HOUR, 1000, "ON_TIME", facts) == BEFORE_INPUTS
    assert partial_code(START + 9 * HOUR, START + 10 * HOUR, 1000, "ON_TIME", facts) \
        == AFTER_INPUTS
    assert partial_code(START + 4 * HOUR, START + 5 * HOUR, 1000, "ON_TIME", facts) \
        == NOT_PARTIAL
    # with 5 reports, a window 2/3 covered cannot be told from a complete one
    assert partial_code(START + 9 * HOUR, START + 10 * HOUR, 5, "ON_TIME", facts) \
        == NOT_PARTIAL


@pytest.mark.parametrize("edge", ["last", "first"])
def test_complete_windows_are_flagged_at_the_stated_rate(monkeypatch, edge):
    """At FALSE_FLAG = 0.05, 20,000 complete windows of 30 uniform reports: flagged ones are
    Binomial(20,000, 0.05), mean 1,000, sd 30.8; ±5 sd fails by chance with probability 6e-7."""
    monkeypatch.setattr(coverage, "FALSE_FLAG", 0.05)
    rng = np.random.default_rng(30)
    trials, n = 20_000, 30
    times = START + rng.integers(0, HOUR, size=(trials, n))
    flagged = 0
    for row in times:
        first, last = int(row.min()), int(row.max())
        facts = MetricInputs(first if edge == "first" else START - 1,
                             last if edge == "last" else START + HOUR, None)
        flagged += partial_code(START, START + HOUR, n, "ON_TIME", facts) != NOT_PARTIAL
    assert abs(flagged - trials * 0.05) <= 5 * np.sqrt(trials * 0.05 * 0.95)


def test_inputs_round_trip_through_the_output_folder(tmp_path):
    inputs = RunInputs()
    inputs.add("m", 10, 20)
    inputs.add("m", 5, 15)
    inputs.merge({"other": (1, 2)})
    inputs.watermark_ms = 99
    write_inputs(str(tmp_path), inputs)
    assert read_inputs(str(tmp_path)) == RunInputs({"m": (5, 20), "other": (1, 2)}, 99)
    (tmp_path / "inputs.json").write_text('{"ranges": 3}')
    assert read_inputs(str(tmp_path)) is None  # not a record of inputs: nothing is flagged
    assert read_inputs(str(tmp_path / "absent")) is None
