"""How close the envelope job comes to its counting bound, beyond start-up.

For every protocol: N reports (d values, ε, Zipf-shaped over one day: the throughput benchmark's
`simulated_reports`) written once as --files files of report envelopes. Each repeat runs, in
turn, so that all see the same load of a shared machine:
  start-up   a job of 1 report (FnApiRunner, or the --beam args given);
  job        the job over the envelope files;
  decode     the reader alone (ReportDecoder over the files);
  dec+count  the reader with each batch counted as it is decoded, as the job's reader does;
  count      the counting alone (SliceCounter.add over the decoded batches, held in memory: the
             protocol's support, each report id once, the integrity sample), the throughput
             benchmark's `aggregate`.
Per repeat, beyond = job - start-up, and
  share      count / beyond: the share of its counting bound the job reaches. The throughput
             benchmark's counting bound is (per-report job - start-up) / count and its envelope
             ratio beyond start-up (per-report job - start-up) / beyond, so their quotient is
             count / beyond whatever the per-report job; measured here over N large enough that
             beyond is not a small difference of two start-ups. The restated goal is 0.8;
  decode/beyond, rest  the reader's share of beyond, and beyond - dec+count: what is neither
             decoding nor counting (Beam's steps, the grouping, finalize, writing) in seconds.
Figures are medians over the repeats of each repeat's own values.

    python benchmarks/envelope_bound.py --reports 4000000 --protocols grr,oue [--json PATH]
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
from throughput import (DAY_S, aggregate, decode_batches, end_to_end, make_report_file,
                        metric_entry, simulated_reports)

from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.ldp.engine.batches import ReportBatch
from ldp_telemetry.ldp.engine.counting import SliceCounter
from ldp_telemetry.schemas.codec import ReportDecoder
from ldp_telemetry.schemas.envelopes import DEFAULT_ENVELOPE_REPORTS, write_envelopes


def envelope_files(workdir: str, registry, metric: str, n: int, files: int,
                   envelope_reports: int) -> list[str]:
    """The `simulated_reports` of `metric` as `files` envelope files (written once, kept)."""
    stem = os.path.join(workdir, f"{metric}-{n}-{files}-e{envelope_reports}")
    paths = [f"{stem}-{k}.avro" for k in range(files)]
    if all(map(os.path.exists, paths)):
        return paths
    config = registry[metric]
    ids, times, columns = simulated_reports(registry, metric, n, seed=1)
    for k, path in enumerate(paths):
        rows = slice(k * n // files, (k + 1) * n // files)
        write_envelopes(path, metric, config.protocol, ids[rows], times[rows],
                        {name: c[rows] for name, c in columns.items()},
                        envelope_reports=envelope_reports)
    return paths


def decode_and_count(registry, paths: list[str]) -> None:
    """Each batch counted as it is decoded (what the job's reader does before the grouping)."""
    decoder = ReportDecoder(registry, DAY_S * 1000)
    counter = SliceCounter(registry)
    for path in paths:
        for item in decoder.decode_file(path):
            if isinstance(item, ReportBatch):
                counter.add(item)


def seconds(action) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def measure(registry, metric: str, paths: list[str], one_report: str, args,
            beam_args: list[str]) -> dict:
    """One protocol's row: medians over the repeats of each repeat's figures."""
    rows = []
    with contextlib.redirect_stderr(io.StringIO()):
        for _ in range(args.repeats):
            start_up = seconds(lambda: end_to_end(registry, one_report, beam_args))
            job = seconds(lambda: end_to_end(registry, paths, beam_args))
            decode = seconds(lambda: decode_batches(registry, paths))
            fused = seconds(lambda: decode_and_count(registry, paths))
            batches = decode_batches(registry, paths)
            count = seconds(lambda b=batches: aggregate(registry, b))
            del batches
            beyond = job - start_up
            rows.append({"start_up_s": start_up, "job_s": job, "decode_s": decode,
                         "decode_and_count_s": fused, "count_s": count,
                         "beyond_start_up_s": beyond,
                         "share_of_bound": count / beyond if beyond > 0 else None,
                         "decode_over_beyond": decode / beyond if beyond > 0 else None,
                         "rest_s": beyond - fused})
    out = {}
    for name in rows[0]:
        values = [row[name] for row in rows if row[name] is not None]
        out[name] = statistics.median(values) if values else None
    out["job_rate"] = args.reports / out["job_s"]
    out["count_rate"] = args.reports / out["count_s"]
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reports", type=int, default=4_000_000)
    parser.add_argument("--domain", type=int, default=1024)
    parser.add_argument("--epsilon", type=float, default=2.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--protocols", default="grr,oue,olh")
    parser.add_argument("--files", type=int, default=1)
    parser.add_argument("--envelope-reports", type=int, default=DEFAULT_ENVELOPE_REPORTS)
    parser.add_argument("--workdir", default=None, help="keep the report files here")
    add_json_argument(parser)
    args, beam_args = parser.parse_known_args(argv)
    workdir = args.workdir or tempfile.mkdtemp(prefix="ldp-bench-")
    os.makedirs(workdir, exist_ok=True)
    names = args.protocols.split(",")
    registry = parse_registry({"metrics": [metric_entry(name, args) for name in names]})
    one_report = os.path.join(workdir, "start-up-1.avro")
    make_report_file(one_report, registry, f"bench.{names[0]}", 1, seed=1)
    print(f"{args.reports:,} reports per protocol in {args.files} envelope file(s) of "
          f"{args.envelope_reports:,}-report envelopes, d={args.domain}, ε={args.epsilon:g}, "
          f"medians of {args.repeats} repeats, files in {workdir}")
    print(f"{'protocol':<9}{'start-up s':>11}{'job s':>8}{'beyond s':>10}{'decode s':>10}"
          f"{'dec+count s':>12}{'count s':>9}{'rest s':>8}{'share of bound':>16}"
          f"{'decode/beyond':>15}")
    with Run("envelope_bound", args.json, {**vars(args), "beam_args": beam_args}) as run:
        rows = []
        for name in names:
            metric = f"bench.{name}"
            paths = envelope_files(workdir, registry, metric, args.reports, args.files,
                                   args.envelope_reports)
            row = measure(registry, metric, paths, one_report, args, beam_args)
            share = "-" if row["share_of_bound"] is None else f"{row['share_of_bound']:.2f}"
            ratio = ("-" if row["decode_over_beyond"] is None
                     else f"{row['decode_over_beyond']:.2f}")
            print(f"{name:<9}{row['start_up_s']:>11.2f}{row['job_s']:>8.2f}"
                  f"{row['beyond_start_up_s']:>10.2f}{row['decode_s']:>10.2f}"
                  f"{row['decode_and_count_s']:>12.2f}{row['count_s']:>9.2f}{row['rest_s']:>8.2f}{share:>16}{ratio:>15}",
                  flush=True)
            rows.append({"protocol": name, **row})
        run.save({"unit": "seconds", "protocols": rows})


if __name__ == "__main__":
    main()
