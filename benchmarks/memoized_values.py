"""Coverage, value by value, of the per-value band records give a memoized (two-stage) oracle:
the score band of f~_v at the composed channel's p* and q* (`band_method` exact-variance,
coverage_frequency.record_bands), for memoized GRR, OUE, SUE, RUE, OLH, BLH, RLH and memoized
OLH or RLH with LOLOHA's lifetime-optimal g (--g-rule loloha; memoize.g).

Windows are drawn as pooled_top_k.py draws a memoized oracle's, per (data set, oracle, ε, n):
W windows of n users from the data set's window (coverage_frequency's data sets), each row a
distinct device reporting once (the case the record's variance holds for), ε1 = ε and
ε∞ = --lifetime-factor · ε, their support counts through the oracle's client, or, for windows of
at least --channel-from reports, from its composed channel (pooled_top_k.py's
--memoized-sampler channel: exact for GRR and the unary encodings, the uniform-hash model for
local hashing). Every value's record band is checked against the window's true frequency;
a window whose values have no band (too few expected supports,
frequency_bands.few_supports_reason) is counted as declared, not checked.

Per (data set, oracle, ε, n) the row pooled_values.py writes (cell_row: the values more than
two standard errors below 0.95 beside chance, their share of the mass, the lowest, every value
together), with the oracle's g and g rule and every value's coverage (`coverages`, in domain
order); per oracle its summary (pooled_values.oracle_summary).

    nice python benchmarks/memoized_values.py --protocols memoized-olh --g-rule loloha \\
        --json benchmarks/results/memoized_values_loloha.json
"""
from __future__ import annotations

import argparse
import sys
import time
import zlib
from pathlib import Path

import numpy as np
from bench_json import (Run, add_json_argument, default_datasets_dir, epsilons_problem, grid_cells,
                        simulation_problem)
from coverage_frequency import DATASETS, record_bands, support_counts
from pooled_top_k import MEMOIZED_PREFIX, g_rule_problem, oracle
from pooled_values import cell_row, oracle_summary

from ldp_telemetry.ldp.estimation.frequency_bands import (channel_support_counts,
                                                          few_supports_reason)
from ldp_telemetry.ldp.protocols.memoized import G_RULES, MEMOIZED
from ldp_telemetry.ldp.protocols.noise import unbiased_estimate


