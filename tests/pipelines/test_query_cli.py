"""`ldp query` on the output of a small real job (simulated reports, FnApiRunner)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.ldp.estimation.queries import WindowEstimate
from ldp_telemetry.output.estimate import EstimateRecord
from ldp_telemetry.output.reader import read_estimates
from ldp_telemetry.output.names import printable
from ldp_telemetry.pipelines.cli import main
from tests.window_records import simulated_job_output

DAY_MS = 86_400_000
START_MS = 1_600_000_000_000 - 1_600_000_000_000 % DAY_MS  # 2020-09-13T00:00:00Z
LABELS = ["red", "green", "blue", "cyan", "magenta", "yellow", "black", "white"]
#: One metric per protocol beyond the GRR and OUE metrics, d = 12 (HR: K = 16 > d).
OTHER_PROTOCOLS = ("sue", "rue", "olh", "blh", "rlh", "hr", "ss", "rws")


@pytest.fixture(scope="module")
def output(tmp_path_factory):
    root = tmp_path_factory.mktemp("query")
    registry = parse_registry({"metrics": [
        {"name": "colour", "protocol": "oue", "epsilon": 1.5, "domain": {"labels": LABELS},
         "postprocess": {"method": "norm-hyb", "alpha": 2}},
        {"name": "hour", "protocol": "grr", "epsilon": 2.0, "domain": {"size": 24},
         "postprocess": "norm"},
        *({"name": f"size-{name}", "protocol": name, "epsilon": 1.0, "domain": {"size": 12},
           "postprocess": "base"} for name in OTHER_PROTOCOLS),
    ]})
    return simulated_job_output(registry, root, 3000, START_MS, 3 * DAY_MS,
                                np.random.default_rng(5))


def query(capsys, out, *args):
    code = main(["query", "--output", out, *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def query_json(capsys, out, *args):
    code, text, err = query(capsys, out, *args, "--json")
    assert code == 0, err
    return json.loads(text)


def window_record(out, metric, index):
    """The record, as the JSON the job wrote (`EstimateRecord.json_value`)."""
    return [r for r in read_estimates(out) if r.metric == metric][index].json_value()


def test_set_query_text_and_json(output, capsys):
    code, text, _ = query(capsys, output, "--metric", "colour", "--window", "0",
                          "--labels", "red,blue,white")
    assert code == 0
    assert "colour" in text and "norm-hyb (alpha=2)" in text and "set {red, blue, white}" in text
    assert "95% band: exact-variance" in text and "norm-reference" not in text
    result = query_json(capsys, output, "--metric", "colour", "--window", "0",
                        "--labels", "red,blue,white")
    record = EstimateRecord.from_json(window_record(output, "colour", 0))
    expected = WindowEstimate.from_record(record).set_sum(["red", "blue", "white"])
    (answer,) = result["answers"]
    assert answer["value"] == pytest.approx(expected.value)
    assert answer["std_error"] == pytest.approx(expected.std_error)
    # the band of the unbiased answer, not centred on the post-processed one
    assert answer["band_method"] == "exact-variance" and answer["band_reason"] is None
    assert [answer["lower95"], answer["upper95"]] == pytest.approx(
        [expected.unbiased_value - 1.959963984540054 * expected.std_error,
         expected.unbiased_value + 1.959963984540054 * expected.std_error])
    assert answer["half95"] == pytest.approx(1.959963984540054 * expected.std_error)
    assert answer["labels"] == ["red", "blue", "white"] and answer["query"] == "set"
    assert result["postprocess"] == {"method": "norm-hyb", "params": {"alpha": 2.0}}


def test_point_query_matches_the_record(output, capsys):
    record = window_record(output, "hour", 1)
    result = query_json(capsys, output, "--metric", "hour", "--window", record["window_start"],
                        "--labels", "5")
    (answer,) = result["answers"]
    assert answer["query"] == "point" and answer["std_error_kind"] == "exact"
    assert answer["value"] == pytest.approx(record["estimate"][5])
    assert answer["unbiased_value"] == pytest.approx(record["unbiased_estimate"][5])


@pytest.mark.parametrize("metric", ["colour", "hour", "size-hr"])
def test_top_k_answers_carry_the_rank_conditional_union(output, capsys, metric):
    """`ldp query --top K`, text and --json: no answer has a 95% band (band_method none, its
    reason naming the family's measured coverage and benchmark); each gives beside it the
    conservative band top_k_rank_conditional_bands makes from the record
    (`conservative_lower`, `conservative_upper`, `conservative_method`), holding both the
    union of the bootstrap and the score band (`top_k_bands`) and, for an answer the
    post-processing did not merge with another value, its band conditional on its rank; the
    text prints each band labelled conservative, never ±, and its last lines name it."""
    from ldp_telemetry.ldp.estimation.frequency_bands import top_k_conservative_reason
    from ldp_telemetry.output.text import BAND_NOTE, CONSERVATIVE_NOTE
    from ldp_telemetry.ldp.estimation.frequency_bands import (merged_answers, top_k_bands,
                                                              top_k_rank_conditional_bands)
    from ldp_telemetry.ldp.estimation.postprocess import error_plug_in
    from ldp_telemetry.ldp.estimation.selective_bands import selective_bands
    top = query_json(capsys, output, "--metric", metric, "--window", "0", "--top", "4")
    answers = top["answers"]
    assert [(a["band_method"], a["lower95"], a["upper95"], a["half95"]) for a in answers] == [
        ("none", None, None, None)] * 4
    assert [a["band_reason"] for a in answers] == [top_k_conservative_reason("pure")] * 4
    assert [a["conservative_method"] for a in answers] == ["rank-conditional-union"] * 4
    record = next(r for r in read_estimates(output, metric))
    window = WindowEstimate.from_record(record)
    run = window._postprocessor
    lower, upper = top_k_rank_conditional_bands(window.unbiased, window.noise, window.protocol,
                                                run, 4)
    assert [a["conservative_lower"] for a in answers] == pytest.approx(list(lower), abs=1e-12)
    assert [a["conservative_upper"] for a in answers] == pytest.approx(list(upper), abs=1e-12)
    answers = [{**a, "lower95": a["conservative_lower"], "upper95": a["conservative_upper"]}
               for a in answers]  # the checks of the band below
    order = np.array([a["indices"][0] for a in answers])
    union_lower, union_upper = top_k_bands(window.unbiased, window.noise, run, 4)
    rank_lower, rank_upper = selective_bands(window.unbiased, window.protocol, window.n,
                                             error_plug_in(window.unbiased), order)
    merged = merged_answers(window.estimate, window.unbiased, order)
    for i, answer in enumerate(answers):
        assert answer["lower95"] <= union_lower[i] and union_upper[i] <= answer["upper95"]
        if not merged[i] and rank_lower[i] < rank_upper[i]:
            assert answer["lower95"] <= rank_lower[i] and rank_upper[i] <= answer["upper95"]
        assert 0.0 <= answer["lower95"] <= answer["upper95"] <= 1.0
    code, text, err = query(capsys, output, "--metric", metric, "--window", "0", "--top", "4")
    assert code == 0, err
    lines = text.splitlines()
    assert lines[5].startswith("  (95% band: none; conservative band: rank-conditional-union;")
    assert BAND_NOTE not in text and "±" not in text
    assert lines[6:] == [f"  ({CONSERVATIVE_NOTE})", f"  ({top_k_conservative_reason('pure')})"]
    for answer, line in zip(answers, lines[1:5], strict=True):
        assert line.split("  (s.e.")[0].endswith(
            f" [{answer['lower95']:.5f}, {answer['upper95']:.5f}] conservative"), line


def test_window_by_iso_variants_and_index(output, capsys):
    starts = [r.window_start for r in read_estimates(output, "colour")]
    assert len(starts) == 3
    by_index = query_json(capsys, output, "--metric", "colour", "--window", "-1", "--top", "2")
    for spelling in (starts[-1], starts[-1].replace("Z", "+00:00"), starts[-1].rstrip("Z")):
        again = query_json(capsys, output, "--metric", "colour", "--window", spelling,
                           "--top", "2")
        assert again == by_index
    assert by_index["window_start"] == starts[-1]


def test_top_k_and_range(output, capsys):
    top = query_json(capsys, output, "--metric", "colour", "--window", "0", "--top", "3")
    values = [a["value"] for a in top["answers"]]
    assert len(values) == 3 and values == sorted(values, reverse=True)
    assert {a["band_method"] for a in top["answers"]} == {"none"}
    assert {a["conservative_method"] for a in top["answers"]} == {"rank-conditional-union"}
    record = window_record(output, "colour", 0)
    assert [a["labels"][0] for a in top["answers"]] == \
        [LABELS[i] for i in np.argsort(-np.asarray(record["estimate"]), kind="stable")[:3]]
    by_label = query_json(capsys, output, "--metric", "colour", "--window", "0",
                          "--range", "green", "cyan")
    by_index = query_json(capsys, output, "--metric", "colour", "--window", "0",
                          "--range", "1", "3")
    assert by_label["answers"] == by_index["answers"]
    assert by_label["answers"][0]["labels"] == ["green", "blue", "cyan"]
    hours = query_json(capsys, output, "--metric", "hour", "--window", "0", "--range", "6", "17")
    assert hours["answers"][0]["indices"] == list(range(6, 18))
    code, text, _ = query(capsys, output, "--metric", "hour", "--window", "0", "--range", "6", "17")
    assert code == 0 and "range 6..17 (12 values)" in text and "exact" in text


def test_method_override(output, capsys):
    record = window_record(output, "colour", 0)
    result = query_json(capsys, output, "--metric", "colour", "--window", "0", "--labels",
                        "red,green", "--method", "post-pos")
    (answer,) = result["answers"]
    assert result["postprocess"]["method"] == "post-pos"
    assert answer["std_error_kind"] == "exact" and answer["band_method"] == "exact-variance"
    assert answer["lower95"] + answer["half95"] == pytest.approx(answer["unbiased_value"])
    assert answer["value"] == pytest.approx(max(0.0, sum(record["unbiased_estimate"][:2])))
    hyb = query_json(capsys, output, "--metric", "colour", "--window", "0", "--top", "1",
                     "--method", "norm-hyb", "--param", "alpha=0.5")
    assert hyb["postprocess"] == {"method": "norm-hyb", "params": {"alpha": 0.5}}


@pytest.mark.parametrize("protocol", OTHER_PROTOCOLS)
def test_set_and_range_queries_on_every_protocol(output, capsys, protocol):
    metric = f"size-{protocol}"
    window = WindowEstimate.from_record(EstimateRecord.from_json(window_record(output, metric, 0)))
    result = query_json(capsys, output, "--metric", metric, "--window", "0", "--labels", "1,4,7")
    (answer,) = result["answers"]
    expected = window.set_sum(["1", "4", "7"])
    assert answer["value"] == pytest.approx(expected.value)
    assert answer["std_error"] == pytest.approx(expected.std_error)
    assert answer["std_error_kind"] == "exact" and 0 < answer["std_error"] < 1
    ranged = query_json(capsys, output, "--metric", metric, "--window", "0", "--range", "2", "9",
                        "--method", "norm")
    (answer,) = ranged["answers"]
    assert answer["indices"] == list(range(2, 10)) and answer["std_error_kind"] == "exact"
    assert answer["std_error"] == pytest.approx(
        window.with_method("norm").range_sum(2, 9).std_error)


@pytest.mark.parametrize("args, message", [
    (["--metric", "colour", "--window", "2001-01-01T00:00:00Z", "--top", "1"],
     "has no window '2001-01-01T00:00:00Z'; its 3 window(s) start at: [0] 2020-09-13T00:00:00Z"),
    (["--metric", "colour", "--window", "7", "--top", "1"], "has no window '7'"),
    (["--metric", "colour", "--window", "yesterday", "--top", "1"], "neither ISO-8601"),
    (["--metric", "size", "--window", "0", "--top", "1"], "metrics: colour, hour, size-blh"),
    (["--metric", "colour", "--window", "0", "--labels", "red,mauve"], "'mauve' is not a label"),
    (["--metric", "colour", "--window", "0", "--labels", "red,red"], "more than once"),
    (["--metric", "colour", "--window", "0", "--range", "cyan", "red"], "empty range"),
    (["--metric", "colour", "--window", "0", "--top", "0"], "positive integer"),
    (["--metric", "colour", "--window", "0", "--top", "1", "--param", "alpha=1"],
     "--param needs --method"),
    (["--metric", "colour", "--window", "0", "--top", "1", "--method", "norm-sub", "--param",
      "alpha=1"], "unknown parameter(s) 'alpha'"),
    (["--metric", "colour", "--window", "0", "--top", "1", "--method", "best"],
     "unknown post-processing method"),
])
def test_errors(output, capsys, args, message):
    code, _, err = query(capsys, output, *args)
    assert code == 2 and message in err, err


def test_query_needs_exactly_one_kind_of_query(output, capsys):
    with pytest.raises(SystemExit):
        main(["query", "--output", output, "--metric", "colour", "--window", "0",
              "--top", "1", "--labels", "red"])
    capsys.readouterr()


def test_show_and_query_agree_on_the_band_and_pick_windows_alike(output, capsys):
    """One band per value in `show` and `query` (the exact band of the unbiased estimate, here
    around a norm-hyb estimate, so printed as [lower, upper]), each saying so; a time inside a
    window names it in both; `show --last` and `--window` select windows."""
    from ldp_telemetry.ldp.base.times import iso_from_ms, ms_from_iso
    from ldp_telemetry.output.bands import value_bands
    record = window_record(output, "colour", 1)
    inside = iso_from_ms(ms_from_iso(record["window_start"]) + 3_600_000)  # an hour in
    top = max(range(len(record["estimate"])),  # the value norm-hyb moved most
              key=lambda i: abs(record["estimate"][i] - record["unbiased_estimate"][i]))
    label = record["labels"][top]
    assert abs(record["estimate"][top] - record["unbiased_estimate"][top]) > 1e-6
    code, text, _ = query(capsys, output, "--metric", "colour", "--window", inside,
                          "--labels", label)
    assert code == 0 and "±" not in text  # the one band is printed [lower, upper]: no ± note
    assert "95% band: exact-variance" in text
    answer = query_json(capsys, output, "--metric", "colour", "--window", inside,
                        "--labels", label)
    assert answer["window_start"] == record["window_start"]
    (point,) = answer["answers"]
    lower, upper = value_bands(record)  # the score band of the unbiased estimate
    low, high = lower[top], upper[top]
    assert [point["lower95"], point["upper95"]] == pytest.approx([low, high], rel=1e-12)
    assert point["half95"] == pytest.approx((high - low) / 2, rel=1e-12)
    assert f"[{low:.5f}, {high:.5f}]" in text
    assert main(["show", "--output", output, "--metric", "colour", "--window", inside,
                 "--top", str(len(LABELS))]) == 0
    shown = capsys.readouterr().out.splitlines()
    assert "±" not in "\n".join(shown)  # every band is printed [lower, upper]: no ± note
    assert shown[0] == ("(each value's band is its own, not adjusted for the value being among "
                        "the largest: `ldp query --top K` gives each a conservative band "
                        "(not a 95% band), or says why it has none)")
    assert record["window_start"] in shown[1]
    assert "95% band: exact-variance of the unbiased estimate" in shown[1]
    (line,) = [line.split() for line in shown[2:] if line.split()[:1] == [label]]
    assert line == [label, f"{record['estimate'][top]:.4f}", f"[{low:.4f},", f"{high:.4f}]"]
    assert main(["show", "--output", output, "--metric", "colour", "--last", "2"]) == 0
    starts = [r.window_start for r in read_estimates(output, "colour")]
    lines = capsys.readouterr().out
    assert starts[-1] in lines and starts[-2] in lines and starts[0] not in lines


def test_the_plus_minus_note_is_printed_only_where_a_value_is_printed_with_a_plus_minus(
        output, capsys):
    """`ldp show` and `ldp query` say what ± means (BAND_NOTE: the half width of the 95% band)
    where a value is printed ± the half width of its band, its centre (SUE's unbiased estimate,
    `base`), and nowhere else: a band printed [lower, upper] (around a post-processed value, or
    a score band) or no band needs no note."""
    from ldp_telemetry.output.text import BAND_NOTE
    assert main(["show", "--output", output, "--metric", "size-sue", "--windows", "1"]) == 0
    shown = capsys.readouterr().out
    assert shown.splitlines()[0] == f"({BAND_NOTE})" and shown.count(" ± ") >= 5
    assert main(["show", "--output", output, "--metric", "colour", "--windows", "1"]) == 0
    shown = capsys.readouterr().out
    assert "±" not in shown and " [" in shown.splitlines()[2]
    code, text, _ = query(capsys, output, "--metric", "size-sue", "--window", "0", "--labels", "3")
    assert code == 0 and " ± " in text.splitlines()[1] and f"; {BAND_NOTE};" in text
    for asked in (["--labels", "red"], ["--labels", "red", "--method", "base"], ["--top", "3"],
                  ["--top", "2", "--method", "power"]):
        code, text, _ = query(capsys, output, "--metric", "colour", "--window", "0", *asked)
        assert code == 0 and "±" not in text and "(95% band: " in text, asked


def test_an_answer_without_a_band_says_so_and_why(output, capsys):
    """Top-k answers of Power (whose bootstrap band is not measured) print no ± and name the
    reason; their JSON carries band_method none, null bounds and the reason."""
    code, text, _ = query(capsys, output, "--metric", "colour", "--window", "0", "--top", "2",
                          "--method", "power")
    assert code == 0 and "(no band)" in text and "±" not in text.split("(95% band")[0]
    assert "no band for top-k answers of power" in text and "95% band: none" in text
    result = query_json(capsys, output, "--metric", "colour", "--window", "0", "--top", "2",
                        "--method", "power")
    for answer in result["answers"]:
        assert (answer["band_method"], answer["lower95"], answer["half95"]) == ("none", None, None)
        assert answer["band_reason"].startswith("no band for top-k answers of power")


def test_names_from_the_data_are_shown_escaped_and_can_be_typed_back_as_shown(output, capsys,
                                                                            tmp_path):
    """A label with a control character, a bidirectional override or a backslash is printed
    as `printable` shows it (never raw to the terminal), and typed back as shown it names the
    same value; where no label shows as the text typed, the text is the label itself."""
    record = window_record(output, "colour", 0)
    bell, override, backslash, typed_out = "a\x07", "cpu\u202elanigiro", "c:\\tmp", "a\\x07"
    record["metric"] = "colour\x1b[2J"
    record["labels"] = [bell, override, backslash, typed_out, *record["labels"][4:]]
    (tmp_path / "estimates-00000-of-00001.jsonl").write_text(json.dumps(record) + "\n")
    shown = [printable(label) for label in (bell, override, backslash, typed_out)]
    assert shown == ["a\\x07", "cpu\\u202elanigiro", "c:\\\\tmp", "a\\\\x07"]
    for index, name in enumerate(shown):
        code, text, err = query(capsys, str(tmp_path), "--metric", record["metric"],
                                "--window", "0", "--labels", name)
        assert code == 0, err
        assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text
        assert f"  {name} " in text and text.startswith("colour\\x1b[2J  [")
        answer = query_json(capsys, str(tmp_path), "--metric", record["metric"], "--window",
                            "0", "--labels", name)["answers"][0]
        assert answer["indices"] == [index] and answer["value"] == record["estimate"][index]
    # typed as it is: the label itself, where no label shows as the text typed
    answer = query_json(capsys, str(tmp_path), "--metric", record["metric"], "--window", "0",
                        "--labels", backslash)["answers"][0]
    assert answer["indices"] == [2]
    code, _, err = query(capsys, str(tmp_path), "--metric", record["metric"], "--window", "0",
                         "--labels", "nothing\x1b[31m")
    assert code == 2 and "\x1b" not in err and "\x07" not in err and "\u202e" not in err
    assert "nothing" in err and "cpu\\u202elanigiro" in err


def test_a_range_of_labels_is_typed_as_shown(output, capsys, tmp_path):
    """--range LO HI takes labels as the text output shows them, as --labels does: the range
    text prints `printable` labels, and typed back they name the same values."""
    record = window_record(output, "colour", 0)
    bell, backslash = "a\x07", "c:\\tmp"
    record["labels"] = [bell, "b", backslash, *record["labels"][3:]]
    (tmp_path / "estimates-00000-of-00001.jsonl").write_text(json.dumps(record) + "\n")
    args = ("--metric", "colour", "--window", "0", "--range", printable(bell),
            printable(backslash))
    answer = query_json(capsys, str(tmp_path), *args)["answers"][0]
    assert answer["indices"] == [0, 1, 2]
    assert answer["value"] == pytest.approx(sum(record["estimate"][:3]))
    code, text, err = query(capsys, str(tmp_path), *args)
    assert code == 0, err
    assert f"range {printable(bell)}..{printable(backslash)} (3 values)" in text


@pytest.mark.parametrize("typed", ["\\U00110000", "\\Uffffffff", "\\Udeadbeef"])
def test_an_escape_of_no_character_is_no_shown_name(output, capsys, typed):
    """A \\U escape beyond U+10FFFF is not what `printable` shows of any name: from_printable
    says so (None) and ldp query reads the text as typed, a label it does not know (exit 2),
    instead of failing in chr()."""
    from ldp_telemetry.output.names import from_printable, typed_name
    assert from_printable(typed) is None
    assert typed_name(typed, LABELS) == typed
    code, _, err = query(capsys, output, "--metric", "colour", "--window", "0", "--labels", typed)
    assert code == 2 and "is not a label" in err


def test_a_label_with_a_comma_or_outer_spaces_is_asked_whole_with_label(output, capsys,
                                                                          tmp_path):
    """--labels splits on commas and strips spaces, so "a, b" names two labels; --label takes
    one label whole (repeatable), as typed or as the text shows it."""
    record = window_record(output, "colour", 0)
    comma, spaced, bell = "red, green", " blue ", "a\x07"
    record["labels"] = [comma, spaced, bell, *record["labels"][3:]]
    (tmp_path / "estimates-00000-of-00001.jsonl").write_text(json.dumps(record) + "\n")
    args = ("--metric", "colour", "--window", "0")
    answer = query_json(capsys, str(tmp_path), *args, "--label", comma)["answers"][0]
    assert answer["indices"] == [0] and answer["value"] == record["estimate"][0]
    answer = query_json(capsys, str(tmp_path), *args, "--label", comma, "--label", spaced,
                        "--label", printable(bell))["answers"][0]
    assert answer["indices"] == [0, 1, 2]
    assert answer["value"] == pytest.approx(sum(record["estimate"][:3]))
    code, _, err = query(capsys, str(tmp_path), *args, "--labels", comma)
    assert code == 2 and "'red'" in err  # split: "red" is no label of this window
    with pytest.raises(SystemExit) as usage:
        query(capsys, str(tmp_path), *args, "--label", "red", "--labels", "blue")
    assert usage.value.code == 2 and "not allowed with argument" in capsys.readouterr().err
