"""Measure the live run against the batch job on the same report files.

Prints, as medians of --repeats runs:

* batch rate: reports / wall time of the batch job (`run_job`, FnApiRunner) on the files;
* live rate: the same files renamed into a followed folder at once; reports / time from the
  renames to the moment every window has a pane on disk that counts all of its reports
  (sustained throughput of decode + stream + count + finalize + pane writes);
* the ratio live / batch (goal >= 0.5);
* latency: files arriving one every --gap seconds, each opening a new window; the time from a
  file's rename to its window's first pane on disk (goal <= --early-every + 2 s);
* many small files: --small-files files of --small-reports reports each (distinct report ids,
  in order over --small-windows windows) through the batch job and renamed into a followed folder
  at once: files/s and reports/s of each, from the renames to every window's full pane (goals:
  >= 200 files/s of 300 reports each, live >= half the batch rate in reports/s).

    python benchmarks/live.py [--reports 1000000] [--files 10] [--protocol oue] [--domain 32]
                              [--small-files 2000] [--small-reports 300] [--json PATH]
"""
from __future__ import annotations

import argparse
import datetime as dt
import io
import os
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
from bench_json import Run, add_json_argument

from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.ldp.config.windows import WindowSpec
from ldp_telemetry.output.layout import STATUS
from ldp_telemetry.output.reader import read_pane_log
from ldp_telemetry.pipelines.batch import run_job
from ldp_telemetry.pipelines.follower import WatermarkPolicy
from ldp_telemetry.pipelines.job import EstimateJob, LiveConfig
from ldp_telemetry.pipelines.live import run_live
from ldp_telemetry.schemas.codec import write_reports

T0 = 1_709_251_200_000
WINDOW_MS = 60_000


def make_files(folder: Path, registry, metric: str, reports: int, files: int, seed: int = 7):
    """`files` files of reports/files reports; file k fills window k. Returns paths, counts."""
    config = registry[metric]
    rng = np.random.default_rng(seed)
    per_file = reports // files
    paths = []
    for k in range(files):
        times = (T0 + k * WINDOW_MS + rng.integers(0, WINDOW_MS, per_file)).astype(np.int64)
        columns = config.protocol.perturb(rng.zipf(1.3, per_file) % config.d, rng)
        path = folder / f"reports-{k:04d}.avro"
        write_reports(str(path), metric, config.protocol, np.arange(per_file), times, columns)
        paths.append(path)
    return paths, per_file


def make_small_files(folder: Path, registry, metric: str, files: int, per_file: int,
                     windows: int, seed: int = 11):
    """`files` files of `per_file` reports with distinct ids, in window order (file k lies in
    window k * windows // files, so a follower reading them oldest first finds none too late).
    Returns the paths and the reports per window (by ISO start)."""
    config = registry[metric]
    rng = np.random.default_rng(seed)
    paths, expected = [], {}
    for k in range(files):
        start = T0 + (k * windows // files) * WINDOW_MS
        times = (start + rng.integers(0, WINDOW_MS, per_file)).astype(np.int64)
        columns = config.protocol.perturb(rng.zipf(1.3, per_file) % config.d, rng)
        path = folder / f"small-{k:05d}.avro"
        write_reports(str(path), metric, config.protocol,
                      np.arange(k * per_file, (k + 1) * per_file), times, columns)
        paths.append(path)
        expected[_iso(start)] = expected.get(_iso(start), 0) + per_file
    return paths, expected


def live_small_rate(registry, paths, expected, work: Path) -> float:
    """Seconds from renaming every file into the followed folder at once to every window's
    pane counting all of its reports."""

    def arrive(inbox, output):
        started = time.perf_counter()
        for path in paths:
            os.symlink(path, inbox / f".{path.name}")
            os.rename(inbox / f".{path.name}", inbox / path.name)
        return wait_for_full_panes(output, expected, timeout_s=600) - started

    return live_run(registry, work, arrive, early_every_s=1, idle_advance_s=1.0)


def batch_seconds(registry, paths, output: Path) -> float:
    shutil.rmtree(output, ignore_errors=True)
    job = EstimateJob(registry, tuple(map(str, paths)), str(output),
                      WindowSpec(WINDOW_MS, WINDOW_MS))
    started = time.perf_counter()
    run_job(job, [], out=io.StringIO())
    return time.perf_counter() - started


def batch_rate(registry, paths, reports, output: Path) -> float:
    shutil.rmtree(output, ignore_errors=True)
    job = EstimateJob(registry, tuple(map(str, paths)), str(output),
                      WindowSpec(WINDOW_MS, WINDOW_MS))
    started = time.perf_counter()
    run_job(job, [], out=io.StringIO())
    return reports / (time.perf_counter() - started)


def live_run(registry, work: Path, arrive, early_every_s: int, idle_advance_s: float):
    """Run the live job in this thread while `arrive(inbox, output)` (another thread) drops
    files; `arrive` returns its result once done, then the run is stopped."""
    inbox, output = work / "in", work / "out"
    shutil.rmtree(work, ignore_errors=True)
    inbox.mkdir(parents=True)
    job = EstimateJob(registry, (), str(output),
                      WindowSpec(WINDOW_MS, WINDOW_MS, early_every_ms=early_every_s * 1000))
    result = {}

    def drive():
        deadline = time.monotonic() + 120
        while not (output / STATUS).exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.0)  # let the pipeline's first bundles go by
        try:
            result["value"] = arrive(inbox, output)
        finally:
            os.kill(os.getpid(), signal.SIGTERM)

    thread = threading.Thread(target=drive, daemon=True)
    thread.start()
    run_live(job, LiveConfig("directory", str(inbox), WatermarkPolicy(0, idle_advance_s),
                             poll_s=0.2, until_s=600), [], out=io.StringIO())
    thread.join(timeout=10)
    return result["value"]


