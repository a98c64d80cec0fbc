"""The job built for Dataflow offline (`--dry_run=True --no_auth`); needs apache-beam[gcp]."""
from __future__ import annotations

import io
import json
import os
import tarfile
from pathlib import Path

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.portability.api import beam_runner_api_pb2

from ldp_telemetry.ldp.config.registry import load_registry
from ldp_telemetry.ldp.config.windows import WindowSpec
from ldp_telemetry.pipelines.batch import run_job
from ldp_telemetry.pipelines.graph import build_pipeline
from ldp_telemetry.pipelines.job import EstimateJob
from ldp_telemetry.runners import dataflow

HOUR = 3_600_000
SETUP_FILE = str(Path(__file__).resolve().parents[2] / "setup.py")
REGISTRY_DOC = {"metrics": [
    {"name": "d.grr", "protocol": "grr", "epsilon": 1.0, "domain": {"labels": ["x", "y", "z"]}},
    {"name": "d.olh", "protocol": "olh", "epsilon": 2.0, "domain": {"size": 8}},
]}

needs_gcp = pytest.mark.skipif(dataflow.unavailable_reason() is not None,
                               reason=str(dataflow.unavailable_reason()))


def job(tmp_path, output="gs://ldp-example-bucket/out"):
    path = tmp_path / "registry.json"
    path.write_text(json.dumps(REGISTRY_DOC))
    return EstimateJob(load_registry(path), ("gs://ldp-example-bucket/in/reports-0.avro",),
                       output, WindowSpec(HOUR, HOUR))


def dry_run_args(**kwargs):
    kwargs.setdefault("setup_file", SETUP_FILE)
    return dataflow.dataflow_options("ldp-example", "europe-west1",
                                     "gs://ldp-example-bucket/tmp", dry_run=True, **kwargs)


@needs_gcp
def test_dry_run_builds_the_job_with_stable_step_names_and_the_project_staged(tmp_path):
    options = PipelineOptions(dry_run_args(job_name="ldp-estimate-dry-run"))
    pipeline = beam.Pipeline(options=options)
    build_pipeline(pipeline, job(tmp_path))
    result = pipeline.run()
    result.wait_until_finish()

    proto = dataflow.built_pipeline(result)
    names = {t.unique_name for t in proto.components.transforms.values()}
    # One counting step for every metric: no step name depends on the registry. The reader
    # counts before the grouping and keys its partials by slice itself (no IntoSlices).
    assert {"CountSupport/GroupSlices", "CountSupport/CountSupport",
            "CountSupport/CountReports"} <= names
    assert not any("[" in name for name in names if name.startswith("CountSupport"))
    assert {"ListFiles", "ReadReports", "FinalizeEstimates", "WriteEstimates",
            "WriteDeadLetters"} <= names
    assert result.job.proto.name == "ldp-estimate-dry-run"

    # The workers get the project as an sdist built from setup.py, schemas included.
    [environment] = proto.components.environments.values()
    assert environment.urn == "beam:env:docker:v1"
    staged = {}
    for artifact in environment.dependencies:
        role = beam_runner_api_pb2.ArtifactStagingToRolePayload.FromString(artifact.role_payload)
        source = beam_runner_api_pb2.ArtifactFilePayload.FromString(artifact.type_payload)
        staged[role.staged_name] = source.path
    assert "workflow.tar.gz" in staged
    with tarfile.open(staged["workflow.tar.gz"]) as sdist:
        members = {Path(name).relative_to(Path(name).parts[0]).as_posix()
                   for name in sdist.getnames() if len(Path(name).parts) > 1}
    assert {"setup.py", "schemas/report.avsc", "schemas/window_estimate.avsc",
            "schemas/dead_letter.avsc", "transforms/count.py", "ldp/config/registry.py",
            "runners/dataflow.py"} <= members


@needs_gcp
def test_run_job_reports_a_dry_run_and_creates_no_local_output_dir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    printed = io.StringIO()
    counters = run_job(job(tmp_path), dry_run_args(setup_file=None,
                                                  sdk_container_image="example/ldp:1"), out=printed)
    assert counters == {}
    assert printed.getvalue().strip() == "dry run: the job was built and validated, and not run"
    assert not os.path.exists(tmp_path / "gs:")


def test_bucket_names_are_checked_before_beam_looks_one_up_online():
    with pytest.raises(ValueError, match="temp_location"):
        dataflow.dataflow_options("p", "europe-west1", "gs://b/tmp", setup_file=SETUP_FILE)
    with pytest.raises(ValueError, match="staging_location"):
        dataflow.dataflow_options("p", "europe-west1", "gs://ok-bucket/tmp",
                                  staging_location="/local/dir", setup_file=SETUP_FILE)


def test_workers_need_the_project_named_explicitly(tmp_path):
    with pytest.raises(ValueError, match="setup_file .* or sdk_container_image"):
        dataflow.dataflow_options("p", "europe-west1", "gs://ok-bucket/tmp")
    with pytest.raises(ValueError, match="does not exist"):
        dataflow.dataflow_options("p", "europe-west1", "gs://ok-bucket/tmp",
                                  setup_file=str(tmp_path / "setup.py"))
