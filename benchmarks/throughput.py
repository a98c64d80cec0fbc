"""Throughput of the pipeline, measured against fastavro's raw decode of the same file.

For every protocol: N reports (d values, ε) are written once as per-report Avro files and once
as files of report envelopes (--envelope-reports per envelope, docs/envelopes.md), --files of
each; then, each a median of --repeats runs in this process,
  raw decode   fastavro.reader over the per-report files, records discarded (the floor any
               per-report reader pays);
  decode       ldp_telemetry.schemas.codec.ReportDecoder: records -> validated numpy batches;
  dec+count/raw  decode and SliceCounter.add of its batches, over the raw decode time: the
               reader's own share, without Beam's fixed cost of a job;
  end to end   the whole Beam job (FnApiRunner, or the --beam args given): read, validate,
               count, finalize, write; `e2e/raw` over the raw decode rate;
  env decode, env e2e  the same over the envelope files; `env/rec` = envelope end to end over
               per-report end to end; `beyond s-u` the same without the start-up of a job (a
               job of 1 report, measured first), which bounds the envelope rate;
  aggregate    SliceCounter.add over already-decoded batches (the counting alone,
               repeated report ids dropped); `no dedupe`: the same batches without their ids;
  count bound  the largest `beyond s-u` an envelope job could reach if it only counted
               (`counting_bound`); `of bound`: `beyond s-u` over it. The start-up, the
               counting and both jobs run in every repeat, and these ratios are medians of
               the repeats' own ratios;
  shuffle B    bytes per report of what the envelope job moves through the runner's grouping
               by slice: each file's reports are counted before it (ldp.engine.partials), so
               only partial statistics and their report ids cross it (pickled, as Beam's
               fallback coder does); `batches B`: the envelope batches themselves
               (ReportBatchCoder), what crossed it when every report was counted after it.
Rates are reports/s; ratios are the figures that matter on a shared, noisy machine (each repeat
runs the decodes and jobs in turn, so that both sides of a ratio see the same load). With
--multi-process the end-to-end runs use ldp_telemetry.runners.direct.multi_process_options().

    python benchmarks/throughput.py --reports 1000000 --domain 1024 [--json PATH]
"""
from __future__ import annotations

import argparse
import contextlib
import io
import os
import pickle
import statistics
import tempfile
import time

import fastavro
import numpy as np
from bench_json import Run, add_json_argument

from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.ldp.config.windows import WindowSpec
from ldp_telemetry.ldp.engine.batches import REPORT_ID, ReportBatch
from ldp_telemetry.ldp.engine.counting import SliceCounter
from ldp_telemetry.ldp.engine.partials import PartialCounter
from ldp_telemetry.ldp.protocols import NUMERIC_PROTOCOLS, PROTOCOLS
from ldp_telemetry.pipelines.batch import run_job
from ldp_telemetry.pipelines.job import EstimateJob
from ldp_telemetry.runners.direct import multi_process_options
from ldp_telemetry.schemas.codec import ReportDecoder, write_reports
from ldp_telemetry.schemas.envelopes import DEFAULT_ENVELOPE_REPORTS, write_envelopes
from ldp_telemetry.transforms.coders import encode_batch

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


def simulated_reports(registry, metric: str, n: int, seed: int):
    """(ids, event times, payload columns) of n reports of a Zipf(1.1)-shaped distribution over
    the domain, spread over one day (numeric protocols: the bucket's midpoint on [0, 1])."""
    config = registry[metric]
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, config.d + 1) ** 1.1
    values = rng.choice(config.d, size=n, p=weights / weights.sum())
    if config.kind == "numeric":
        values = (values + 0.5) / config.d
    times = START_MS + np.sort(rng.integers(0, DAY_S * 1000, size=n))
    return np.arange(n), times, config.protocol.perturb(values, rng)


def make_report_file(path: str, registry, metric: str, n: int, seed: int) -> None:
    """One per-report file of `simulated_reports`."""
    write_reports(path, metric, registry[metric].protocol,
                  *simulated_reports(registry, metric, n, seed))


