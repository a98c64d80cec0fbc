"""Numeric metrics end to end: `ldp simulate` (range check, mapping onto [0, 1]), `ldp run` with
sliding windows, the numeric estimate record (schema, fields, values equal to the window's
finalize without Beam), and streaming panes of a numeric metric through a TestStream."""
from __future__ import annotations

import csv
import glob
import io
import itertools
import json
import subprocess
import sys
from pathlib import Path

import fastavro
import numpy as np
import pytest

from ldp_telemetry.ldp.base.errors import InputError
from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.ldp.config.windows import WindowSpec
from ldp_telemetry.ldp.engine.finalize import finalize_window
from ldp_telemetry.ldp.estimation.histograms import QUANTILE_LEVELS
from ldp_telemetry.pipelines.batch import run_job
from ldp_telemetry.pipelines.cli import main as cli_main
from ldp_telemetry.pipelines.csv_input import map_to_domain
from ldp_telemetry.pipelines.job import EstimateJob
from ldp_telemetry.schemas import load_schema
from ldp_telemetry.schemas.codec import write_reports
from ldp_telemetry.transforms.replay import FilesArrive, WatermarkTo
from tests.json_lines import job_json_lines
from tests.pipelines.test_streaming_panes import run_stream

T0 = 1_709_251_200  # 2024-03-01T00:00:00Z, seconds
HOUR = 3600
REGISTRY_DOC = {"metrics": [
    {"name": "rtt_ms", "protocol": "sw", "epsilon": 1.0,
     "domain": {"low": 0, "high": 800, "buckets": 32},
     "estimator": {"method": "ems", "bootstrap": 3}},
    {"name": "rtt_disc", "protocol": "sw-discrete", "epsilon": 2.0,
     "domain": {"low": 0, "high": 800, "buckets": 16},
     "estimator": {"method": "em", "bootstrap": 2, "max_iterations": 200}},
    {"name": "rtt_hh", "protocol": "hh", "epsilon": 2.0,
     "domain": {"low": 0, "high": 800, "buckets": 16},
     "estimator": {"method": "admm", "bootstrap": 2}},
]}
REGISTRY = parse_registry(REGISTRY_DOC)
NUMERIC_FIELDS = {"bucket_edges", "mean", "variance", "quantiles", "mean_std_error",
                  "quantile_std_errors", "bootstrap_replicates"}


def write_csv(path: Path, values, times) -> None:
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["t", "rtt"])
        writer.writerows(zip(times, values, strict=True))


def test_map_to_domain_scales_onto_the_unit_interval_and_refuses_outside_values():
    config = REGISTRY["rtt_ms"]
    np.testing.assert_allclose(map_to_domain(["0", "200", "800", "400.5"], config),
                               [0, 0.25, 1, 400.5 / 800])
    with pytest.raises(InputError, match=r"3 value\(s\) outside the domain \[0, 800\] of metric "
                                         r"'rtt_ms' \(first at lines 2, 4, 5: '-1', '800.01', "
                                         r"'nan'\)"):
        map_to_domain(["-1", "5", "800.01", "nan"], config)
    with pytest.raises(InputError, match=r"1 value\(s\) .*first at line 3: 'fast'"):
        map_to_domain(["3", "fast"], config)


def test_simulate_cli_refuses_values_outside_the_domain(tmp_path):
    registry = tmp_path / "registry.json"
    registry.write_text(json.dumps(REGISTRY_DOC))
    write_csv(tmp_path / "v.csv", [10, 900, 20, 1000], [T0] * 4)
    done = subprocess.run(
        [sys.executable, "-m", "ldp_telemetry.pipelines.cli", "simulate", "--registry",
         str(registry), "--metric", "rtt_ms", "--input", str(tmp_path / "v.csv"),
         "--value-column", "rtt", "--time-column", "t", "--out", str(tmp_path / "reports")],
        capture_output=True, text=True)
    assert done.returncode != 0
    assert ("2 value(s) outside the domain [0, 800] of metric 'rtt_ms' (first at lines 3, 5: "
            "'900', '1000')") in done.stderr
    assert not glob.glob(str(tmp_path / "reports" / "*.avro"))


