"""`ldp query` on a string metric prints each heavy hitter through `printable`, as `ldp show`
and the dashboard do: a string from the fleet cannot recolour, reorder or hide the terminal's
text; `--json` keeps the strings as they are."""
from __future__ import annotations

import argparse
import json

import pytest

from ldp_telemetry.ldp.base.errors import ConfigError
from ldp_telemetry.output.estimate import EstimateRecord
from ldp_telemetry.pipelines.heavy_hitter_query import answer_heavy_hitters

LABELS = ["mail", "\x1b[31mred", "\u202eexe"]


def record() -> EstimateRecord:
    return EstimateRecord.from_json({
        "metric": "app", "window_start": "2024-03-01T00:00:00Z",
        "window_end": "2024-03-01T01:00:00Z", "n": 1000, "protocol": "pem", "epsilon": 4.0,
        "labels": LABELS, "estimate": [0.3, 0.2, 0.1], "unbiased_estimate": [0.3, 0.2, 0.1],
        "std_error": [0.01, 0.01, 0.01], "postprocess": {"method": "none"},
        "heavy_hitters": {"top": 10, "threshold": 0.0, "width": 20, "level_reports": [100]},
        "pane": {"timing": "ON_TIME", "index": 0, "is_last": True}})


def answer(**flags) -> str:
    return answer_heavy_hitters(record(), argparse.Namespace(
        **{"top": None, "labels": None, "label": None, "json": False, "metric": "app",
           **flags}))


def test_the_text_escapes_control_and_bidirectional_characters():
    text = answer(top=3)
    assert "\x1b" not in text and "\u202e" not in text
    assert "\\x1b[31mred" in text and "\\u202eexe" in text


def test_json_keeps_the_strings():
    answers = json.loads(answer(top=3, json=True))["answers"]
    assert [a["labels"][0] for a in answers] == LABELS


def test_a_string_is_asked_for_as_the_text_shows_it():
    answers = json.loads(answer(labels="\\x1b[31mred,\\u202eexe,mail", json=True))["answers"]
    assert [a["labels"][0] for a in answers] == [LABELS[1], LABELS[2], LABELS[0]]
    assert [a["value"] for a in answers] == [0.2, 0.1, 0.3]


def test_a_string_is_asked_for_whole_with_label():
    """--label names one heavy hitter whole (repeatable), as --labels does after splitting; an
    unknown one is refused naming --label."""
    answers = json.loads(answer(label=["\\x1b[31mred", "mail"], json=True))["answers"]
    assert [a["labels"][0] for a in answers] == [LABELS[1], LABELS[0]]
    with pytest.raises(ConfigError) as refused:
        answer(label=["red, mail"])
    assert refused.value.field == "label"


def test_the_metric_from_the_record_is_escaped_too():
    """The window line names the record's metric through `printable`, as ldp query's other
    answers do: a metric name read from a file cannot reach the terminal raw."""
    hostile = EstimateRecord.from_json({**record().json_value(), "metric": "app\x1b[2J"})
    text = answer_heavy_hitters(hostile, argparse.Namespace(
        top=3, labels=None, json=False, metric="app\x1b[2J"))
    assert "\x1b" not in text and text.startswith("app\\x1b[2J  [")


@pytest.mark.parametrize("flags", [{"top": 3}, {"labels": "mail"}], ids=["top", "labels"])
def test_a_heavy_hitter_has_no_95_band_and_keeps_its_standard_error(flags):
    """A heavy hitter was selected by the search for its estimate, and no benchmark measured
    how often estimate ± 1.96 s.e. holds the truth of the strings found: `ldp query` gives it
    no 95% band (band_method none, lower95, upper95 and half95 null, band_reason saying why and
    naming the benchmark that measured the search), keeps its standard error, and prints no ±
    and no ± note, in JSON and in the text."""
    from ldp_telemetry.ldp.estimation.heavy_hitters import HEAVY_HITTER_BAND_REASON
    from ldp_telemetry.output.text import BAND_NOTE
    answers = json.loads(answer(json=True, **flags))["answers"]
    assert [(a["band_method"], a["lower95"], a["upper95"], a["half95"], a["band_reason"])
            for a in answers] == [("none", None, None, None, HEAVY_HITTER_BAND_REASON)] * len(
                answers)
    assert all(a["std_error"] == 0.01 for a in answers)
    assert "benchmarks/open_domains.py" in HEAVY_HITTER_BAND_REASON
    lines = answer(**flags).splitlines()
    assert "±" not in "\n".join(lines) and BAND_NOTE not in "\n".join(lines)
    assert all(line.endswith(" (no band)  (s.e. 0.01000)") for line in lines[1:-2]), lines
    assert lines[-2:] == ["  (95% band: none; s.e. of the prefix-extension estimate)",
                          f"  (no band: {HEAVY_HITTER_BAND_REASON})"]


def test_the_coverage_summary_declares_the_heavy_hitters_without_a_band():
    """The coverage summary (docs/error-bars.md) lists a string metric's heavy hitters (its
    records' values and `ldp query`'s answers) among those declared without a band, naming the
    benchmark that measured the search only."""
    from tests.benchmark_scripts import loaded_scripts
    with loaded_scripts("coverage_summary") as scripts:
        rows = scripts["coverage_summary"].summary()
    (row,) = [row for row in rows if row["family"].startswith("heavy hitters")]
    assert (row["band"], row["pairs"]) == ("none", 0)
    assert "its records" in row["family"]  # the records' values, not only ldp query's
    assert "benchmarks/open_domains.py" in row["note"]
