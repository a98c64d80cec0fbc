"""Peak memory and bytes written of the batch job with large domains, against the memory model.

One OUE metric (ε = 2) of d values, one report in each of W windows of `--window` seconds
(sliding with `--period`), one Avro file; each case runs in its own process, whose peak
resident memory (ru_maxrss) is its own, as does a job of d = 8 and 1 window: the start-up
(interpreter, Beam, numpy). Predicted = start-up + `job_memory_bytes` (pipelines/memory.py:
the accumulators plus one window being finalized and written).

    python benchmarks/window_memory.py --cases 100000x20 100000x200 1000000x3 4000000x2
    python benchmarks/window_memory.py --cases 100000x50 --period 1800   # sliding, 2 per report
    python benchmarks/window_memory.py --store --cases 100000x20 1000000x3   # also to SQLite

`--json PATH` also writes the rows as JSON (benchmarks/bench_json.py).
"""
from __future__ import annotations

import argparse
import contextlib
import glob
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
from ldp_telemetry.pipelines.batch import run_job
from ldp_telemetry.pipelines.job import EstimateJob
from ldp_telemetry.pipelines.memory import job_memory_bytes
from ldp_telemetry.schemas.codec import write_reports

START_MS = 1_700_000_000_000
MB = 2 ** 20


def registry_of(d: int, estimator: str):
    return parse_registry({"metrics": [{"name": "m", "protocol": "oue", "epsilon": 2.0,
                                        "domain": {"size": d}, "estimator": estimator}]})


def one(d: int, windows: int, window_s: float, period_s: float | None, estimator: str,
        store: bool) -> dict:
    registry = registry_of(d, estimator)
    protocol = registry["m"].protocol
    rng = np.random.default_rng(d + windows)
    step_ms = round((period_s or window_s) * 1000)
    times = START_MS + np.arange(windows) * step_ms + 1
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "reports.avro")
        write_reports(path, "m", protocol, np.arange(windows), times,
                      protocol.perturb(rng.integers(0, d, windows), rng))
        out = os.path.join(tmp, "out")
        job = EstimateJob(registry, (path,), out, WindowSpec.from_seconds(window_s, period_s),
                          store=f"sqlite:///{tmp}/store.db" if store else None)
        start = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):
            counters = run_job(job, [])
        job_s = time.perf_counter() - start
        written = {ext: sum(os.path.getsize(p) for p in glob.glob(f"{out}/estimates-*.{ext}"))
                   for ext in ("jsonl", "avro")}
    return {"job_s": job_s, "windows_finalized": counters.get("windows_finalized", 0),
            "jsonl_bytes": written["jsonl"], "avro_bytes": written["avro"],
            "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", default=["100000x20", "100000x200", "1000000x3"],
                        help="DxW: domain size x windows (one report each)")
    parser.add_argument("--window", type=float, default=3600.0, help="window length, seconds")
    parser.add_argument("--period", type=float, default=None, help="sliding period, seconds")
    parser.add_argument("--estimator", default="unbiased")
    parser.add_argument("--store", action="store_true", help="also write a SQLite store")
    parser.add_argument("--one", default=None, help=argparse.SUPPRESS)
    add_json_argument(parser)
    args = parser.parse_args(argv)
    if args.one is not None:
        d, windows = map(int, args.one.split("x"))
        print(json.dumps(one(d, windows, args.window, args.period, args.estimator, args.store)))
        return
    with Run("window_memory", args.json, vars(args)) as run:
        run.save(measure_all(args))


def measure_all(args) -> dict:
    """Print and return the start-up's peak and one row per case."""

    def run(case: str) -> dict:
        command = [sys.executable, os.path.abspath(__file__), "--one", case,
                   "--window", str(args.window), "--estimator", args.estimator]
        if args.period is not None:
            command += ["--period", str(args.period)]
        if args.store:
            command += ["--store"]
        done = subprocess.run(command, capture_output=True, text=True, check=True)
        return json.loads(done.stdout.strip().splitlines()[-1])

    start_up = run("8x1")["peak_mb"]
    print(f"start-up (d = 8, 1 window): {start_up:.0f} MB peak RSS")
    print(f"{'d':>10} {'windows':>8} {'model MB':>9} {'predicted MB':>13} {'measured MB':>12} "
          f"{'measured/predicted':>19} {'JSON MB':>8} {'JSON B/value':>13} {'Avro MB':>8} "
          f"{'job s':>7}")
    rows = []
    for case in args.cases:
        d, windows = map(int, case.split("x"))
        model = job_memory_bytes(registry_of(d, args.estimator),
                                 WindowSpec.from_seconds(args.window, args.period),
                                 store=args.store) / MB
        row = run(case)
        values = d * row["windows_finalized"]
        print(f"{d:>10,} {windows:>8,} {model:>9.0f} {start_up + model:>13.0f} "
              f"{row['peak_mb']:>12.0f} {row['peak_mb'] / (start_up + model):>19.2f} "
              f"{row['jsonl_bytes'] / MB:>8.0f} {row['jsonl_bytes'] / values:>13.1f} "
              f"{row['avro_bytes'] / MB:>8.1f} {row['job_s']:>7.1f}", flush=True)
        rows.append({"domain": d, "windows": windows, "model_mb": model,
                     "predicted_mb": start_up + model, "measured_mb": row["peak_mb"],
                     "measured_over_predicted": row["peak_mb"] / (start_up + model),
                     "jsonl_mb": row["jsonl_bytes"] / MB,
                     "jsonl_bytes_per_value": row["jsonl_bytes"] / values,
                     "avro_mb": row["avro_bytes"] / MB, "job_s": row["job_s"]})
    return {"start_up_peak_mb": start_up, "cases": rows}


if __name__ == "__main__":
    main()
