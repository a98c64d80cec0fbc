"""One row builder for every kind of store: what SQLite keeps of a pane and the BigQuery row of
the same pane come from `store.records` and agree, for every kind of record (the golden job's:
frequency with and without integrity, a sized domain, numeric with bands, mean only, combined).
Exact comparisons: the rows are copies of the record's numbers."""
from __future__ import annotations

from ldp_telemetry.output.estimate import EstimateRecord
from ldp_telemetry.store import open_store
from ldp_telemetry.store.records import pane_row, summary_rows, value_rows
from ldp_telemetry.transforms.store import BIGQUERY_PANES_SCHEMA, bigquery_pane_row
from tests.output.golden_job import read_golden

COLUMNS = ("version", "n", "protocol", "epsilon", "p_star", "q_star", "smallest_resolvable",
           "estimator", "postprocess", "pane_timing", "pane_index", "pane_is_last", "record")


def test_sql_and_bigquery_rows_of_every_kind_of_record_are_the_same_rows(tmp_path):
    records = [EstimateRecord.from_json(line) for line in read_golden("estimates.jsonl.gz")]
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
