"""The fixed cost of a batch job: the wall and CPU seconds of a job over one report.

Two jobs, each run --runs times in this process after one warm-up run, round-robin (so a change
in the machine's load touches both alike): a job of ONE GRR report (d = 8) and a job of ten
metrics with one report each (ten report files). Their time is what every batch job pays
whatever its input: building the Beam graph, the runner's stages, writing the (nearly empty)
output files. Prints the medians; CPU is this process's user + system time, the steadier
figure on a shared machine (FnApiRunner runs in process).

    python benchmarks/job_start_up.py --runs 7 [--json PATH]
"""
from __future__ import annotations

import argparse
import contextlib
import io
import os
import statistics
import tempfile
import time

import numpy as np
from bench_json import Run, add_json_argument

from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.ldp.config.windows import WindowSpec
from ldp_telemetry.pipelines.batch import run_job
from ldp_telemetry.pipelines.job import EstimateJob
from ldp_telemetry.schemas.writer import write_reports

DAY_S = 86_400
START_MS = 1_700_000_000_000 - 1_700_000_000_000 % (DAY_S * 1000)
CASES = {"1 report": 1, "10 metrics": 10}


def report_files(workdir: str, metrics: int) -> tuple:
    """(registry, paths): `metrics` GRR metrics (d = 8, ε = 2), one file of one report each."""
    registry = parse_registry({"metrics": [
        {"name": f"bench.m{k}", "protocol": "grr", "epsilon": 2.0, "domain": {"size": 8}}
        for k in range(metrics)]})
    rng = np.random.default_rng(1)
    paths = []
    for k in range(metrics):
        protocol = registry[f"bench.m{k}"].protocol
        path = os.path.join(workdir, f"m{k}-of-{metrics}.avro")
        write_reports(path, f"bench.m{k}", protocol, np.arange(1), np.array([START_MS + k]),
                      protocol.perturb(np.array([k % 8]), rng))
        paths.append(path)
    return registry, tuple(paths)


def time_job(registry, paths: tuple) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one batch job over `paths`, output to a new folder."""
    with tempfile.TemporaryDirectory() as output, contextlib.redirect_stderr(io.StringIO()):
        job = EstimateJob(registry, paths, output, WindowSpec.from_seconds(DAY_S))
        before, start = os.times(), time.perf_counter()
        run_job(job, [], out=io.StringIO())
        wall, after = time.perf_counter() - start, os.times()
    return wall, (after.user - before.user) + (after.system - before.system)


def measure(runs: int) -> dict:
    """Print and return the median wall and CPU seconds of each case."""
    with tempfile.TemporaryDirectory() as workdir:
        jobs = {name: report_files(workdir, metrics) for name, metrics in CASES.items()}
        for job in jobs.values():  # warm-up: imports, caches
            time_job(*job)
        samples: dict[str, list[tuple[float, float]]] = {name: [] for name in jobs}
        for _ in range(runs):
            for name, job in jobs.items():
                samples[name].append(time_job(*job))
    print(f"{'job':<12} {'wall median':>12} {'CPU median':>11}   (median of {runs} runs)")
    rows = []
    for name, times in samples.items():
        wall = statistics.median(w for w, _ in times)
        cpu = statistics.median(c for _, c in times)
        print(f"{name:<12} {wall:>11.3f}s {cpu:>10.3f}s")
        rows.append({"job": name, "metrics": CASES[name], "wall_s": wall, "cpu_s": cpu})
    return {"jobs": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    add_json_argument(parser)
    args = parser.parse_args()
    with Run("job_start_up", args.json, vars(args)) as run:
        run.save(measure(args.runs))


if __name__ == "__main__":
    main()
