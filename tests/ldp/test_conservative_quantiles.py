"""The quantiles of a CFO-binning or hierarchical-histogram record have no 95% band: their band
of whole bins (ldp_telemetry.ldp.estimation.bin_quantiles) is conservative, given beside it as
`conservative_bands` and read by every reader as conservative; Square Wave's are unchanged;
records written before the field still read (fastavro and Apache's `avro`), their quantile band
read as the conservative band it is."""
from __future__ import annotations

import dataclasses
import io
import json

import avro.io
import avro.schema
import fastavro
import pytest

from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.ldp.engine.finalize import finalize_window, numeric_bands
from ldp_telemetry.ldp.estimation.bin_quantiles import (CONSERVATIVE_QUANTILE_REASON,
                                                        bin_quantile_statistic_bands)
from ldp_telemetry.ldp.estimation.histograms import QUANTILE_LEVELS
from ldp_telemetry.ldp.estimation.uncertainty import (BAND_BIAS_CORRECTED, BAND_EXACT, BAND_NONE)
from ldp_telemetry.output.bands import (conservative_band, statistic_band,
                                        statistic_band_method)
from ldp_telemetry.output.estimate import EstimateRecord, record_problem
from ldp_telemetry.output.records import numeric_estimate_record
from ldp_telemetry.output.text import CONSERVATIVE_NOTE, format_numeric
from ldp_telemetry.pipelines.cli import main
from ldp_telemetry.schemas import load_schema
from tests.lognormal_window import lognormal_window

HOUR = 3_600_000


def _config(protocol: str, estimator: str | None = None, output_buckets: int | None = None):
    metric = {"name": "latency", "protocol": protocol, "epsilon": 2.0,
              "domain": {"low": 0, "high": 32, "buckets": 16}}
    if output_buckets is not None:
        metric["domain"]["output_buckets"] = output_buckets
    if estimator is not None:
        metric["estimator"] = {"method": estimator, "bootstrap": 20, "seed": 5}
    return parse_registry({"metrics": [metric]})["latency"]


def _record(protocol: str, n: int = 5_000, seed: int = 3) -> EstimateRecord:
    config = _config(protocol)
    result = finalize_window(config, lognormal_window(config, n, seed), n)
    return EstimateRecord.from_json(numeric_estimate_record(config, result, 0, HOUR).to_json())


def _written_before(record: EstimateRecord) -> EstimateRecord:
    """The record as it was written before `conservative_bands`: the same band in `bands`,
    named exact-variance with the rest (what the band holds as its reason)."""
    held = {key: record.band_reasons[key].split("; the conservative band: ", 1)[1]
            for key in QUANTILE_LEVELS}
    return dataclasses.replace(
        record, band_method=BAND_EXACT, band_methods=None, conservative_bands=None,
        bands={**record.bands, **record.conservative_bands},
        band_reasons={**record.band_reasons, **held},
        fields=record.fields - {"band_methods", "conservative_bands"})


@pytest.mark.parametrize("protocol", ["cfo-grr", "cfo-olh", "hh"])
def test_the_quantiles_have_no_95_band_and_carry_the_whole_bins_band_as_conservative(protocol):
    """Every quantile: `bands` null, its reason CONSERVATIVE_QUANTILE_REASON then what the band
    holds; `conservative_bands` bit for bit bin_quantile_statistic_bands' band (not computed
    otherwise); the mean's and variance's 95% bands stay, exact-variance."""
    config = _config(protocol)
    n = 5_000
    statistic = lognormal_window(config, n, 3)
    made = bin_quantile_statistic_bands(config.protocol, statistic, n, 0.0, 32.0,
                                        config.estimator.method)
    record = _record(protocol)
    value = record.json_value()
    assert value["band_method"] == BAND_NONE
    assert value["band_methods"] == {"mean": BAND_EXACT, "variance": BAND_EXACT}
    assert set(value["conservative_bands"]) == set(QUANTILE_LEVELS)
    for key in QUANTILE_LEVELS:
        assert value["bands"][key] is None
        assert value["band_reasons"][key] == (CONSERVATIVE_QUANTILE_REASON
                                              + "; the conservative band: " + made[key].reason)
        assert value["conservative_bands"][key] == {"lower": made[key].lower,
                                                    "upper": made[key].upper}
        assert statistic_band(record, key) == (None, None)
        assert statistic_band_method(record, key) == BAND_NONE
        assert conservative_band(record, key) == (made[key].lower, made[key].upper)
    assert value["bands"]["mean"] is not None
    assert statistic_band_method(record, "mean") == BAND_EXACT
    assert conservative_band(record, "mean") == (None, None)
    assert record_problem(value) is None
    assert "not a 95% band" in load_schema("window_estimate")["fields"][-1]["doc"]


