"""Coverage of the top-k union band with its bootstrap replayed at other fits than Norm-Sub (a
study behind docs/error-bars.md: nothing is written into the package).

The union band of `ldp query` (frequency_bands.top_k_parts) draws R = 40 windows of n reports
from the Norm-Sub fit π̂ of the window's unbiased estimate f~ (true counts ~ Multinomial(n,
π̂), support counts through the protocol's channel), post-processes and ranks each, corrects
the bias and widens the result to the selected value's score band. Here the same band is made
on the same windows with the replicates drawn from another fit of f~ (FITS), the bias
correction and the widening to the score band kept, every fit from the same bootstrap stream
(common random numbers):

    norm-sub   π̂ = max(f~ + δ, 0) summing to 1: today's band
    norm-mul   γ · max(f~, 0): every value with a positive estimate keeps a share
    norm-hyb   the values above the threshold T kept as estimated, Norm-Sub for the rest
    ibu        IBU's fixed point (the maximum-likelihood distribution, [Agrawal01])
    half       ½ f~ + ½ π̂, clipped at 0 and renormalized: f~ shrunk half way to Norm-Sub

Windows: for a pure oracle those of benchmarks/coverage_frequency.py at the same --seed (the
same generator calls: seed 131 gives the calibration windows of calibrate_top_k.py, seed 31
its held-out ones); for a pooled-hash or memoized oracle those of benchmarks/pooled_top_k.py
(its oracles, samplers and seeding; the noise model with the collision term, as `ldp query`
makes it). Per (data set, oracle, ε, n, method, fit): each rank's coverage over the windows,
the median over windows of its width against the Norm-Sub band's, and the shares of answers
whose band is the selected value's score band or has its lower end at the clip at 0
(`band_ends`). Summary per fit, counted per (method, cell, rank) triple: inside [0.93, 0.97],
above, below, below 0.90, more than two standard errors below 0.95 beside how many an exactly
calibrated band gives by chance, the lowest, the median and largest width against today's; and
the triples each fit moves into or out of the goal, and below it, against today's.

    M="base norm-sub norm-hyb base-cut"
    nice python benchmarks/top_k_fit.py --datasets airports --protocols grr oue \\
        --epsilons 0.5 2 --seed 131 --methods $M --benchmark top_k_fit_choice \\
        --json benchmarks/results/top_k_fit_choice.json
    nice python benchmarks/top_k_fit.py --datasets airports --protocols grr oue --seed 31 \\
        --methods $M --benchmark top_k_fit_held_out \\
        --json benchmarks/results/top_k_fit_held_out.json
    nice python benchmarks/top_k_fit.py --datasets emoji "common words" --protocols grr oue \\
        --seed 31 --epsilons 1 4 --sizes 10000 100000 --methods $M \\
        --benchmark top_k_fit_held_out_shapes \\
        --json benchmarks/results/top_k_fit_held_out_shapes.json
    nice python benchmarks/top_k_fit.py --datasets airports --protocols cms \\
        --sizes 1000 10000 100000 --methods base norm-sub norm-hyb \\
        --fits norm-sub norm-mul ibu half --seed 31 --benchmark top_k_fit_pooled \\
        --json benchmarks/results/top_k_fit_pooled.json
    nice python benchmarks/top_k_fit.py --datasets airports --protocols grr oue --seed 31 \\
        --methods $M --fits norm-sub --benchmark top_k_fit_ends \\
        --json benchmarks/results/top_k_fit_ends.json
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
import zlib
from collections.abc import Callable
from pathlib import Path

import numpy as np
from bench_json import (Run, add_json_argument, default_datasets_dir, epsilons_problem,
                        simulation_problem)
from coverage_frequency import DATASETS, TOP, default_sampler, query_weights, support_counts
from coverage_summary import GOAL
from pooled_top_k import MEMOIZED_PREFIX, oracle
from selective_top_k import chosen_run, triple_counts

from ldp_telemetry.ldp.estimation.frequency_bands import (BAND_REPLICATES, bootstrap_spread,
                                                          channel_support_counts, score_bands,
                                                          top_answers, with_score_bands)
from ldp_telemetry.ldp.estimation.postprocess import METHODS, project_to_simplex
from ldp_telemetry.ldp.protocols import PROTOCOLS, is_pooled
from ldp_telemetry.ldp.protocols.memoized import MEMOIZED
from ldp_telemetry.ldp.protocols.noise import unbiased_estimate

#: The fits the replicates are drawn from (module docstring); the first is today's.
FITS = ("norm-sub", "norm-mul", "norm-hyb", "ibu", "half")
TODAY = FITS[0]
#: Every method but Power's (not measured) and the slowest (IBU, MLE-Apx, auto: each runs R
#: times per answer's band); --methods names others.
DEFAULT_METHODS = ("base", "base-pos", "post-pos", "base-cut", "norm", "norm-mul", "norm-sub",
                   "norm-cut", "norm-hyb")


def fit_rule(name: str, noise) -> Callable[[np.ndarray], np.ndarray]:
    """f~ -> the distribution the replicates' users are drawn from, for fit `name`."""
    if name == "norm-sub":
        return project_to_simplex
    if name == "half":
        def half(unbiased: np.ndarray) -> np.ndarray:
            mixed = np.clip(0.5 * unbiased + 0.5 * project_to_simplex(unbiased), 0.0, None)
            return mixed / mixed.sum()
        return half
    return lambda unbiased: METHODS[name].run(unbiased, noise)


