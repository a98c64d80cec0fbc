"""A CFO-binning or hierarchical-histogram mean or variance whose exact-variance band covered
above 0.97 of the held-out windows of a data shape (three runs of benchmarks/coverage_bins.py
pooled) has no 95% band in that (protocol, ε, n) setting: its band is given, unchanged, as the
conservative band (`conservative_bands`), named so by every reader; the window's other
statistics keep theirs."""
from __future__ import annotations


import pytest

from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.ldp.engine.finalize import finalize_window
from ldp_telemetry.ldp.estimation.bin_band_declarations import BIN_MISSES, BIN_OVER_COVERAGE
from ldp_telemetry.ldp.estimation.cfo_moments import (BIN_MISS_REASON, BIN_OVER_COVERAGE_REASON,
                                                      cfo_statistic_bands,
                                                      conservative_moment_statistics,
                                                      declared_moment_statistics,
                                                      fixed_declared_statistics,
                                                      hh_statistic_bands)
from ldp_telemetry.ldp.estimation.moments import MOMENT_STATISTICS
from ldp_telemetry.ldp.estimation.uncertainty import BAND_EXACT, BAND_NONE, coverage_cell
from ldp_telemetry.output.bands import (conservative_band, conservative_method, statistic_band,
                                        statistic_band_method)
from ldp_telemetry.output.estimate import EstimateRecord, record_problem
from ldp_telemetry.output.records import numeric_estimate_record
from ldp_telemetry.output.text import CONSERVATIVE_NOTE, format_numeric
from ldp_telemetry.pipelines.cli import main
from tests.benchmark_scripts import loaded_scripts
from tests.record_avro import through_avro
from tests.lognormal_window import lognormal_window

HOUR = 3_600_000
BINS = 64
#: the conservative setting with the fewest reports, CFO-GRR or HH (OLH's server cost is
#: O(n · B)): the test's window, and its conservative statistics
SETTING = min((key for key in BIN_OVER_COVERAGE if key[0] in ("cfo-grr", "hh")),
              key=lambda key: (key[2], key[1], key[0]))
STATISTICS = sorted(BIN_OVER_COVERAGE[SETTING], key=MOMENT_STATISTICS.index)


def _config(protocol: str, epsilon: float):
    return parse_registry({"metrics": [{
        "name": "latency", "protocol": protocol, "epsilon": epsilon,
        "domain": {"low": 0, "high": 32, "buckets": BINS}}]})["latency"]


@pytest.fixture(scope="module")
def made():
    """(config, n, the window's statistic, its result, its record read back from JSON)."""
    protocol, epsilon, n = SETTING
    config = _config(protocol, epsilon)
    assert coverage_cell(epsilon, n) == (epsilon, n)
    statistic = lognormal_window(config, n)
    result = finalize_window(config, statistic, n)
    record = EstimateRecord.from_json(
        numeric_estimate_record(config, result, 0, HOUR).to_json())
    return config, n, statistic, result, record


def test_each_conservative_setting_over_covered_pooled_over_two_runs():
    """Each conservative (protocol, ε, n, statistic) covered above 0.97 of the windows of a
    data set pooled over the three runs (500 windows each, 200 at n = 10⁶); it is not declared
    without a band there, and its reason gives the coverage."""
    assert BIN_OVER_COVERAGE, "the rule found over-coverage in the runs it reads"
    for (protocol, epsilon, n), table in BIN_OVER_COVERAGE.items():
        reasons = conservative_moment_statistics(protocol, epsilon, n)
        assert set(reasons) == set(table)
        declared = declared_moment_statistics(protocol, epsilon, n)
        for statistic, (dataset, coverage, windows, runs) in table.items():
            assert coverage > 0.97 and runs == 3
            assert windows == (600 if n == 1_000_000 else 1_500)
            assert statistic not in declared
            assert reasons[statistic] == BIN_OVER_COVERAGE_REASON.format(
                epsilon=epsilon, n=f"{n:,}", cell_epsilon=epsilon, cell_n=n, protocol=protocol,
                coverage=coverage, windows=windows, dataset=dataset, runs=runs)


def test_the_band_moves_unchanged_to_the_conservative_band(made):
    """In the setting, each conservative statistic's 95% band is none (its method none, its
    reason BIN_OVER_COVERAGE_REASON then what the band holds) and its conservative band is, bit
    for bit, the exact-variance band (computed here directly); the printed value and standard
    error are kept; the other moment keeps its 95% band."""
    config, n, statistic, result, _ = made
    bands = (hh_statistic_bands if SETTING[0] == "hh" else cfo_statistic_bands)(
        config.protocol, statistic, n, config.low, config.high)
    why = conservative_moment_statistics(*SETTING)
    for key in MOMENT_STATISTICS:
        direct = bands[key]
        if key in STATISTICS:
            assert direct.lower is not None
            kept = result.bands[key]
            assert (kept.lower, kept.upper, kept.method) == (None, None, BAND_NONE)
            assert kept.reason.startswith(why[key])
            assert (kept.estimate, kept.std_error) == (direct.estimate, direct.std_error)
            moved = result.conservative_bands[key]
            assert (moved.lower, moved.upper, moved.method) == (direct.lower, direct.upper,
                                                                BAND_EXACT)
        else:
            assert result.bands[key] == direct
            assert key not in result.conservative_bands