def test_square_wave_quantiles_keep_their_95_bands_and_have_no_conservative_band():
    """A Square Wave record (EMS) is as before: its quantiles' bias-corrected bands in `bands`,
    no `conservative_bands` in its JSON, null in its Avro record (at 1,024 output buckets: at
    16 the variance's band is widened past CONSERVATIVE_SHARE, so conservative)."""
    config = _config("sw", "ems", 1024)
    statistic = lognormal_window(config, 5_000, 4)
    method, bands, conservative = numeric_bands(config, statistic, 5_000)
    assert method == BAND_BIAS_CORRECTED and conservative is None
    result = finalize_window(config, statistic, 5_000)
    record = numeric_estimate_record(config, result, 0, HOUR)
    value = record.json_value()
    assert "conservative_bands" not in value and value["band_method"] == BAND_BIAS_CORRECTED
    assert value["bands"] == {key: band.as_dict() for key, band in bands.items()}
    assert any(value["bands"][key] is not None for key in QUANTILE_LEVELS)
    assert record.to_avro().get("conservative_bands") is None
    assert all(conservative_band(record, key) == (None, None) for key in QUANTILE_LEVELS)
    assert "conservative" not in format_numeric(record)


def test_a_malformed_conservative_band_is_not_a_record():
    value = _record("cfo-grr").json_value()
    value["conservative_bands"]["0.5"] = {"lower": "x", "upper": 1.0}
    assert "conservative_bands" in record_problem(value)


def _old_schema() -> dict:
    full = load_schema("window_estimate")
    return {**full, "fields": [f for f in full["fields"] if f["name"] != "conservative_bands"]}


@pytest.mark.parametrize("protocol", ["cfo-olh", "hh"])
def test_a_record_written_before_the_field_reads_with_both_libraries(protocol):
    """A record written under the schema before `conservative_bands` resolves against today's
    with the field null (fastavro and Apache's reference `avro`); a record of today's writes
    and reads back through Avro unchanged."""
    record = _record(protocol)
    old = _written_before(record)
    buffer = io.BytesIO()
    fastavro.writer(buffer, fastavro.parse_schema(_old_schema()), [old.to_avro()])
    buffer.seek(0)
    (read,) = list(fastavro.reader(buffer, reader_schema=fastavro.parse_schema(
        load_schema("window_estimate"))))
    assert read["conservative_bands"] is None
    assert EstimateRecord.from_avro(read).to_json() == old.to_json()
    writer = io.BytesIO()
    fastavro.schemaless_writer(writer, fastavro.parse_schema(_old_schema()), old.to_avro())
    reference = avro.io.DatumReader(avro.schema.parse(json.dumps(_old_schema())),
                                    avro.schema.parse(json.dumps(load_schema("window_estimate"))))
    decoded = reference.read(avro.io.BinaryDecoder(io.BytesIO(writer.getvalue())))
    assert decoded["conservative_bands"] is None and decoded["bands"] == old.bands
    buffer = io.BytesIO()
    fastavro.writer(buffer, fastavro.parse_schema(load_schema("window_estimate")),
                    [record.to_avro()])
    buffer.seek(0)
    (again,) = list(fastavro.reader(buffer))
    assert EstimateRecord.from_avro(again).to_json() == record.to_json()


