"""Coverage, value by value, of the per-value band records give a pooled-hash oracle (CMS, HCMS,
FLH): f~_v ± z · its standard error with the collision term (`band_method` exact-variance,
coverage_frequency.record_bands), under ONE fixed hash pool per (oracle, ε), as a deployed
metric has.

Windows are drawn as pooled_top_k.py draws them, per (data set, oracle, ε, n): W windows of n
users from the data set's window (coverage_frequency's data sets), their support counts through
the oracle — CMS from its exact (hash, bucket) table given the pool, HCMS and FLH through their
own clients — and every value's record band checked against the window's true frequency. The
pool is the protocol's own (`make_protocol`: fixed by the metric), the same in every window of
a cell, so a value's collision bias is the same in all of them.

Per (data set, oracle, ε, n): the values' coverage across the W windows; how many values lie
more than two standard errors (√(0.95 · 0.05 / W)) below 0.95 beside how many an exactly
calibrated band puts there by chance (coverage_summary.below_by_two_chance, per value), the
share of the probability mass those values hold (their mean true frequency), the lowest
coverage and its value's mean frequency, and the coverage of every value together (what
coverage_frequency.py's "values" group pools). Per oracle: the same over its cells.

--band corrected measures instead the band with the pool's own bias removed
(frequency_bands.pool_corrected_bands: the score band around g = (I + B)⁻¹ f~, B f the pool's
collision bias, linear in f and known from the pool, with the other values' support rate given
the pool in place of q* and C · Σ_{x != v} eq. 2_x added); --pool ROOT draws the
oracle's hashes from another root (a pool the record's failures were not seen on).

    nice python benchmarks/pooled_values.py --datasets airports 'common words' emoji \\
        --json benchmarks/results/pooled_values.json
    nice python benchmarks/pooled_values.py --datasets airports 'common words' emoji \\
        --pool 131 --seed 131 --benchmark pooled_values_confirm \\
        --json benchmarks/results/pooled_values_confirm.json
    nice python benchmarks/pooled_values.py --datasets airports 'common words' emoji \\
        --band corrected --pool 131 --seed 131 --benchmark pooled_values_corrected \\
        --json benchmarks/results/pooled_values_corrected.json
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
from bench_json import Run, add_json_argument, default_datasets_dir, simulation_problem
from coverage_frequency import DATASETS, default_sampler, record_bands, support_counts
from coverage_summary import below_by_two, below_by_two_chance

from ldp_telemetry.ldp.estimation.frequency_bands import pool_corrected_bands

from ldp_telemetry.ldp.protocols import is_pooled, make_protocol
from ldp_telemetry.ldp.protocols.noise import unbiased_estimate

#: The bands --band measures: the record's (with the collision term), or with the pool's bias
#: removed.
BANDS = ("record", "corrected")


def value_coverage(dataset, name: str, epsilon: float, n: int, windows: int, seed: int,
                   band: str = "record", pool: int | None = None
                   ) -> tuple[np.ndarray, np.ndarray, str]:
    """(each value's coverage over the windows, its mean true frequency, the sampler) of one
    (data set, oracle, ε, n) cell under the oracle's fixed pool (its own, or root `pool`'s),
    for the record's band or the bias-corrected one (`band`)."""
    d = dataset(0).size
    protocol = make_protocol(name, epsilon, d)
    if pool is not None:
        protocol = protocol.with_pool(pool)
    sampler = default_sampler(name, n, d, 300_000_000)
    base_noise = protocol.noise(n)
    rng = np.random.default_rng([seed, n, int(epsilon * 100), d, len(name)])
    held = np.zeros(d)
    mass = np.zeros(d)
    for w in range(windows):
        counts = rng.multinomial(n, dataset(w))
        truth = counts / n
        unbiased = unbiased_estimate(support_counts(protocol, counts, rng, sampler), base_noise)
        if band == "corrected":
            lower, upper = pool_corrected_bands(protocol, unbiased, n)
        else:
            lower, upper, _ = record_bands(protocol, unbiased, n)
        held += (lower <= truth + 1e-12) & (truth <= upper + 1e-12)
        mass += truth
    return held / windows, mass / windows, sampler


def cell_row(dataset_name: str, name: str, epsilon: float, n: int, windows: int,
             coverage: np.ndarray, mass: np.ndarray, sampler: str, seconds: float,
             band: str = "record", pool: int | None = None) -> dict:
    """The row of one cell (module docstring)."""
    falling = np.array([below_by_two(float(c), windows) for c in coverage])
    lowest = int(np.argmin(coverage))
    return {"dataset": dataset_name, "protocol": name, "epsilon": epsilon, "n": n,
            "band": band, "pool": "default" if pool is None else pool,
            "windows": windows, "sampler": sampler, "values": int(coverage.size),
            "below_by_two": int(falling.sum()),
            "below_by_two_chance": round(coverage.size * below_by_two_chance(windows), 1),
            "below_by_two_mass": round(float(mass[falling].sum() / mass.sum()), 4),
            "below_090": int((coverage < 0.90).sum()),
            "lowest": round(float(coverage[lowest]), 4),
            "lowest_frequency": round(float(mass[lowest]), 6),
            "all_values": round(float(coverage.mean()), 4),
            "seconds": round(seconds, 1)}


