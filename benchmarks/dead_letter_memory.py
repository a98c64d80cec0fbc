"""Peak memory of the batch job over files that are nothing but dead letters.

Two hostile files of N records each: reports of a metric that is not in the registry
(`unknown_metric`, one dead letter per report) and malformed report envelopes (each announcing
one report whose `event_times` column is too short: `undecodable`, one dead letter per
envelope). Each job runs in its own process on FnApiRunner, whose peak resident memory
(ru_maxrss) is its own, as does a job of 1 valid report: the start-up (interpreter, Beam,
numpy). `held` is the peak beyond the start-up; the job's memory model
(`pipelines/memory.py`, `DEAD_LETTER_BYTES`) bounds it whatever N.

    python benchmarks/dead_letter_memory.py --records 2000000

`--trace` runs one job in this process under tracemalloc and prints where its peak lies;
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

import numpy as np
from bench_json import Run, add_json_argument
from fastavro import writer as avro_writer
from throughput import DAY_S, START_MS, make_report_file, metric_entry

from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.ldp.config.windows import WindowSpec
from ldp_telemetry.pipelines.batch import run_job
from ldp_telemetry.pipelines.job import EstimateJob
from ldp_telemetry.schemas.codec import write_reports
from ldp_telemetry.schemas.envelopes import envelope_record, envelope_schema

MB = 2 ** 20
CASES = ("unknown_metric", "malformed_envelope")
#: Records written per call, so that writing N records holds a bounded part of them.
_WRITE_ROWS = 100_000


def registry_of():
    settings = argparse.Namespace(domain=16, epsilon=2.0)
    return parse_registry({"metrics": [metric_entry("grr", settings)]})


def make_case_file(path: str, case: str, n: int) -> None:
    """A file of `n` records that are all dead letters of `case` (written once, then kept)."""
    if os.path.exists(path):
        return
    protocol = registry_of()["bench.grr"].protocol
    rng = np.random.default_rng(7)
    temporary = path + ".part"
    if case == "unknown_metric":
        ids = np.arange(n)
        times = START_MS + np.sort(rng.integers(0, DAY_S * 1000, size=n))
        write_reports(temporary, "bench.not-registered", protocol, ids, times,
                      protocol.perturb(rng.integers(0, 16, size=n), rng))
    else:
        with open(temporary, "wb") as out:
            avro_writer(out, envelope_schema(), _malformed_envelopes(protocol, n, rng))
    os.replace(temporary, path)


def _malformed_envelopes(protocol, n: int, rng):
    """Envelopes of one report each whose `event_times` column is 4 bytes short."""
    for start in range(0, n, _WRITE_ROWS):
        rows = min(_WRITE_ROWS, n - start)
        values = protocol.perturb(rng.integers(0, 16, size=rows), rng)
        for i in range(rows):
            record = envelope_record("bench.grr", protocol, np.array([start + i]),
                                     np.array([START_MS + i]),
                                     {name: column[i:i + 1] for name, column in values.items()})
            record["event_times"] = record["event_times"][:4]
            yield record


def one_job(path: str) -> dict:
    """Run the job over `path` in this process: its seconds, counters and peak RSS."""
    with tempfile.TemporaryDirectory() as output:
        job = EstimateJob(registry_of(), (path,), output, WindowSpec.from_seconds(DAY_S))
        start = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            counters = run_job(job, ["--runner=FnApiRunner"])
        seconds = time.perf_counter() - start
        written = sum(os.path.getsize(os.path.join(output, name)) for name in os.listdir(output)
                      if name.startswith("dead_letters-"))
    return {"job_s": seconds, "counters": counters, "dead_letter_bytes": written,
            "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def traced_job(path: str, top: int = 12, every_s: float = 2.0) -> None:
    """One job under tracemalloc, sampled every `every_s` seconds: the traced peak, and the
    lines holding most in the sample that held most."""
    import threading
    import tracemalloc
    tracemalloc.start()
    largest: list = [0, None]
    done = threading.Event()

    def sample():
        while not done.wait(every_s):
            current = tracemalloc.get_traced_memory()[0]
            if current > largest[0]:
                largest[:] = [current, tracemalloc.take_snapshot()]

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    result = one_job(path)
    done.set()
    sampler.join()
    peak = tracemalloc.get_traced_memory()[1]
    print(f"traced: peak {peak / MB:.0f} MB, largest sample {largest[0] / MB:.0f} MB; "
          f"peak RSS {result['peak_mb']:.0f} MB; {result['counters']}")
    if largest[1] is None:
        return
    for stat in largest[1].statistics("lineno")[:top]:
        print(f"{stat.size / MB:8.1f} MB {stat.count:>9,} blocks  {stat.traceback[0]}")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--workdir", default=None, help="keep the files here")
    parser.add_argument("--trace", action="store_true",
                        help="trace one job of the first case in this process")
    parser.add_argument("--one", default=None, help=argparse.SUPPRESS)
    add_json_argument(parser)
    args = parser.parse_args(argv)
    if args.one is not None:
        print(json.dumps(one_job(args.one)))
        return
    cases = args.cases.split(",")
    workdir = args.workdir or tempfile.mkdtemp(prefix="ldp-bench-")
    os.makedirs(workdir, exist_ok=True)
    if args.trace:
        path = os.path.join(workdir, f"{cases[0]}-{args.records}.avro")
        make_case_file(path, cases[0], args.records)
        traced_job(path)
        return
    with Run("dead_letter_memory", args.json, vars(args)) as run:
        run.save(measure(args, cases, workdir))


def measure(args, cases: list[str], workdir: str) -> dict:
    """Print and return the start-up's peak and one row per case."""
    def run(path: str) -> dict:
        command = [sys.executable, os.path.abspath(__file__), "--one", path]
        done = subprocess.run(command, capture_output=True, text=True, check=True)
        return json.loads(done.stdout.strip().splitlines()[-1])

    one = os.path.join(workdir, "dead-letters-start-up-1.avro")
    if not os.path.exists(one):
        make_report_file(one, registry_of(), "bench.grr", 1, seed=1)
    start_up = run(one)["peak_mb"]
    print(f"{args.records:,} dead letters per case; start-up (a job of 1 report): "
          f"{start_up:.0f} MB peak RSS")
    print(f"{'case':<20}{'file MB':>9}{'peak MB':>9}{'held MB':>9}{'job s':>8}"
          f"{'dead-letter files MB':>22}")
    rows = []
    for case in cases:
        path = os.path.join(workdir, f"{case}-{args.records}.avro")
        make_case_file(path, case, args.records)
        result = run(path)
        counters = result["counters"]
        dead = sum(v for k, v in counters.items() if k.startswith("dead_letter."))
        if counters.get("records_read") != args.records or dead != args.records:
            raise RuntimeError(f"{case}: read {counters.get('records_read')}, dead-lettered "
                               f"{dead}, not {args.records}")
        held = result["peak_mb"] - start_up
        file_mb = os.path.getsize(path) / MB
        print(f"{case:<20}{file_mb:>9.1f}{result['peak_mb']:>9.0f}{held:>9.0f}"
              f"{result['job_s']:>8.1f}{result['dead_letter_bytes'] / MB:>22.1f}", flush=True)
        rows.append({"case": case, "records": args.records, "file_mb": file_mb,
                     "peak_mb": result["peak_mb"], "held_mb": held, "job_s": result["job_s"],
                     "dead_letter_files_mb": result["dead_letter_bytes"] / MB})
    return {"start_up_peak_mb": start_up, "cases": rows}


if __name__ == "__main__":
    main()