def wait_for_full_panes(output: Path, expected: dict, timeout_s: float = 300) -> float:
    """perf_counter time when every window has a pane counting `expected[window_start]`."""
    deadline = time.perf_counter() + timeout_s
    while time.perf_counter() < deadline:
        full = {e["window_start"] for e in read_pane_log(str(output))
                if e["n"] == expected.get(e["window_start"])}
        if len(full) == len(expected):
            return time.perf_counter()
        time.sleep(0.02)
    raise TimeoutError("the live run did not write every window's full pane in time")


def live_rate(registry, paths, per_file, work: Path) -> float:
    expected = {_iso(T0 + k * WINDOW_MS): per_file for k in range(len(paths))}

    def arrive(inbox, output):
        started = time.perf_counter()
        for path in paths:
            os.symlink(path, inbox / f".{path.name}")
            os.rename(inbox / f".{path.name}", inbox / path.name)
        return per_file * len(paths) / (wait_for_full_panes(output, expected) - started)

    return live_run(registry, work, arrive, early_every_s=1, idle_advance_s=1.0)


def latencies(registry, paths, per_file, work: Path, gap_s: float, early_every_s: int):
    def arrive(inbox, output):
        delays = []
        for k, path in enumerate(paths):
            os.symlink(path, inbox / f".{path.name}")
            os.rename(inbox / f".{path.name}", inbox / path.name)
            arrived = time.time()
            window = _iso(T0 + k * WINDOW_MS)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                first = [e for e in read_pane_log(str(output)) if e["window_start"] == window]
                if first:
                    delays.append(_epoch(first[0]["written_at"]) - arrived)
                    break
                time.sleep(0.02)
            time.sleep(max(0.0, arrived + gap_s - time.time()))
        return delays

    return live_run(registry, work, arrive, early_every_s=early_every_s, idle_advance_s=None)


def _iso(ms: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ms / 1000))


