"""Throughput of the pipeline, measured against fastavro's raw decode of the same file.

For every protocol: one Avro file of N reports (d values, ε) is written once; then, each a
median of --repeats runs in this process,
  raw decode   fastavro.reader over the file, records discarded (the floor any reader pays);
  decode       ldp_telemetry.schemas.codec.ReportDecoder: records -> validated numpy batches;
  end to end   the whole Beam job (FnApiRunner): read, validate, count, finalize, write;
  aggregate    SliceCounter.add over already-decoded batches (the counting alone,
               repeated report ids dropped); `no dedupe`: the same batches without their ids.
Rates are reports/s; `e2e/raw` is the figure that matters on a shared, noisy machine.

    python benchmarks/throughput.py --reports 1000000 --domain 1024 [--json PATH]
"""
from __future__ import annotations

import argparse
import contextlib
import io
import os
import statistics
import tempfile
import time

import fastavro
import numpy as np
from bench_json import Run, add_json_argument

from ldp_telemetry.ldp.protocols import NUMERIC_PROTOCOLS, PROTOCOLS
from ldp_telemetry.ldp.registry import parse_registry
from ldp_telemetry.ldp.windows import WindowSpec
from ldp_telemetry.pipelines.batch import run_job
from ldp_telemetry.pipelines.job import EstimateJob
from ldp_telemetry.schemas.batches import REPORT_ID, ReportBatch
from ldp_telemetry.schemas.codec import ReportDecoder, write_reports
from ldp_telemetry.transforms.count import SliceCounter

SQUARE_WAVE = ("sw", "sw-discrete")
DAY_S = 86_400
START_MS = 1_700_000_000_000 - 1_700_000_000_000 % (DAY_S * 1000)


def median_seconds(action, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def make_report_file(path: str, registry, metric: str, n: int, seed: int) -> None:
    """n reports of a Zipf(1.1)-shaped distribution over the domain, spread over one day
    (numeric protocols: the bucket's midpoint on [0, 1])."""
    config = registry[metric]
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, config.d + 1) ** 1.1
    values = rng.choice(config.d, size=n, p=weights / weights.sum())
    if config.kind == "numeric":
        values = (values + 0.5) / config.d
    times = START_MS + np.sort(rng.integers(0, DAY_S * 1000, size=n))
    write_reports(path, metric, config.protocol, np.arange(n), times,
                  config.protocol.perturb(values, rng))


def raw_decode(path: str) -> int:
    with open(path, "rb") as handle:
        return sum(1 for _ in fastavro.reader(handle))


def decode_batches(registry, path: str) -> list[ReportBatch]:
    return list(ReportDecoder(registry, DAY_S * 1000).decode_file(path))


def aggregate(registry, batches: list[ReportBatch]) -> None:
    counter = SliceCounter(registry)
    for batch in batches:
        counter.add(batch)


def without_ids(batches: list[ReportBatch]) -> list[ReportBatch]:
    return [ReportBatch(b.metric, b.slice_start_ms,
                        {k: v for k, v in b.columns.items() if k != REPORT_ID}) for b in batches]


def end_to_end(registry, path: str, beam_args: list[str]) -> None:
    with tempfile.TemporaryDirectory() as output:
        job = EstimateJob(registry, (path,), output, WindowSpec.from_seconds(DAY_S))
        run_job(job, beam_args, out=io.StringIO())


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reports", type=int, default=1_000_000)
    parser.add_argument("--domain", type=int, default=1024)
    parser.add_argument("--epsilon", type=float, default=2.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--protocols", default=",".join([*PROTOCOLS, *SQUARE_WAVE]),
                        help="comma-separated registry names (default: every frequency oracle "
                             "and Square Wave; numeric ones with d buckets of [0, 1], Square "
                             "Wave with EMS without bootstrap, others their default estimator)")
    parser.add_argument("--workdir", default=None, help="keep the report files here")
    parser.add_argument("--skip-end-to-end", action="store_true")
    add_json_argument(parser)
    args, beam_args = parser.parse_known_args(argv)
    with Run("throughput", args.json, {**vars(args), "beam_args": beam_args}) as run:
        rows = measure(args, beam_args)
        run.save({"unit": "reports/s", "protocols": rows})


def metric_entry(name: str, args) -> dict:
    """The registry entry of protocol `name`'s benchmark metric."""
    entry = {"name": f"bench.{name}", "protocol": name, "epsilon": args.epsilon,
             "domain": {"size": args.domain}}
    if name in NUMERIC_PROTOCOLS:
        entry["domain"] = {"low": 0, "high": 1, "buckets": args.domain}
    if name in SQUARE_WAVE:
        entry["estimator"] = {"method": "ems", "bootstrap": 0}
    return entry


def measure(args, beam_args: list[str]) -> list[dict]:
    """Print and return one row of rates per protocol."""
    workdir = args.workdir or tempfile.mkdtemp(prefix="ldp-bench-")
    os.makedirs(workdir, exist_ok=True)
    names = args.protocols.split(",")
    registry = parse_registry({"metrics": [metric_entry(name, args) for name in names]})
    print(f"{args.reports:,} reports per protocol, d={args.domain}, ε={args.epsilon:g}, "
          f"median of {args.repeats} runs, files in {workdir}")
    header = (f"{'protocol':<9}{'raw decode/s':>14}{'decode/s':>12}{'end-to-end/s':>14}"
              f"{'e2e/raw':>9}{'aggregate/s':>14}{'no dedupe/s':>14}")
    print(header)
    rows = []
    for name in names:
        path = os.path.join(workdir, f"{name}-{args.reports}-{args.domain}-{args.epsilon:g}.avro")
        if not os.path.exists(path):
            make_report_file(path, registry, f"bench.{name}", args.reports, seed=1)
        row = measure_file(registry, path, args, beam_args)
        e2e, ratio = row["end_to_end"], row["end_to_end_over_raw"]
        print(f"{name:<9}{row['raw_decode']:>14,.0f}{row['decode']:>12,.0f}"
              f"{'-' if e2e is None else f'{e2e:,.0f}':>14}"
              f"{'-' if ratio is None else f'{ratio:.2f}':>9}{row['aggregate']:>14,.0f}"
              f"{row['aggregate_without_ids']:>14,.0f}", flush=True)
        rows.append({"protocol": name, **row})
    return rows


def measure_file(registry, path: str, args, beam_args: list[str]) -> dict:
    """The rates of one protocol's report file (reports/s)."""
    n = args.reports
    raw = n / median_seconds(lambda: raw_decode(path), args.repeats)
    decode = n / median_seconds(lambda: decode_batches(registry, path), args.repeats)
    batches = decode_batches(registry, path)
    agg = n / median_seconds(lambda: aggregate(registry, batches), args.repeats)
    bare = without_ids(batches)
    agg_bare = n / median_seconds(lambda: aggregate(registry, bare), args.repeats)
    e2e = None
    if not args.skip_end_to_end:
        with contextlib.redirect_stderr(io.StringIO()):
            e2e = n / median_seconds(lambda: end_to_end(registry, path, beam_args),
                                     args.repeats)
    return {"raw_decode": raw, "decode": decode, "end_to_end": e2e,
            "end_to_end_over_raw": None if e2e is None else e2e / raw,
            "aggregate": agg, "aggregate_without_ids": agg_bare}


if __name__ == "__main__":
    main()
