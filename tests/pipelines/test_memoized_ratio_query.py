"""`ldp query --top` on memoized records at lifetime / report budget ratios ε∞ / ε1 inside and
outside the range the memoized top-k bands were measured at (frequency_bands.
TOP_K_LIFETIME_RANGE, benchmarks/pooled_top_k.py --lifetime-factor), for channels that move with
the ratio (memoized RUE) and channels that do not (frequency_bands.ratio_free_channel): a small
real job (simulated reports, one device per row, FnApiRunner), its records read back from the
Avro output."""
from __future__ import annotations

import json

import numpy as np
import pytest

from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.ldp.estimation.frequency_bands import TOP_K_LIFETIME_RANGE
from ldp_telemetry.pipelines.cli import main
from tests.window_records import simulated_job_output

DAY_MS = 86_400_000
START_MS = 1_600_000_000_000 - 1_600_000_000_000 % DAY_MS
#: metric -> (protocol, ε1, ε∞): the docs' and demo registry's example (ε∞ = 4.10 ε1), the
#: measured ends, ratio-free channels at ratios never measured (their channel is the measured
#: one), and memoized RUE at those ratios (its channel there was never measured)
METRICS = {"docs-example": ("oue", 1.07, 4.39), "low-end": ("sue", 1.0, 1.25),
           "high-end": ("rue", 1.0, 5.0), "grr-above": ("grr", 1.0, 8.0),
           "olh-below": ("olh", 2.0, 2.2), "above": ("rue", 1.0, 8.0),
           "below": ("rue", 2.0, 2.2)}


@pytest.fixture(scope="module")
def output(tmp_path_factory):
    root = tmp_path_factory.mktemp("memoized-ratio")
    registry = parse_registry({"metrics": [
        {"name": name, "protocol": protocol, "epsilon": epsilon, "domain": {"size": 12},
         "postprocess": "norm-sub", "memoize": {"lifetime_epsilon": lifetime}}
        for name, (protocol, epsilon, lifetime) in METRICS.items()]})
    # 5,000 reports: the (ε, 10⁴) cells, where none of these oracles is declared
    return simulated_job_output(registry, root, 5_000, START_MS, DAY_MS,
                                np.random.default_rng(11))


def top(capsys, output: str, metric: str, *extra: str) -> tuple[int, str]:
    code = main(["query", "--output", output, "--metric", metric, "--window", "0",
                 "--top", "3", *extra])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return code, captured.out


@pytest.mark.parametrize("metric", ["docs-example", "low-end", "high-end", "grr-above",
                                    "olh-below"])
def test_a_memoized_record_with_a_measured_channel_keeps_its_top_k_band(output, capsys,
                                                                         metric):
    """ε∞ / ε1 within TOP_K_LIFETIME_RANGE (1.25–5, ends included), or a channel that is the same
    at every ratio (memoized GRR at 8 ε1, memoized OLH at 1.1 ε1): the union
    (`bias-corrected-bootstrap`) for each of the top 3, as at ε∞ = 2 ε1, given as their
    conservative band (no 95% band)."""
    _, text = top(capsys, output, metric, "--json")
    answers = json.loads(text)["answers"]
    assert [a["conservative_method"] for a in answers] == ["bias-corrected-bootstrap"] * 3
    assert all(0.0 <= a["conservative_lower"] <= a["conservative_upper"] <= 1.0
               and a["band_method"] == "none" and a["lower95"] is None for a in answers)


@pytest.mark.parametrize("metric, ratio, key", [("above", "8", "memoized-rue"),
                                                ("below", "1.1", "memoized-rue")])
def test_a_memoized_rue_record_outside_the_measured_ratios_has_no_top_k_band(output, capsys,
                                                                             metric, ratio,
                                                                             key):
    """Memoized RUE's channel at ε∞ = 8 ε1 and 1.1 ε1 was never measured: every answer of
    `ldp query --top` (text and --json) has band none and a reason naming the oracle key, its
    ratio, the measured range and the benchmark; its point answers keep their value bands (the
    exact variance of the composed channel holds at any ratio)."""
    _, text = top(capsys, output, metric, "--json")
    answers = json.loads(text)["answers"]
    low, high = TOP_K_LIFETIME_RANGE
    reason = (f"no band for top-k answers of {key} at ε∞ = {ratio} ε1: its composed channel "
              f"moves with ε∞, and memoized top-k bands were measured for ε∞ from {low:g} ε1 to "
              f"{high:g} ε1 (benchmarks/pooled_top_k.py --lifetime-factor)")
    assert [(a["band_method"], a["lower95"], a["upper95"], a["band_reason"],
             a["conservative_lower"], a["conservative_upper"], a["conservative_method"])
            for a in answers] == [("none", None, None, reason, None, None, None)] * 3
    _, text = top(capsys, output, metric)
    assert reason in text
    code = main(["query", "--output", output, "--metric", metric, "--window", "0",
                 "--labels", "0", "--json"])
    (point,) = json.loads(capsys.readouterr().out)["answers"]
    assert code == 0 and point["band_method"] == "exact-variance"


def test_the_plan_says_when_its_budget_ratio_leaves_top_k_answers_without_a_band(capsys):
    """`ldp plan --lifetime-epsilon` at ε∞ = 8 ε1 ends with the sentence that the top-k answers
    of the rows whose channel moves with ε∞ get no band (memoized RUE; LOLOHA's g is the report
    g there, which `ratio_free_channel` finds), at 1.1 ε1 RUE and LOLOHA's g (OLH's and RLH's
    rows); at 4.39 / 1.07 (the docs' example) and at the ends of the range it says nothing of
    it."""
    assert main(["plan", "--epsilon", "1", "--domain", "64", "--lifetime-epsilon", "8"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        "top-k answers (ldp query --top) of rue records get no band: their composed channel "
        "moves with ε∞, and ε∞ = 8 ε1 lies outside the 1.25–5 ε1 it was measured at (the other "
        "rows' channel is the same at every ε∞; docs/error-bars.md)")
    assert main(["plan", "--epsilon", "2", "--domain", "64", "--lifetime-epsilon", "2.2"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith(
        "top-k answers (ldp query --top) of rue, olh (g: loloha), rlh (g: loloha) records get no "
        "band: their composed channel moves with ε∞, and ε∞ = 1.1 ε1 lies outside")
    for epsilon, lifetime in (("1.07", "4.39"), ("0.5", "0.625"), ("4", "20")):
        assert main(["plan", "--epsilon", epsilon, "--domain", "64",
                     "--lifetime-epsilon", lifetime]) == 0
        assert "top-k answers" not in capsys.readouterr().out
