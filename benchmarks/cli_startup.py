"""Start-up time of the `ldp` commands, each a fresh interpreter.

Runs every command --runs times, round-robin (so a change in the machine's load touches every
command alike), and prints per command the median wall time and the median CPU time (user +
system of the child process; the steadier figure on a shared machine), and the ratio of its
CPU time to `ldp run --help`, the one command here that imports Apache Beam.

    python benchmarks/cli_startup.py --runs 5 [--json PATH]
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

from bench_json import Run, add_json_argument

COMMANDS = {
    "plan": ["plan", "--epsilon", "1", "--domain", "100"],
    "--help": ["--help"],
    "query --help": ["query", "--help"],
    "run --help": ["run", "--help"],
}
LAUNCH = "import sys; from ldp_telemetry.pipelines.cli import main; sys.exit(main())"


def time_once(args: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one `ldp ARGS` in a fresh interpreter."""
    before = os.times()
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", LAUNCH, *args], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = os.times()
    cpu = (after.children_user - before.children_user) + (after.children_system
                                                          - before.children_system)
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    add_json_argument(parser)
    args = parser.parse_args()
    with Run("cli_startup", args.json, vars(args)) as run:
        run.save(measure(args.runs))


def measure(runs: int) -> dict:
    """Print and return the medians of each command."""
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in COMMANDS}
    for args in COMMANDS.values():  # warm-up: file caches, .pyc files
        time_once(args)
    for _ in range(runs):
        for name, args in COMMANDS.items():
            times[name].append(time_once(args))
    reference = statistics.median(cpu for _, cpu in times["run --help"])
    print(f"{'command':<18} {'wall median':>12} {'CPU median':>11} {'CPU / run --help':>17}")
    rows = []
    for name, samples in times.items():
        wall = statistics.median(w for w, _ in samples)
        cpu = statistics.median(c for _, c in samples)
        print(f"{'ldp ' + name:<18} {wall:>11.3f}s {cpu:>10.3f}s {cpu / reference:>17.2f}")
        rows.append({"command": f"ldp {' '.join(COMMANDS[name])}", "wall_s": wall, "cpu_s": cpu,
                     "cpu_over_run_help": cpu / reference})
    return {"commands": rows}


if __name__ == "__main__":
    main()
