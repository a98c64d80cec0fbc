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

--band shipped measures what records give today, window by window
(frequency_bands.pooled_value_band, the rule every writer and reader applies): the record's
band below the pool-bias share, the pool-corrected band past it for CMS and HCMS, and no band
where the rule declares one (FLH past the share; a pool too small for its domain). A value's
coverage is counted over the windows that give it a band; a row also counts the windows
declared, and a cell whose every window is declared has no coverage (`declared`).

--queries K (with --band shipped) also follows K sets of 10% of the domain and K ranges
(contiguous, 1–10% of it), each drawn once per cell and kept over its windows as a dashboard's
query is: each window's answer gets the band `ldp query` gives below the pool-bias share (the
unbiased sum ± z · its exact standard error over pools), and past it (where `ldp query` gives
none), that band and the sum of g with its variance given the pool
(frequency_bands.pool_corrected_sum); per query and band its coverage over the windows of its
kind (`query_exact_held` over the windows below the share, `query_plain_held` and
`query_corrected_held` over `corrected_windows`: how many queries held in each number of
windows).

    nice python benchmarks/pooled_values.py --datasets airports 'common words' emoji \\
        --json benchmarks/results/pooled_values.json
    nice python benchmarks/pooled_values.py --datasets airports 'common words' emoji \\
        --pool 131 --seed 131 --benchmark pooled_values_confirm \\
        --json benchmarks/results/pooled_values_confirm.json
    nice python benchmarks/pooled_values.py --datasets airports 'common words' emoji \\
        --band corrected --pool 131 --seed 131 --benchmark pooled_values_corrected \\
        --json benchmarks/results/pooled_values_corrected.json
    nice python benchmarks/pooled_values.py --datasets airports 'common words' emoji words \
        --protocols cms hcms --band shipped --pool 231 --seed 231 \
        --benchmark pooled_values_shipped --json benchmarks/results/pooled_values_shipped.json
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
from bench_json import (Run, add_json_argument, default_datasets_dir, grid_cells,
                        simulation_problem)
from coverage_frequency import DATASETS, default_sampler, record_bands, support_counts
from coverage_summary import below_by_two, below_by_two_chance

from ldp_telemetry.ldp.estimation.frequency_bands import (exact_bands, pool_corrected_bands,
                                                          pool_corrected_sum, pool_debiased,
                                                          pooled_value_band)
from ldp_telemetry.ldp.estimation.postprocess import error_plug_in
from ldp_telemetry.ldp.estimation.uncertainty import BAND_NONE, BAND_POOL_CORRECTED

from ldp_telemetry.ldp.protocols import is_pooled, make_protocol
from ldp_telemetry.ldp.protocols.noise import unbiased_estimate

#: The bands --band measures: the record's (with the collision term), with the pool's bias
#: removed, or the one today's records give each window (module docstring).
BANDS = ("record", "corrected", "shipped")
#: Most fixed sets (and as many ranges) --queries follows per cell.
MAX_QUERIES = 1_000