_FIRST_IDS = itertools.count(0, 1_000_000)


def simulate(tmp_path, rng, metric, n, start_s, span_s, name):
    config = REGISTRY[metric]
    values = rng.gamma(9.0, 30.0, n).clip(0, 800)
    times = (start_s * 1000 + rng.integers(0, span_s * 1000, n)).astype(np.int64)
    columns = config.protocol.perturb(config.to_unit(values), rng)
    path = str(tmp_path / f"{name}.avro")
    first = next(_FIRST_IDS)  # distinct ids across files: a repeated id counts once
    write_reports(path, metric, config.protocol, first + np.arange(n), times, columns)
    return path, times, columns


def direct(config, parts, start_s, end_s):
    """The window's finalize result computed without Beam from the same payloads."""
    statistic, n = config.protocol.new_statistic(), 0
    for times, columns in parts:
        inside = (times >= start_s * 1000) & (times < end_s * 1000)
        config.protocol.accumulate(statistic, {k: v[inside] for k, v in columns.items()})
        n += int(inside.sum())
    return finalize_window(config, statistic, n)


def check_record(record, config, expected):
    assert record["n"] == expected.n
    assert set(record) >= NUMERIC_FIELDS
    assert record["protocol"] == config.protocol_name and record["epsilon"] == config.epsilon
    assert record["estimator"]["method"] == config.estimator.method
    assert record["estimator"]["iterations"] == expected.estimator.iterations
    assert len(record["bucket_edges"]) == config.d + 1
    assert record["bucket_edges"][0] == 0 and record["bucket_edges"][-1] == 800
    assert len(record["estimate"]) == config.d
    assert sum(record["estimate"]) == pytest.approx(1.0)
    np.testing.assert_allclose(record["estimate"], expected.estimate, rtol=1e-9, atol=1e-15)
    assert record["mean"] == pytest.approx(expected.mean, rel=1e-9)
    assert list(record["quantiles"]) == list(QUANTILE_LEVELS)
    assert record["bootstrap_replicates"] == dict(config.estimator.params)["bootstrap"]
    if expected.unbiased is None:  # only CFO-binning and hierarchies keep one
        assert record["unbiased_estimate"] is None
    else:
        np.testing.assert_allclose(record["unbiased_estimate"], expected.unbiased, rtol=1e-9,
                                   atol=1e-12)
        assert record.get("level_reports") == (None if expected.level_reports is None
                                               else list(expected.level_reports))
    assert record["band_method"] == expected.band_method
    assert record["bands"] == {key: band.as_dict() for key, band in expected.bands.items()}
    fastavro.validation.validate(record, load_schema("window_estimate"), raise_errors=True)


