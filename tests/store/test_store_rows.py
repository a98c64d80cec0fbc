"""One row builder for every kind of store: what SQLite keeps of a pane and the BigQuery row of
the same pane come from `store.records` and agree, for every kind of record (the golden job's:
frequency with and without integrity, a sized domain, numeric with bands, mean only, combined;
and a Wiener filter's, a replayed choice's and a string metric's, made here).
Exact comparisons: the rows are copies of the record's numbers."""
from __future__ import annotations

import numpy as np
import pytest

from ldp_telemetry.client.values import domain_points
from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.ldp.engine.finalize import finalize_window
from ldp_telemetry.output.estimate import EstimateRecord
from ldp_telemetry.output.records import window_estimate_record
from ldp_telemetry.store import open_store
from ldp_telemetry.store.records import pane_row, summary_rows, value_rows
from ldp_telemetry.transforms.store import BIGQUERY_PANES_SCHEMA, bigquery_pane_row
from tests.output.golden_job import read_golden

T0_MS = 1_709_251_200_000  # 2024-03-01T00:00:00Z

COLUMNS = ("version", "n", "protocol", "epsilon", "p_star", "q_star", "smallest_resolvable",
           "estimator", "postprocess", "pane_timing", "pane_index", "pane_is_last", "record")


def later_kinds() -> list[EstimateRecord]:
    """A record of each kind the golden job predates: a pooled-hash oracle's Wiener filter
    (its values banded from `unbiased_std_error`, not the filter's std_error), a replay's
    choice (`postprocess: auto`) and a string metric's heavy hitters."""
    registry = parse_registry({"metrics": [
        {"name": "wiener", "protocol": "flh", "epsilon": 2.0, "domain": {"size": 16},
         "estimator": "iiw"},
        {"name": "auto", "protocol": "grr", "epsilon": 1.0, "domain": {"size": 8},
         "postprocess": "auto"},
        {"name": "strings", "protocol": "pem", "epsilon": 4.0,
         "domain": {"strings": {"max_bytes": 10, "pool": 128}},
         "estimator": {"method": "heavy-hitters", "top": 4}}]})
    rng = np.random.default_rng(8)
    records = []
    for name, values in (("wiener", rng.integers(0, 16, 2000)), ("auto", rng.integers(0, 8, 2000)),
                         ("strings", rng.choice(["mail", "maps", "chat"], 3000))):
        config = registry[name]
        statistic = config.protocol.new_statistic()
        points = domain_points(config, values) if name == "strings" else values
        config.protocol.accumulate(statistic, config.protocol.perturb(points, rng))
        records.append(window_estimate_record(config, finalize_window(config, statistic,
                                                                      len(values)),
                                              T0_MS, T0_MS + 3_600_000))
    return records


def test_sql_and_bigquery_rows_of_every_kind_of_record_are_the_same_rows(tmp_path):
    records = [EstimateRecord.from_json(line) for line in read_golden("estimates.jsonl.gz")]
    wiener, auto, strings = later = later_kinds()
    assert wiener.band_method == "exact-variance" and wiener.unbiased_std_error is not None
    assert auto.postprocess["chosen"]
    assert strings.heavy_hitters is not None and len(strings.labels) > 0
    records += later
    with open_store(f"sqlite:///{tmp_path}/rows.db") as store:
        assert store.write_panes(records) == len(records)
        for record in records:
            key = (record.metric, record.version, record.start_ms, record.end_ms)
            where = ("WHERE metric = ? AND version = ? AND window_start_ms = ? "
                     "AND window_end_ms = ?")
            [window] = store._query(f"SELECT {', '.join(COLUMNS)} FROM ldp_windows {where}", key)
            values = store._query(
                "SELECT value_index, label, estimate, unbiased_estimate, std_error, lower95, "
                f"upper95 FROM ldp_window_values {where} ORDER BY value_index", key)
            summaries = store._query(
                "SELECT statistic, value, std_error, lower95, upper95 FROM ldp_window_summaries "
                f"{where} ORDER BY statistic", key)
            row = bigquery_pane_row(record)
            assert set(row) == {field["name"] for field in BIGQUERY_PANES_SCHEMA["fields"]}
            columns = pane_row(record)
            assert tuple(int(v) if name == "pane_is_last" else v
                         for name, v in zip(COLUMNS, window, strict=True)) == tuple(
                columns[name] for name in COLUMNS) == tuple(row[name] for name in COLUMNS)
            assert record.to_json() == row["record"]
            built = [tuple(value) for value in value_rows(record)]
            assert values == built == [tuple(v.values()) for v in row["values"]]
            assert len(values) == len(record.estimate)
            assert summaries == sorted(summary_rows(record))
            assert bool(summaries) == record.numeric
            if record is wiener:  # the filter's error kept, the band f~ ± z · f~'s error
                assert wiener.unbiased_std_error is not None
                assert all(v[4] == e and v[5] == pytest.approx(v[3] - 1.959963984540054 * u)
                           for v, e, u in zip(values, wiener.std_error,
                                              wiener.unbiased_std_error, strict=True))
            elif record is strings:  # heavy hitters: no band, their standard error kept
                assert all(v[4] is not None and v[5] is None and v[6] is None for v in values)
            elif not record.numeric:
                assert all(v[5] is not None for v in values)
