"""The portable runner: a job service that speaks Beam's Job API, and where the SDK workers run.

A Flink job server exposes the same Job API as Beam's local job service
(`apache_beam.runners.portability.local_job_service_main`), so a job that runs here with
`--runner=PortableRunner --job_endpoint=localhost:PORT` is submitted to Flink by changing the
endpoint (see `ldp_telemetry.runners.flink`).

Where the Python SDK workers run is the *environment*:

* `LOOPBACK` — in the submitting process (a worker pool Beam starts beside the client). The job
  service must be able to reach the client; good for local runs and tests.
* `EXTERNAL` — in a worker pool service at `--environment_config=localhost:PORT`, e.g. one started
  by `local_worker_pool()` or `python -m apache_beam.runners.worker.worker_pool_main`.
  The pool imports the project from its own environment: it must be installed there
  (`pip install .`), or on its PYTHONPATH (as `local_worker_pool()` arranges for this checkout).
* `DOCKER` (Beam's default) — an `apache/beam_python3.X_sdk` container per worker; needs Docker
  and the project staged with `--setup_file ./setup.py`.

`local_job_service()` and `local_worker_pool()` start the services as subprocesses bound to
localhost on a free port, wait (bounded) until they accept connections, and stop them on exit.
"""
from __future__ import annotations

import argparse
import contextlib
import logging
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from ldp_telemetry.ldp.base.errors import ConfigError
from ldp_telemetry.output.atomic import write_atomically

_LOGGER = logging.getLogger(__name__)

STARTUP_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 10.0


class ServiceStartError(OSError):
    """A local service exited or did not accept connections in time."""


def portable_options(job_endpoint: str, environment: str = "LOOPBACK",
                     worker_pool: str | None = None) -> list[str]:
    """Pipeline arguments for PortableRunner against `job_endpoint` (host:port).

    `environment` is LOOPBACK (workers in this process) or EXTERNAL (workers in the pool at
    `worker_pool`, host:port).
    """
    environment = environment.upper()
    args = ["--runner=PortableRunner", f"--job_endpoint={job_endpoint}",
            f"--environment_type={environment}"]
    if environment == "EXTERNAL":
        if not worker_pool:
            raise ConfigError("the EXTERNAL environment needs a worker pool address",
                              field="worker_pool")
        args.append(f"--environment_config={worker_pool}")
    elif worker_pool:
        raise ConfigError(f"a worker pool is only used by the EXTERNAL environment, "
                          f"not {environment}", field="worker_pool")
    return args


@contextlib.contextmanager
def local_job_service(startup_timeout: float = STARTUP_TIMEOUT_S,
                      python: str = sys.executable) -> Iterator[str]:
    """Run Beam's local job service in a subprocess; yields its endpoint `localhost:PORT`.

    The service picks a free port itself and writes it to a file (no race between choosing a
    port and binding it). Raises ServiceStartError, with the service's output, when it exits or
    does not accept connections within `startup_timeout` seconds.
    """
    command = [python, "-m", "apache_beam.runners.portability.local_job_service_main",
               "--port", "0"]
    with _service(command, "--port_file", "job service", startup_timeout) as endpoint:
        yield endpoint


@contextlib.contextmanager
def local_worker_pool(startup_timeout: float = STARTUP_TIMEOUT_S, python: str = sys.executable,
                      use_process: bool = False) -> Iterator[str]:
    """Run an SDK worker pool for the EXTERNAL environment; yields `localhost:PORT`.

    The pool (`python -m ldp_telemetry.runners.portable worker-pool`) binds localhost only and
    runs each worker as a thread of the pool process, or with `use_process` as a process of
    `python`. Its workers import the package installed in `python`'s environment, as workers on
    a cluster do.
    """
    command = [python, "-m", "ldp_telemetry.runners.portable", "worker-pool"]
    if use_process:
        command.append("--use-process")
    with _service(command, "--port-file", "worker pool", startup_timeout) as endpoint:
        yield endpoint


@contextlib.contextmanager
def _service(command: list[str], port_file_flag: str, what: str, startup_timeout: float,
             env: dict | None = None) -> Iterator[str]:
    with tempfile.TemporaryDirectory(prefix="ldp-service-") as folder:
        port_file = Path(folder) / "port"
        log_path = Path(folder) / "service.log"
        with open(log_path, "wb") as log:
            process = subprocess.Popen([*command, port_file_flag, str(port_file)],
                                       stdout=log, stderr=subprocess.STDOUT, env=env,
                                       cwd=folder)
        try:
            endpoint = _wait_until_serving(process, port_file, startup_timeout, what, log_path)
            _LOGGER.info("%s serving at %s (pid %d)", what, endpoint, process.pid)
            yield endpoint
        finally:
            _stop(process)


