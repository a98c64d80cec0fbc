"""benchmarks/coverage.py and benchmarks/calibrate_bands.py keep simulated windows in a cache;
a cache made from the other script's windows (the calibration's seed, or the held-out one) is
refused, so the held-out coverage never reuses calibration windows and the fit never sees
held-out ones. benchmarks/declare_bands.py's rule, and the declarations it wrote from sets 2
and 3."""
from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from tests.benchmark_scripts import loaded_scripts



@pytest.fixture(scope="module")
def scripts():
    with loaded_scripts("coverage", "calibrate_bands") as loaded:
        yield loaded


def cache_of(coverage, tmp_path, seed: int) -> Path:
    """A cache of one lognormal cell (ε 4, n 1,000, 128 buckets, 2 windows, R 20) simulated
    with `seed`."""
    sim = coverage.simulate("lognormal latency", 4.0, 1_000, 128, 2, 20, seed)
    path = tmp_path / f"seed{seed}.pkl"
    path.write_bytes(pickle.dumps([sim]))
    return path


def only_lognormal(monkeypatch, *modules):
    """The scripts see the lognormal latency only (drawn here, no data file): one cell."""
    for module in modules:
        monkeypatch.setattr(module, "available",
                            lambda names: [name for name in names if name == "lognormal latency"])
        if hasattr(module, "CALIBRATION_SETS"):
            monkeypatch.setattr(module, "CALIBRATION_SETS", ("lognormal latency",))


def test_the_held_out_evaluation_refuses_calibration_windows(scripts, tmp_path, capsys,
                                                            monkeypatch):
    coverage = scripts["coverage"]
    only_lognormal(monkeypatch, coverage)
    args = ["--epsilons", "4", "--sizes", "1000", "--calibration-set-sizes", "1000",
            "--windows", "2", "--wide-buckets", "0", "--simulate-only"]
    calibration = cache_of(coverage, tmp_path, coverage.CALIBRATION_SEED)
    with pytest.raises(SystemExit):
        coverage.main([*args, "--set", "3", "--cache", str(calibration)])
    assert "holds other cells" in capsys.readouterr().err
    held_out = cache_of(coverage, tmp_path, coverage.SETS[3][1])
    coverage.main([*args, "--set", "3", "--cache", str(held_out)])  # its own windows: accepted


def test_the_calibration_refuses_held_out_windows(scripts, tmp_path, capsys, monkeypatch):
    coverage, calibrate = scripts["coverage"], scripts["calibrate_bands"]
    only_lognormal(monkeypatch, calibrate)
    held_out = cache_of(coverage, tmp_path, coverage.EVALUATION_SEED)
    with pytest.raises(SystemExit):
        calibrate.main(["--epsilons", "4", "--sizes", "1000", "--windows", "2",
                        "--cache", str(held_out)])
    assert "holds other cells" in capsys.readouterr().err


@pytest.mark.parametrize("seed", [31, 53])
def test_the_validation_refuses_the_windows_the_declarations_are_fitted_on(scripts, capsys,
                                                                           seed):
    """Set 4 refuses the seeds of sets 2 and 3, both read by benchmarks/declare_bands.py."""
    with pytest.raises(SystemExit):
        scripts["coverage"].main(["--seed", str(seed), "--simulate-only"])
    assert "31, 53: declarations" in capsys.readouterr().err


@pytest.fixture(scope="module")
def declare():
    with loaded_scripts("declare_bands") as loaded:
        yield loaded["declare_bands"]


def test_the_declaration_rule_declares_what_lies_two_standard_errors_below(declare):
    """W = 100: 2 s.e. below 0.95 is 0.9064, so 0.90 is declared in its cell and the lowest of
    a cell's data sets is the one named; 0.91 is kept by that rule but lies more than one
    pooled s.e. (0.0218) below 0.95, so the pooled rule declares it; two data sets pooled to
    0.93 of 200 windows lie below 0.95 − 0.0154 and are declared, 0.94 of 200 kept; cells of
    other bucket counts, levels the margins already declare and coverages measured where a
    cell already declared the band are not the rule's."""
    from ldp_telemetry.ldp.estimation.band_calibration import MARGIN_SCALES

    def cell(dataset, epsilon, n, coverage, buckets=128, declared=()):
        return {"dataset": dataset, "epsilon": epsilon, "n": n, "buckets": buckets,
                "windows": 100, "declared_without_band": list(declared),
                "coverage": {**dict.fromkeys(declare.QUANTILE_LEVELS, 0.95), "0.5": coverage}}
    kept = [key for key, scales in MARGIN_SCALES.items() if scales["0.5"] is not None]
    cells = [cell("a", *kept[0], 0.90), cell("b", *kept[0], 0.86), cell("a", *kept[1], 0.91),
             cell("a", *kept[2], 0.94), cell("b", *kept[2], 0.92),
             cell("a", *kept[3], 0.95), cell("b", *kept[3], 0.93),
             cell("a", *kept[4], 0.50, buckets=512), cell("a", *kept[5], 0.50, declared=["0.5"]),
             *(cell("a", *key, 1.0) for key in kept[6:])]  # the level's pooled coverage > 0.93
    misses, pooled, levels = declare.declarations(cells)
    assert misses == {kept[0]: {"0.5": ("b", 0.86, 100)}}
    assert pooled == {kept[1]: {"0.5": (1, 0.91, 100)}, kept[2]: {"0.5": (2, 0.93, 200)}}
    assert levels == {}