def union_band(unbiased: np.ndarray, noise, run: Callable[[np.ndarray], np.ndarray],
               order: np.ndarray, fit: str) -> tuple[np.ndarray, np.ndarray]:
    """(lower, upper) of the answers `order` (the top values of run(f~)): the union band of
    frequency_bands.top_k_bands with its replicates drawn from `fit` of f~ (R = 40, the
    bootstrap's seed 0, as `ldp query` draws them), clipped to [0, 1]."""
    centre, half = bootstrap_spread(unbiased, noise, run, top_answers(order.size),
                                    BAND_REPLICATES, 0, fit_rule(fit, noise))
    lower, upper = with_score_bands(centre - half, centre + half, unbiased[order], noise)
    return np.clip(lower, 0.0, 1.0), np.clip(upper, 0.0, 1.0)


def band_ends(lower: np.ndarray, upper: np.ndarray, unbiased: np.ndarray, noise
              ) -> tuple[np.ndarray, np.ndarray]:
    """Per answer of `union_band`: (both ends are the selected value's own score band's,
    clipped to [0, 1] — the answers no fit of the replay can narrow; the lower end is the clip
    at 0 while the score band's is above 0 — the bootstrap reaches below 0)."""
    score_lower, score_upper = score_bands(unbiased, noise.p_star, noise.q_star, noise.n,
                                           noise.extra_variance)
    score_lower, score_upper = np.clip(score_lower, 0.0, 1.0), np.clip(score_upper, 0.0, 1.0)
    at_score = (np.isclose(lower, score_lower, rtol=0.0, atol=1e-12)
                & np.isclose(upper, score_upper, rtol=0.0, atol=1e-12))
    return at_score, (lower <= 0.0) & (score_lower > 1e-12)


def windows(dataset, name: str, epsilon: float, n: int, count: int, seed: int):
    """(protocol, [(truth, f~, noise)] of `count` windows) of one cell (module docstring)."""
    d = dataset(0).size
    protocol = oracle(name, epsilon, d, 2.0)
    pure = not is_pooled(name) and not name.startswith(MEMOIZED_PREFIX)
    base_noise = protocol.noise(n)
    if pure:  # coverage_frequency.measure_cell's draws
        sampler = default_sampler(name, n, d, 300_000_000)
        rng = np.random.default_rng([seed, n, int(epsilon * 100), len(name)])
    else:  # pooled_top_k.cell_rows' draws (its default samplers)
        sampler = "client" if name.startswith(MEMOIZED_PREFIX) else default_sampler(
            name, n, d, 300_000_000)
        rng = np.random.default_rng([seed, n, int(epsilon * 100), d, len(name)] + (
            [zlib.crc32(name.encode())] if sampler == "channel" else []))
    out = []
    for w in range(count):
        counts = rng.multinomial(n, dataset(w))
        if sampler == "channel":
            support = channel_support_counts(counts, base_noise, rng)
        else:
            support = support_counts(protocol, counts, rng, sampler)
        unbiased = unbiased_estimate(support, base_noise)
        if pure:
            query_weights(d, 5, rng)  # coverage_frequency's draws, in its order
        out.append((counts / n, unbiased, base_noise.for_window(unbiased)))
    return protocol, out


