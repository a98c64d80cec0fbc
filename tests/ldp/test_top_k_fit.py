"""benchmarks/top_k_fit.py: the top-k union band with its bootstrap replayed at other fits than
Norm-Sub (a study; the package keeps Norm-Sub). Its Norm-Sub column must be the band `ldp
query` gives, every other fit a distribution to draw users from, and its counts exact."""
from __future__ import annotations

import json

import numpy as np
import pytest

from ldp_telemetry.ldp.estimation.frequency_bands import top_k_bands
from ldp_telemetry.ldp.estimation.postprocess import METHODS
from ldp_telemetry.ldp.protocols import make_protocol
from ldp_telemetry.ldp.protocols.noise import unbiased_estimate
from tests.benchmark_scripts import loaded_scripts

F = np.array([0.3, 0.2, 0.15, 0.1, 0.08, 0.06, 0.04, 0.03, 0.02, 0.01, 0.01, 0.0])


def window(name: str, n: int, seed: int = 7):
    """(protocol, f~, noise) of one window of F through the protocol's client."""
    protocol = make_protocol(name, 1.0, F.size)
    rng = np.random.default_rng(seed)
    statistic = protocol.new_statistic()
    protocol.accumulate(statistic, protocol.perturb(rng.choice(F.size, size=n, p=F), rng))
    noise = protocol.noise(n)
    unbiased = unbiased_estimate(protocol.support_counts(statistic), noise)
    return protocol, unbiased, noise.for_window(unbiased)


@pytest.mark.parametrize("name", ["grr", "oue", "cms"])
def test_the_norm_sub_fit_is_the_band_ldp_query_gives(name):
    """At the Norm-Sub fit the study's band is frequency_bands.top_k_bands, value for value
    (the union `ldp query` gives alone or joins with the rank-conditional band), so every other
    fit is compared with the band that ships; another fit draws other replicates."""
    _, unbiased, noise = window(name, 2_000)
    with loaded_scripts("top_k_fit") as scripts:
        study = scripts["top_k_fit"]
        for method in ("base", "norm-sub", "norm-hyb"):
            def run(u, method=method):
                return METHODS[method].run(u, noise)
            order = np.argsort(-run(unbiased), kind="stable")[:5]
            shipped = top_k_bands(unbiased, noise, run, 5)
            today = study.union_band(unbiased, noise, run, order, "norm-sub")
            np.testing.assert_array_equal(today[0], shipped[0])
            np.testing.assert_array_equal(today[1], shipped[1])
            other = study.union_band(unbiased, noise, run, order, "half")
            assert not np.array_equal(other[1] - other[0], today[1] - today[0])


def test_every_fit_is_a_distribution_near_the_window():
    """Each fit of f~ is non-negative and sums to 1; Norm-Sub zeroes values Norm-Mul and the
    half-way shrinkage keep (the less sparse fits the study replays at)."""
    _, unbiased, noise = window("grr", 2_000)
    with loaded_scripts("top_k_fit") as scripts:
        study = scripts["top_k_fit"]
        fitted = {name: np.asarray(study.fit_rule(name, noise)(unbiased), dtype=float)
                  for name in study.FITS}
    for name, fit in fitted.items():
        assert fit.min() >= 0.0 and fit.sum() == pytest.approx(1.0, abs=1e-9), name
    zeros = {name: int(np.count_nonzero(fit == 0.0)) for name, fit in fitted.items()}
    assert zeros["norm-mul"] <= zeros["norm-sub"] and zeros["half"] <= zeros["norm-sub"]
    np.testing.assert_allclose(
        fitted["half"], np.clip(0.5 * unbiased + 0.5 * fitted["norm-sub"], 0, None)
        / np.clip(0.5 * unbiased + 0.5 * fitted["norm-sub"], 0, None).sum())


