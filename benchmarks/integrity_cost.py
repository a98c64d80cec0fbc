"""What the integrity statistics cost: the same report file through the counting step and the
whole job with integrity on (the default) and off (`"integrity": false`).

For every protocol: one Avro file of N reports (d values, ε; benchmarks/throughput.py's file),
then, each a median of --repeats runs alternating on / off,
  aggregate    SliceCounter.add over decoded batches: the support counts, plus the report
               sample when on;
  end to end   the whole Beam job (FnApiRunner): read, validate, count, finalize (plus the
               integrity tests when on), write.
Rates are reports/s; `ratio` is on / off (1.00: free), of wall-clock rates and of the process's
CPU time for the end-to-end job (off / on: steadier than wall clock on a shared machine). The
goal is an end-to-end ratio of at least 0.90.

    python benchmarks/integrity_cost.py --reports 200000 [--json PATH]
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
from throughput import aggregate, decode_batches, end_to_end, make_report_file

from ldp_telemetry.ldp.config.registry import parse_registry

FREQUENCY = ("grr", "oue", "olh", "ss", "rws")


def registry_of(name: str, args, integrity: bool):
    entry = {"name": f"bench.{name}", "protocol": name, "epsilon": args.epsilon,
             "domain": {"size": args.domain}}
    if not integrity:
        entry["integrity"] = False
    return parse_registry({"metrics": [entry]})


def alternating(on, off, repeats: int) -> tuple[float, float, float, float]:
    """Median wall-clock seconds of `on` and of `off`, run alternately so that load hits both
    alike, and their median CPU seconds (this process's: steadier on a shared machine)."""
    times = {"on": [], "off": [], "cpu on": [], "cpu off": []}
    for _ in range(repeats):
        for name, action in (("on", on), ("off", off)):
            start, cpu = time.perf_counter(), time.process_time()
            action()
            times[name].append(time.perf_counter() - start)
            times[f"cpu {name}"].append(time.process_time() - cpu)
    return tuple(statistics.median(times[k]) for k in ("on", "off", "cpu on", "cpu off"))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reports", type=int, default=200_000)
    parser.add_argument("--domain", type=int, default=1024)
    parser.add_argument("--epsilon", type=float, default=2.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--protocols", default=",".join(FREQUENCY))
    parser.add_argument("--workdir", default=None)
    add_json_argument(parser)
    args, beam_args = parser.parse_known_args(argv)
    workdir = args.workdir or tempfile.mkdtemp(prefix="ldp-bench-")
    os.makedirs(workdir, exist_ok=True)
    n = args.reports
    print(f"{n:,} reports per protocol, d={args.domain}, ε={args.epsilon:g}, median of "
          f"{args.repeats} alternating runs")
    print(f"{'protocol':<9}{'aggregate on/s':>16}{'off/s':>12}{'ratio':>7}"
          f"{'end-to-end on/s':>17}{'off/s':>12}{'ratio':>7}{'CPU ratio':>11}")
    rows = []
    with Run("integrity_cost", args.json, {**vars(args), "beam_args": beam_args}) as run:
        for name in args.protocols.split(","):
            on, off = registry_of(name, args, True), registry_of(name, args, False)
            path = os.path.join(workdir, f"{name}-{n}-{args.domain}-{args.epsilon:g}.avro")
            if not os.path.exists(path):
                make_report_file(path, on, f"bench.{name}", n, seed=1)
            batches = decode_batches(on, path)
            agg_on, agg_off, _, _ = alternating(
                lambda: aggregate(on, batches),  # noqa: B023
                lambda: aggregate(off, batches),  # noqa: B023
                args.repeats)
            with contextlib.redirect_stderr(io.StringIO()):
                e2e_on, e2e_off, cpu_on, cpu_off = alternating(
                    lambda: end_to_end(on, path, beam_args),  # noqa: B023
                    lambda: end_to_end(off, path, beam_args),  # noqa: B023
                    args.repeats)
            row = {"protocol": name, "aggregate_on": n / agg_on, "aggregate_off": n / agg_off,
                   "aggregate_ratio": agg_off / agg_on, "end_to_end_on": n / e2e_on,
                   "end_to_end_off": n / e2e_off, "end_to_end_ratio": e2e_off / e2e_on,
                   "end_to_end_cpu_on_s": cpu_on, "end_to_end_cpu_off_s": cpu_off,
                   "end_to_end_cpu_ratio": cpu_off / cpu_on}
            print(f"{name:<9}{row['aggregate_on']:>16,.0f}{row['aggregate_off']:>12,.0f}"
                  f"{row['aggregate_ratio']:>7.2f}{row['end_to_end_on']:>17,.0f}"
                  f"{row['end_to_end_off']:>12,.0f}{row['end_to_end_ratio']:>7.2f}"
                  f"{row['end_to_end_cpu_ratio']:>11.2f}", flush=True)
            rows.append(row)
        run.save({"unit": "reports/s", "protocols": rows})


if __name__ == "__main__":
    main()
