"""Coverage, value by value, of the band records give a combination of two pooled-hash versions
of one metric (combine.combine_versions: the inverse-variance combination of the versions'
unbiased estimates, its band estimate ± z · std_error, `exact-variance`), under the ONE fixed
hash pool the versions share (CMS then HCMS, CMS then FLH, both at ε: their own pools, of one
root, so their collision errors are correlated), as a deployed metric whose configuration
changed has.

Windows are drawn per (data set, pair, ε, n): W windows, n/2 users of each version drawn from
the data set's window (coverage_frequency's data sets), each version's support counts through
its oracle as pooled_values.py draws them (CMS from its exact (hash, bucket) table given the
pool, HCMS and FLH through their clients), its noise at the window's Σ f² (`for_window`, as
finalize does), then the combination. A window whose combination has no band (its collision
share past frequency_bands.POOL_BIAS_SHARE, `pool_share_reason`, or too few supports) is counted
as declared; every value's band of the other windows is checked against the window's truth
(both versions' users together).

Per cell: the windows declared, and over the banded windows (where they are at least half of
the cell's; otherwise the cell counts as declared) the row
pooled_values.py writes (cell_row: values more than two standard errors below 0.95 at the
banded W beside chance, their share of the mass, the lowest, every value together) and every
value's coverage (`coverages`, in domain order); per pair the summary of
pooled_values.oracle_summary.

    nice python benchmarks/combined_pooled_values.py \\
        --json benchmarks/results/combined_pooled_values.json
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from bench_json import (Run, add_json_argument, default_datasets_dir, epsilons_problem, grid_cells,
                        simulation_problem)
from coverage_frequency import DATASETS, default_sampler, support_counts
from pooled_values import cell_row, oracle_summary

from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.ldp.engine.finalize import WindowResult
from ldp_telemetry.ldp.estimation.combine import combine_versions
from ldp_telemetry.ldp.estimation.frequency_bands import exact_bands
from ldp_telemetry.ldp.protocols.noise import unbiased_estimate

#: The version pairs measured (older, newer), by name.
PAIRS = {"cms+hcms": ("cms", "hcms"), "cms+flh": ("cms", "flh")}


def versions(older: str, newer: str, epsilon: float, d: int) -> list:
    """The two MetricConfigs of one metric whose configuration changed from `older` to `newer`
    at ε over d labelled values (the registry's history), oldest first."""
    labels = [f"v{i}" for i in range(d)]
    document = {"metrics": [{"name": "m", "protocol": newer, "epsilon": epsilon,
                             "domain": {"labels": labels}, "version": 2,
                             "history": [{"protocol": older, "epsilon": epsilon,
                                          "domain": {"labels": labels}, "version": 1}]}]}
    return list(parse_registry(document).versions("m"))


def value_coverage(dataset, pair: str, epsilon: float, n: int, windows: int, seed: int
                   ) -> tuple[np.ndarray, np.ndarray, int, str]:
    """(each value's coverage over the banded windows, its mean true frequency, the windows
    declared, the samplers) of one (data set, pair, ε, n) cell."""
    d = dataset(0).size
    configs = versions(*PAIRS[pair], epsilon, d)
    labels = [f"v{i}" for i in range(d)]
    half = n // 2
    samplers = [default_sampler(config.protocol.name, half, d, 300_000_000)
                for config in configs]
    rng = np.random.default_rng([seed, n, int(epsilon * 100), d, len(pair), 91])
    held, mass = np.zeros(d), np.zeros(d)
    banded = declared = 0
    for w in range(windows):
        parts, total = [], np.zeros(d)
        for config, sampler in zip(configs, samplers, strict=True):
            counts = rng.multinomial(half, dataset(w))
            total += counts
            protocol = config.protocol
            base = protocol.noise(half)
            unbiased = unbiased_estimate(support_counts(protocol, counts, rng, sampler), base)
            noise = base.for_window(unbiased)
            parts.append((config, WindowResult(half, unbiased, np.zeros(d), unbiased, noise)))
        combined = combine_versions(parts)
        assert combined is not None, "two versions with reports over the same labels"
        if combined.band_reason is not None:
            declared += 1
            continue
        order = [combined.labels.index(label) for label in labels]
        truth = total / total.sum()
        lower, upper = exact_bands(combined.estimate[order], combined.std_error[order])
        held += (lower <= truth + 1e-12) & (truth <= upper + 1e-12)
        mass += truth
        banded += 1
    if 2 * banded < windows:  # most of the cell's windows declared: the cell is
        return np.zeros(0), np.zeros(0), declared, "+".join(samplers)
    return held / banded, mass / banded, declared, "+".join(samplers)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="*", default=["airports", "common words"],
                        choices=list(DATASETS))
    parser.add_argument("--pairs", nargs="*", default=list(PAIRS), choices=list(PAIRS))
    parser.add_argument("--epsilons", nargs="*", type=float, default=[0.5, 1.0, 2.0, 4.0])
    parser.add_argument("--sizes", nargs="*", type=int,
                        default=[1_000, 10_000, 100_000, 1_000_000])
    parser.add_argument("--windows", type=int, default=100)
    parser.add_argument("--seed", type=int, default=31)
    parser.add_argument("--datasets-dir", default=default_datasets_dir())
    parser.add_argument("--benchmark", default="combined_pooled_values",
                        help="the results' name")
    add_json_argument(parser)
    args = parser.parse_args(argv)
    folder = Path(args.datasets_dir)
    problem = (simulation_problem(folder, args.windows, args.sizes)
               or epsilons_problem(args.epsilons))
    if problem:
        print(problem, file=sys.stderr)
        return 2
    if any(n < 2 for n in args.sizes):
        print("--sizes must be at least 2 (n/2 users per version)", file=sys.stderr)
        return 2
    with Run(args.benchmark, args.json, vars(args)) as run:
        rows: list[dict] = []
        declared_cells: list[dict] = []
        for dataset_name, dataset, pair, epsilon, n in grid_cells(
                args.datasets, lambda key: DATASETS[key](folder), args.pairs,
                args.epsilons, args.sizes):
            started = time.perf_counter()
            coverage, mass, declared, sampler = value_coverage(
                dataset, pair, epsilon, n, args.windows, args.seed)
            cell = {"dataset": dataset_name, "protocol": pair, "epsilon": epsilon,
                    "n": n, "declared_windows": declared}
            if coverage.size == 0:
                declared_cells.append(cell)
                print(f"{dataset_name} {pair} ε={epsilon:g} n={n:,}: declared in "
                      f"{declared} of {args.windows} windows", flush=True)
                continue
            row = {**cell_row(dataset_name, pair, epsilon, n,
                              args.windows - declared, coverage, mass, sampler,
                              time.perf_counter() - started),
                   "declared_windows": declared,
                   "coverages": " ".join(f"{c:g}" for c in coverage.round(4))}
            rows.append(row)
            print(f"{dataset_name} {pair} ε={epsilon:g} n={n:,}: "
                  f"{row['below_by_two']} of {row['values']} values below by two "
                  f"s.e. (chance {row['below_by_two_chance']}; mass "
                  f"{row['below_by_two_mass']:.3f}), lowest {row['lowest']}, all "
                  f"values {row['all_values']}; {declared} windows declared "
                  f"({row['seconds']} s)", flush=True)
        found = oracle_summary(rows) if rows else {}
        for name, line in found.items():
            print(f"{name}: {line['below_by_two']} of {line['values']} values below by two s.e. "
                  f"(chance {line['below_by_two_chance']}), {line['cells_beyond_chance']} of "
                  f"{line['cells']} cells beyond chance; lowest {line['lowest']}", flush=True)
        run.save({"rows": rows, "declared": declared_cells, "summary": found})
    return 0


if __name__ == "__main__":
    sys.exit(main())
