"""Aggregation cost of every frequency oracle against the domain size: the planner's cost model.

For each registered protocol at ε (default 2) and each d of --domains, N reports of a Zipf(1.1)
population are perturbed (not timed), then timed, each the median of --repeats runs:
  counting   `accumulate` of the N reports into an empty statistic, in seconds per report;
  finalize   `support_counts` of that statistic, in seconds per window (called again until
             --min-seconds of CPU have passed, the mean per call: a few microseconds for most).
Times are CPU seconds of this process (`time.process_time`): one core's work, steadier on a
shared machine than wall-clock time.
Reports are counted in batches of --batch (the decoder's chunk, 65,536; fewer where a batch's
payloads would exceed --batch-bytes): --sample reports are perturbed and repeated to fill one
batch (perturbing is the client's cost, and O(d) per report for some), and a counting run
accumulates that batch N / batch times. N doubles from --min-reports until a run lasts --target
seconds of CPU or N reaches --max-reports, so the per-batch cost (an O(d) statistic's sums) is
spread as in a job.
The model of ldp_telemetry.ldp.config.cost (t(d) = a + b·d^c per protocol and cost) is fitted
to these rows and written into the results and, with --model PATH, as the package's model file
(ldp/config/aggregation_cost.json), so that the model's constants always come from a committed
measurement.

    python benchmarks/aggregation_cost.py [--json PATH] [--model ldp/config/aggregation_cost.json]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import numpy as np
from bench_json import Run, add_json_argument

from ldp_telemetry.ldp.config.cost import fit, model_from_document
from ldp_telemetry.ldp.protocols import PROTOCOLS, make_protocol

DOMAINS = (16, 256, 4096, 65536, 1 << 20)


def population(d: int, n: int, rng: np.random.Generator) -> np.ndarray:
    weights = 1.0 / np.arange(1, d + 1) ** 1.1
    return rng.choice(d, size=n, p=weights / weights.sum())


def timed(step) -> float:
    start = time.process_time()
    step()
    return time.process_time() - start


def per_call(step, min_seconds: float) -> float:
    """Mean CPU seconds of `step` over as many calls as take min_seconds (one at least)."""
    calls, start = 0, time.process_time()
    while True:
        step()
        calls += 1
        elapsed = time.process_time() - start
        if elapsed >= min_seconds:
            return elapsed / calls


def measure(name: str, epsilon: float, d: int, args, rng: np.random.Generator) -> dict:
    """One row: the protocol's counting seconds per report and finalize seconds at d."""
    protocol = make_protocol(name, epsilon, d)
    n, batch, count_seconds, finalize_seconds = protocol_seconds(protocol, d, args, rng)
    return {"protocol": name, "d": d, "parameter": protocol.parameter, "reports": n, "batch": batch,
            "count_seconds_per_report": count_seconds, "finalize_seconds": finalize_seconds}


