"""The replay-chosen post-processing (`postprocess: "auto"`) against the fixed methods, real data.

For each data set, protocol and ε, evaluate_postprocess.py's `evaluate` perturbs the same
population --repeats times (exact support counts) and runs every candidate of
ldp_telemetry.ldp.estimation.replay.CANDIDATES and the three auto methods on the same unbiased
estimates. Each auto method is scored on its own query: "auto" on the full-domain MSE,
"auto-top" (k = 10) on the top-10 MSE, "auto-sets" (sets of 10% of the domain) on the set-10%
MSE. Printed per setting and query: the auto method's MSE as a ratio to the best fixed
method's (goal ≤ 1.10) and to Base's (goal ≤ 1), the best fixed method, and the methods the
auto method chose (how often). Also the finalize cost of each auto method (median seconds per
window, R = 10).

    python benchmarks/evaluate_auto.py --json benchmarks/results/evaluate_auto.json
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections import Counter

import numpy as np
from bench_json import Run, add_json_argument, default_datasets_dir
from evaluate_postprocess import SAMPLERS, babynames_counts, emoji_counts, evaluate, resample

from ldp_telemetry.ldp.estimation.replay import AUTO_METHODS, CANDIDATES, choose
from ldp_telemetry.ldp.protocols import make_protocol
from ldp_telemetry.ldp.protocols.noise import unbiased_estimate

#: The query column each auto method is scored on (evaluate_postprocess's columns).
COLUMN = {"auto": "full", "auto-top": "top 10", "auto-sets": "set 10%"}


def populations(root: str, users: int, rng: np.random.Generator):
    """(label, true counts) of the shared real data sets that are present."""
    emoji = os.path.join(root, "emoji_sentiment_occurrences.csv")
    if os.path.exists(emoji):
        yield "emoji", resample(emoji_counts(emoji), users, rng)
    names = os.path.join(root, "babynames_ssa_1880_2017.csv.gz")
    if os.path.exists(names):
        counts = babynames_counts(names, 1940)
        top = np.sort(counts)[::-1][:1024]  # the 1,024 most common names of 1940
        yield "babynames 1940 (top 1,024)", resample(top, users, rng)


def choices(counts: np.ndarray, protocol_name: str, epsilon: float, repeats: int, seed: int
            ) -> tuple[dict[str, Counter], dict[str, float]]:
    """What each auto method chose over `repeats` windows, and its median seconds."""
    protocol = make_protocol(protocol_name, epsilon, counts.size)
    noise = protocol.noise(int(counts.sum()))
    rng = np.random.default_rng(seed)
    chosen = {method: Counter() for method in AUTO_METHODS}
    seconds = {method: [] for method in AUTO_METHODS}
    for _ in range(repeats):
        unbiased = unbiased_estimate(SAMPLERS["exact"](protocol, counts, rng), noise)
        for method, query in AUTO_METHODS.items():
            started = time.perf_counter()
            chosen[method][choose(unbiased, noise, query).method] += 1
            seconds[method].append(time.perf_counter() - started)
    return chosen, {m: statistics.median(s) for m, s in seconds.items()}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default=default_datasets_dir())
    parser.add_argument("--users", type=int, default=1_000_000)
    parser.add_argument("--protocols", nargs="+", default=["oue", "grr"])
    parser.add_argument("--epsilons", type=float, nargs="+", default=[0.5, 1.0, 2.0, 4.0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--seed", type=int, default=31)
    add_json_argument(parser)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    methods = [*CANDIDATES, *AUTO_METHODS]
    rows = []
    print("| data | protocol | ε | query | auto / best fixed | auto / Base | best fixed | "
          "auto chose | auto s |")
    print("|---|---|---:|---|---:|---:|---|---|---:|")
    with Run("evaluate_auto", args.json, vars(args)) as run:
        found = list(populations(args.datasets, args.users, rng))
        if not found:
            print("no data set found: nothing measured", file=sys.stderr)
        for label, counts in found:
            for protocol in args.protocols:
                for epsilon in args.epsilons:
                    seed = int(rng.integers(1 << 62))
                    result = evaluate(counts, protocol, epsilon, args.repeats, seed,
                                      methods=methods, rhos=(10,), k=10, sets=100)
                    chosen, seconds = choices(counts, protocol, epsilon, args.repeats, seed)
                    for method, column in COLUMN.items():
                        fixed = {m: result.mse[m][column] for m in CANDIDATES}
                        best = min(fixed, key=fixed.get)
                        auto = result.mse[method][column]
                        row = {"data": label, "d": int(counts.size), "n": int(counts.sum()),
                               "protocol": protocol, "epsilon": epsilon, "query": column,
                               "method": method, "auto_mse": auto, "best_fixed": best,
                               "best_fixed_mse": fixed[best], "base_mse": fixed["base"],
                               "ratio_best": auto / fixed[best],
                               "ratio_base": auto / fixed["base"],
                               "chosen": dict(chosen[method]),
                               "median_choose_s": seconds[method], "mse": fixed}
                        rows.append(row)
                        picks = ", ".join(f"{m} {c}" for m, c in chosen[method].most_common(3))
                        print(f"| {label} | {protocol} | {epsilon:g} | {column} | "
                              f"{row['ratio_best']:.3f} | {row['ratio_base']:.3f} | {best} | "
                              f"{picks} | {seconds[method]:.2f} |", flush=True)
        within = sum(r["ratio_best"] <= 1.10 for r in rows)
        not_worse = sum(r["ratio_base"] <= 1.0 for r in rows)
        print(f"\nwithin 10% of the best fixed method: {within} of {len(rows)}; "
              f"no worse than Base: {not_worse} of {len(rows)}")
        run.save({"rows": rows, "repeats": args.repeats, "candidates": list(CANDIDATES),
                  "goal": {"ratio_best": 1.10, "ratio_base": 1.0}})


if __name__ == "__main__":
    main()