def value_coverage(dataset, name: str, epsilon: float, n: int, windows: int, seed: int,
                   lifetime_factor: float, g_rule: str | None, channel: bool
                   ) -> tuple[np.ndarray, np.ndarray, str, object]:
    """(each value's coverage over the windows, its mean true frequency, the sampler, the
    protocol) of one (data set, oracle, ε, n) cell; both arrays empty where the window's
    values have no band (few_supports_reason)."""
    d = dataset(0).size
    protocol = oracle(name, epsilon, d, lifetime_factor, g_rule)
    sampler = "channel" if channel else "client"
    base_noise = protocol.noise(n)
    if few_supports_reason(base_noise) is not None:
        return np.zeros(0), np.zeros(0), sampler, protocol
    # seeded by the oracle's name, so that oracles do not share their draws (pooled_top_k.py's
    # channel windows likewise)
    rng = np.random.default_rng([seed, n, int(epsilon * 100), d, zlib.crc32(name.encode())])
    held = np.zeros(d)
    mass = np.zeros(d)
    for w in range(windows):
        counts = rng.multinomial(n, dataset(w))
        truth = counts / n
        if channel:
            support = channel_support_counts(counts, base_noise, rng)
        else:
            support = support_counts(protocol, counts, rng, "client")
        unbiased = unbiased_estimate(support, base_noise)
        lower, upper, _ = record_bands(protocol, unbiased, n)
        held += (lower <= truth + 1e-12) & (truth <= upper + 1e-12)
        mass += truth
    return held / windows, mass / windows, sampler, protocol


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="*", default=["airports", "common words"],
                        choices=list(DATASETS))
    parser.add_argument("--protocols", nargs="*", default=["memoized-olh"],
                        help="memoized-X for X's two-stage form")
    parser.add_argument("--epsilons", nargs="*", type=float, default=[0.5, 1.0, 2.0, 4.0])
    parser.add_argument("--sizes", nargs="*", type=int,
                        default=[1_000, 10_000, 100_000, 1_000_000])
    parser.add_argument("--windows", type=int, default=100)
    parser.add_argument("--lifetime-factor", type=float, default=2.0,
                        help="ε∞ as a multiple of ε1 (> 1)")
    parser.add_argument("--g-rule", default=None, choices=G_RULES,
                        help="memoized OLH's and RLH's g (memoize.g; default: the report g)")
    parser.add_argument("--channel-from", type=int, default=1_000_000, metavar="N",
                        help="windows of at least N reports from the composed channel, not the "
                             "client")
    parser.add_argument("--seed", type=int, default=31)
    parser.add_argument("--datasets-dir", default=default_datasets_dir())
    parser.add_argument("--benchmark", default="memoized_values", help="the results' name")
    add_json_argument(parser)
    args = parser.parse_args(argv)
    folder = Path(args.datasets_dir)
    problem = (simulation_problem(folder, args.windows, args.sizes)
               or epsilons_problem(args.epsilons))
    if problem:
        print(problem, file=sys.stderr)
        return 2
    if not args.lifetime_factor > 1.0:
        print(f"--lifetime-factor must exceed 1, got {args.lifetime_factor:g}", file=sys.stderr)
        return 2
    members = [name[len(MEMOIZED_PREFIX):] for name in args.protocols]
    wrong = [name for name, member in zip(args.protocols, members, strict=True)
             if not name.startswith(MEMOIZED_PREFIX) or member not in MEMOIZED]
    if wrong:
        print(f"--protocols: {wrong[0]!r} is not memoized-X for X in {sorted(MEMOIZED)}",
              file=sys.stderr)
        return 2
    problem = g_rule_problem(args.protocols, args.g_rule)
    if problem:
        print(problem, file=sys.stderr)
        return 2
    with Run(args.benchmark, args.json, vars(args)) as run:
        rows: list[dict] = []
        declared: list[dict] = []
        for dataset_name, dataset, name, epsilon, n in grid_cells(
                args.datasets, lambda key: DATASETS[key](folder), args.protocols,
                args.epsilons, args.sizes):
            started = time.perf_counter()
            coverage, mass, sampler, protocol = value_coverage(
                dataset, name, epsilon, n, args.windows, args.seed,
                args.lifetime_factor, args.g_rule, n >= args.channel_from)
            g = ({"g": protocol.g, "g_rule": protocol.g_rule}
                 if hasattr(protocol, "g_rule") else {})
            if coverage.size == 0:
                declared.append({"dataset": dataset_name, "protocol": name,
                                 "epsilon": epsilon, "n": n, **g})
                print(f"{dataset_name} {name} ε={epsilon:g} n={n:,}: declared "
                      "(too few expected supports)", flush=True)
                continue
            row = {**cell_row(dataset_name, name, epsilon, n, args.windows,
                              coverage, mass, sampler,
                              time.perf_counter() - started),
                   "lifetime_epsilon": args.lifetime_factor * epsilon, **g,
                   "coverages": " ".join(f"{c:g}" for c in coverage.round(4))}
            rows.append(row)
            print(f"{dataset_name} {name} ε={epsilon:g} n={n:,} {g}: "
                  f"{row['below_by_two']} of {row['values']} values below by two "
                  f"s.e. (chance {row['below_by_two_chance']}; mass "
                  f"{row['below_by_two_mass']:.3f}), lowest {row['lowest']}, all "
                  f"values {row['all_values']} ({row['seconds']} s)", flush=True)
        found = oracle_summary(rows)
        for name, line in found.items():
            print(f"{name}: {line['below_by_two']} of {line['values']} values below by two s.e. "
                  f"(chance {line['below_by_two_chance']}), {line['cells_beyond_chance']} of "
                  f"{line['cells']} cells beyond chance; lowest {line['lowest']}", flush=True)
        run.save({"rows": rows, "declared": declared, "summary": found})
    return 0


if __name__ == "__main__":
    sys.exit(main())
