"""Scaling: the batch job on 1 and 2 worker processes, on FnApiRunner and on a Dask cluster.

N GRR reports (d = 1024, ε = 2, Zipf-shaped values over one day, hourly windows: 24 slices to
count in parallel) are written once as --files per-report Avro files. Each runner is run with 1
and with 2 workers, --repeats times round-robin (so that a change in the machine's load touches
every runner alike):

  start-up     a job of 1 report on the same runner (for Dask: starting the local cluster of
               that many worker processes, the job, stopping the cluster);
  job          the job over the N reports (for Dask, cluster start-up included);
  beyond s-u   job - start-up, and the rate N / (job - start-up);
  speed-up     the rate beyond start-up with 2 workers over the rate with 1, and per worker
               (speed-up / 2: 1.0 is perfect scaling).

Medians of the repeats. On a machine of 2 cores shared with other work, 2 workers compete with
that work for the second core: read the load average with the figures.

    python benchmarks/scaling.py --reports 10000000 --files 16 [--json PATH]
"""
from __future__ import annotations

import argparse
import contextlib
import io
import os
import statistics
import tempfile
import time

from bench_json import Run, add_json_argument
from throughput import make_report_file, simulated_reports

from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.ldp.config.windows import WindowSpec
from ldp_telemetry.pipelines.batch import run_job
from ldp_telemetry.pipelines.job import EstimateJob
from ldp_telemetry.runners.dask import dask_options
from ldp_telemetry.runners.direct import multi_process_options
from ldp_telemetry.schemas.codec import write_reports

METRIC = "bench.grr"
HOUR_S = 3_600
RUNNERS = {"FnApiRunner, worker processes": multi_process_options,
           "Dask, local cluster": lambda workers: dask_options(workers=workers)}
WORKERS = (1, 2)


def report_files(workdir: str, registry, n: int, files: int) -> list[str]:
    """`files` per-report files of n reports in all (written once, kept in `workdir`)."""
    paths = [os.path.join(workdir, f"scaling-{n}-{k}-of-{files}.avro") for k in range(files)]
    if all(map(os.path.exists, paths)):
        return paths
    ids, times, columns = simulated_reports(registry, METRIC, n, seed=1)
    for k, path in enumerate(paths):
        rows = slice(k * n // files, (k + 1) * n // files)
        write_reports(path, METRIC, registry[METRIC].protocol, ids[rows], times[rows],
                      {name: column[rows] for name, column in columns.items()})
    return paths


def timed_job(registry, paths: list[str], beam_args: list[str]) -> tuple[float, int]:
    """(wall seconds, records read) of one job (hourly windows) into a new folder."""
    with tempfile.TemporaryDirectory() as output, contextlib.redirect_stderr(io.StringIO()):
        job = EstimateJob(registry, tuple(paths), output, WindowSpec.from_seconds(HOUR_S))
        printed = io.StringIO()
        start = time.perf_counter()
        counters = run_job(job, beam_args, out=printed)
        seconds = time.perf_counter() - start
    return seconds, counters["records_read"]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reports", type=int, default=10_000_000)
    parser.add_argument("--files", type=int, default=16,
                        help="per-report files the reports are split into")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workdir", default=None, help="keep the report files here")
    add_json_argument(parser)
    args = parser.parse_args(argv)
    workdir = args.workdir or tempfile.mkdtemp(prefix="ldp-scaling-")
    os.makedirs(workdir, exist_ok=True)
    registry = parse_registry({"metrics": [{"name": METRIC, "protocol": "grr", "epsilon": 2.0,
                                            "domain": {"size": 1024}}]})
    with Run("scaling", args.json, vars(args)) as run:
        paths = report_files(workdir, registry, args.reports, args.files)
        one = os.path.join(workdir, "scaling-start-up-1.avro")
        make_report_file(one, registry, METRIC, 1, seed=1)
        cases = [(name, workers, options(workers))
                 for name, options in RUNNERS.items() for workers in WORKERS]
        start_up = {case[:2]: [] for case in cases}
        jobs = {case[:2]: [] for case in cases}
        for _ in range(args.repeats):
            for name, workers, beam_args in cases:
                start_up[name, workers].append(timed_job(registry, [one], beam_args)[0])
                seconds, read = timed_job(registry, paths, beam_args)
                if read != args.reports:
                    raise SystemExit(f"{name}, {workers} worker(s): read {read} reports, "
                                     f"not {args.reports}")
                jobs[name, workers].append(seconds)
        rows = []
        for name, workers, beam_args in cases:
            s_u, job = (statistics.median(start_up[name, workers]),
                        statistics.median(jobs[name, workers]))
            rows.append({"runner": name, "workers": workers, "beam_args": beam_args,
                         "start_up_s": s_u, "job_s": job, "beyond_start_up_s": job - s_u,
                         "rate_beyond_start_up": args.reports / (job - s_u),
                         "start_up_runs_s": start_up[name, workers],
                         "job_runs_s": jobs[name, workers]})
        for row in rows:
            one_worker = next(r for r in rows if r["runner"] == row["runner"]
                              and r["workers"] == 1)
            row["speed_up"] = row["rate_beyond_start_up"] / one_worker["rate_beyond_start_up"]
            row["speed_up_per_worker"] = row["speed_up"] / row["workers"]
        print(f"{args.reports:,} reports in {args.files} files; medians of {args.repeats}")
        print(f"{'runner':<32} {'workers':>7} {'start-up s':>10} {'job s':>8} "
              f"{'beyond s-u':>10} {'reports/s':>12} {'speed-up':>8} {'per worker':>10}")
        for row in rows:
            print(f"{row['runner']:<32} {row['workers']:>7} {row['start_up_s']:>10.2f} "
                  f"{row['job_s']:>8.2f} {row['beyond_start_up_s']:>10.2f} "
                  f"{row['rate_beyond_start_up']:>12,.0f} {row['speed_up']:>8.2f} "
                  f"{row['speed_up_per_worker']:>10.2f}")
        run.save({"unit": "seconds; reports/s", "runs": rows})


if __name__ == "__main__":
    main()
