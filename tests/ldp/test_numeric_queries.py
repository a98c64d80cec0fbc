"""Range and quantile queries on a numeric record, by hand, and through `ldp query`."""
from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from ldp_telemetry.ldp.estimation.numeric_queries import (QUANTILE_BAND_NOT_FINITE_REASON,
                                                          NumericWindow)
from ldp_telemetry.output.estimate import EstimateRecord
from ldp_telemetry.pipelines.cli import main

RECORD = EstimateRecord(
    metric="rtt", start_ms=1_709_251_200_000, end_ms=1_709_337_600_000, n=100, protocol="sw",
    epsilon=1.0,
    estimator={"method": "ems", "params": {}, "iterations": 7, "last_change": 1e-4},
    bucket_edges=[0.0, 100.0, 200.0, 400.0], estimate=[0.2, 0.3, 0.5],
    quantile_std_errors={"0.5": 12.5})


def test_range_probability_spreads_mass_uniformly_within_buckets():
    window = NumericWindow.from_record(RECORD)
    assert window.range_probability(0, 400).value == pytest.approx(1.0)
    assert window.range_probability(50, 150).value == pytest.approx(0.1 + 0.15)
    assert window.range_probability(300, 1000).value == pytest.approx(0.25)
    assert window.range_probability(-5, -1).value == 0
    with pytest.raises(ValueError, match="LO <= HI"):
        window.range_probability(5, 1)


def test_quantiles_and_their_errors():
    window = NumericWindow.from_record(RECORD)
    median = window.quantile(0.5)  # CDF: 0.2 at 100, 0.5 at 200
    assert median.value == pytest.approx(200.0) and median.std_error == 12.5
    assert window.quantile(0.75).value == pytest.approx(300.0)
    assert window.quantile(0.75).std_error is None
    with pytest.raises(ValueError):
        window.quantile(1.5)
    with pytest.raises(ValueError, match="not numeric"):
        NumericWindow.from_record(dataclasses.replace(RECORD, metric="x", bucket_edges=None))


def test_query_cli_on_a_numeric_metric(tmp_path, capsys):
    (tmp_path / "estimates-00000-of-00001.jsonl").write_text(
        RECORD.to_json()
        + "\n")
    assert main(["query", "--output", str(tmp_path), "--metric", "rtt", "--window", "0",
                 "--quantile", "0.5,0.75", "--json"]) == 0
    answers = json.loads(capsys.readouterr().out)["answers"]
    assert [a["value"] for a in answers] == pytest.approx([200.0, 300.0])
    assert main(["query", "--output", str(tmp_path), "--metric", "rtt", "--window", "0",
                 "--range", "50", "150"]) == 0
    text = capsys.readouterr().out
    assert "0.25" in text
    assert "s.e." not in text  # the answer has no standard error, so the text names no kind
    # a quantile at a level the record does not keep has none either; the text says which
    # levels have one, and no longer names the mean (its standard error is exact)
    assert main(["query", "--output", str(tmp_path), "--metric", "rtt", "--window", "0",
                 "--quantile", "0.3"]) == 0
    text = capsys.readouterr().out
    assert ("(no standard error: the record keeps bootstrap errors for the quantiles at levels "
            "0.01, 0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99 only)") in text
    assert "mean" not in text
    assert main(["query", "--output", str(tmp_path), "--metric", "rtt", "--window", "0",
                 "--top", "2"]) != 0
    assert "is numeric" in capsys.readouterr().err
    assert main(["query", "--output", str(tmp_path), "--metric", "rtt", "--window", "0",
                 "--label", "1"]) == 2
    assert "is numeric" in capsys.readouterr().err
    assert np.isfinite(NumericWindow.from_record(RECORD).estimate).all()


def test_the_plus_minus_note_is_printed_only_with_a_plus_minus(tmp_path, capsys):
    """`ldp query` on a numeric metric says what ± means (BAND_NOTE) only where an answer is
    printed ± the half width of its band (a record written before `band_method`: estimate ±
    z · bootstrap standard error), not beside a record's own band printed [lower, upper] nor
    beside an answer with no band."""
    from ldp_telemetry.output.text import BAND_NOTE
    banded = dataclasses.replace(RECORD, metric="banded", band_method="bias-corrected-bootstrap",
                                 bands={"0.5": {"lower": 150.0, "upper": 260.0}})
    (tmp_path / "estimates-00000-of-00001.jsonl").write_text(
        RECORD.to_json() + "\n" + banded.to_json() + "\n")
    ask = ["query", "--output", str(tmp_path), "--window", "0"]
    assert main([*ask, "--metric", "rtt", "--quantile", "0.5"]) == 0
    text = capsys.readouterr().out
    assert f" ± {1.959963984540054 * 12.5:.5g}" in text and f"({BAND_NOTE}; s.e. bootstrap)" in text
    assert main([*ask, "--metric", "banded", "--quantile", "0.5"]) == 0
    text = capsys.readouterr().out
    assert "95% band [150, 260]" in text and "±" not in text and "(s.e. bootstrap)" in text
    for metric in ("rtt", "banded"):
        assert main([*ask, "--metric", metric, "--range", "50", "150"]) == 0
        text = capsys.readouterr().out
        assert "±" not in text and "0.25" in text, metric