def test_a_record_written_before_the_field_shows_its_quantile_band_as_conservative(
        tmp_path, capsys):
    """An older CFO-binning record's quantile band (then named exact-variance) is read as
    today's: no 95% band, the same band as conservative, in `ldp show` and `ldp query`."""
    record = _record("cfo-grr")
    old = _written_before(record)
    for key in QUANTILE_LEVELS:
        assert statistic_band(old, key) == (None, None)
        assert statistic_band_method(old, key) == BAND_NONE
        assert conservative_band(old, key) == conservative_band(record, key)
    assert statistic_band(old, "mean") == statistic_band(record, "mean")
    # the Python API reads it so too, not only the command line
    from ldp_telemetry.ldp.estimation.numeric_queries import NumericWindow
    answer = NumericWindow.from_record(old).quantile(0.5)
    assert answer.band is None and answer.band_method == BAND_NONE
    assert answer.band_reason == record.band_reasons["0.5"]
    (tmp_path / "estimates-00000-of-00001.jsonl").write_text(old.to_json() + "\n")
    assert main(["show", "--output", str(tmp_path), "--metric", "latency"]) == 0
    shown = capsys.readouterr().out
    lower, upper = conservative_band(record, "0.5")
    line = next(line for line in shown.splitlines() if line.strip().startswith("q0.5"))
    assert line.endswith(f" [{lower:.4g}, {upper:.4g}] conservative")
    assert CONSERVATIVE_NOTE in shown
    query = ["query", "--output", str(tmp_path), "--metric", "latency", "--window",
             old.window_start]
    assert main([*query, "--quantile", "0.5", "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)["answers"][0]
    assert answer["band95"] is None and answer["band_method"] == BAND_NONE
    assert answer["band_reason"] == record.band_reasons["0.5"]
    assert (answer["conservative_lower"], answer["conservative_upper"],
            answer["conservative_method"]) == (lower, upper, "whole-bins")


def test_the_coverage_summary_counts_the_conservative_band_and_declares_the_quantiles():
    """benchmarks/coverage_summary.py: the whole-bins quantile rows keep their measured coverage
    under CONSERVATIVE_LABEL (rendered unquoted, as a band that is not used), and CFO-binning
    and HH quantiles are among the families declared without a 95% band."""
    from ldp_telemetry.ldp.estimation.uncertainty import CONSERVATIVE_LABEL
    from tests.benchmark_scripts import loaded_scripts
    with loaded_scripts("coverage_summary") as scripts:
        summary = scripts["coverage_summary"]
        rows = summary.bin_quantile_rows(
            {"levels": ["0.5", "0.9"],
             "cells": [{"coverage": {"whole-bins": {"0.5": 0.99, "0.9": 0.95}},
                        "windows": 300}]})
        table = summary.markdown(rows + [{"family": family, "band": band, "pairs": 0,
                                          "declared": None, "note": why}
                                         for family, band, why in summary.DECLARED])
    (row,) = rows
    assert (row["band"], row["pairs"], row["above"], row["inside"]) == (
        CONSERVATIVE_LABEL, 2, 1, 1)
    assert f"| {CONSERVATIVE_LABEL} | 2 |" in table
    declared = [line for line in table.splitlines()
                if line.startswith("| CFO-binning and HH quantiles | `none` |")]
    assert len(declared) == 1 and "conservative band is given instead" in declared[0]
    assert "benchmarks/coverage_bin_quantiles.py" in declared[0]


def test_the_store_and_the_dashboard_give_no_95_band_and_the_conservative_band(tmp_path):
    """Through the store: the quantiles' summary rows have no 95% band (their reason in the
    stored record), the mean's keeps its own; the dashboard's window has `quantile_bands`
    None and `conservative_quantile_bands` the record's conservative band; the record read
    back keeps `conservative_bands`."""
    from ldp_telemetry.dashboard.source import StoreSource
    from ldp_telemetry.output.layout import version_label
    from ldp_telemetry.store import open_store
    record = _record("hh")
    url = f"sqlite:///{tmp_path}/bands.db"
    with open_store(url) as store:
        store.write_panes([record])
    with open_store(url, create=False) as store:
        saved = {statistic: (low, high) for statistic, low, high in store._query(
            "SELECT statistic, lower95, upper95 FROM ldp_window_summaries")}
    assert all(saved[f"q{key}"] == (None, None) for key in QUANTILE_LEVELS)
    assert saved["mean"] == statistic_band(record, "mean")
    source = StoreSource(url)
    try:
        window = source.window("latency", record.start_ms, record.end_ms,
                               version_label(record.json_value()))
    finally:
        source.close()
    for key in QUANTILE_LEVELS:
        assert window["quantile_bands"][key] is None
        assert window["conservative_quantile_bands"][key] == pytest.approx(
            list(conservative_band(record, key)))
    assert window["conservative_bands"] == record.conservative_bands
    assert window["band_reasons"]["0.5"].startswith(CONSERVATIVE_QUANTILE_REASON)
