"""Time per window of the batch job, with finalize's own cost measured apart.

One GRR metric (d values, ε = 2), `--reports-per-window` reports in each of W consecutive
windows of `--window` seconds (one Avro file). For each W:
  job          the whole Beam job (FnApiRunner): read, count, windows, finalize, write;
  finalize     `finalize_window` + the estimate record alone, W times (no Beam);
  per window   (job - finalize) / W: what the pipeline adds per window beyond finalize.

    python benchmarks/windows.py --windows 1000 10000 100000
"""
from __future__ import annotations

import argparse
import contextlib
import io
import os
import resource
import sys
import tempfile
import time

import numpy as np

from ldp_telemetry.ldp.finalize import finalize_window
from ldp_telemetry.ldp.registry import parse_registry
from ldp_telemetry.pipelines.estimate import EstimateJob, run_job
from ldp_telemetry.schemas.codec import write_reports
from ldp_telemetry.transforms.finalize import window_estimate_record
from ldp_telemetry.transforms.windows import WindowSpec

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
    start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        counters = run_job(job, [])
    job_s = time.perf_counter() - start
    assert counters.get("windows_finalized") == windows, counters
    statistic = config.protocol.new_statistic()
    config.protocol.accumulate(statistic, {"value": rng.integers(0, d, per_window)})
    start = time.perf_counter()
    for _ in range(windows):
        result = finalize_window(config, statistic, per_window)
        window_estimate_record(config, result, "2024-01-01T00:00:00Z", "2024-01-01T00:00:01Z",
                               {"timing": "ON_TIME", "index": 0, "is_last": False})
    finalize_s = time.perf_counter() - start
    return {"windows": windows, "job_s": job_s, "finalize_s": finalize_s,
            "per_window_ms": 1000 * (job_s - finalize_s) / windows,
            "finalize_ms": 1000 * finalize_s / windows}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--windows", type=int, nargs="+", default=[1000, 10_000, 100_000])
    parser.add_argument("--reports-per-window", type=int, default=1)
    parser.add_argument("--window", type=float, default=1.0, help="window length, seconds")
    parser.add_argument("--domain", type=int, default=8)
    args = parser.parse_args(argv)
    print(f"{'windows':>8} {'job s':>8} {'finalize s':>11} {'finalize ms/w':>14} "
          f"{'beyond finalize ms/w':>21} {'peak RSS MB':>12}")
    with tempfile.TemporaryDirectory() as tmp:
        for windows in args.windows:
            row = measure(windows, args.reports_per_window, args.window, args.domain, tmp)
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            print(f"{row['windows']:>8} {row['job_s']:>8.1f} {row['finalize_s']:>11.2f} "
                  f"{row['finalize_ms']:>14.3f} {row['per_window_ms']:>21.3f} {peak:>12.0f}",
                  flush=True)


if __name__ == "__main__":
    main()