def test_query_json_prints_no_band_the_record_declares(tmp_path, capsys):
    """`half95` of a numeric answer is its record's band's (null where the record declares
    none, half of [lower, upper] otherwise), as the text prints it; it was 1.96 · s.e. even
    for a quantile whose record says it has no calibrated band. A record written before
    `band_method` keeps value ± 1.96 · s.e."""
    banded = dataclasses.replace(
        RECORD, band_method="bias-corrected-bootstrap",
        bands={"0.5": None, "0.75": {"lower": 240.0, "upper": 330.0}},
        band_reasons={"0.5": "no calibrated band"},
        quantile_std_errors={"0.5": 12.5, "0.75": 20.0})
    for record, expected in ((banded, [None, 45.0]), (RECORD, [1.959963984540054 * 12.5, None])):
        (tmp_path / "estimates-00000-of-00001.jsonl").write_text(record.to_json() + "\n")
        assert main(["query", "--output", str(tmp_path), "--metric", "rtt", "--window", "0",
                     "--quantile", "0.5,0.75", "--json"]) == 0
        answers = json.loads(capsys.readouterr().out)["answers"]
        assert [a["half95"] for a in answers] == pytest.approx(expected)
        assert main(["query", "--output", str(tmp_path), "--metric", "rtt", "--window", "0",
                     "--quantile", "0.5"]) == 0
        text = capsys.readouterr().out
        assert ("(no band)" in text) == (record is banded)


def test_a_mean_only_record_has_no_range_nor_quantile(tmp_path, capsys):
    """`sr` and `pm` records keep the mean only (an empty estimate over the domain's two
    edges): a range or a quantile is refused by name, not answered with a shape error."""
    mean_only = dataclasses.replace(
        RECORD, protocol="pm", estimator={"method": "mean", "params": {}, "iterations": None,
                                          "last_change": None},
        bucket_edges=[0.0, 100.0], estimate=[], quantile_std_errors={})
    window = NumericWindow.from_record(mean_only)
    with pytest.raises(ValueError, match="no range to answer") as error:
        window.range_probability(0, 50)
    assert error.value.field == "range"
    with pytest.raises(ValueError, match="no quantile to answer") as error:
        window.quantile(0.5)
    assert error.value.field == "quantile"
    (tmp_path / "estimates-00000-of-00001.jsonl").write_text(mean_only.to_json() + "\n")
    for query in (["--range", "0", "50"], ["--quantile", "0.5"]):
        assert main(["query", "--output", str(tmp_path), "--metric", "rtt", "--window", "0",
                     *query]) == 2
        assert "estimates the mean only" in capsys.readouterr().err


def test_a_quantiles_band_reason_is_read_from_the_record_and_printed_escaped(tmp_path, capsys):
    """A quantile answer carries the record's `band_reasons` entry for its level (what its band
    holds, or why it has none); the text prints each reason once with its levels, escaped (a
    record file is data: its text must not drive the terminal)."""
    declared = "no band: measured 0.88 \x1b[2J"
    record = dataclasses.replace(
        RECORD, band_method="bias-corrected-bootstrap",
        bands={"0.5": {"lower": 150.0, "upper": 250.0}, "0.75": None, "0.9": None},
        band_reasons={"0.75": declared, "0.9": declared})
    window = NumericWindow.from_record(record)
    assert window.quantile(0.5).band_reason is None
    assert window.quantile(0.75).band_reason == declared
    # not one of the record's levels: said, not silent (before band_method: nothing to say)
    assert window.quantile(0.8).band_reason.startswith("no band: the record keeps bands at "
                                                       "the levels 0.01, 0.05,")
    assert NumericWindow.from_record(RECORD).quantile(0.8).band_reason is None
    (tmp_path / "estimates-00000-of-00001.jsonl").write_text(record.to_json() + "\n")
    query = ["query", "--output", str(tmp_path), "--metric", "rtt", "--window", "0",
             "--quantile", "0.5,0.75,0.9"]
    assert main([*query, "--json"]) == 0
    answers = json.loads(capsys.readouterr().out)["answers"]
    assert [a["band_reason"] for a in answers] == [None, declared, declared]
    assert main(query) == 0
    text = capsys.readouterr().out
    assert "\x1b" not in text
    assert text.count("no band: measured 0.88 \\x1b[2J") == 1
    assert "(quantile 0.75, 0.9: no band: measured 0.88 \\x1b[2J)" in text