def test_a_level_below_the_goal_across_the_grid_is_declared_everywhere(declare):
    """A level whose coverage pooled over every cell set 1 kept its band in and every data set
    lies below 0.93 is declared in every cell; at 0.935 it is not."""
    from ldp_telemetry.ldp.estimation.band_calibration import MARGIN_SCALES
    kept = [key for key, scales in MARGIN_SCALES.items() if scales["0.5"] is not None]

    def cells(coverage):
        return [{"dataset": "a", "epsilon": epsilon, "n": n, "buckets": 128, "windows": 100,
                 "coverage": {**dict.fromkeys(declare.QUANTILE_LEVELS, 0.95), "0.5": coverage}}
                for epsilon, n in kept]
    assert declare.declarations(cells(0.92))[2] == {"0.5": (len(kept), 0.92, 100 * len(kept))}
    assert declare.declarations(cells(0.935))[2] == {}


def test_the_shipped_declarations_are_the_rule_applied_to_sets_2_and_3(declare):
    """ldp/estimation/band_declarations.py is what benchmarks/declare_bands.py writes from the
    results of set 2 (benchmarks/results/coverage_set2.json, seed 31) and set 3
    (benchmarks/results/coverage.json, seed 53), and from set 4 (seed 71) with its data sets
    measured again (seeds 89, 97, 101 and 103): nobody edited it by hand."""
    from ldp_telemetry.ldp.estimation.band_declarations import (DECLARED_LEVELS,
                                                                HELD_OUT_MISSES, POOLED_MISSES,
                                                                SET4_MISSES, SET4_OVER_COVERAGE)
    cells, sources = declare.rule_cells(declare.RESULTS)
    assert [seed for _, seed in sources] == [31, 53]
    misses, pooled, levels = declare.declarations(cells)
    assert misses == HELD_OUT_MISSES and pooled == POOLED_MISSES and levels == DECLARED_LEVELS
    set4, set4_sources = declare.set4_cells(declare.SET4_RUNS)
    assert [seed for _, seed in set4_sources] == [71, 89, 97, 101, 103]
    below, over = declare.set4_pooled(set4)
    assert below == SET4_MISSES and over == SET4_OVER_COVERAGE
    assert declare.module_text(misses, pooled, levels, sources, below, over,
                               set4_sources) == declare.MODULE.read_text()


def _set4_cell(declare, dataset, key, coverage, buckets=128, declared=()):
    return {"dataset": dataset, "epsilon": key[0], "n": key[1], "buckets": buckets,
            "windows": 200, "declared_without_band": list(declared),
            "coverage": {**dict.fromkeys(declare.QUANTILE_LEVELS, 0.95), "0.5": coverage}}


def test_set_4s_runs_pooled_declare_below_the_goal_and_make_above_it_conservative(declare):
    """Pooled over every run of one data set (windows added), a level below 0.94 (KEEP_FLOOR)
    is declared in its setting and one above 0.97 is conservative; 0.94 and 0.97 themselves
    are neither;
    a run's coverage of a level it declares and a cell of another bucket count are not read;
    a setting with one data set below and another above is declared (the lowest named), and
    one with two above names the highest."""
    from ldp_telemetry.ldp.estimation.band_calibration import MARGIN_SCALES
    kept = [key for key, scales in MARGIN_SCALES.items() if scales["0.5"] is not None]
    cell = lambda *args, **kwargs: _set4_cell(declare, *args, **kwargs)  # noqa: E731
    cells = [cell("a", kept[0], 0.92), cell("a", kept[0], 0.93),            # 0.925: below
             cell("a", kept[1], 0.93), cell("a", kept[1], 0.95),            # 0.94: neither
             cell("a", kept[2], 0.98), cell("a", kept[2], 0.97),            # 0.975: above
             cell("a", kept[3], 0.97), cell("a", kept[3], 0.97),            # 0.97: neither
             cell("a", kept[4], 0.99), cell("a", kept[4], 0.80, declared=["0.5"]),
             cell("a", kept[5], 0.96), cell("a", kept[5], 0.50, buckets=512),
             cell("a", kept[6], 0.99), cell("b", kept[6], 0.90),
             cell("a", kept[7], 0.98), cell("b", kept[7], 0.99),
             cell("a", kept[8], 0.99), cell("b", kept[8], 0.935)]
    below, over = declare.set4_pooled(cells)
    assert below == {kept[0]: {"0.5": ("a", 0.925, 400, 2)},
                     kept[6]: {"0.5": ("b", 0.9, 200, 1)},
                     kept[8]: {"0.5": ("b", 0.935, 200, 1)}}
    assert over == {kept[2]: {"0.5": ("a", 0.975, 400, 2)},
                    kept[4]: {"0.5": ("a", 0.99, 200, 1)},
                    kept[7]: {"0.5": ("b", 0.99, 200, 1)}}