def test_every_reader_names_it_conservative(made, tmp_path, capsys):
    """The record: `bands` null, its band method none (the record's, CFO-binning's and HH's
    being none), `conservative_bands` the band; output.bands reads no 95% band and the
    conservative one, made by the exact variance; `ldp show` prints it
    `[lower, upper] conservative` with CONSERVATIVE_NOTE."""
    _, _, _, result, record = made
    value = record.json_value()
    assert record_problem(value) is None
    for key in STATISTICS:
        band = result.conservative_bands[key]
        assert value["bands"][key] is None
        assert value.get("band_methods", {}).get(key, value["band_method"]) == BAND_NONE
        assert value["conservative_bands"][key] == {"lower": band.lower, "upper": band.upper}
        assert statistic_band(record, key) == (None, None)
        assert statistic_band_method(record, key) == BAND_NONE
        assert conservative_band(record, key) == (band.lower, band.upper)
        assert conservative_method(record, key) == BAND_EXACT
    (tmp_path / "estimates-00000-of-00001.jsonl").write_text(record.to_json() + "\n")
    assert main(["show", "--output", str(tmp_path), "--metric", "latency"]) == 0
    shown = capsys.readouterr().out
    for key in STATISTICS:
        lower, upper = conservative_band(record, key)
        line = next(line for line in shown.splitlines() if line.strip().startswith(f"{key} "))
        assert line.endswith(f" [{lower:.4g}, {upper:.4g}] conservative")
    assert CONSERVATIVE_NOTE in shown and CONSERVATIVE_NOTE in format_numeric(record)


def test_the_record_reads_back_through_both_avro_libraries(made):
    """The record with its conservative moment bands writes and reads back through fastavro,
    and Apache's reference `avro` decodes the same bytes to the same conservative bands."""
    _, _, _, _, record = made
    again, decoded = through_avro(record)
    assert again.to_json() == record.to_json()
    assert decoded["conservative_bands"] == record.to_avro()["conservative_bands"]


def test_outside_the_settings_the_moments_keep_their_95_bands():
    """A window of a setting the rule does not name keeps its mean's and variance's bands as
    95% bands; its conservative bands are the quantiles' whole-bins bands only."""
    setting = next(("cfo-grr", epsilon, 10_000) for epsilon in (4.0, 2.0, 1.0)
                   if ("cfo-grr", epsilon, 10_000) not in BIN_OVER_COVERAGE
                   and not declared_moment_statistics("cfo-grr", epsilon, 10_000))
    config = _config(*setting[:2])
    result = finalize_window(config, lognormal_window(config, setting[2]), setting[2])
    for key in MOMENT_STATISTICS:
        assert result.bands[key].lower is not None and result.bands[key].method == BAND_EXACT
        assert key not in result.conservative_bands


def _bin_cell(dataset, key, mean, variance=0.95, windows=500, declared=()):
    return {"dataset": dataset, "protocol": key[0], "epsilon": key[1], "n": key[2],
            "windows": windows, "declared": list(declared),
            "coverage": {"mean": mean, "variance": variance}}


def test_the_rule_pools_each_data_set_over_the_runs():
    """Pooled over the runs of one data set (windows added), a statistic above 0.97 is
    conservative in its setting and the highest data set is named, one below 0.93 is declared
    and the lowest named; 0.97 and 0.93 themselves are neither; a setting above 0.97 where
    another data set lies below 0.94 (KEEP_FLOOR) is declared, the lowest named; a statistic a
    cell declares without a band is not read."""
    with loaded_scripts("declare_bin_bands") as loaded:
        declare = loaded["declare_bin_bands"]
        a, b, c, d, e, f = (("cfo-grr", 1.0, 10_000), ("hh", 2.0, 1_000),
                            ("cfo-olh", 4.0, 100_000), ("hh", 0.5, 1_000_000),
                            ("cfo-grr", 2.0, 1_000), ("hh", 1.0, 10_000))
        cells = [_bin_cell("x", a, 0.98), _bin_cell("x", a, 0.97),        # 0.975: above
                 _bin_cell("y", a, 0.95), _bin_cell("y", a, 0.96),
                 _bin_cell("x", b, 0.97, 0.93), _bin_cell("x", b, 0.97, 0.93),  # neither
                 _bin_cell("x", c, 0.99), _bin_cell("y", c, 0.934),       # y below 0.94
                 _bin_cell("x", d, 0.95, 0.90, windows=200, declared=["variance"]),
                 _bin_cell("x", e, 0.96), _bin_cell("y", e, 0.99), _bin_cell("y", e, 0.98),
                 _bin_cell("x", f, 0.95, 0.92), _bin_cell("x", f, 0.95, 0.93),  # 0.925: below
                 _bin_cell("y", f, 0.95, 0.99), _bin_cell("y", f, 0.95, 0.99)]
        misses, over = declare.pooled_rule(cells)
        assert misses == {c: {"mean": ("y", 0.934, 500, 1)},
                          f: {"variance": ("x", 0.925, 1000, 2)}}
        assert over == {a: {"mean": ("x", 0.975, 1000, 2)},
                        e: {"mean": ("y", 0.985, 1000, 2)}}


