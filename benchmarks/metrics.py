"""Time and peak memory of the batch job against the number of metrics, on the same reports.

`--reports` GRR reports (d = `--domain`, ε = 2) in one Avro file, spread evenly over M metrics
and over `--windows` hourly windows. Each M runs in its own process, so that its peak resident
memory is its own. The job must end with its summary line.

    python benchmarks/metrics.py --metrics 50 5000 --reports 100000 [--json PATH]
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

import fastavro
import numpy as np
from bench_json import Run, add_json_argument

from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.ldp.config.windows import WindowSpec
from ldp_telemetry.pipelines.batch import run_job
from ldp_telemetry.pipelines.job import EstimateJob
from ldp_telemetry.schemas import NAMESPACE, load_schema

START_MS = 1_700_000_000_000 - 1_700_000_000_000 % 86_400_000
HOUR_MS = 3_600_000


def one(metrics: int, reports: int, windows: int, domain: int) -> dict:
    registry = parse_registry({"metrics": [
        {"name": f"fleet.metric{i:05d}", "protocol": "grr", "epsilon": 2.0,
         "domain": {"size": domain}} for i in range(metrics)]})
    protocol = registry.metrics[0].protocol
    rng = np.random.default_rng(metrics)
    values = protocol.perturb(rng.integers(0, domain, reports), rng)["value"].tolist()
    names = [m.name for m in registry.metrics]
    times = (START_MS + rng.integers(0, windows * HOUR_MS, reports)).tolist()
    branch = f"{NAMESPACE}.{protocol.payload_record}"
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "reports.avro")
        with open(path, "wb") as handle:
            fastavro.writer(handle, load_schema("report"), (
                {"report_id": i, "metric": names[i % metrics], "event_time": times[i],
                 "payload": (branch, {"value": values[i]})} for i in range(reports)))
        printed = io.StringIO()
        start = time.perf_counter()
        run_job(EstimateJob(registry, (path,), os.path.join(tmp, "out"),
                            WindowSpec(HOUR_MS, HOUR_MS)), [], out=printed)
        seconds = time.perf_counter() - start
    return {"metrics": metrics, "job_s": seconds, "summary": printed.getvalue().strip(),
            "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--metrics", type=int, nargs="+", default=[50, 5000])
    parser.add_argument("--reports", type=int, default=100_000)
    parser.add_argument("--windows", type=int, default=1)
    parser.add_argument("--domain", type=int, default=16)
    parser.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)
    add_json_argument(parser)
    args = parser.parse_args(argv)
    if args.one is not None:
        with contextlib.redirect_stdout(io.StringIO()):
            row = one(args.one, args.reports, args.windows, args.domain)
        print(json.dumps(row))
        return
    with Run("metrics", args.json, vars(args)) as run:
        run.save(measure_all(args))


def measure_all(args) -> dict:
    """Print and return one row per number of metrics (a failed job: its last error line)."""
    print(f"{args.reports:,} GRR reports (d={args.domain}) over {args.windows} hourly window(s)")
    print(f"{'metrics':>8} {'job s':>8} {'peak RSS MB':>12}  summary")
    rows = []
    for metrics in args.metrics:
        command = [sys.executable, os.path.abspath(__file__), "--one", str(metrics),
                   "--reports", str(args.reports), "--windows", str(args.windows),
                   "--domain", str(args.domain)]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode:
            error = done.stderr.strip().splitlines()[-1]
            print(f"{metrics:>8} failed: {error}", flush=True)
            rows.append({"metrics": metrics, "failed": error})
            continue
        row = json.loads(done.stdout.strip().splitlines()[-1])
        print(f"{metrics:>8} {row['job_s']:>8.1f} {row['peak_mb']:>12.0f}  {row['summary']}",
              flush=True)
        rows.append({"metrics": metrics, "job_s": row["job_s"], "peak_rss_mb": row["peak_mb"],
                     "summary": row["summary"]})
    return {"rows": rows}


if __name__ == "__main__":
    main()