def cell_rows(dataset_name: str, dataset, name: str, epsilon: float, n: int,
              methods: list[str], fits: list[str], count: int, seed: int) -> list[dict]:
    """One row per (method, fit) of a cell: coverage and width per rank (module docstring)."""
    _, drawn = windows(dataset, name, epsilon, n, count, seed)
    inside = {(m, f): [] for m in methods for f in fits}
    width = {(m, f): [] for m in methods for f in fits}
    ends = {(m, f): [] for m in methods for f in fits}
    seconds = {f: [] for f in fits}
    for truth, unbiased, noise in drawn:
        for method in methods:
            run = chosen_run(method, unbiased, noise)
            order = np.argsort(-run(unbiased), kind="stable")[:TOP]
            selected = truth[order]
            for fit in fits:
                started = time.perf_counter()
                lower, upper = union_band(unbiased, noise, run, order, fit)
                seconds[fit].append(time.perf_counter() - started)
                ends[(method, fit)].append(band_ends(lower, upper, unbiased[order], noise))
                inside[(method, fit)].append((lower <= selected + 1e-12)
                                             & (selected <= upper + 1e-12))
                width[(method, fit)].append(upper - lower)
    rows = []
    for method in methods:
        today = np.vstack(width[(method, TODAY)])
        for fit in fits:
            mine = np.vstack(width[(method, fit)])
            ratios = []
            for column, base in zip(mine.T, today.T, strict=True):
                kept = base > 0
                ratios.append(round(float(np.median(column[kept] / base[kept])), 4)
                              if kept.any() else None)
            rows.append({"dataset": dataset_name, "protocol": name, "epsilon": epsilon, "n": n,
                         "method": method, "fit": fit, "windows": count,
                         "by_rank": [round(float(v), 4)
                                     for v in np.vstack(inside[(method, fit)]).mean(axis=0)],
                         "width_vs_today": ratios,
                         # shares of answers (`band_ends`): the band is the score band's;
                         # its lower end is the clip at 0 of the bootstrap's
                         "at_score": round(float(np.mean([a for a, _ in ends[(method, fit)]])),
                                           4),
                         "clipped_at_0": round(float(np.mean([c for _, c in
                                                              ends[(method, fit)]])), 4),
                         "median_ms_per_query": round(1e3 * statistics.median(seconds[fit]), 3)})
    return rows


def fit_summary(rows: list[dict], fit: str) -> dict:
    """Per (method, cell, rank) triple of `fit`: inside GOAL, above, below, below 0.90, more
    than two s.e. below 0.95 (beside chance), lowest, width against today's; and against
    today's on the same triples: moved into the goal, moved out of it, moved below it."""
    low, high = GOAL
    mine = {_key(r): r for r in rows if r["fit"] == fit}
    today = {_key(r): r for r in rows if r["fit"] == TODAY}
    triples, ratios, into, out_of, newly_below = [], [], 0, 0, 0
    for key, row in mine.items():
        base = today[key]["by_rank"]
        for c, b, ratio in zip(row["by_rank"], base, row["width_vs_today"], strict=True):
            triples.append((c, row["windows"]))
            if ratio is not None:
                ratios.append(ratio)
            inside_now, inside_before = low <= c <= high, low <= b <= high
            into += inside_now and not inside_before
            out_of += inside_before and not inside_now
            newly_below += c < low <= b
    return {**triple_counts(triples),
            "median": statistics.median(c for c, _ in triples) if triples else None,
            "median_width_vs_today": round(statistics.median(ratios), 3) if ratios else None,
            "largest_width_vs_today": round(max(ratios), 3) if ratios else None,
            "into_goal": into, "out_of_goal": out_of, "newly_below": newly_below,
            # shares of answers (`band_ends`; runs that record them, else None)
            **{key: (round(statistics.mean(r[key] for r in mine.values()), 4)
                     if mine and all(key in r for r in mine.values()) else None)
               for key in ("at_score", "clipped_at_0")}}