def protocol_seconds(protocol, d: int, args, rng: np.random.Generator
                     ) -> tuple[int, int, float, float]:
    """(reports counted per run, batch, median counting seconds per report, median finalize
    seconds) of `protocol` over [0, d): batches of one perturbed sample counted until a run
    lasts `args.target` seconds, `args.repeats` times."""
    batch = max(1, min(args.batch, args.batch_bytes // protocol.payload_bytes()))
    sample = protocol.perturb(population(d, min(batch, args.sample), rng), rng)
    columns = {key: np.resize(column, (batch, *column.shape[1:]))
               for key, column in sample.items()}

    def count(statistic, n: int) -> None:
        for start in range(0, n, batch):
            rows = min(batch, n - start)
            protocol.accumulate(statistic, {key: column[:rows]
                                            for key, column in columns.items()})

    n = min(args.min_reports, batch)
    while timed(lambda n=n: count(protocol.new_statistic(), n)) < args.target \
            and 2 * n <= args.max_reports:
        n *= 2
    counts, finals = [], []
    for _ in range(args.repeats):
        statistic = protocol.new_statistic()
        counts.append(timed(lambda s=statistic, n=n: count(s, n)) / n)
        finals.append(per_call(lambda s=statistic: protocol.support_counts(s), args.min_seconds))
    return n, batch, statistics.median(counts), statistics.median(finals)


def run(args) -> dict:
    """The results document: the measured rows and the model fitted to them."""
    rng = np.random.default_rng(args.seed)
    rows = []
    for name in args.protocols:
        for d in args.domains:
            row = measure(name, args.epsilon, d, args, rng)
            rows.append(row)
            print(f"{name:<5} d={d:<7,} {row['parameter']:<16} n={row['reports']:<8,} "
                  f"{1 / row['count_seconds_per_report']:>14,.0f} reports/s "
                  f"{row['finalize_seconds'] * 1e3:>10.2f} ms finalize", flush=True)
    return modelled(rows, args.epsilon)


def modelled(rows: list[dict], epsilon: float) -> dict:
    """The results of measured `rows`: the rows with the model's figures, and the model."""
    model = fit(rows, epsilon)
    fitted = model_from_document(model)
    for row in rows:
        row["model_count_seconds_per_report"] = fitted.seconds_per_report(row["protocol"],
                                                                         row["d"])
        row["model_finalize_seconds"] = fitted.finalize_seconds(row["protocol"], row["d"])
    return {"epsilon": epsilon, "rows": rows, "model": model}


def parser() -> argparse.ArgumentParser:
    out = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    out.add_argument("--epsilon", type=float, default=2.0)
    out.add_argument("--domains", type=int, nargs="+", default=list(DOMAINS))
    out.add_argument("--protocols", nargs="+", default=list(PROTOCOLS), choices=list(PROTOCOLS))
    out.add_argument("--repeats", type=int, default=5)
    out.add_argument("--target", type=float, default=0.2,
                     help="seconds of CPU one counting run should last")
    out.add_argument("--batch", type=int, default=65_536,
                     help="reports per accumulate call (the decoder's CHUNK_RECORDS)")
    out.add_argument("--batch-bytes", type=int, default=1 << 26,
                     help="most payload bytes of one batch (a batch has at least one report)")
    out.add_argument("--sample", type=int, default=256,
                     help="distinct perturbed reports repeated to fill a batch")
    out.add_argument("--min-reports", type=int, default=256)
    out.add_argument("--min-seconds", type=float, default=0.01,
                     help="CPU seconds of repeated finalize calls per timing")
    out.add_argument("--max-reports", type=int, default=1 << 20)
    out.add_argument("--seed", type=int, default=7)
    out.add_argument("--model", default=None, metavar="PATH",
                     help="also write the fitted model file (ldp/config/aggregation_cost.json)")
    out.add_argument("--refit", default=None, metavar="RESULTS",
                     help="measure nothing: fit the model again to the rows of RESULTS (a file "
                          "this script wrote), rewriting it and, with --model, the model file")
    add_json_argument(out)
    return out


def refit(path: str, model_path: str | None) -> int:
    """Fit the model again to the rows of a results file (rewritten in place): after a change
    of the model's form, without measuring again."""
    with open(path, encoding="utf-8") as handle:
        document = json.load(handle)
    results = document["results"]
    document["results"] = modelled(results["rows"], results["epsilon"])
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(json.dumps(document, indent=1, ensure_ascii=False) + "\n")
    if model_path:
        with open(model_path, "w", encoding="utf-8") as handle:
            json.dump(document["results"]["model"], handle, indent=1)
            handle.write("\n")
    return 0


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    if args.refit:
        return refit(args.refit, args.model)
    with Run("aggregation_cost", args.json, vars(args)) as bench:
        results = run(args)
        bench.save(results)
    if args.model:
        with open(args.model, "w", encoding="utf-8") as handle:
            json.dump(results["model"], handle, indent=1)
            handle.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
