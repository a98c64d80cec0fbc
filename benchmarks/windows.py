"""Time per window of the batch job, with finalize's own cost measured apart.

One GRR metric (d values, ε = 2), `--reports-per-window` reports in each of W consecutive
windows of `--window` seconds (one Avro file). Each W runs in its own process (so that its
peak memory is its own), as does a job of 1 window, the start-up cost of any job:
  job          the whole Beam job (FnApiRunner): read, count, windows, finalize, write;
  finalize     `finalize_window` + the estimate record alone, W times (no Beam);
  beyond       (job - job of 1 window - finalize) / W: what the pipeline adds per window
               beyond finalize and start-up.
Each figure is given in wall time and in CPU time of the process (children included): on a
shared machine the CPU times stay readable when other work slows the wall clock. The load
average (1 minute) at the start of each run is printed with it.

    python benchmarks/windows.py --windows 1000 10000 100000 [--repeat 3] [--json PATH]

With `--repeat R` every job (the 1-window one included) runs R times and each column is the
median of its R runs.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np
from bench_json import Run, add_json_argument

from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.ldp.config.windows import WindowSpec
from ldp_telemetry.ldp.engine.finalize import finalize_window
from ldp_telemetry.output.records import BATCH_PANE, window_estimate_record
from ldp_telemetry.pipelines.batch import run_job
from ldp_telemetry.pipelines.job import EstimateJob
from ldp_telemetry.schemas.codec import write_reports

START_S = 1_700_000_000


def measure(windows: int, per_window: int, window_s: float, d: int, tmp: str) -> dict:
    registry = parse_registry({"metrics": [
        {"name": "w.grr", "protocol": "grr", "epsilon": 2.0, "domain": {"size": d}}]})
    config = registry["w.grr"]
    rng = np.random.default_rng(windows)
    n = windows * per_window
    times = (START_S * 1000 + np.repeat(np.arange(windows), per_window) * round(window_s * 1000)
             + rng.integers(0, round(window_s * 1000), n))
    path = os.path.join(tmp, f"reports-{windows}.avro")
    write_reports(path, "w.grr", config.protocol, np.arange(n), times,
                  config.protocol.perturb(rng.integers(0, d, n), rng))
    job = EstimateJob(registry, (path,), os.path.join(tmp, f"out-{windows}"),
                      WindowSpec.from_seconds(window_s))
    start, start_cpu = time.perf_counter(), cpu_seconds()
    with contextlib.redirect_stdout(io.StringIO()):
        counters = run_job(job, [])
    job_s, job_cpu_s = time.perf_counter() - start, cpu_seconds() - start_cpu
    assert counters.get("windows_finalized") == windows, counters
    statistic = config.protocol.new_statistic()
    config.protocol.accumulate(statistic, {"value": rng.integers(0, d, per_window)})
    start, start_cpu = time.perf_counter(), cpu_seconds()
    for _ in range(windows):
        result = finalize_window(config, statistic, per_window)
        window_estimate_record(config, result, 1_704_067_200_000, 1_704_067_201_000,
                               BATCH_PANE).json_value()  # the plain record, as before
    finalize_s, finalize_cpu_s = time.perf_counter() - start, cpu_seconds() - start_cpu
    return {"windows": windows, "job_s": job_s, "finalize_s": finalize_s,
            "job_cpu_s": job_cpu_s, "finalize_cpu_s": finalize_cpu_s,
            "per_window_ms": 1000 * (job_s - finalize_s) / windows,
            "finalize_ms": 1000 * finalize_s / windows}


def cpu_seconds() -> float:
    """CPU time (user + system) of this process and of its finished children, in seconds."""
    own, children = (resource.getrusage(who) for who in (resource.RUSAGE_SELF,
                                                         resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def one(windows: int, args) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        row = measure(windows, args.reports_per_window, args.window, args.domain, tmp)
    row["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return row


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--windows", type=int, nargs="+", default=[1000, 10_000, 100_000])
    parser.add_argument("--reports-per-window", type=int, default=1)
    parser.add_argument("--window", type=float, default=1.0, help="window length, seconds")
    parser.add_argument("--domain", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=1,
                        help="runs per number of windows; the figures are their medians")
    parser.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)
    add_json_argument(parser)
    args = parser.parse_args(argv)
    if args.one is not None:
        with contextlib.redirect_stdout(io.StringIO()):
            row = one(args.one, args)
        print(json.dumps(row))
        return
    with Run("windows", args.json, vars(args)) as run:
        run.save(measure_all(args))


def measure_all(args) -> dict:
    """Print and return the start-up job and one row per number of windows."""

    def run(windows: int) -> dict:
        rows = [run_once(windows) for _ in range(args.repeat)]
        return {key: float(np.median([row[key] for row in rows])) for key in rows[0]}

    def run_once(windows: int) -> dict:
        command = [sys.executable, os.path.abspath(__file__), "--one", str(windows),
                   "--reports-per-window", str(args.reports_per_window),
                   "--window", str(args.window), "--domain", str(args.domain)]
        done = subprocess.run(command, capture_output=True, text=True, check=True)
        return json.loads(done.stdout.strip().splitlines()[-1])

    first = run(1)
    start_up, start_up_cpu = first["job_s"], first["job_cpu_s"]
    print(f"start-up (a job of 1 window): {start_up:.1f} s wall, {start_up_cpu:.1f} s CPU; "
          f"load average {os.getloadavg()[0]:.2f}")
    print(f"{'windows':>8} {'job s':>8} {'job CPU s':>10} {'finalize ms/w':>14} "
          f"{'(CPU)':>6} {'beyond finalize ms/w':>21} {'(CPU)':>6} {'peak RSS MB':>12} "
          f"{'load':>5}")
    rows = []
    for windows in args.windows:
        load = os.getloadavg()[0]
        row = run(windows)
        beyond = 1000 * (row["job_s"] - start_up - row["finalize_s"]) / windows
        beyond_cpu = 1000 * (row["job_cpu_s"] - start_up_cpu - row["finalize_cpu_s"]) / windows
        print(f"{windows:>8} {row['job_s']:>8.1f} {row['job_cpu_s']:>10.1f} "
              f"{row['finalize_ms']:>14.3f} {1000 * row['finalize_cpu_s'] / windows:>6.3f} "
              f"{beyond:>21.3f} {beyond_cpu:>6.3f} {row['peak_mb']:>12.0f} {load:>5.2f}",
              flush=True)
        rows.append({"windows": windows, "job_s": row["job_s"], "job_cpu_s": row["job_cpu_s"],
                     "finalize_ms_per_window": row["finalize_ms"],
                     "finalize_cpu_ms_per_window": 1000 * row["finalize_cpu_s"] / windows,
                     "beyond_finalize_ms_per_window": beyond,
                     "beyond_finalize_cpu_ms_per_window": beyond_cpu,
                     "peak_rss_mb": row["peak_mb"], "load_average_at_start": load})
    return {"start_up": {"job_s": start_up, "job_cpu_s": start_up_cpu,
                         "peak_rss_mb": first["peak_mb"]},
            "windows": rows}


if __name__ == "__main__":
    main()
