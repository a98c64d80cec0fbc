"""Peak memory of the batch job over the same reports as per-report files and as envelopes.

For every protocol: N reports (d values, ε) written once per layout (the throughput
benchmark's files, `throughput.make_report_files`); each job runs in its own process, whose
peak resident memory (ru_maxrss) is its own, as does a job of 1 report: the start-up
(interpreter, Beam, numpy). `held` is the peak beyond the start-up; `envelope / per-report` the
ratio of the two layouts' `held`. The job's memory model (pipelines/memory.py) leaves out the
reports a runner holds while it groups them by slice; this measures that both layouts hold
about the same (the reader's chunks are bounded in reports either way, docs/envelopes.md).

    python benchmarks/envelope_memory.py --reports 1000000 --protocols grr,oue,olh

`--json PATH` also writes the rows as JSON (benchmarks/bench_json.py).
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

from bench_json import Run, add_json_argument
from throughput import DAY_S, make_report_file, make_report_files, metric_entry

from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.ldp.config.windows import WindowSpec
from ldp_telemetry.pipelines.batch import run_job
from ldp_telemetry.pipelines.job import EstimateJob
from ldp_telemetry.schemas.envelopes import DEFAULT_ENVELOPE_REPORTS

MB = 2 ** 20


def registry_of(protocols: list[str], domain: int, epsilon: float):
    settings = argparse.Namespace(domain=domain, epsilon=epsilon)
    return parse_registry({"metrics": [metric_entry(name, settings) for name in protocols]})


def one_job(paths: list[str], protocols: list[str], domain: int, epsilon: float) -> dict:
    """Run the job over `paths` in this process: its seconds and this process's peak RSS."""
    registry = registry_of(protocols, domain, epsilon)
    with tempfile.TemporaryDirectory() as output:
        job = EstimateJob(registry, tuple(paths), output, WindowSpec.from_seconds(DAY_S))
        start = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            counters = run_job(job, [])
        seconds = time.perf_counter() - start
    return {"job_s": seconds, "records_read": counters.get("records_read", 0),
            "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reports", type=int, default=1_000_000)
    parser.add_argument("--domain", type=int, default=1024)
    parser.add_argument("--epsilon", type=float, default=2.0)
    parser.add_argument("--protocols", default="grr,oue,olh")
    parser.add_argument("--envelope-reports", type=int, default=DEFAULT_ENVELOPE_REPORTS)
    parser.add_argument("--workdir", default=None, help="keep the report files here")
    parser.add_argument("--one", nargs="+", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--make", nargs=2, default=None, help=argparse.SUPPRESS)
    add_json_argument(parser)
    args = parser.parse_args(argv)
    protocols = args.protocols.split(",")
    if args.one is not None:
        print(json.dumps(one_job(args.one, protocols, args.domain, args.epsilon)))
        return
    if args.make is not None:  # the files of one protocol, written in a process of their own
        workdir, name = args.make
        make_report_files(workdir, stem_of(name, args), registry_of(
            protocols, args.domain, args.epsilon), f"bench.{name}", args.reports, 1,
            args.envelope_reports)
        return
    with Run("envelope_memory", args.json, vars(args)) as run:
        run.save(measure(args, protocols))


def stem_of(name: str, args) -> str:
    """The throughput benchmark's file stem of protocol `name` (one file of each layout)."""
    return f"{name}-{args.reports}-{args.domain}-{args.epsilon:g}-1"


def measure(args, protocols: list[str]) -> dict:
    """Print and return the start-up's peak and one row per protocol."""
    workdir = args.workdir or tempfile.mkdtemp(prefix="ldp-bench-")
    os.makedirs(workdir, exist_ok=True)
    registry = registry_of(protocols, args.domain, args.epsilon)

    def run(paths: list[str]) -> dict:
        command = [sys.executable, os.path.abspath(__file__), "--protocols", args.protocols,
                   "--domain", str(args.domain), "--epsilon", str(args.epsilon), "--one", *paths]
        done = subprocess.run(command, capture_output=True, text=True, check=True)
        return json.loads(done.stdout.strip().splitlines()[-1])

    one = os.path.join(workdir, "memory-start-up-1.avro")
    make_report_file(one, registry, f"bench.{protocols[0]}", 1, seed=1)
    start_up = run([one])["peak_mb"]
    print(f"{args.reports:,} reports per protocol, d={args.domain}, envelopes of "
          f"{args.envelope_reports:,} reports; start-up (a job of 1 report): "
          f"{start_up:.0f} MB peak RSS")
    print(f"{'protocol':<9}{'per-report MB':>14}{'envelope MB':>13}{'held per-report':>17}"
          f"{'held envelope':>15}{'envelope/per-report':>21}")
    rows = []
    for name in protocols:
        # Written by a child process: a process's peak RSS (ru_maxrss) starts from its parent's
        # resident size when it was forked, so this process must stay small.
        subprocess.run([sys.executable, os.path.abspath(__file__), "--protocols", args.protocols,
                        "--domain", str(args.domain), "--epsilon", str(args.epsilon),
                        "--reports", str(args.reports), "--envelope-reports",
                        str(args.envelope_reports), "--make", workdir, name], check=True)
        paths, envelopes = make_report_files(workdir, stem_of(name, args), registry,
                                             f"bench.{name}", args.reports, 1,
                                             args.envelope_reports)
        records, packed = run(paths), run(envelopes)
        for side in (records, packed):
            if side["records_read"] != args.reports:
                raise RuntimeError(f"{name}: a job read {side['records_read']} reports, "
                                   f"not {args.reports}")
        held, held_envelope = records["peak_mb"] - start_up, packed["peak_mb"] - start_up
        ratio = held_envelope / held if held > 0 else None
        print(f"{name:<9}{records['peak_mb']:>14.0f}{packed['peak_mb']:>13.0f}{held:>17.0f}"
              f"{held_envelope:>15.0f}{'–' if ratio is None else f'{ratio:.2f}':>21}",
              flush=True)
        rows.append({"protocol": name, "per_report_mb": records["peak_mb"],
                     "envelope_mb": packed["peak_mb"], "held_per_report_mb": held,
                     "held_envelope_mb": held_envelope, "envelope_over_per_report": ratio,
                     "per_report_job_s": records["job_s"], "envelope_job_s": packed["job_s"]})
    return {"start_up_peak_mb": start_up, "protocols": rows}


if __name__ == "__main__":
    main()
