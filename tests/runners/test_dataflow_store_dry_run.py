"""`--store bigquery://PROJECT/DATASET` on Dataflow: the same rows go to BigQuery, built offline."""
from __future__ import annotations

import dataclasses

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from ldp_telemetry.pipelines.graph import build_pipeline
from ldp_telemetry.runners import dataflow
from ldp_telemetry.transforms.store import BIGQUERY_PANES_SCHEMA, bigquery_pane_row, check_store_url
from tests.runners.test_dataflow_dry_run import dry_run_args, job, needs_gcp


@needs_gcp
def test_dry_run_writes_panes_and_rejects_to_bigquery(tmp_path):
    options = PipelineOptions(dry_run_args(job_name="ldp-store-dry-run"))
    pipeline = beam.Pipeline(options=options)
    build_pipeline(pipeline, dataclasses.replace(job(tmp_path),
                                                 store="bigquery://ldp-example/telemetry"))
    result = pipeline.run()
    result.wait_until_finish()

    proto = dataflow.built_pipeline(result)
    names = {t.unique_name for t in proto.components.transforms.values()}
    assert {"WriteToStore/PaneRows", "WriteToStore/WritePanesToBigQuery",
            "WriteToStore/RejectSlices", "WriteToStore/CountRejects",
            "WriteToStore/WriteRejectsToBigQuery"} <= names
    text = str(proto)
    assert "ldp-example:telemetry.ldp_panes" in text and "ldp-example:telemetry.ldp_rejects" in text
    assert not any(name.startswith("WriteToStore/WritePanes/") for name in names)  # no SQL sink


def test_a_pane_becomes_one_bigquery_row_with_its_values_nested():
    record = {"metric": "m", "window_start": "2024-03-01T00:00:00Z",
              "window_end": "2024-03-01T01:00:00Z", "n": 400, "protocol": "grr",
              "epsilon": 2.0, "estimator": {"method": "unbiased", "params": {}},
              "postprocess": {"method": "norm-sub", "params": {}}, "labels": ["a", "b"],
              "estimate": [0.75, 0.25], "unbiased_estimate": [0.8, 0.2],
              "std_error": [0.05, 0.05], "pane": {"timing": "LATE", "index": 2,
                                                  "is_last": False}}
    row = bigquery_pane_row(record)
    assert set(row) == {field["name"] for field in BIGQUERY_PANES_SCHEMA["fields"]}
    assert (row["pane_timing"], row["pane_index"], row["estimator"]) == ("LATE", 2, "unbiased")
    assert [v["label"] for v in row["values"]] == ["a", "b"]
    assert row["values"][0]["lower95"] == pytest.approx(0.8 - 1.959964 * 0.05)  # unbiased's


def test_bigquery_urls_name_a_project_and_a_dataset():
    check_store_url("bigquery://p/d")
    with pytest.raises(ValueError, match="bigquery://PROJECT/DATASET"):
        check_store_url("bigquery://only-project")
