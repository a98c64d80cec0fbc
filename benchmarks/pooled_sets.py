"""Coverage, query by query, of the band `ldp query` gives a set or a range of a pooled-hash
(CMS, HCMS, FLH) window whose values keep their bands (collision share at most
frequency_bands.POOL_BIAS_SHARE), under ONE fixed hash pool per (oracle, ε) and the SAME sets and
ranges in every window — a dashboard following one set over months of one metric.

Windows are drawn as pooled_values.py draws them, per (data set, oracle, ε, n): W windows of n
users from the data set's window (coverage_frequency's data sets), CMS from its exact
(hash, bucket) table given the pool, HCMS and FLH through their clients. Per cell, --queries
random sets of 10% of the domain and as many random ranges of 1–25% of it
(coverage_frequency.query_weights), drawn once for the cell. Each window's answers are
queries.WindowEstimate's (`set_sum`, `range_sum`, method `base`: Σ_S f~ ± z · its exact standard
error with the collision term); a window whose answers have no band (its share past the
threshold: `_pool_declared`) is counted as declared, not checked.

Per cell: the windows declared, and where at most half were, over the banded windows: the
queries more than two standard errors (√(0.95 · 0.05 / W), W the banded windows) below 0.95
beside chance (coverage_summary.below_by_two_chance per query), the lowest, every query
together, each query's coverage (`coverages`: the sets, then the ranges). Per oracle: queries
below by two s.e. beside chance over its cells, the lowest.

    nice python benchmarks/pooled_sets.py --json benchmarks/results/pooled_sets.json
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from bench_json import (Run, add_json_argument, default_datasets_dir, epsilons_problem, grid_cells,
                        simulation_problem)
from coverage_frequency import DATASETS, default_sampler, query_weights, support_counts
from coverage_summary import below_by_two, below_by_two_chance

from ldp_telemetry.ldp.estimation.queries import WindowEstimate
from ldp_telemetry.ldp.estimation.uncertainty import BAND_NONE
from ldp_telemetry.ldp.protocols import is_pooled, make_protocol
from ldp_telemetry.ldp.protocols.noise import unbiased_estimate

#: Most sets (and as many ranges) a cell follows (--queries).
MAX_QUERIES = 100


def query_coverage(dataset, name: str, epsilon: float, n: int, windows: int, queries: int,
                   seed: int) -> tuple[np.ndarray, int, str]:
    """(each query's coverage over the banded windows — the sets, then the ranges —, the
    windows declared, the sampler) of one (data set, oracle, ε, n) cell; the coverage is empty
    where more than half the windows were declared."""
    d = dataset(0).size
    protocol = make_protocol(name, epsilon, d)
    sampler = default_sampler(name, n, d, 300_000_000)
    base = protocol.noise(n)
    rng = np.random.default_rng([seed, n, int(epsilon * 100), d, len(name), 17])
    sets, ranges = query_weights(d, queries, np.random.default_rng([seed, d, 23]))
    chosen = [np.flatnonzero(row) for row in (*sets, *ranges)]
    held = np.zeros(len(chosen))
    banded = declared = 0
    for w in range(windows):
        counts = rng.multinomial(n, dataset(w))
        truth = counts / n
        unbiased = unbiased_estimate(support_counts(protocol, counts, rng, sampler), base)
        window = WindowEstimate.from_unbiased(protocol, n, unbiased, "base")
        answers = [window.set_sum(indices.tolist()) for indices in chosen]
        if any(a.band_method == BAND_NONE for a in answers):
            declared += 1
            continue
        banded += 1
        for i, (indices, a) in enumerate(zip(chosen, answers, strict=True)):
            true = float(truth[indices].sum())
            held[i] += a.lower95 <= true + 1e-12 and true <= a.upper95 + 1e-12
    if 2 * banded < windows:
        return np.zeros(0), declared, sampler
    return held / banded, declared, sampler


def cell_row(dataset_name: str, name: str, epsilon: float, n: int, windows: int,
             declared: int, coverage: np.ndarray, sampler: str, seconds: float) -> dict:
    """The row of one measured cell (module docstring)."""
    banded = windows - declared
    falling = np.array([below_by_two(float(c), banded) for c in coverage])
    return {"dataset": dataset_name, "protocol": name, "epsilon": epsilon, "n": n,
            "windows": banded, "declared_windows": declared, "sampler": sampler,
            "queries": int(coverage.size), "below_by_two": int(falling.sum()),
            "below_by_two_chance": round(coverage.size * below_by_two_chance(banded), 2),
            "below_090": int((coverage < 0.90).sum()),
            "lowest": round(float(coverage.min()), 4),
            "all_queries": round(float(coverage.mean()), 4),
            "coverages": " ".join(f"{c:g}" for c in coverage.round(4)),
            "seconds": round(seconds, 1)}


def oracle_summary(rows: list[dict]) -> dict:
    """Per oracle: queries (summed over cells) more than two s.e. below 0.95 beside chance,
    the lowest query coverage."""
    return {name: {"cells": len(mine), "queries": sum(r["queries"] for r in mine),
                   "below_by_two": sum(r["below_by_two"] for r in mine),
                   "below_by_two_chance": round(sum(r["below_by_two_chance"] for r in mine), 1),
                   "lowest": min(r["lowest"] for r in mine)}
            for name in sorted({r["protocol"] for r in rows})
            for mine in [[r for r in rows if r["protocol"] == name]]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="*", default=["airports", "common words"],
                        choices=list(DATASETS))
    parser.add_argument("--protocols", nargs="*", default=["cms", "hcms", "flh"])
    parser.add_argument("--epsilons", nargs="*", type=float, default=[0.5, 1.0, 2.0, 4.0])
    parser.add_argument("--sizes", nargs="*", type=int,
                        default=[1_000, 10_000, 100_000, 1_000_000])
    parser.add_argument("--windows", type=int, default=100)
    parser.add_argument("--queries", type=int, default=10,
                        help=f"sets (and as many ranges) per cell, at most {MAX_QUERIES}")
    parser.add_argument("--seed", type=int, default=31)
    parser.add_argument("--datasets-dir", default=default_datasets_dir())
    parser.add_argument("--benchmark", default="pooled_sets", help="the results' name")
    add_json_argument(parser)
    args = parser.parse_args(argv)
    folder = Path(args.datasets_dir)
    problem = (simulation_problem(folder, args.windows, args.sizes)
               or epsilons_problem(args.epsilons))
    if problem:
        print(problem, file=sys.stderr)
        return 2
    if not 1 <= args.queries <= MAX_QUERIES:
        print(f"--queries must lie in [1, {MAX_QUERIES}], got {args.queries}", file=sys.stderr)
        return 2
    unpooled = [name for name in args.protocols if not is_pooled(name)]
    if unpooled:
        print(f"--protocols: {', '.join(unpooled)} not a pooled-hash oracle", file=sys.stderr)
        return 2
    with Run(args.benchmark, args.json, vars(args)) as run:
        rows: list[dict] = []
        declared_cells: list[dict] = []
        for dataset_name, dataset, name, epsilon, n in grid_cells(
                args.datasets, lambda key: DATASETS[key](folder), args.protocols,
                args.epsilons, args.sizes):
            started = time.perf_counter()
            coverage, declared, sampler = query_coverage(
                dataset, name, epsilon, n, args.windows, args.queries, args.seed)
            if coverage.size == 0:
                declared_cells.append({"dataset": dataset_name, "protocol": name,
                                       "epsilon": epsilon, "n": n,
                                       "declared_windows": declared})
                print(f"{dataset_name} {name} ε={epsilon:g} n={n:,}: declared in "
                      f"{declared} of {args.windows} windows", flush=True)
                continue
            row = cell_row(dataset_name, name, epsilon, n, args.windows, declared,
                           coverage, sampler, time.perf_counter() - started)
            rows.append(row)
            print(f"{dataset_name} {name} ε={epsilon:g} n={n:,}: "
                  f"{row['below_by_two']} of {row['queries']} queries below by two "
                  f"s.e. (chance {row['below_by_two_chance']}), lowest "
                  f"{row['lowest']}, all {row['all_queries']}; {declared} windows "
                  f"declared ({row['seconds']} s)", flush=True)
        found = oracle_summary(rows)
        for name, line in found.items():
            print(f"{name}: {line['below_by_two']} of {line['queries']} queries below by two "
                  f"s.e. (chance {line['below_by_two_chance']}); lowest {line['lowest']}",
                  flush=True)
        run.save({"rows": rows, "declared": declared_cells, "summary": found})
    return 0


if __name__ == "__main__":
    sys.exit(main())