def fixed_queries(d: int, count: int, rng: np.random.Generator) -> np.ndarray:
    """(2·count, d) indicator weights: `count` sets of 10% of the domain, then `count` ranges
    of 1–10% of it at random starts."""
    weights = np.zeros((2 * count, d))
    size = max(1, d // 10)
    for q in range(count):
        weights[q, rng.choice(d, size, replace=False)] = 1.0
        length = int(rng.integers(1, size + 1))
        start = int(rng.integers(0, d - length + 1))
        weights[count + q, start:start + length] = 1.0
    return weights


def value_coverage(dataset, name: str, epsilon: float, n: int, windows: int, seed: int,
                   band: str = "record", pool: int | None = None, queries: int = 0,
                   query_held: dict[str, np.ndarray] | None = None
                   ) -> tuple[np.ndarray, np.ndarray, str, dict[str, int]]:
    """(each value's coverage over the windows that give it a band, its mean true frequency,
    the sampler, windows per band method) of one (data set, oracle, ε, n) cell under the
    oracle's fixed pool (its own, or root `pool`'s), for the record's band, the
    bias-corrected one, or today's rule (`band`). NaN coverage where every window is
    declared. `queries` (--band shipped): fixed sets and ranges (`fixed_queries`) whose windows
    held, by band, are added into `query_held` ("exact", "corrected", "plain")."""
    d = dataset(0).size
    protocol = make_protocol(name, epsilon, d)
    if pool is not None:
        protocol = protocol.with_pool(pool)
    sampler = default_sampler(name, n, d, 300_000_000)
    base_noise = protocol.noise(n)
    rng = np.random.default_rng([seed, n, int(epsilon * 100), d, len(name)])
    held = np.zeros(d)
    mass = np.zeros(d)
    methods: dict[str, int] = {}
    weights = fixed_queries(d, queries, np.random.default_rng([seed, n, d, 7])) if queries \
        else np.zeros((0, d))
    solved: np.ndarray | None = None  # (I + B)⁻¹ w of each query: the pool's, once per cell
    for w in range(windows):
        counts = rng.multinomial(n, dataset(w))
        truth = counts / n
        unbiased = unbiased_estimate(support_counts(protocol, counts, rng, sampler), base_noise)
        mass += truth
        method = band
        if band == "shipped":
            method, _ = pooled_value_band(protocol, base_noise.for_window(unbiased), unbiased)
            methods[method] = methods.get(method, 0) + 1
            if method == BAND_NONE:
                continue
        if method in ("corrected", BAND_POOL_CORRECTED):
            lower, upper = pool_corrected_bands(protocol, unbiased, n)
        else:
            lower, upper, _ = record_bands(protocol, unbiased, n)
        held += (lower <= truth + 1e-12) & (truth <= upper + 1e-12)
        if query_held is None or not len(weights):
            continue
        answers = weights @ truth
        plug_in = error_plug_in(unbiased)
        plain = np.array([math.sqrt(protocol.linear_variance(n, q, plug_in)) for q in weights])
        low, high = exact_bands(weights @ unbiased, plain)
        inside = (low <= answers + 1e-12) & (answers <= high + 1e-12)
        if method != BAND_POOL_CORRECTED:
            query_held["exact"] += inside
            continue
        query_held["plain"] += inside
        if solved is None:
            solved = np.array([pool_debiased(protocol, q) for q in weights])
        centre = pool_debiased(protocol, unbiased)
        sums = [pool_corrected_sum(protocol, unbiased, n, q, centre, u)
                for q, u in zip(weights, solved, strict=True)]
        low, high = exact_bands(np.array([c for c, _ in sums]), np.array([e for _, e in sums]))
        inside = (low <= answers + 1e-12) & (answers <= high + 1e-12)
        query_held["corrected"] += inside
    banded = windows - methods.get(BAND_NONE, 0)
    coverage = held / banded if banded else np.full(d, np.nan)
    return coverage, mass / windows, sampler, methods


def cell_row(dataset_name: str, name: str, epsilon: float, n: int, windows: int,
             coverage: np.ndarray, mass: np.ndarray, sampler: str, seconds: float,
             band: str = "record", pool: int | None = None,
             methods: dict[str, int] | None = None) -> dict:
    """The row of one cell (module docstring); `windows`: those with a band (0: the cell is
    declared, and has no coverage), `methods`: windows per band method (--band shipped)."""
    extra = {} if methods is None else {"methods": dict(sorted(methods.items())),
                                        "declared": windows == 0}
    if windows == 0:
        return {"dataset": dataset_name, "protocol": name, "epsilon": epsilon, "n": n,
                "band": band, "pool": "default" if pool is None else pool, "windows": 0,
                "sampler": sampler, "values": int(coverage.size), "seconds": round(seconds, 1),
                **extra}
    falling = np.array([below_by_two(float(c), windows) for c in coverage])
    lowest = int(np.argmin(coverage))
    if methods is not None:  # how many values held in each number of windows: the values'
        # coverages without a list of d numbers (coverage_summary's per-value row)
        held = np.bincount(np.rint(coverage * windows).astype(int), minlength=windows + 1)
        extra["held"] = {str(k): int(c) for k, c in enumerate(held) if c}
    return {"dataset": dataset_name, "protocol": name, "epsilon": epsilon, "n": n,
            "band": band, "pool": "default" if pool is None else pool, **extra,
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
        mine = [r for r in rows if r["protocol"] == name and r["windows"]]
        declared = sum(1 for r in rows if r["protocol"] == name and not r["windows"])
        if not mine:
            out[name] = {"cells": 0, "declared_cells": declared}
            continue
        out[name] = {
            "cells": len(mine), "declared_cells": declared,
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


def _histogram(held: np.ndarray) -> dict[str, int]:
    """{number of windows: queries that held in that many}."""
    counts = np.bincount(held)
    return {str(k): int(c) for k, c in enumerate(counts) if c}


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
    parser.add_argument("--queries", type=int, default=0, metavar="K",
                        help="with --band shipped: follow K fixed sets and K fixed ranges per "
                             f"cell (at most {MAX_QUERIES})")
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
    if not 0 <= args.queries <= MAX_QUERIES or (args.queries and args.band != "shipped"):
        print(f"--queries must lie in [0, {MAX_QUERIES}], with --band shipped; got "
              f"{args.queries}", file=sys.stderr)
        return 2
    unpooled = [name for name in args.protocols if not is_pooled(name)]
    if unpooled:
        print(f"--protocols: {', '.join(unpooled)} not a pooled-hash oracle", file=sys.stderr)
        return 2
    with Run(args.benchmark, args.json, vars(args)) as run:
        rows: list[dict] = []
        for dataset_name, dataset, name, epsilon, n in grid_cells(
                args.datasets, lambda key: DATASETS[key](folder), args.protocols,
                args.epsilons, args.sizes):
            started = time.perf_counter()
            query_held = {key: np.zeros(2 * args.queries, dtype=int)
                          for key in ("exact", "corrected", "plain")}
            coverage, mass, sampler, methods = value_coverage(
                dataset, name, epsilon, n, args.windows, args.seed, args.band,
                args.pool, args.queries, query_held)
            banded = args.windows - methods.get(BAND_NONE, 0)
            row = cell_row(dataset_name, name, epsilon, n, banded, coverage,
                           mass, sampler, time.perf_counter() - started, args.band,
                           args.pool, methods if args.band == "shipped" else None)
            if args.queries:
                row.update({f"query_{key}_held": _histogram(held)
                            for key, held in query_held.items()})
                row["queries"] = 2 * args.queries
                row["corrected_windows"] = methods.get(BAND_POOL_CORRECTED, 0)
            rows.append(row)
            if not banded:
                print(f"{dataset_name} {name} ε={epsilon:g} n={n:,}: declared "
                      f"({methods})", flush=True)
                continue
            print(f"{dataset_name} {name} ε={epsilon:g} n={n:,}: "
                  f"{row['below_by_two']} of {row['values']} values below by two "
                  f"s.e. (chance {row['below_by_two_chance']}; mass "
                  f"{row['below_by_two_mass']:.3f}), lowest {row['lowest']} "
                  f"(f {row['lowest_frequency']:.4f}), all values "
                  f"{row['all_values']} ({row['seconds']} s)"
                  + (f" {methods}" if methods else ""), flush=True)
        found = oracle_summary(rows)
        for name, line in found.items():
            if not line["cells"]:
                print(f"{name}: every cell declared ({line['declared_cells']})", flush=True)
                continue
            print(f"{name}: {line['below_by_two']} of {line['values']} values below by two s.e. "
                  f"(chance {line['below_by_two_chance']}), {line['cells_beyond_chance']} of "
                  f"{line['cells']} cells beyond chance; lowest {line['lowest']}", flush=True)
        run.save({"rows": rows, "summary": found})
    return 0


if __name__ == "__main__":
    sys.exit(main())