def test_the_chance_of_a_miss_below_is_the_binomial_tail():
    """An exact band's coverage over W windows is Binomial(W, 0.95) / W: more than two standard
    errors below 0.95 means at most 90 of 100 windows (0.9064 · 100 rounded down) and at most
    183 of 200 (0.9192 · 200), whose probabilities the tables print as the chance."""
    from scipy import stats
    with loaded_scripts("coverage_summary") as loaded:
        summary = loaded["coverage_summary"]
        assert summary.below_by_two(0.90, 100) and not summary.below_by_two(0.91, 100)
        assert summary.below_by_two(0.915, 200) and not summary.below_by_two(0.92, 200)
        assert summary.below_by_two_chance(100) == pytest.approx(stats.binom.cdf(90, 100, 0.95))
        assert summary.below_by_two_chance(200) == pytest.approx(stats.binom.cdf(183, 200, 0.95))


def test_the_summary_counts_each_row_beside_its_binomial_chance():
    """An exact band's coverage over W windows is Binomial(W, 0.95) / W: inside [0.93, 0.97]
    at W = 100 means 93 to 97 hits, both edges included (0.754; the normal law says 0.64),
    above means 98 to 100, below at most 92, and more than two standard errors off at most
    90 or all 100. A row's chances are those shares summed over its pairs."""
    from math import comb

    def mass(hits):
        return sum(comb(100, k) * 0.95 ** k * 0.05 ** (100 - k) for k in hits)
    with loaded_scripts("coverage_summary") as loaded:
        summary = loaded["coverage_summary"]
        shares = summary.chance_shares(100)
        assert shares["inside"] == pytest.approx(mass(range(93, 98)), rel=1e-9)
        assert shares["above"] == pytest.approx(mass(range(98, 101)), rel=1e-9)
        assert shares["below"] == pytest.approx(mass(range(0, 93)), rel=1e-9)
        assert shares["off"] == pytest.approx(mass([*range(0, 91), 100]), rel=1e-9)
        row = summary.tally("f", "exact-variance", [(0.95, 100), (1.0, 100), (0.9, 200)])
        assert (row["inside"], row["above"], row["below"], row["off"]) == (1, 1, 1, 2)
        assert row["expected_inside"] == pytest.approx(
            2 * shares["inside"] + summary.chance_shares(200)["inside"])
        table = summary.markdown([row])
        assert "inside [0.93, 0.97] (chance)" in table
        assert f"| 1 ({row['expected_inside']:.1f}) |" in table


def test_the_summary_reads_the_newest_held_out_set(tmp_path):
    """The Square Wave quantile row of the coverage summary comes from set 4's results when
    they exist, set 3's otherwise."""
    import json

    def results(name, seed):
        run = {"parameters": {"seed": seed}, "results": {"set": seed, "cells": []}}
        (tmp_path / f"{name}.json").write_text(json.dumps(run))
    with loaded_scripts("coverage_summary") as loaded:
        summary = loaded["coverage_summary"]
        assert summary.newest_quantile_set(tmp_path) is None
        results("coverage", 53)
        assert summary.newest_quantile_set(tmp_path)["parameters"]["seed"] == 53
        results("coverage_set4", 71)
        assert summary.newest_quantile_set(tmp_path)["parameters"]["seed"] == 71


def test_set_4_draws_taxi_minutes_by_their_slots_share():
    """The NYC taxi pickup minute (set 4): values in [0, 1440), each 30-minute slot drawn as
    often as its share of NAB's passengers. 10⁵ draws: a slot's count is Binomial(n, p), so
    each slot lies within 4.5 standard errors but with probability 6.8 · 10⁻⁶, all 48 but
    with probability < 4 · 10⁻⁴ (seed fixed). Skipped without the shared data sets."""
    import numpy as np
    with loaded_scripts("coverage") as loaded:
        coverage = loaded["coverage"]
        if not coverage.dataset_path(coverage.TAXI).exists():
            pytest.skip("the shared data sets are not here")
        shares = coverage._taxi_slots()
        values = coverage.draw(coverage.TAXI, np.random.default_rng(7), 100_000)
    assert len(shares) == 48 and shares.sum() == pytest.approx(1.0)
    assert values.min() >= 0.0 and values.max() < 1440.0
    counts = np.bincount((values // 30).astype(int), minlength=48)
    error = np.sqrt(shares * (1 - shares) / 100_000)
    assert np.all(np.abs(counts / 100_000 - shares) <= 4.5 * error)