def test_a_quantiles_band_method_read_from_the_record_is_printed_escaped(tmp_path, capsys):
    """The text names the record's `band_method` after a quantile's band: read from a file, it
    is escaped as `ldp show` escapes it (it must not drive the terminal); --json keeps it."""
    method = "bias-corrected\x1b[2J-bootstrap"
    record = dataclasses.replace(RECORD, band_method=method,
                                 bands={"0.5": {"lower": 150.0, "upper": 250.0}})
    (tmp_path / "estimates-00000-of-00001.jsonl").write_text(record.to_json() + "\n")
    query = ["query", "--output", str(tmp_path), "--metric", "rtt", "--window", "0",
             "--quantile", "0.5"]
    assert main(query) == 0
    text = capsys.readouterr().out
    assert "\x1b" not in text and "(bias-corrected\\x1b[2J-bootstrap)" in text
    assert main([*query, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["answers"][0]["band_method"] == method


def test_a_quantile_band_that_is_not_finite_in_the_file_is_no_band(tmp_path, capsys):
    """A record read from a file whose quantile band holds NaN (or infinity) gives that
    quantile no band, saying why, instead of printing [nan, …] and writing NaN, which is not
    JSON, into --json."""
    record = dataclasses.replace(
        RECORD, band_method="bias-corrected-bootstrap",
        bands={"0.5": {"lower": float("nan"), "upper": 250.0},
               "0.75": {"lower": 200.0, "upper": float("inf")},
               "0.9": {"lower": 300.0, "upper": 400.0}})
    window = NumericWindow.from_record(record)
    for level in (0.5, 0.75):
        answer = window.quantile(level)
        assert answer.band is None and answer.band_reason == QUANTILE_BAND_NOT_FINITE_REASON
    assert window.quantile(0.9).band == (300.0, 400.0)
    (tmp_path / "estimates-00000-of-00001.jsonl").write_text(record.to_json() + "\n")
    query = ["query", "--output", str(tmp_path), "--metric", "rtt", "--window", "0",
             "--quantile", "0.5,0.75,0.9"]
    assert main([*query, "--json"]) == 0

    def refuse(constant):
        raise AssertionError(f"{constant} is not JSON")
    answers = json.loads(capsys.readouterr().out, parse_constant=refuse)["answers"]
    assert [a["band95"] for a in answers] == [None, None, [300.0, 400.0]]
    assert main(query) == 0
    text = capsys.readouterr().out
    assert "nan" not in text.lower() and text.count("(no band)") == 2
    assert f"(quantile 0.5, 0.75: {QUANTILE_BAND_NOT_FINITE_REASON})" in text


def test_a_quantile_whose_record_kept_no_bootstrap_error_has_none(tmp_path, capsys):
    """A record made with fewer than 2 bootstrap replicates keeps NaN quantile errors: the
    answer has no standard error (null in JSON, where NaN is no valid number), the text
    prints no "nan" and says why, and the levels note stays for levels the record never keeps."""
    from ldp_telemetry.pipelines.query_text import NO_QUANTILE_ERROR_NOTE
    record = dataclasses.replace(RECORD, quantile_std_errors={"0.5": float("nan")})
    assert NumericWindow.from_record(record).quantile(0.5).std_error is None
    (tmp_path / "estimates-00000-of-00001.jsonl").write_text(record.to_json() + "\n")
    ask = ["query", "--output", str(tmp_path), "--metric", "rtt", "--window", "0"]
    assert main([*ask, "--quantile", "0.5"]) == 0
    text = capsys.readouterr().out
    assert "nan" not in text and NO_QUANTILE_ERROR_NOTE in text
    assert "keeps bootstrap errors for the quantiles at levels" not in text
    assert main([*ask, "--quantile", "0.5,0.3"]) == 0
    text = capsys.readouterr().out
    assert NO_QUANTILE_ERROR_NOTE in text and "at levels 0.01, 0.05" in text
    assert main([*ask, "--quantile", "0.5", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["answers"][0]["std_error"] is None