def _key(row: dict) -> tuple:
    return row["dataset"], row["protocol"], row["epsilon"], row["n"], row["method"]


def summaries(rows: list[dict], fits: list[str]) -> dict:
    """fit -> summary, over every row and per (data set, oracle)."""
    sets = {"all": rows}
    for dataset, protocol in sorted({(r["dataset"], r["protocol"]) for r in rows}):
        sets[f"{dataset}, {protocol}"] = [r for r in rows
                                          if (r["dataset"], r["protocol"]) == (dataset, protocol)]
    return {name: {fit: fit_summary(mine, fit) for fit in fits} for name, mine in sets.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=["airports"], choices=DATASETS)
    parser.add_argument("--protocols", nargs="+", default=["grr", "oue"])
    parser.add_argument("--epsilons", nargs="+", type=float, default=[0.5, 1.0, 2.0, 4.0])
    parser.add_argument("--sizes", nargs="+", type=int,
                        default=[1_000, 10_000, 100_000, 1_000_000])
    parser.add_argument("--methods", nargs="+", default=list(DEFAULT_METHODS))
    parser.add_argument("--fits", nargs="+", default=list(FITS), choices=FITS)
    parser.add_argument("--windows", type=int, default=100)
    parser.add_argument("--seed", type=int, default=31)
    parser.add_argument("--datasets-dir", default=default_datasets_dir())
    parser.add_argument("--benchmark", default="top_k_fit", help="the results' name")
    add_json_argument(parser)
    args = parser.parse_args(argv)
    folder = Path(args.datasets_dir)
    problem = (simulation_problem(folder, args.windows, args.sizes)
               or epsilons_problem(args.epsilons))
    if args.fits[0] != TODAY:
        problem = f"--fits must start with {TODAY} (today's band, the widths' reference)"
    unknown = sorted(set(args.methods) - set(METHODS) - {"auto"})
    if unknown:
        problem = f"--methods: unknown {', '.join(unknown)}"
    for name in args.protocols:
        member = name[len(MEMOIZED_PREFIX):] if name.startswith(MEMOIZED_PREFIX) else name
        if member not in (MEMOIZED if name.startswith(MEMOIZED_PREFIX) else PROTOCOLS):
            problem = f"--protocols: unknown {name!r}"
    if problem:
        print(problem, file=sys.stderr)
        return 2
    rows: list[dict] = []
    with Run(args.benchmark, args.json, vars(args)) as run:
        for dataset_name in args.datasets:
            dataset = DATASETS[dataset_name](folder)
            for name in args.protocols:
                for epsilon in args.epsilons:
                    for n in args.sizes:
                        mine = cell_rows(dataset_name, dataset, name, epsilon, n, args.methods,
                                         args.fits, args.windows, args.seed)
                        rows.extend(mine)
                        for row in mine:
                            print(f"{dataset_name}, {name}, ε = {epsilon:g}, n = {n}, "
                                  f"{row['method']:<9} {row['fit']:<9} "
                                  f"{' '.join(f'{c:.2f}' for c in row['by_rank'])}", flush=True)
        by_set = summaries(rows, args.fits)
        for set_name, fits in by_set.items():
            for fit, line in fits.items():
                print(f"{set_name}; {fit:<9}: {line['inside']} of {line['triples']} inside, "
                      f"{line['above']} above, {line['below']} below "
                      f"({line['below_by_two']} more than 2 s.e. below 0.95, chance "
                      f"{line['below_by_two_chance']}); lowest {line['lowest']}; width "
                      f"{line['median_width_vs_today']} (largest "
                      f"{line['largest_width_vs_today']}); into {line['into_goal']}, out of "
                      f"{line['out_of_goal']}, newly below {line['newly_below']}", flush=True)
        run.save({"summary": by_set, "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