def oracle_summary(rows: list[dict]) -> dict:
    """Per oracle: values (summed over cells) more than two s.e. below 0.95 beside chance,
    cells where more fell than chance would put there by two of its standard deviations, the
    lowest value coverage."""
    out = {}
    for name in sorted({r["protocol"] for r in rows}):
        mine = [r for r in rows if r["protocol"] == name]
        out[name] = {
            "cells": len(mine),
            "values": sum(r["values"] for r in mine),
            "below_by_two": sum(r["below_by_two"] for r in mine),
            "below_by_two_chance": round(sum(r["below_by_two_chance"] for r in mine), 1),
            "cells_beyond_chance": sum(int(excess(r)) for r in mine),
            "lowest": min(r["lowest"] for r in mine)}
    return out


def excess(row: dict) -> bool:
    """Whether a cell has more values below by two s.e. than chance gives, beyond two of
    chance's own standard deviations (binomial over the cell's values, treated as
    independent)."""
    p = row["below_by_two_chance"] / row["values"]
    return row["below_by_two"] > row["below_by_two_chance"] + 2.0 * math.sqrt(
        row["values"] * p * (1.0 - p))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="*", default=["airports", "common words"],
                        choices=list(DATASETS))
    parser.add_argument("--protocols", nargs="*", default=["cms", "hcms", "flh"])
    parser.add_argument("--epsilons", nargs="*", type=float, default=[0.5, 1.0, 2.0, 4.0])
    parser.add_argument("--sizes", nargs="*", type=int,
                        default=[1_000, 10_000, 100_000, 1_000_000])
    parser.add_argument("--windows", type=int, default=100)
    parser.add_argument("--seed", type=int, default=31)
    parser.add_argument("--band", default="record", choices=BANDS)
    parser.add_argument("--pool", type=int, default=None, metavar="ROOT",
                        help="draw the hashes from this root in [0, 2^64) (default: the "
                             "protocol's own pool)")
    parser.add_argument("--datasets-dir", default=default_datasets_dir())
    parser.add_argument("--benchmark", default="pooled_values", help="the results' name")
    add_json_argument(parser)
    args = parser.parse_args(argv)
    folder = Path(args.datasets_dir)
    problem = simulation_problem(folder, args.windows, args.sizes)
    if problem:
        print(problem, file=sys.stderr)
        return 2
    if args.pool is not None and not 0 <= args.pool < 1 << 64:
        print(f"--pool must lie in [0, 2^64), got {args.pool}", file=sys.stderr)
        return 2
    unpooled = [name for name in args.protocols if not is_pooled(name)]
    if unpooled:
        print(f"--protocols: {', '.join(unpooled)} not a pooled-hash oracle", file=sys.stderr)
        return 2
    with Run(args.benchmark, args.json, vars(args)) as run:
        rows: list[dict] = []
        for dataset_name in args.datasets:
            dataset = DATASETS[dataset_name](folder)
            for name in args.protocols:
                for epsilon in args.epsilons:
                    for n in args.sizes:
                        started = time.perf_counter()
                        coverage, mass, sampler = value_coverage(
                            dataset, name, epsilon, n, args.windows, args.seed, args.band,
                            args.pool)
                        row = cell_row(dataset_name, name, epsilon, n, args.windows, coverage,
                                       mass, sampler, time.perf_counter() - started, args.band,
                                       args.pool)
                        rows.append(row)
                        print(f"{dataset_name} {name} ε={epsilon:g} n={n:,}: "
                              f"{row['below_by_two']} of {row['values']} values below by two "
                              f"s.e. (chance {row['below_by_two_chance']}; mass "
                              f"{row['below_by_two_mass']:.3f}), lowest {row['lowest']} "
                              f"(f {row['lowest_frequency']:.4f}), all values "
                              f"{row['all_values']} ({row['seconds']} s)", flush=True)
        found = oracle_summary(rows)
        for name, line in found.items():
            print(f"{name}: {line['below_by_two']} of {line['values']} values below by two s.e. "
                  f"(chance {line['below_by_two_chance']}), {line['cells_beyond_chance']} of "
                  f"{line['cells']} cells beyond chance; lowest {line['lowest']}", flush=True)
        run.save({"rows": rows, "summary": found})
    return 0


if __name__ == "__main__":
    sys.exit(main())
