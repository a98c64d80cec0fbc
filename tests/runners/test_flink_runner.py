"""The job on Flink, compared with FnApiRunner. Runs only where a Flink job server is supplied:
LDP_FLINK_JOB_ENDPOINT=HOST:PORT (a running job server, LOOPBACK workers: the task managers must
reach this machine) or LDP_FLINK_JOB_SERVER_JAR=PATH (Beam's FlinkRunner starts it, on an
embedded mini-cluster unless LDP_FLINK_MASTER names one)."""
from __future__ import annotations

import pytest
from apache_beam.options.pipeline_options import (FlinkRunnerOptions, PipelineOptions,
                                                  PortableOptions, StandardOptions)

from ldp_telemetry.runners import flink

FLINK_ARGS = flink.options_from_environment()


@pytest.mark.skipif(FLINK_ARGS is None,
                    reason=f"no Flink job server: set {flink.JOB_ENDPOINT_VARIABLE} or "
                           f"{flink.JOB_SERVER_JAR_VARIABLE}")
def test_flink_run_matches_fn_api_runner(comparison_input, tmp_path):
    got = comparison_input.run(tmp_path / "out", FLINK_ARGS)
    comparison_input.assert_matches_reference(got)


def test_options_from_the_environment(tmp_path):
    assert flink.options_from_environment({}) is None
    assert flink.options_from_environment({flink.JOB_ENDPOINT_VARIABLE: "localhost:8099"}) == [
        "--runner=PortableRunner", "--job_endpoint=localhost:8099", "--environment_type=LOOPBACK"]
    jar = tmp_path / "beam-runners-flink-1.19-job-server-2.77.0.jar"
    jar.write_bytes(b"")
    args = flink.options_from_environment({flink.JOB_SERVER_JAR_VARIABLE: str(jar)})
    options = PipelineOptions(args)
    assert options.view_as(StandardOptions).runner == "FlinkRunner"
    assert options.view_as(FlinkRunnerOptions).flink_master == "[local]"
    assert options.view_as(FlinkRunnerOptions).flink_job_server_jar == str(jar)
    assert options.view_as(PortableOptions).environment_type == "LOOPBACK"
    args = flink.options_from_environment({flink.JOB_SERVER_JAR_VARIABLE: str(jar),
                                           flink.MASTER_VARIABLE: "flink-jm:8081"})
    assert PipelineOptions(args).view_as(FlinkRunnerOptions).flink_master == "flink-jm:8081"
    with pytest.raises(ValueError, match="is not a file"):
        flink.options_from_environment({flink.JOB_SERVER_JAR_VARIABLE: str(tmp_path / "no.jar")})


def test_cluster_profiles_name_their_worker_environment():
    args = flink.job_server_options("flink-js:8099", "EXTERNAL", "localhost:50000", parallelism=4)
    options = PipelineOptions(args)
    assert options.view_as(PortableOptions).job_endpoint == "flink-js:8099"
    assert options.view_as(PortableOptions).environment_type == "EXTERNAL"
    assert options.view_as(PortableOptions).environment_config == "localhost:50000"
    assert options.view_as(FlinkRunnerOptions).parallelism == 4
    with pytest.raises(ValueError, match="environment_config"):
        flink.flink_runner_options("flink-jm:8081", environment="EXTERNAL")
