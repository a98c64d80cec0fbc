"""A throw-away PostgreSQL server for tests: initdb into a temporary folder, pg_ctl start on a
Unix socket in it (no TCP port), stopped and removed afterwards.

PostgreSQL refuses to run as root, so as root the server runs as the `postgres` system user
(created by Debian's `postgresql` package). `start_server()` returns (url, stop) or raises
`Unavailable` with the reason a test should skip with.
"""
from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile

START_TIMEOUT_S = 60


class Unavailable(RuntimeError):
    """PostgreSQL cannot be started here; the message says why."""


def server_binaries() -> str:
    """The newest /usr/lib/postgresql/*/bin holding initdb and pg_ctl, or Unavailable."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                   key=lambda p: int(p.split("/")[4]) if p.split("/")[4].isdigit() else 0)
    if found:
        return os.path.dirname(found[-1])
    initdb = shutil.which("initdb")
    if initdb:
        return os.path.dirname(initdb)
    raise Unavailable("PostgreSQL server binaries not found (Debian: apt-get install postgresql)")


def start_server():
    """Start a server; returns (psycopg URL, stop function)."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        raise Unavailable("psycopg is not installed (pip install 'ldp-telemetry[postgres]')") \
            from None
    binaries = server_binaries()
    run_as: list[str] = []
    owner = None
    if os.geteuid() == 0:
        try:
            owner = pwd.getpwnam("postgres")
        except KeyError:
            raise Unavailable("running as root and there is no 'postgres' user to run the "
                              "server as (PostgreSQL refuses root)") from None
        run_as = ["runuser", "-u", "postgres", "--"]
    folder = tempfile.mkdtemp(prefix="ldp-pg-")
    if owner is not None:
        os.chown(folder, owner.pw_uid, owner.pw_gid)
    data = os.path.join(folder, "data")

    def run(*command: str, timeout: float = START_TIMEOUT_S) -> None:
        done = subprocess.run([*run_as, *command], capture_output=True, text=True,
                              timeout=timeout, check=False)
        if done.returncode != 0:
            raise Unavailable(f"{os.path.basename(command[0])} failed: "
                              f"{(done.stderr or done.stdout).strip()[-500:]}")

    try:
        run(f"{binaries}/initdb", "-D", data, "-U", "ldp", "-A", "trust", "--no-sync",
            "-E", "UTF8", "--locale", "C")
        run(f"{binaries}/pg_ctl", "-D", data, "-w", "-t", str(START_TIMEOUT_S), "-l",
            os.path.join(folder, "server.log"), "-o",
            f"-c listen_addresses='' -c unix_socket_directories='{folder}' -c fsync=off",
            "start")
    except (Unavailable, OSError, subprocess.TimeoutExpired) as error:
        shutil.rmtree(folder, ignore_errors=True)
        raise Unavailable(f"PostgreSQL did not start: {error}") from None

    def stop() -> None:
        subprocess.run([*run_as, f"{binaries}/pg_ctl", "-D", data, "-m", "immediate", "-w",
                        "stop"], capture_output=True, timeout=START_TIMEOUT_S, check=False)
        shutil.rmtree(folder, ignore_errors=True)

    return f"postgresql://ldp@/postgres?host={folder}", stop
