"""Coverage, rank by rank, of the top-k band `ldp query --top` gives a pooled-hash (CMS, HCMS,
FLH) or memoized (two-stage) oracle: the union of the bias-corrected bootstrap and the selected
value's score band (frequency_bands.top_k_bands, `band_method` bias-corrected-bootstrap), which
the pure one-stage oracles' rank-conditional join does not reach (`rank_conditional_applies`).

Windows are drawn here, per (data set, oracle, ε, n): W windows of n users drawn from the data
set's window (coverage_frequency's data sets), their support counts through the oracle — CMS
from its exact distribution given the pool (coverage_frequency.cms_table), HCMS, FLH and the
memoized oracles through their own clients (`perturb`, then the server's aggregation; a
memoized oracle's rows are distinct devices, one report each, the case its exact variance
holds for) — and the band made exactly as `ldp query` does: the window's noise model with the
pool's collision term (`for_window`), R = 40 replicates, the method's top 10. A memoized
oracle runs at ε1 = ε with ε∞ = --lifetime-factor · ε.

Per (data set, oracle, ε, n, method): coverage per rank, the median width and time per query;
per oracle: (method, cell, rank) triples inside [0.93, 0.97], above, below, below 0.90, more
than two standard errors (√(0.95 · 0.05 / W)) below 0.95 beside how many an exactly
calibrated band puts there by chance (coverage_summary.below_by_two_chance), the lowest; and
the triples more than two standard errors below, listed (`failing`: what TOP_K_UNCALIBRATED
declares).

With --confirm RESULTS, only the cells (data set, oracle, ε, n) where a triple of RESULTS fell
more than two standard errors below 0.95 are measured again (pass another --seed): a
declaration chosen on one seed's windows, checked on others.

    nice python benchmarks/pooled_top_k.py --protocols cms hcms flh \\
        --json benchmarks/results/top_k_pooled.json
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from bench_json import Run, add_json_argument, default_datasets_dir, simulation_problem
from coverage_frequency import DATASETS, TOP, default_sampler, support_counts
from coverage_summary import GOAL, below_by_two, below_by_two_chance
from selective_top_k import by_rank

from ldp_telemetry.ldp.estimation.frequency_bands import (MEMOIZED_KEY, rank_conditional_applies,
                                                          top_k_bands, top_k_oracle)
from ldp_telemetry.ldp.estimation.postprocess import METHODS
from ldp_telemetry.ldp.protocols import is_pooled, make_protocol
from ldp_telemetry.ldp.protocols.memoized import MEMOIZED, make_memoized_protocol
from ldp_telemetry.ldp.protocols.noise import unbiased_estimate

#: Prefix of a memoized oracle on the command line ("memoized-grr": L-GRR), its key in
#: TOP_K_UNCALIBRATED.
MEMOIZED_PREFIX = MEMOIZED_KEY


def oracle(name: str, epsilon: float, d: int, lifetime_factor: float):
    """The protocol of `name` at ε over d values ("memoized-X": X's two-stage form at ε1 = ε,
    ε∞ = lifetime_factor · ε)."""
    if name.startswith(MEMOIZED_PREFIX):
        return make_memoized_protocol(name[len(MEMOIZED_PREFIX):], epsilon, d,
                                      lifetime_factor * epsilon)
    return make_protocol(name, epsilon, d)


def cell_rows(dataset_name: str, dataset, name: str, epsilon: float, n: int,
              methods: list[str], windows: int, seed: int, lifetime_factor: float
              ) -> list[dict]:
    """The rows of one (data set, oracle, ε, n) cell, one per method (module docstring)."""
    d = dataset(0).size
    protocol = oracle(name, epsilon, d, lifetime_factor)
    sampler = "client" if name.startswith(MEMOIZED_PREFIX) else default_sampler(
        name, n, d, 300_000_000)
    base_noise = protocol.noise(n)
    rng = np.random.default_rng([seed, n, int(epsilon * 100), d, len(name)])
    inside: dict[str, list[np.ndarray]] = {m: [] for m in methods}
    widths: dict[str, list[float]] = {m: [] for m in methods}
    seconds: dict[str, list[float]] = {m: [] for m in methods}
    for w in range(windows):
        counts = rng.multinomial(n, dataset(w))
        truth = counts / n
        unbiased = unbiased_estimate(support_counts(protocol, counts, rng, sampler), base_noise)
        noise = base_noise.for_window(unbiased)  # as queries.WindowAnswers.noise
        for method in methods:
            def post(u: np.ndarray, method: str = method, noise=noise) -> np.ndarray:
                return METHODS[method].run(u, noise)
            started = time.perf_counter()
            lower, upper = top_k_bands(unbiased, noise, post, TOP)
            seconds[method].append(time.perf_counter() - started)
            order = np.argsort(-post(unbiased), kind="stable")[:TOP]
            selected = truth[order]
            inside[method].append((lower <= selected + 1e-12) & (selected <= upper + 1e-12))
            widths[method].append(float(np.median(upper - lower)))
    rows = []
    for method in methods:
        held = np.vstack(inside[method])
        rows.append({"dataset": dataset_name, "protocol": name, "oracle": top_k_oracle(protocol),
                     "epsilon": epsilon, "n": n, "method": method, "windows": windows,
                     "lifetime_epsilon": (lifetime_factor * epsilon
                                          if name.startswith(MEMOIZED_PREFIX) else None),
                     "sampler": sampler,
                     "coverage": round(float(held.mean()), 4),
                     "by_rank": " ".join(f"{v:g}" for v in held.mean(axis=0).round(4)),
                     "median_width": round(statistics.median(widths[method]), 6),
                     "median_ms_per_query": round(1e3 * statistics.median(seconds[method]), 2)})
    return rows


def oracle_summary(rows: list[dict]) -> dict:
    """Per oracle: its (method, cell, rank) triples inside GOAL, above, below, below 0.90, more
    than two s.e. below 0.95 (beside chance), the lowest, and those more than two s.e. below
    (`failing`: data set, ε, n, method, rank, coverage)."""
    low, high = GOAL
    out = {}
    for name in sorted({r["protocol"] for r in rows}):
        mine = [r for r in rows if r["protocol"] == name]
        triples = [(c, r, rank) for r in mine
                   for rank, c in enumerate(by_rank({"by_rank": r["by_rank"]}), start=1)]
        out[name] = {
            "triples": len(triples),
            "inside": sum(low <= c <= high for c, _, _ in triples),
            "above": sum(c > high for c, _, _ in triples),
            "below": sum(c < low for c, _, _ in triples),
            "below_090": sum(c < 0.90 for c, _, _ in triples),
            "below_by_two": sum(below_by_two(c, r["windows"]) for c, r, _ in triples),
            "below_by_two_chance": round(sum(below_by_two_chance(r["windows"])
                                             for _, r, _ in triples), 1),
            "lowest": min((c for c, _, _ in triples), default=None),
            "failing": [{"dataset": r["dataset"], "epsilon": r["epsilon"], "n": r["n"],
                         "method": r["method"], "rank": rank, "coverage": c}
                        for c, r, rank in triples if below_by_two(c, r["windows"])]}
    return out


def failing_cells(results: dict) -> set[tuple[str, str, float, int]]:
    """The (data set, oracle, ε, n) cells of a results file of this script where a (method,
    rank) triple fell more than two standard errors below 0.95 (`oracle_summary`)."""
    return {(f["dataset"], name, f["epsilon"], f["n"])
            for name, line in results["summary"].items() for f in line["failing"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="*", default=["airports", "common words"],
                        choices=list(DATASETS))
    parser.add_argument("--protocols", nargs="*", default=["cms", "hcms", "flh"],
                        help="pooled-hash oracles, or memoized-X for X's two-stage form")
    parser.add_argument("--epsilons", nargs="*", type=float, default=[0.5, 1.0, 2.0, 4.0])
    parser.add_argument("--sizes", nargs="*", type=int, default=[1_000, 10_000, 100_000])
    parser.add_argument("--methods", nargs="*", default=["base", "norm-sub", "norm-hyb"])
    parser.add_argument("--windows", type=int, default=100)
    parser.add_argument("--lifetime-factor", type=float, default=2.0,
                        help="a memoized oracle's ε∞ as a multiple of ε1 (> 1)")
    parser.add_argument("--seed", type=int, default=31)
    parser.add_argument("--datasets-dir", default=default_datasets_dir())
    parser.add_argument("--benchmark", default="top_k_pooled", help="the results' name")
    parser.add_argument("--confirm", default=None, metavar="RESULTS",
                        help="measure only the cells with a failing triple in this results "
                             "file of the script (on another --seed)")
    add_json_argument(parser)
    args = parser.parse_args(argv)
    folder = Path(args.datasets_dir)
    problem = simulation_problem(folder, args.windows, args.sizes)
    if problem:
        print(problem, file=sys.stderr)
        return 2
    bad_epsilons = [e for e in args.epsilons if not 0.0 < e < float("inf")]
    if bad_epsilons:
        print(f"--epsilons must be positive and finite, got {bad_epsilons[0]:g}",
              file=sys.stderr)
        return 2
    if not args.lifetime_factor > 1.0:
        print(f"--lifetime-factor must exceed 1, got {args.lifetime_factor:g}", file=sys.stderr)
        return 2
    unknown = [m for m in args.methods if m not in METHODS]
    if unknown:
        print(f"--methods: unknown {', '.join(unknown)}", file=sys.stderr)
        return 2
    for name in args.protocols:
        memoized = name.startswith(MEMOIZED_PREFIX)
        if (memoized and name[len(MEMOIZED_PREFIX):] not in MEMOIZED) or (
                not memoized and not is_pooled(name)):
            print(f"--protocols: {name!r} is neither a pooled-hash oracle nor memoized-X for X "
                  f"in {sorted(MEMOIZED)}", file=sys.stderr)
            return 2
        if rank_conditional_applies(oracle(name, 1.0, 64, args.lifetime_factor)):
            print(f"--protocols: {name} gets the rank-conditional band "
                  "(selective_top_k.py --unfiltered measures it)", file=sys.stderr)
            return 2
    only = None
    if args.confirm is not None:
        try:
            only = failing_cells(json.loads(Path(args.confirm).read_text())["results"])
        except (OSError, ValueError, KeyError) as error:
            print(f"--confirm: cannot read the failing cells of {args.confirm}: {error}",
                  file=sys.stderr)
            return 2
    with Run(args.benchmark, args.json, vars(args)) as run:
        rows: list[dict] = []
        for dataset_name in args.datasets:
            dataset = DATASETS[dataset_name](folder)
            for name in args.protocols:
                for epsilon in args.epsilons:
                    for n in args.sizes:
                        if only is not None and (dataset_name, name, epsilon, n) not in only:
                            continue
                        found = cell_rows(dataset_name, dataset, name, epsilon, n, args.methods,
                                          args.windows, args.seed, args.lifetime_factor)
                        rows += found
                        for r in found:
                            print(f"{dataset_name} {name} ε={epsilon:g} n={n:,} {r['method']}: "
                                  f"{r['coverage']:.3f} by rank {r['by_rank']} "
                                  f"({r['median_ms_per_query']} ms)", flush=True)
        found_summary = oracle_summary(rows)
        for name, line in found_summary.items():
            print(f"{name}: {line['inside']} of {line['triples']} triples inside, "
                  f"{line['above']} above, {line['below']} below ({line['below_090']} below "
                  f"0.90), {line['below_by_two']} below by two s.e. (chance "
                  f"{line['below_by_two_chance']}); lowest {line['lowest']}", flush=True)
            for failing in line["failing"]:
                print(f"  {name} {failing}", flush=True)
        run.save({"rows": rows, "summary": found_summary})
    return 0


if __name__ == "__main__":
    sys.exit(main())
