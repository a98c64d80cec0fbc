"""A Square Wave quantile whose bias-corrected band covered above 0.97 of the held-out windows of
a data shape (set 4's runs pooled) has no 95% band in that (ε, n) setting: its band is
given, unchanged, as the conservative band (`conservative_bands`), named so by every reader;
the other quantiles of the window keep their 95% bands."""
from __future__ import annotations

import json

import pytest

from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.ldp.engine.finalize import finalize_window, interval_fit
from ldp_telemetry.ldp.estimation.band_declarations import SET4_OVER_COVERAGE
from ldp_telemetry.ldp.estimation.histograms import QUANTILE_LEVELS
from ldp_telemetry.ldp.estimation.uncertainty import (BAND_BIAS_CORRECTED, BAND_NONE,
                                                      OVER_COVERAGE_REASON, band_scales,
                                                      bias_corrected_bands,
                                                      conservative_statistics, coverage_cell)
from ldp_telemetry.output.bands import (conservative_band, conservative_method, statistic_band,
                                        statistic_band_method)
from ldp_telemetry.output.estimate import EstimateRecord, record_problem
from ldp_telemetry.output.records import numeric_estimate_record
from ldp_telemetry.output.text import CONSERVATIVE_NOTE, format_numeric
from ldp_telemetry.pipelines.cli import main
from tests.record_avro import through_avro
from tests.benchmark_scripts import loaded_scripts
from tests.lognormal_window import lognormal_window

HOUR = 3_600_000
#: the levels `ldp show` prints
SHOWN = ("0.1", "0.25", "0.5", "0.75", "0.9")
#: the conservative setting with the fewest reports where `ldp show` prints a conservative
#: level (the test's window), and its conservative levels
CELL = min((key for key, table in SET4_OVER_COVERAGE.items() if set(table) & set(SHOWN)),
           key=lambda key: (key[1], key[0]))
LEVELS = sorted(SET4_OVER_COVERAGE[CELL], key=float)


def _config():
    return parse_registry({"metrics": [{
        "name": "latency", "protocol": "sw", "epsilon": CELL[0],
        "domain": {"low": 0, "high": 32, "buckets": 128},
        "estimator": {"method": "ems", "bootstrap": 20, "seed": 5}}]})["latency"]


@pytest.fixture(scope="module")
def made():
    """(config, n, the window's statistic, its result, its record read back from JSON)."""
    config = _config()
    n = CELL[1]
    assert coverage_cell(config.protocol.epsilon, n) == CELL
    statistic = lognormal_window(config, n)
    result = finalize_window(config, statistic, n)
    record = EstimateRecord.from_json(
        numeric_estimate_record(config, result, 0, HOUR).to_json())
    return config, n, statistic, result, record


def test_each_conservative_setting_over_covered_pooled_over_set4s_runs():
    """Each conservative (ε, n, level) covered above 0.97 of at least 400 held-out windows of
    a data set pooled over set 4's runs (200 windows each); it has a calibrated margin (not
    declared), and its reason gives the coverage."""
    from ldp_telemetry.ldp.estimation.band_calibration import MARGIN_SCALES
    for (epsilon, n), table in SET4_OVER_COVERAGE.items():
        reasons = conservative_statistics(epsilon, n)
        assert set(reasons) == set(table)
        scales, declared = band_scales(epsilon, n)
        for level, (dataset, coverage, windows, runs) in table.items():
            assert coverage > 0.97 and windows == 200 * runs and runs >= 2
            assert MARGIN_SCALES[(epsilon, n)][level] is not None and level not in declared
            assert reasons[level] == OVER_COVERAGE_REASON.format(
                epsilon=epsilon, n=f"{n:,}", cell_epsilon=epsilon, cell_n=n,
                coverage=coverage, windows=windows, dataset=dataset, runs=runs)


def test_the_band_moves_unchanged_to_the_conservative_band(made):
    """In the setting, each conservative level's 95% band is none (its method none, its
    reason OVER_COVERAGE_REASON) and its conservative band is, bit for bit, the
    bias-corrected band the margins give (computed here directly); every other quantile's
    95% band is that band too, and has no conservative band."""
    config, n, statistic, result, _ = made
    scales, reasons = band_scales(config.protocol.epsilon, n)
    direct = bias_corrected_bands(config.protocol.channel().forward, interval_fit(config),
                                  statistic, n, config.bucket_edges, 20, 5, scales, reasons)
    assert result.band_method == BAND_BIAS_CORRECTED
    why = conservative_statistics(config.protocol.epsilon, n)
    for key in QUANTILE_LEVELS:
        if key in LEVELS:
            assert direct[key].lower is not None
            assert result.bands[key].lower is None and result.bands[key].method == BAND_NONE
            assert result.bands[key].reason == why[key]
            kept = result.conservative_bands[key]
            assert (kept.lower, kept.upper, kept.method) == (direct[key].lower,
                                                             direct[key].upper,
                                                             BAND_BIAS_CORRECTED)
        else:
            assert result.bands[key] == direct[key]
            assert result.conservative_bands[key].lower is None


