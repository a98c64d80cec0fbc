"""Bad command lines and bad CSV input stop with a message that names the problem (exit 2)."""
from __future__ import annotations

import json

import pytest

from ldp_telemetry.pipelines import cli
from ldp_telemetry.pipelines.csv_input import parse_event_times

REGISTRY = {"metrics": [{"name": "m", "protocol": "grr", "epsilon": 1.0,
                         "domain": {"labels": ["a", "b", "c"]}}]}


@pytest.fixture
def files(tmp_path):
    registry = tmp_path / "registry.json"
    registry.write_text(json.dumps(REGISTRY))
    values = tmp_path / "values.csv"
    values.write_text("t,v\n2024-03-01T00:00:00Z,a\n2024-03-01T00:01:00z,b\n1709251260,c\n")
    return registry, values, tmp_path


def simulate(registry, values, out, *extra):
    return cli.main(["simulate", "--registry", str(registry), "--metric", "m", "--input",
                     str(values), "--value-column", "v", "--time-column", "t",
                     "--out", str(out), "--seed", "1", *extra])


def error_of(capsys) -> str:
    return capsys.readouterr().err


def test_iso_times_with_z_and_naive_times_are_utc():
    assert parse_event_times(["2024-03-01T00:00:00Z", "2024-03-01T00:00:01z",
                              "2024-03-01 00:00:02", "2024-03-01T01:00:03+01:00"]).tolist() == [
        1709251200000, 1709251201000, 1709251202000, 1709251203000]


def test_a_column_mixing_formats_names_the_line(files, capsys):
    registry, values, tmp = files
    assert simulate(registry, values, tmp / "out") == 2
    assert "line 4: event time '1709251260'" in error_of(capsys)


OUTSIDE = "outside [1970-01-01T00:00:00Z, 2200-01-01T00:00:00Z)"


@pytest.mark.parametrize("time, why", [("1709251200000", OUTSIDE), ("nan", OUTSIDE),
                                       ("-5", OUTSIDE)])
def test_event_times_out_of_range_are_refused(files, capsys, time, why):
    registry, values, tmp = files
    values.write_text(f"t,v\n1709251200,a\n{time},b\n")
    assert simulate(registry, values, tmp / "out") == 2
    assert f"line 3: event time '{time}' is {why}" in error_of(capsys)


def test_a_short_row_names_its_line(files, capsys):
    registry, values, tmp = files
    values.write_text("t,v\n1709251200,a\n1709251201\n")
    assert simulate(registry, values, tmp / "out") == 2
    assert "line 3: 1 field(s), the header has 2" in error_of(capsys)


def test_simulating_twice_into_one_folder_needs_overwrite(files, capsys):
    registry, values, tmp = files
    values.write_text("t,v\n1709251200,a\n1709251201,b\n1709251202,c\n")
    assert simulate(registry, values, tmp / "out", "--reports-per-file", "1") == 0
    assert len(list((tmp / "out").glob("m-*.avro"))) == 3
    assert simulate(registry, values, tmp / "out") == 2
    assert "already holds 3 report file(s) of metric 'm'" in error_of(capsys)
    assert simulate(registry, values, tmp / "out", "--overwrite") == 0
    assert [p.name for p in (tmp / "out").glob("m-*.avro")] == ["m-00000.avro"]


def test_zero_reports_per_file_is_refused(files, capsys):
    registry, values, tmp = files
    values.write_text("t,v\n1709251200,a\n")
    assert simulate(registry, values, tmp / "out", "--reports-per-file", "0") == 2
    assert "--reports-per-file must be positive, got 0" in error_of(capsys)


@pytest.mark.parametrize("flags, message", [
    (["--window", "60", "--period", "0"], "--period must be in [0.001 s, window]"),
    (["--window", "60", "--window-ofset", "30"], "did you mean --window-offset?"),
    (["--window", "60", "--perod", "30"], "did you mean --period?"),
])
def test_run_refuses_bad_or_misspelt_window_flags(files, capsys, flags, message):
    registry, values, tmp = files
    values.write_text("t,v\n1709251200,a\n")
    assert simulate(registry, values, tmp / "reports") == 0
    code = cli.main(["run", "--registry", str(registry), "--input", str(tmp / "reports/*.avro"),
                     "--output", str(tmp / "out"), *flags])
    assert code == 2 and message in error_of(capsys)
    assert not (tmp / "out").exists()  # nothing ran
