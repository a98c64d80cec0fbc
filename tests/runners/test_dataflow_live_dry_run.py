"""The live job for Dataflow — Pub/Sub report messages in, panes out — built offline
(`--dry_run=True --no_auth --streaming`); needs apache-beam[gcp] and skips without it."""
from __future__ import annotations

import io
import json
from pathlib import Path

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from ldp_telemetry.ldp.config.registry import load_registry
from ldp_telemetry.ldp.config.windows import WindowSpec
from ldp_telemetry.pipelines.job import EstimateJob, LiveConfig
from ldp_telemetry.pipelines.live import run_live
from ldp_telemetry.pipelines.remote import build_remote_pipeline
from ldp_telemetry.runners import dataflow

SETUP_FILE = str(Path(__file__).resolve().parents[2] / "setup.py")
SUBSCRIPTION = "projects/ldp-example/subscriptions/reports"
needs_gcp = pytest.mark.skipif(dataflow.unavailable_reason() is not None,
                               reason=str(dataflow.unavailable_reason()))


def job(tmp_path):
    path = tmp_path / "registry.json"
    path.write_text(json.dumps({"metrics": [
        {"name": "d.grr", "protocol": "grr", "epsilon": 1.0, "domain": {"size": 3}},
        {"name": "d.oue", "protocol": "oue", "epsilon": 1.0, "domain": {"size": 5}}]}))
    return EstimateJob(load_registry(path), (), "gs://ldp-example-bucket/live",
                       WindowSpec(60_000, 60_000, allowed_lateness_ms=600_000,
                                  early_every_ms=10_000))


def dry_run_args():
    return dataflow.dataflow_options("ldp-example", "europe-west1", "gs://ldp-example-bucket/tmp",
                                     setup_file=SETUP_FILE, job_name="ldp-live-dry-run",
                                     dry_run=True) + ["--streaming"]


@needs_gcp
def test_the_dataflow_live_job_reads_pubsub_and_writes_panes(tmp_path):
    options = PipelineOptions(dry_run_args())
    pipeline = beam.Pipeline(options=options)
    build_remote_pipeline(pipeline, job(tmp_path), LiveConfig("pubsub", SUBSCRIPTION))
    result = pipeline.run()
    result.wait_until_finish()
    proto = dataflow.built_pipeline(result)
    names = {t.unique_name for t in proto.components.transforms.values()}
    assert {"ReadReports/ReadMessages", "ReadReports/DecodeMessages", "FinalizeEstimates",
            "WritePanes", "WriteDeadLetters"} <= names
    read = next(t for t in proto.components.transforms.values()
                if t.unique_name == "ReadReports/ReadMessages")
    payload = read.SerializeToString()
    # the message contract: event time and id attributes, the subscription
    for text in (b"event_time", b"message_id", SUBSCRIPTION.encode()):
        assert text in payload or text in proto.SerializeToString(), text
    assert result.job.proto.type.name == "JOB_TYPE_STREAMING"
    assert result.job.proto.name == "ldp-live-dry-run"


@needs_gcp
def test_ldp_run_follow_pubsub_dry_run_prints_and_returns(tmp_path):
    printed = io.StringIO()
    counters = run_live(job(tmp_path), LiveConfig("pubsub", SUBSCRIPTION), dry_run_args(),
                        out=printed)
    assert counters == {}
    assert printed.getvalue().strip() == "dry run: the job was built and validated, and not run"