def test_the_summary_counts_triples_against_the_norm_sub_band():
    """fit_summary: per (method, cell, rank) triple, inside [0.93, 0.97], above, below, below
    0.90, more than two standard errors below 0.95 (0.0436 at W = 100), and the triples moved
    into, out of and below the goal against the Norm-Sub band; widths against it."""
    key = {"dataset": "zipf", "protocol": "grr", "epsilon": 1.0, "n": 1000, "method": "base",
           "windows": 100}
    rows = [{**key, "fit": "norm-sub", "by_rank": [0.99, 0.95, 0.94, 0.90],
             "width_vs_today": [1.0, 1.0, 1.0, 1.0]},
            {**key, "fit": "half", "by_rank": [0.95, 0.96, 0.92, 0.85],
             "width_vs_today": [0.8, 0.9, 0.7, None]}]
    with loaded_scripts("top_k_fit") as scripts:
        today = scripts["top_k_fit"].fit_summary(rows, "norm-sub")
        half = scripts["top_k_fit"].fit_summary(rows, "half")
    assert (today["inside"], today["above"], today["below"], today["below_090"],
            today["below_by_two"]) == (2, 1, 1, 0, 1)
    assert (half["inside"], half["above"], half["below"], half["below_090"],
            half["below_by_two"]) == (2, 0, 2, 1, 1)
    assert (half["into_goal"], half["out_of_goal"], half["newly_below"]) == (1, 1, 1)
    assert half["median_width_vs_today"] == 0.8 and half["largest_width_vs_today"] == 0.9
    assert half["lowest"] == 0.85 and half["below_by_two_chance"] > 0


def test_the_script_runs_a_small_grid_and_rejects_bad_flags(tmp_path):
    """The script writes one row per (cell, method, fit) with each rank's coverage and width
    against the Norm-Sub band, the report renders its summary; bad flags exit 2."""
    arguments = ["--datasets", "zipf", "--epsilons", "1", "--sizes", "1000", "--windows", "3",
                 "--methods", "base", "norm-sub", "--datasets-dir", str(tmp_path)]
    with loaded_scripts("top_k_fit", "report") as scripts:
        study = scripts["top_k_fit"]
        assert study.main([*arguments, "--protocols", "grr", "cms", "--fits", "norm-sub",
                           "half", "--json", str(tmp_path / "f.json")]) == 0
        for bad in (["--windows", "0"], ["--sizes", "0"], ["--epsilons", "0"],
                    ["--fits", "half"], ["--methods", "nope"], ["--protocols", "xyz"]):
            assert study.main([*arguments, *bad]) == 2, bad
        document = json.loads((tmp_path / "f.json").read_text())
        table = scripts["report"].top_k_fit({**document["results"],
                                             "parameters": document["parameters"]})
    rows = document["results"]["rows"]
    assert len(rows) == 2 * 2 * 2  # protocols × methods × fits
    assert all(len(r["by_rank"]) == 10 and r["windows"] == 3 for r in rows)
    assert all(r["width_vs_today"] == [1.0] * 10 for r in rows if r["fit"] == "norm-sub")
    assert document["results"]["summary"]["all"]["half"]["triples"] == 40
    assert "| all | half | 40 |" in table and "| zipf, cms | norm-sub | 20 |" in table


def test_band_ends_tell_the_score_band_from_the_clipped_bootstrap():
    """band_ends: an answer whose band is its score band (clipped) is counted as such, one
    whose lower end is 0 while its score band's is above 0 as clipped, a band wider than its
    score band at the top as neither."""
    from ldp_telemetry.ldp.estimation.frequency_bands import score_bands
    _, unbiased, noise = window("oue", 2_000)
    top = np.sort(np.argsort(-unbiased)[:4])
    low, high = score_bands(unbiased[top], noise.p_star, noise.q_star, noise.n,
                            noise.extra_variance)
    low, high = np.clip(low, 0.0, 1.0), np.clip(high, 0.0, 1.0)
    assert (low > 0).all()  # the top values of this window are significant
    with loaded_scripts("top_k_fit") as scripts:
        ends = scripts["top_k_fit"].band_ends
        at_score, clipped = ends(low, high, unbiased[top], noise)
        assert at_score.all() and not clipped.any()
        at_score, clipped = ends(np.zeros(4), high, unbiased[top], noise)
        assert not at_score.any() and clipped.all()
        at_score, clipped = ends(low, high + 0.01, unbiased[top], noise)
        assert not at_score.any() and not clipped.any()
