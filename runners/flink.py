"""Flink: the same portable job, submitted to a Flink job server.

Two ways in, both needing Beam's Flink job server (a Java program; its jar
`beam-runners-flink-<flink version>-job-server-<beam version>.jar` is published on Maven Central,
and as the Docker image `apache/beam_flink<flink version>_job_server`):

* A running job server — `--runner=PortableRunner --job_endpoint=HOST:8099`
  (`job_server_options()`). The job server is started separately, e.g.
  `java -jar beam-runners-flink-1.19-job-server-2.77.0.jar --flink-master=HOST:8081
  --job-host=localhost --job-port=8099`, or `--flink-master=[local]` for an embedded mini-cluster.
* Beam's FlinkRunner starts the job server itself — `--runner=FlinkRunner
  --flink_master=HOST:8081 --flink_job_server_jar=PATH` (`flink_runner_options()`). Without
  `--flink_job_server_jar`, Beam downloads the jar from Maven Central. `--flink_master=[local]`
  runs an embedded Flink mini-cluster inside the job server.

Where the Python workers run (see `ldp_telemetry.runners.portable`): LOOPBACK only when the Flink
task managers can connect back to the submitting machine (true for `[local]`); on a cluster,
EXTERNAL with a worker pool beside each task manager (the SDK image
`apache/beam_python3.11_sdk:2.77.0` started with `--worker_pool`, the project pip-installed in
it) or DOCKER on the task managers with `--setup_file ./setup.py`.

The runner-comparison test runs against Flink when one of these is set:
`LDP_FLINK_JOB_ENDPOINT=HOST:PORT` (a running job server) or
`LDP_FLINK_JOB_SERVER_JAR=PATH` (with `LDP_FLINK_MASTER`, default `[local]`).
"""
from __future__ import annotations

import os
from collections.abc import Mapping

from ldp_telemetry.ldp.base.errors import ConfigError

JOB_ENDPOINT_VARIABLE = "LDP_FLINK_JOB_ENDPOINT"
JOB_SERVER_JAR_VARIABLE = "LDP_FLINK_JOB_SERVER_JAR"
MASTER_VARIABLE = "LDP_FLINK_MASTER"


def job_server_options(job_endpoint: str, environment: str = "LOOPBACK",
                       environment_config: str | None = None,
                       parallelism: int | None = None) -> list[str]:
    """PortableRunner against a running Flink job server at `job_endpoint` (host:port)."""
    args = ["--runner=PortableRunner", f"--job_endpoint={job_endpoint}"]
    return args + _environment_args(environment, environment_config) + _parallelism(parallelism)


def flink_runner_options(flink_master: str = "[local]", job_server_jar: str | None = None,
                         environment: str = "LOOPBACK", environment_config: str | None = None,
                         parallelism: int | None = None) -> list[str]:
    """Beam's FlinkRunner, which starts the job server from `job_server_jar` itself."""
    args = ["--runner=FlinkRunner", f"--flink_master={flink_master}"]
    if job_server_jar:
        args.append(f"--flink_job_server_jar={job_server_jar}")
    return args + _environment_args(environment, environment_config) + _parallelism(parallelism)


def options_from_environment(environ: Mapping[str, str] = os.environ) -> list[str] | None:
    """Flink options from LDP_FLINK_JOB_ENDPOINT or LDP_FLINK_JOB_SERVER_JAR; None when unset."""
    endpoint = environ.get(JOB_ENDPOINT_VARIABLE, "").strip()
    if endpoint:
        return job_server_options(endpoint)
    jar = environ.get(JOB_SERVER_JAR_VARIABLE, "").strip()
    if jar:
        if not os.path.isfile(jar):
            raise ConfigError(f"{JOB_SERVER_JAR_VARIABLE}={jar} is not a file",
                              field=JOB_SERVER_JAR_VARIABLE)
        return flink_runner_options(environ.get(MASTER_VARIABLE, "").strip() or "[local]", jar)
    return None


def _environment_args(environment: str, environment_config: str | None) -> list[str]:
    args = [f"--environment_type={environment.upper()}"]
    if environment_config:
        args.append(f"--environment_config={environment_config}")
    elif environment.upper() == "EXTERNAL":
        raise ConfigError("the EXTERNAL environment needs environment_config=HOST:PORT",
                          field="environment_config")
    return args


def _parallelism(parallelism: int | None) -> list[str]:
    return [] if parallelism is None else [f"--parallelism={parallelism}"]