def test_every_reader_names_it_conservative(made, tmp_path, capsys):
    """The record: `bands` null, `band_methods` none for the level, `conservative_bands` the
    band; output.bands reads no 95% band and the conservative one, made by the
    bias-corrected bootstrap; `ldp show` prints it `[lower, upper] conservative` with
    CONSERVATIVE_NOTE; `ldp query --quantile --json` gives it as conservative_*."""
    _, _, _, result, record = made
    value = record.json_value()
    assert record_problem(value) is None
    for key in LEVELS:
        band = result.conservative_bands[key]
        assert value["bands"][key] is None and value["band_methods"][key] == BAND_NONE
        assert value["conservative_bands"][key] == {"lower": band.lower, "upper": band.upper}
        assert statistic_band(record, key) == (None, None)
        assert statistic_band_method(record, key) == BAND_NONE
        assert conservative_band(record, key) == (band.lower, band.upper)
        assert conservative_method(record, key) == BAND_BIAS_CORRECTED
    others = [key for key in QUANTILE_LEVELS if key not in LEVELS
              and value["bands"][key] is not None]
    for key in others:
        assert conservative_band(record, key) == (None, None)
        assert statistic_band_method(record, key) == BAND_BIAS_CORRECTED
    (tmp_path / "estimates-00000-of-00001.jsonl").write_text(record.to_json() + "\n")
    assert main(["show", "--output", str(tmp_path), "--metric", "latency"]) == 0
    shown = capsys.readouterr().out
    printed = [key for key in LEVELS if key in SHOWN]
    assert printed
    for key in printed:
        lower, upper = conservative_band(record, key)
        line = next(line for line in shown.splitlines()
                    if line.strip().startswith(f"q{key} "))
        assert line.endswith(f" [{lower:.4g}, {upper:.4g}] conservative")
    assert CONSERVATIVE_NOTE in shown and CONSERVATIVE_NOTE in format_numeric(record)
    key = LEVELS[0]
    assert main(["query", "--output", str(tmp_path), "--metric", "latency", "--window",
                 record.window_start, "--quantile", key, "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)["answers"][0]
    assert answer["band95"] is None and answer["band_method"] == BAND_NONE
    assert answer["band_reason"] == record.band_reasons[key]
    assert (answer["conservative_lower"], answer["conservative_upper"],
            answer["conservative_method"]) == (*conservative_band(record, key),
                                               BAND_BIAS_CORRECTED)


def test_the_record_reads_back_through_both_avro_libraries(made):
    """The record with its conservative bands writes and reads back through fastavro, and
    Apache's reference `avro` decodes the same bytes to the same conservative bands."""
    _, _, _, _, record = made
    again, decoded = through_avro(record)
    assert again.to_json() == record.to_json()
    assert decoded["conservative_bands"] == record.to_avro()["conservative_bands"]


def test_outside_the_settings_a_square_wave_record_has_no_conservative_band():
    """A window in a setting with no confirmed over-coverage keeps every band it has as a
    95% band and writes no `conservative_bands`."""
    from ldp_telemetry.ldp.estimation.band_calibration import MARGIN_SCALES
    plain = next(key for key in sorted(MARGIN_SCALES, key=lambda key: (key[1], key[0]))
                 if key not in SET4_OVER_COVERAGE)
    config = parse_registry({"metrics": [{
        "name": "latency", "protocol": "sw", "epsilon": plain[0],
        "domain": {"low": 0, "high": 32, "buckets": 128},
        "estimator": {"method": "ems", "bootstrap": 20, "seed": 5}}]})["latency"]
    result = finalize_window(config, lognormal_window(config, plain[1]), plain[1])
    assert result.conservative_bands is None
    value = numeric_estimate_record(config, result, 0, HOUR).json_value()
    assert "conservative_bands" not in value
    assert BAND_NONE not in {value["band_methods"].get(key) for key in QUANTILE_LEVELS}


def test_the_benchmarks_page_counts_a_run_s_conservative_bands_apart_from_its_95_bands():
    """The benchmarks page's table of the run measured under the pooled rule (the sixth seed)
    marks a quantile whose band records give as the conservative band `†` and leaves it out of
    the counts of 95% bands, as the coverage table of the error-bars page does; a level the
    setting keeps as a 95% band is counted, a declared one is marked `*`."""
    kept = next(level for level in QUANTILE_LEVELS
                if level not in LEVELS and level not in band_scales(*CELL)[1])
    declared = next(level for level in QUANTILE_LEVELS if level in band_scales(*CELL)[1])
    run = {"statistics": ["mean", "variance", *QUANTILE_LEVELS], "goal": [0.93, 0.97],
           "parameters": {"windows": 200, "replicates": 20, "seed": 107},
           "held_out_sets": ["shape"], "range_queries": "none",
           "cells": [{"dataset": "shape", "epsilon": CELL[0], "n": CELL[1], "buckets": 128,
                      "windows": 200, "median_band_s": 0.1, "declared_without_band": [declared],
                      "coverage": {**dict.fromkeys(["mean", "variance", *QUANTILE_LEVELS], 0.95),
                                   LEVELS[0]: 0.99, kept: 0.96}}]}
    with loaded_scripts("report") as loaded:
        report = loaded["report"]
        render = next(section[3] for section in report.SECTIONS
                      if section[0] == "coverage_set4_sixth")
        text = render(run)
    row = next(line for line in text.splitlines()
               if line.startswith(f"| shape | {CELL[0]:g} | {CELL[1]:,} |"))
    assert "| 0.99† |" in row and "| 0.96 |" in row and "| 0.95* |" in row
    banded = len(QUANTILE_LEVELS) - 1 - len(LEVELS)
    assert f"{banded} (cell, quantile level) pairs have a 95% band, {len(LEVELS)} a " \
           "conservative band instead" in text
    assert next(line for line in text.splitlines() if line.startswith("| all |")).startswith(
        f"| all | {banded} |")
