"""The job on the PortableRunner through a real local job service (the Job API a Flink job
server exposes), with LOOPBACK and EXTERNAL workers, against the FnApiRunner run."""
from __future__ import annotations

import socket

import pytest

from ldp_telemetry.pipelines import cli
from ldp_telemetry.runners.portable import (ServiceStartError, local_job_service, local_worker_pool,
                                            portable_options, with_local_job_service)

pytestmark = pytest.mark.slow  # job services and worker pools in subprocesses

@pytest.fixture(scope="module")
def job_endpoint():
    with local_job_service() as endpoint:
        yield endpoint


def accepts_connections(endpoint: str) -> bool:
    host, port = endpoint.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=1):
            return True
    except OSError:
        return False


def test_loopback_run_matches_fn_api_runner(comparison_input, job_endpoint, tmp_path):
    assert job_endpoint.startswith("localhost:")
    got = comparison_input.run(tmp_path / "out", portable_options(job_endpoint, "LOOPBACK"))
    comparison_input.assert_matches_reference(got)


def test_external_worker_pool_run_matches_fn_api_runner(comparison_input, job_endpoint,
                                                        tmp_path):
    # The workers run in another process: every element (ReportBatch, SupportStatistic) and
    # every DoFn crosses a process boundary, and the pool imports the project on its own.
    with local_worker_pool() as pool:
        got = comparison_input.run(tmp_path / "out",
                                   portable_options(job_endpoint, "EXTERNAL", pool))
    assert not accepts_connections(pool)
    comparison_input.assert_matches_reference(got)


def test_auto_started_job_service_for_a_portable_run_without_endpoint(capsys):
    args = ["--runner=PortableRunner", "--streaming=false"]
    with with_local_job_service(args) as started:
        [endpoint] = [a.split("=", 1)[1] for a in started if a.startswith("--job_endpoint=")]
        assert started[:2] == args and "--environment_type=LOOPBACK" in started
        assert accepts_connections(endpoint)
    assert not accepts_connections(endpoint)  # stopped on exit
    assert f"started a local job service at {endpoint}" in capsys.readouterr().err

    for unchanged in (["--runner=PortableRunner", "--job_endpoint=localhost:1"],
                      ["--runner=FnApiRunner"], []):
        with with_local_job_service(unchanged) as same:
            assert same == unchanged


def test_ldp_run_passes_the_started_endpoint_to_the_job(monkeypatch, tmp_path):
    seen = {}
    monkeypatch.setattr("ldp_telemetry.pipelines.batch.run_job",
                        lambda job, beam_args, out=None: seen.setdefault("args", beam_args)
                        and {})  # the run's counters: none
    monkeypatch.setattr("ldp_telemetry.pipelines.job.job_from_arguments",
                        lambda args: type("Job", (), {"output": str(tmp_path)})())
    monkeypatch.setattr("ldp_telemetry.runners.portable.local_job_service", fake_service)
    assert cli.main(["run", "--registry", "r.json", "--input", "x.avro", "--output",
                     str(tmp_path), "--window", "60", "--runner=PortableRunner",
                     "--environment_type=EXTERNAL", "--environment_config=localhost:2"]) == 0
    assert seen["args"] == ["--runner=PortableRunner", "--environment_type=EXTERNAL",
                            "--environment_config=localhost:2",
                            "--job_endpoint=localhost:5555"]


def fake_service():
    from contextlib import contextmanager

    @contextmanager
    def service():
        yield "localhost:5555"
    return service()


def test_a_service_that_exits_at_once_is_reported():
    with pytest.raises(ServiceStartError, match="exited with code 1"), \
            local_job_service(python="/bin/false"):
        pass


def test_a_service_that_never_listens_is_stopped_after_the_bounded_wait(tmp_path):
    silent = tmp_path / "silent"
    silent.write_text("#!/bin/sh\nexec sleep 60\n")
    silent.chmod(0o755)
    with pytest.raises(ServiceStartError, match="did not accept connections within 0.5 s"), \
            local_job_service(startup_timeout=0.5, python=str(silent)):
        pass


def test_portable_options():
    assert portable_options("localhost:8099") == [
        "--runner=PortableRunner", "--job_endpoint=localhost:8099", "--environment_type=LOOPBACK"]
    assert portable_options("localhost:8099", "external", "localhost:50000")[-2:] == [
        "--environment_type=EXTERNAL", "--environment_config=localhost:50000"]
    with pytest.raises(ValueError):
        portable_options("localhost:8099", "EXTERNAL")
    with pytest.raises(ValueError):
        portable_options("localhost:8099", "LOOPBACK", "localhost:50000")


def test_step_labels_in_the_portable_pipeline_are_stable(comparison_input):
    import apache_beam as beam

    from ldp_telemetry.pipelines.graph import build_pipeline
    pipeline = beam.Pipeline(runner="PortableRunner")
    build_pipeline(pipeline, comparison_input.job)
    names = {t.unique_name for t in pipeline.to_runner_api().components.transforms.values()}
    # The reader counts before the grouping and keys its partials by slice itself (no
    # IntoSlices in a batch job without panes).
    assert {"CountSupport/GroupSlices", "CountSupport/CountSupport",
            "CountSupport/IntoWindows", "CountSupport/MergeSlices"} <= names
    assert "CountSupport/IntoSlices" not in names
    # One counting step for every metric: no step name depends on the registry.
    assert not any(metric in name for name in names for metric in ("r.grr", "r.oue", "r.olh"))