def _epoch(iso: str) -> float:
    return dt.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reports", type=int, default=1_000_000)
    parser.add_argument("--files", type=int, default=10)
    parser.add_argument("--protocol", default="oue")
    parser.add_argument("--domain", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--early-every", type=int, default=2)
    parser.add_argument("--gap", type=float, default=4.0,
                        help="seconds between file arrivals in the latency run")
    parser.add_argument("--small-files", type=int, default=2000,
                        help="files of the many-small-files run (0: skip it)")
    parser.add_argument("--small-reports", type=int, default=300,
                        help="reports per file of the many-small-files run")
    parser.add_argument("--small-windows", type=int, default=10,
                        help="windows the small files are spread over")
    parser.add_argument("--skip-large", action="store_true",
                        help="only the many-small-files run")
    add_json_argument(parser)
    args = parser.parse_args(argv)
    with Run("live", args.json, vars(args)) as run:
        run.save(measure(args))
    return 0


def measure(args) -> dict:
    """Print and return the batch and live rates of each run and the latencies, then the
    many-small-files figures (`small`)."""
    registry = parse_registry({"metrics": [
        {"name": "bench", "protocol": args.protocol, "epsilon": 2.0,
         "domain": {"size": args.domain}}]})
    results = {} if args.skip_large else measure_large(args, registry)
    if args.small_files:
        results["small"] = measure_small(args, registry)
    return results


def measure_small(args, registry) -> dict:
    """Print and return files/s and reports/s of the batch job and the live run over many
    small files."""
    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        (folder / "small").mkdir()
        paths, expected = make_small_files(folder / "small", registry, "bench", args.small_files,
                                           args.small_reports, args.small_windows)
        reports = args.small_files * args.small_reports
        print(f"{args.small_files:,} files of {args.small_reports} reports "
              f"({reports:,} reports, {args.small_windows} windows)")
        batch, live = [], []
        for repeat in range(args.repeats):
            batch.append(batch_seconds(registry, paths, folder / "batch-out"))
            live.append(live_small_rate(registry, paths, expected, folder / "live"))
            print(f"  run {repeat + 1}: batch {len(paths) / batch[-1]:,.0f} files/s, "
                  f"live {len(paths) / live[-1]:,.0f} files/s", flush=True)
    b, l_ = statistics.median(batch), statistics.median(live)
    print(f"batch job:  {len(paths) / b:,.0f} files/s, {reports / b:,.0f} reports/s "
          f"(median of {len(batch)})")
    print(f"live run:   {len(paths) / l_:,.0f} files/s, {reports / l_:,.0f} reports/s; "
          f"live / batch = {b / l_:.2f} (goals: >= 200 files/s, >= 0.5)")
    return {"files": len(paths), "reports_per_file": args.small_reports, "reports": reports,
            "windows": args.small_windows, "batch_s": batch, "live_s": live,
            "batch_files_per_s": len(paths) / b, "batch_reports_per_s": reports / b,
            "live_files_per_s": len(paths) / l_, "live_reports_per_s": reports / l_,
            "live_over_batch": b / l_}


def measure_large(args, registry) -> dict:
    """The large files: batch and live rates, latencies."""
    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        (folder / "files").mkdir()
        paths, per_file = make_files(folder / "files", registry, "bench", args.reports,
                                     args.files)
        reports = per_file * len(paths)
        print(f"{reports:,} reports of {args.protocol} (d = {args.domain}) in {len(paths)} files")
        batch, live = [], []
        for repeat in range(args.repeats):
            batch.append(batch_rate(registry, paths, reports, folder / "batch-out"))
            live.append(live_rate(registry, paths, per_file, folder / "live"))
            print(f"  run {repeat + 1}: batch {batch[-1]:,.0f} reports/s, "
                  f"live {live[-1]:,.0f} reports/s", flush=True)
        delays = latencies(registry, paths, per_file, folder / "latency", args.gap,
                           args.early_every)
    b, l_ = statistics.median(batch), statistics.median(live)
    print(f"batch job:  {b:,.0f} reports/s (median of {len(batch)})")
    print(f"live run:   {l_:,.0f} reports/s (median of {len(live)}); live / batch = {l_ / b:.2f}")
    print(f"latency from a file's arrival to its window's first pane on disk: median "
          f"{statistics.median(delays):.2f} s over {len(delays)} files (early period "
          f"{args.early_every} s; min {min(delays):.2f}, max {max(delays):.2f})")
    return {"reports": reports, "files": len(paths), "batch_reports_per_s": batch,
            "live_reports_per_s": live, "batch_median": b, "live_median": l_,
            "live_over_batch": l_ / b, "latency_s": delays,
            "latency_median_s": statistics.median(delays)}


if __name__ == "__main__":
    sys.exit(main())