def _wait_until_serving(process: subprocess.Popen, port_file: Path, timeout: float, what: str,
                        log_path: Path) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise ServiceStartError(f"the {what} exited with code {process.returncode}:\n"
                                    f"{_tail(log_path)}")
        port = _read_port(port_file)
        if port is not None and _accepts_connections("localhost", port):
            return f"localhost:{port}"
        time.sleep(0.05)
    raise ServiceStartError(f"the {what} did not accept connections within {timeout:g} s:\n"
                            f"{_tail(log_path)}")


def _read_port(port_file: Path) -> int | None:
    try:
        text = port_file.read_text().strip()
    except FileNotFoundError:
        return None
    return int(text) if text.isdigit() else None


def _accepts_connections(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1.0):
            return True
    except OSError:
        return False


def _stop(process: subprocess.Popen) -> None:
    """SIGTERM (both services exit cleanly on it), then SIGKILL after STOP_TIMEOUT_S."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        _LOGGER.warning("pid %d did not stop within %g s; killing it", process.pid,
                        STOP_TIMEOUT_S)
        process.kill()
        process.wait()


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no output)"


def has_option(beam_args: Sequence[str], name: str) -> bool:
    """Whether `--name` (as `--name=V` or `--name V`) is among the pipeline arguments."""
    return any(arg == f"--{name}" or arg.startswith(f"--{name}=") for arg in beam_args)


def runner_name(beam_args: Sequence[str]) -> str | None:
    """The value of --runner in the pipeline arguments, if any."""
    for i, arg in enumerate(beam_args):
        if arg.startswith("--runner="):
            return arg.split("=", 1)[1]
        if arg == "--runner" and i + 1 < len(beam_args):
            return beam_args[i + 1]
    return None


@contextlib.contextmanager
def with_local_job_service(beam_args: Sequence[str], out=None) -> Iterator[list[str]]:
    """`--runner=PortableRunner` without `--job_endpoint`: start a local job service for the run.

    Yields the arguments with `--job_endpoint` added (and `--environment_type=LOOPBACK` unless
    an environment is named). Any other arguments are yielded unchanged.
    """
    args = list(beam_args)
    if runner_name(args) != "PortableRunner" or has_option(args, "job_endpoint"):
        yield args
        return
    with local_job_service() as endpoint:
        print(f"started a local job service at {endpoint} for this run",
              file=out or sys.stderr)
        args.append(f"--job_endpoint={endpoint}")
        if not has_option(args, "environment_type"):
            args.append("--environment_type=LOOPBACK")
        yield args


# -- the worker pool service -------------------------------------------------------------------

def serve_worker_pool(port_file: str, use_process: bool = False) -> None:
    """Serve Beam's SDK worker pool on localhost until SIGTERM or SIGINT.

    Beam's own launcher (`worker_pool_main`) binds every interface; this one binds localhost
    and writes the chosen port to `port_file` once it is serving.
    """
    import signal
    import threading
    from concurrent import futures

    import grpc
    from apache_beam.portability.api import beam_fn_api_pb2, beam_fn_api_pb2_grpc
    from apache_beam.runners.worker.worker_pool_main import BeamFnExternalWorkerPoolServicer

    if use_process:  # Beam starts process workers as `python`: make that this interpreter
        os.environ["PATH"] = os.pathsep.join([os.path.dirname(sys.executable),
                                              os.environ.get("PATH", "")])
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16),
                         options=[("grpc.http2.max_pings_without_data", 0),
                                  ("grpc.http2.max_ping_strikes", 0)])
    pool = BeamFnExternalWorkerPoolServicer(use_process=use_process)
    beam_fn_api_pb2_grpc.add_BeamFnExternalWorkerPoolServicer_to_server(pool, server)
    port = server.add_insecure_port("localhost:0")
    server.start()
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    signal.signal(signal.SIGINT, lambda *_: stopped.set())
    write_atomically(port_file, str(port), fsync=False)
    print(f"worker pool serving at localhost:{port}", flush=True)
    stopped.wait()
    # Process workers the job service did not stop (Beam's launcher does this at exit too).
    for worker_id in list(pool._worker_processes):
        pool.StopWorker(beam_fn_api_pb2.StopWorkerRequest(worker_id=worker_id), None)
    server.stop(1).wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ldp_telemetry.runners.portable")
    commands = parser.add_subparsers(dest="command", required=True)
    pool = commands.add_parser("worker-pool", help="serve an SDK worker pool on localhost")
    pool.add_argument("--port-file", required=True, help="write the chosen port here")
    pool.add_argument("--use-process", action="store_true",
                      help="run each worker as a process instead of a thread")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO)
    serve_worker_pool(args.port_file, args.use_process)
    return 0


if __name__ == "__main__":
    sys.exit(main())