def test_the_shipped_declarations_are_the_rule_applied_to_the_three_runs():
    """ldp/estimation/bin_band_declarations.py is what benchmarks/declare_bin_bands.py writes
    from seed 47's, 109's and 113's runs (each with its n = 10⁶ cells): nobody edited it."""
    with loaded_scripts("declare_bin_bands") as loaded:
        declare = loaded["declare_bin_bands"]
        cells, sources = declare.run_cells(declare.RUNS)
        assert [seed for _, seed in sources] == [47, 47, 109, 109, 113, 113]
        # the cells declare only what the declarations before the rule declare: the rule never
        # reads its own declarations back (coverage_bins.py records fixed_declared_statistics)
        assert all(cell["declared"] == sorted(fixed_declared_statistics(
            cell["protocol"], float(cell["epsilon"]), int(cell["n"]))) for cell in cells)
        misses, over = declare.pooled_rule(cells)
        assert misses == BIN_MISSES and over == BIN_OVER_COVERAGE
        assert declare.module_text(misses, over, sources) == declare.MODULE.read_text()


def test_a_setting_below_the_goal_prints_no_band():
    """Each declared (protocol, ε, n, statistic) covered below 0.94 of the windows of a data
    set pooled over the three runs (below 0.93, or another data set's lay above 0.97: the
    table names the lowest); a record there has no band for it, with BIN_MISS_REASON, and
    keeps its estimate and standard error; it has no conservative band either."""
    assert BIN_MISSES, "the rule found misses in the runs it reads"
    for (protocol, epsilon, n), table in BIN_MISSES.items():
        declared = declared_moment_statistics(protocol, epsilon, n)
        assert not set(table) & set(BIN_OVER_COVERAGE.get((protocol, epsilon, n), {}))
        for statistic, (dataset, coverage, windows, runs) in table.items():
            assert coverage < 0.94 and runs == 3
            assert declared[statistic] == BIN_MISS_REASON.format(
                cell_epsilon=epsilon, cell_n=n, protocol=protocol, coverage=coverage,
                windows=windows, dataset=dataset, runs=runs)
    protocol, epsilon, n = min((key for key in BIN_MISSES if key[0] in ("cfo-grr", "hh")),
                               key=lambda key: (key[2], key[1]))
    config = _config(protocol, epsilon)
    result = finalize_window(config, lognormal_window(config, n), n)
    for statistic in BIN_MISSES[(protocol, epsilon, n)]:
        band = result.bands[statistic]
        assert (band.lower, band.upper) == (None, None)
        assert band.reason == declared_moment_statistics(protocol, epsilon, n)[statistic]
        assert band.estimate is not None and band.std_error is not None
        assert statistic not in result.conservative_bands


def test_the_coverage_table_counts_conservative_pairs_apart():
    """The coverage summary's CFO-binning and HH rows count a pair records give as the
    conservative band in its own row, not among the 95% bands; the benchmarks page marks it
    `†`."""
    protocol, epsilon, n = SETTING
    key = STATISTICS[0]
    other = next(s for s in MOMENT_STATISTICS if s != key)
    cell = {"dataset": "shape", "protocol": protocol, "epsilon": epsilon, "n": n, "buckets": 64,
            "windows": 500, "seed": 113, "declared": [],
            "coverage": {"central": 0.95, "tail": 0.95, "cut": 0.95, key: 0.99, other: 0.95},
            "values": {"coverage": dict.fromkeys(("central", "tail", "cut", "mean",
                                                  "variance"), 0.95)},
            "z_rms": dict.fromkeys(("central", "tail", "cut", "mean", "variance"), 1.0),
            "median_band_ms": 1.0}
    run = {"cells": [cell], "goal": [0.93, 0.97], "seed": 113,
           "statistics": ["central", "tail", "cut", "mean", "variance"],
           "parameters": {"windows": 500}}
    with loaded_scripts("coverage_summary", "report") as loaded:
        rows = loaded["coverage_summary"].bin_rows(run)
        family, conservative = (
            ("HH mean and variance", "HH mean and variance where the band over-covered")
            if protocol == "hh" else
            ("CFO-binning mean and variance, held out",
             "CFO-binning mean and variance where the band over-covered, held out"))
        banded = next(row for row in rows if row["family"] == family)
        kept = next(row for row in rows if row["family"] == conservative)
        held = len(STATISTICS)  # the setting's conservative statistics: `key`, maybe `other`
        assert (banded["pairs"], banded["declared"]) == (2 - held, held)
        assert (kept["pairs"], kept["above"]) == (held, 1)
        text = loaded["report"].coverage_bins(run)
    line = next(line for line in text.splitlines() if line.startswith("| shape |"))
    assert "| 0.990† |" in line
