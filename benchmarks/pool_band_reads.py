"""The cost of reading a pool-corrected window: what `ldp show`, the store and the dashboard do
with one CMS record past the pool-bias share, read again and again (a live poll).

For each domain size d, one window of n reports (Zipf 1.1 values, seed fixed) is finalised into
its record as the pipeline writes it; then each read, timed apart (median of --repeats):
  method       output.bands.value_band_method (the pool-bias rule: a solve of (I + B) g = f~)
  bands        output.bands.value_bands (every value's pool-corrected band)
  store rows   store.records.value_rows (what a store write or re-band computes)
  first read   value_band_method + value_bands + value_rows of a record not read before
The first read is timed with the solve cache emptied (frequency_bands.clear_pool_solves);
the others twice: "cold" with the cache emptied before each (one solve each) and as a poll
finds them, the record read before.

    python benchmarks/pool_band_reads.py [--domains 1024,4096] [--n 100000] [--json PATH]
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from bench_json import Run, add_json_argument

from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.ldp.engine.finalize import finalize_window
from ldp_telemetry.ldp.estimation import frequency_bands
from ldp_telemetry.output.bands import value_band_method, value_bands
from ldp_telemetry.output.records import window_estimate_record
from ldp_telemetry.store.records import value_rows


def window_record(protocol: str, d: int, n: int, epsilon: float, seed: int):
    """The record of one window of n reports of Zipf(1.1) values over d, as the pipeline
    writes it."""
    metric = {"name": "m", "protocol": protocol, "epsilon": epsilon, "domain": {"size": d}}
    config = parse_registry({"metrics": [metric]})["m"]
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, d + 1) ** 1.1
    values = rng.choice(d, size=n, p=weights / weights.sum())
    statistic = config.protocol.new_statistic()
    config.protocol.accumulate(statistic, config.protocol.perturb(values, rng))
    return window_estimate_record(config, finalize_window(config, statistic, n), 0, 1)


def first_read(record) -> None:
    frequency_bands.clear_pool_solves()
    value_band_method(record)
    value_bands(record)
    list(value_rows(record))


def cold(read, record) -> None:
    frequency_bands.clear_pool_solves()
    read(record)


def timed(read, record, repeats: int) -> float:
    """Median seconds of `read(record)` over `repeats` runs."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        read(record)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--protocol", default="cms")
    parser.add_argument("--domains", default="1024,4096")
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--epsilon", type=float, default=4.0)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--seed", type=int, default=5)
    add_json_argument(parser)
    args = parser.parse_args()
    rows = []
    with Run("pool_band_reads", args.json, vars(args)) as run:
        for d in map(int, args.domains.split(",")):
            record = window_record(args.protocol, d, args.n, args.epsilon, args.seed)
            row = {"d": d, "band_method": record.band_method,
                   "first read s": timed(first_read, record, args.repeats)}
            for name, read in (("method", value_band_method), ("bands", value_bands),
                               ("store rows", lambda r: list(value_rows(r)))):
                row[f"{name} cold s"] = timed(lambda r, read=read: cold(read, r), record,
                                              args.repeats)
                row[f"{name} s"] = timed(read, record, args.repeats)
            rows.append(row)
            print(f"{args.protocol} d = {d:>5} ({row['band_method']}): "
                  + ", ".join(f"{key} {value:.4f}" for key, value in row.items()
                              if key.endswith(" s")), flush=True)
        run.save({"unit": "seconds, median", "reads": rows})


if __name__ == "__main__":
    main()