def make_report_files(workdir: str, stem: str, registry, metric: str, n: int, files: int,
                      envelope_reports: int, seed: int = 1) -> tuple[list[str], list[str]]:
    """The same reports as `files` per-report files and `files` envelope files (written once,
    kept in `workdir`): (per-report paths, envelope paths)."""
    records = [os.path.join(workdir, f"{stem}-{k}.avro") for k in range(files)]
    envelopes = [os.path.join(workdir, f"{stem}-e{envelope_reports}-{k}.avro")
                 for k in range(files)]
    if all(map(os.path.exists, records + envelopes)):
        return records, envelopes
    config = registry[metric]
    ids, times, columns = simulated_reports(registry, metric, n, seed)
    for k, (rec, env) in enumerate(zip(records, envelopes, strict=True)):
        rows = slice(k * n // files, (k + 1) * n // files)
        part = (ids[rows], times[rows], {name: c[rows] for name, c in columns.items()})
        write_reports(rec, metric, config.protocol, *part)
        write_envelopes(env, metric, config.protocol, *part, envelope_reports=envelope_reports)
    return records, envelopes


def raw_decode(paths: str | list[str]) -> int:
    count = 0
    for path in [paths] if isinstance(paths, str) else paths:
        with open(path, "rb") as handle:
            count += sum(1 for _ in fastavro.reader(handle))
    return count


def decode_batches(registry, paths: str | list[str]) -> list[ReportBatch]:
    decoder = ReportDecoder(registry, DAY_S * 1000)
    return [item for path in ([paths] if isinstance(paths, str) else paths)
            for item in decoder.decode_file(path)]


def decode_and_count(registry, paths: list[str]) -> None:
    aggregate(registry, decode_batches(registry, paths))


def aggregate(registry, batches: list[ReportBatch]) -> None:
    counter = SliceCounter(registry)
    for batch in batches:
        counter.add(batch)


def partial_bytes(registry, paths: list[str]) -> int:
    """Bytes of the partial statistics an envelope job sends through the grouping by slice."""
    total = 0
    for path in paths:
        counter = PartialCounter(registry, path)
        partials = [p for batch in decode_batches(registry, path) for p in counter.add(batch)]
        for element in partials + counter.finish():
            total += len(pickle.dumps(element, pickle.HIGHEST_PROTOCOL))
    return total


def without_ids(batches: list[ReportBatch]) -> list[ReportBatch]:
    return [ReportBatch(b.metric, b.slice_start_ms,
                        {k: v for k, v in b.columns.items() if k != REPORT_ID}) for b in batches]


def end_to_end(registry, paths: str | list[str], beam_args: list[str]) -> None:
    paths = (paths,) if isinstance(paths, str) else tuple(paths)
    with tempfile.TemporaryDirectory() as output:
        job = EstimateJob(registry, paths, output, WindowSpec.from_seconds(DAY_S))
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
    parser.add_argument("--envelope-reports", type=int, default=DEFAULT_ENVELOPE_REPORTS,
                        help="reports per envelope in the envelope files")
    parser.add_argument("--files", type=int, default=1,
                        help="split the reports into this many files of each layout")
    parser.add_argument("--multi-process", type=int, default=0, metavar="WORKERS",
                        help="run the end-to-end jobs on FnApiRunner with this many worker "
                             "processes (runners.direct.multi_process_options)")
    add_json_argument(parser)
    args, beam_args = parser.parse_known_args(argv)
    if args.multi_process:
        beam_args = [*multi_process_options(args.multi_process), *beam_args]
    name = "throughput_multiprocess" if args.multi_process else "throughput"
    with Run(name, args.json, {**vars(args), "beam_args": beam_args}) as run:
        rows, start_up = measure(args, beam_args)
        run.save({"unit": "reports/s", "protocols": rows, "start_up_s": start_up})


def metric_entry(name: str, args) -> dict:
    """The registry entry of protocol `name`'s benchmark metric."""
    entry = {"name": f"bench.{name}", "protocol": name, "epsilon": args.epsilon,
             "domain": {"size": args.domain}}
    if name in NUMERIC_PROTOCOLS:
        entry["domain"] = {"low": 0, "high": 1, "buckets": args.domain}
    if name in SQUARE_WAVE:
        entry["estimator"] = {"method": "ems", "bootstrap": 0}
    return entry


def start_up_seconds(registry, workdir: str, metric: str, args, beam_args: list[str]
                     ) -> float | None:
    """Seconds of a job over one report: what every job pays whatever its input."""
    if args.skip_end_to_end:
        return None
    path = os.path.join(workdir, "start-up-1.avro")
    make_report_file(path, registry, metric, 1, seed=1)
    with contextlib.redirect_stderr(io.StringIO()):
        return median_seconds(lambda: end_to_end(registry, path, beam_args), args.repeats)


def measure(args, beam_args: list[str]) -> tuple[list[dict], float | None]:
    """Print and return one row of rates per protocol, and the job's start-up seconds."""
    workdir = args.workdir or tempfile.mkdtemp(prefix="ldp-bench-")
    os.makedirs(workdir, exist_ok=True)
    names = args.protocols.split(",")
    registry = parse_registry({"metrics": [metric_entry(name, args) for name in names]})
    print(f"{args.reports:,} reports per protocol, d={args.domain}, ε={args.epsilon:g}, "
          f"median of {args.repeats} runs, files in {workdir}")
    print(f"envelopes of {args.envelope_reports:,} reports, {args.files} file(s) of each layout"
          f"{', beam args ' + ' '.join(beam_args) if beam_args else ''}")
    header = (f"{'protocol':<9}{'raw decode/s':>14}{'decode/s':>12}{'dec+count/raw':>15}"
              f"{'end-to-end/s':>14}{'e2e/raw':>9}{'env decode/s':>14}{'env e2e/s':>12}"
              f"{'env/rec':>9}{'beyond s-u':>11}{'aggregate/s':>14}{'no dedupe/s':>14}"
              f"{'count bound':>12}{'of bound':>11}{'shuffle B':>10}{'batches B':>10}")
    start_up = start_up_seconds(registry, workdir, f"bench.{names[0]}", args, beam_args)
    if start_up is not None:
        print(f"start-up: a job of 1 report takes {start_up:.2f} s")
    print(header)
    rows = []
    for name in names:
        stem = f"{name}-{args.reports}-{args.domain}-{args.epsilon:g}-{args.files}"
        paths, envelopes = make_report_files(workdir, stem, registry, f"bench.{name}",
                                             args.reports, args.files, args.envelope_reports)
        one = os.path.join(workdir, "start-up-1.avro")
        row = measure_files(registry, paths, envelopes, args, beam_args,
                            None if start_up is None else one)

        def shown(value, spec=",.0f"):
            return "-" if value is None else format(value, spec)
        print(f"{name:<9}{row['raw_decode']:>14,.0f}{row['decode']:>12,.0f}"
              f"{row['decode_and_count_over_raw']:>15.2f}{shown(row['end_to_end']):>14}"
              f"{shown(row['end_to_end_over_raw'], '.2f'):>9}"
              f"{row['envelope_decode']:>14,.0f}{shown(row['envelope_end_to_end']):>12}"
              f"{shown(row['envelope_over_records'], '.1f'):>9}"
              f"{shown(row['envelope_over_records_beyond_start_up'], '.1f'):>11}"
              f"{row['aggregate']:>14,.0f}"
              f"{row['aggregate_without_ids']:>14,.0f}"
              f"{shown(row['counting_bound'], '.1f'):>12}"
              f"{shown(row['share_of_counting_bound'], '.2f'):>11}"
              f"{row['shuffle_bytes_per_report']:>10.1f}"
              f"{row['batch_bytes_per_report']:>10.0f}", flush=True)
        rows.append({"protocol": name, **row})
    return rows, start_up


def counting_bound(n: int, records: float | None, aggregate: float,
                   start_up: float | None) -> float | None:
    """The largest envelope / per-report ratio beyond start-up that any envelope job could
    reach if it did nothing but count: (per-report job seconds - start-up) / counting seconds.
    Counting (the protocol's support, duplicate ids, the integrity sample) is work every layout
    does, so an envelope job's rate never passes it."""
    if None in (records, start_up):
        return None
    return (n / records - start_up) / (n / aggregate)


def beyond_start_up(n: int, records: float | None, envelopes: float | None,
                    start_up: float | None) -> float | None:
    """Envelope / per-report end to end without the job's start-up: (per-report job seconds -
    start-up) / (envelope job seconds - start-up); None when the envelope job took no longer
    than the start-up (too noisy to tell) or nothing was run."""
    if None in (records, envelopes, start_up) or n / envelopes <= start_up:
        return None
    return (n / records - start_up) / (n / envelopes - start_up)


def measure_files(registry, paths: list[str], envelopes: list[str], args,
                  beam_args: list[str], one_report: str | None) -> dict:
    """The rates of one protocol's report files and envelope files (reports/s).

    Each repeat runs every measurement once, in turn — the decodes, the counting, a job of one
    report (`one_report`, None: no jobs) and the two jobs — so that the ratios compare runs
    that saw the same load of a shared machine. The start-up ratios (`beyond_start_up`,
    `counting_bound` and the share of it reached) are computed per repeat; every figure is the
    median over the repeats.
    """
    n = args.reports
    batches = decode_batches(registry, paths)
    actions = {
        "raw_decode": lambda: raw_decode(paths),
        "decode": lambda: decode_batches(registry, paths),
        "decode_and_count": lambda: decode_and_count(registry, paths),
        "envelope_decode": lambda: decode_batches(registry, envelopes),
        "aggregate": lambda: aggregate(registry, batches)}
    if one_report is not None:
        actions["start_up"] = lambda: end_to_end(registry, one_report, beam_args)
        actions["end_to_end"] = lambda: end_to_end(registry, paths, beam_args)
        actions["envelope_end_to_end"] = lambda: end_to_end(registry, envelopes, beam_args)
    times = {name: [] for name in actions}
    with contextlib.redirect_stderr(io.StringIO()):
        for _ in range(args.repeats):
            for name, action in actions.items():
                times[name].append(median_seconds(action, 1))
    rates = {name: n / statistics.median(seconds) for name, seconds in times.items()}
    agg = rates["aggregate"]
    ratios = {"beyond": [], "bound": [], "share": []}
    for k in range(args.repeats if one_report is not None else 0):
        start_up = times["start_up"][k]
        beyond = beyond_start_up(n, n / times["end_to_end"][k],
                                 n / times["envelope_end_to_end"][k], start_up)
        bound = counting_bound(n, n / times["end_to_end"][k], n / times["aggregate"][k],
                               start_up)
        ratios["bound"].append(bound)
        if beyond is not None:
            ratios["beyond"].append(beyond)
            ratios["share"].append(beyond / bound)
    median = {k: statistics.median(v) if v else None for k, v in ratios.items()}
    batch_bytes = sum(len(encode_batch(batch)) for batch in decode_batches(registry, envelopes))
    bare = without_ids(batches)
    agg_bare = n / median_seconds(lambda: aggregate(registry, bare), args.repeats)
    raw, e2e, env_e2e = (rates["raw_decode"], rates.get("end_to_end"),
                         rates.get("envelope_end_to_end"))
    return {"raw_decode": raw, "decode": rates["decode"],
            "decode_and_count_over_raw": rates["decode_and_count"] / raw,
            "end_to_end": e2e, "end_to_end_over_raw": None if e2e is None else e2e / raw,
            "envelope_decode": rates["envelope_decode"], "envelope_end_to_end": env_e2e,
            "envelope_over_records": None if e2e is None else env_e2e / e2e,
            "aggregate": agg, "aggregate_without_ids": agg_bare,
            "start_up_s": statistics.median(times["start_up"]) if "start_up" in times else None,
            "envelope_over_records_beyond_start_up": median["beyond"],
            "counting_bound": median["bound"], "share_of_counting_bound": median["share"],
            "shuffle_bytes_per_report": partial_bytes(registry, envelopes) / n,
            "batch_bytes_per_report": batch_bytes / n}


if __name__ == "__main__":
    main()