def test_sliding_windows_of_numeric_metrics(tmp_path, capsys):
    rng = np.random.default_rng(21)
    parts = {metric: [] for metric in REGISTRY.by_name}
    files = []
    for metric in REGISTRY.by_name:
        for hour, n in enumerate((1500, 900, 1200)):
            path, times, columns = simulate(tmp_path, rng, metric, n, T0 + hour * HOUR, HOUR,
                                            f"{metric}-{hour}")
            files.append(path)
            parts[metric].append((times, columns))
    job = EstimateJob(REGISTRY, tuple(files), str(tmp_path / "out"),
                      WindowSpec(2 * HOUR * 1000, HOUR * 1000))
    printed = io.StringIO()
    counters = run_job(job, [], out=printed)
    assert counters["records_accepted"] == len(REGISTRY.by_name) * 3600
    records = job_json_lines(tmp_path / "out", "estimates")
    # windows starting at T0 − 1 h .. T0 + 2 h, per metric
    assert len(records) == len(REGISTRY.by_name) * 4
    for record in records:
        config = REGISTRY[record["metric"]]
        start = int(np.datetime64(record["window_start"].rstrip("Z"), "s").astype(int))
        check_record(record, config, direct(config, parts[record["metric"]], start,
                                            start + 2 * HOUR))
    avro_records = []
    for path in glob.glob(str(tmp_path / "out" / "estimates-*.avro")):
        with open(path, "rb") as handle:
            avro_records += list(fastavro.reader(handle))
    assert len(avro_records) == len(records)
    # a hierarchy's quantiles: no 95% band, the conservative whole-bins band beside it
    # (ldp.estimation.bin_quantiles), read back from JSON and Avro alike
    hh = next(record for record in records if record["metric"] == "rtt_hh"
              and record["n"] == 2100)
    band = hh["conservative_bands"]["0.5"]
    assert hh["band_method"] == "none" and hh["bands"]["0.5"] is None
    assert band["lower"] < band["upper"]
    avro_hh = next(record for record in avro_records if record["metric"] == "rtt_hh"
                   and record["n"] == 2100)
    assert avro_hh["conservative_bands"] == hh["conservative_bands"]
    out = str(tmp_path / "out")
    query = ["query", "--output", out, "--metric", "rtt_hh", "--window", hh["window_start"],
             "--quantile", "0.5", "--json"]
    assert cli_main(query) == 0
    answer = json.loads(capsys.readouterr().out)["answers"][0]
    assert answer["band95"] is None and answer["band_method"] == "none"
    assert [answer["conservative_lower"], answer["conservative_upper"]] == [band["lower"],
                                                                            band["upper"]]
    assert cli_main(["show", "--output", out, "--metric", "rtt_hh",
                     "--window", hh["window_start"]]) == 0
    shown = capsys.readouterr().out
    assert "95% band: none" in shown
    assert f" [{band['lower']:.4g}, {band['upper']:.4g}] conservative" in shown
    assert "among the largest" not in shown  # the selection note is a frequency window's


def test_streaming_panes_of_a_numeric_metric(tmp_path):
    """One window of 60 s: an ON_TIME pane with the on-time file, then a LATE pane with both."""
    rng = np.random.default_rng(22)
    config = REGISTRY["rtt_ms"]
    on_time, t1, c1 = simulate(tmp_path, rng, "rtt_ms", 800, T0, 60, "on-time")
    late, t2, c2 = simulate(tmp_path, rng, "rtt_ms", 300, T0, 60, "late")
    steps = [WatermarkTo(T0), FilesArrive((on_time,)), WatermarkTo(T0 + 60),
             FilesArrive((late,)), WatermarkTo(T0 + 500)]
    windows = WindowSpec.from_seconds(60, allowed_lateness=120)
    expected = [("ON_TIME", direct(config, [(t1, c1)], T0, T0 + 60)),
                ("LATE", direct(config, [(t1, c1), (t2, c2)], T0, T0 + 60))]

    def check(records):
        records = sorted((r.json_value() for r in records if r.metric == "rtt_ms"),
                         key=lambda r: r["pane"]["index"])
        assert [r["pane"]["timing"] for r in records] == ["ON_TIME", "LATE"]
        for record, (_, result) in zip(records, expected, strict=True):
            check_record(record, config, result)

    run_stream(windows, steps, check, registry=REGISTRY)


def test_dead_letters_for_bad_square_wave_payloads(tmp_path):
    config = REGISTRY["rtt_ms"]
    b = config.protocol.b
    y = np.array([0.5, 1 + b + 0.1, np.nan, -b])
    path = str(tmp_path / "bad.avro")
    write_reports(path, "rtt_ms", config.protocol, np.arange(4), np.full(4, T0 * 1000),
                  {"y": y})
    job = EstimateJob(REGISTRY, (path,), str(tmp_path / "out"), WindowSpec(HOUR * 1000,
                                                                          HOUR * 1000))
    counters = run_job(job, [], out=io.StringIO())
    assert counters["records_accepted"] == 2
    assert counters["dead_letter.invalid_payload"] == 2
    letters = job_json_lines(tmp_path / "out", "dead_letters")
    assert {letter["reason"] for letter in letters} == {"invalid_payload"}
    assert all("Square Wave" in letter["detail"] for letter in letters)
