"""Coverage of the quantile bands of CFO-binning and hierarchical histograms (inverted exact CDF
bands), on held-out windows of real data.

The windows are benchmarks/coverage_bins.py's (its data sets, flights3m `minute` among them,
which no band of this family was fitted on; its `draw_values` and its perturb-and-check loop,
benchmarks/coverage_moments.py's `checked_windows`), on seeds of their own: the declarations
of ldp_telemetry.ldp.estimation.bin_quantiles are chosen on one (`--seed 61`) and validated on
a fresh one (`--seed 67`, the results file). Every window gets both rules' bands at every level
of QUANTILE_LEVELS (ldp_telemetry.ldp.estimation.bin_quantiles.quantile_bands: `whole-bins`,
what records give as each quantile's conservative band, bit for bit, and `interpolated`),
checked against the values' own α-quantile: the
smallest value with at least a share α of the window's values at or below it (numpy's
`inverted_cdf`). With W windows a coverage's standard error is √(0.95 · 0.05 / W) (0.015 at
W = 200).

    python benchmarks/coverage_bin_quantiles.py --windows 300 --jobs 2 \\
        --json benchmarks/results/coverage_bin_quantiles.json

`--large` measures n = 10⁶ instead, for `cfo-grr` and `hh` only (as coverage_bins.py's).
`--cost R` times the bands of one window instead (`cost`: 64 to 4096 bins, R repeats):

    python benchmarks/coverage_bin_quantiles.py --cost 5 \\
        --json benchmarks/results/coverage_bin_quantiles_cost.json

Printed per cell and rule: the coverage of each level, the median width of its band in bins,
and the median milliseconds both rules' bands of all nine levels cost per window (from one
statistic; the client's perturbation not counted).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time

import numpy as np
from bench_json import Run, add_json_argument
from coverage import DISTANCE, available
from coverage_bins import DELAY, DOMAIN, LOGNORMAL, MINUTE, SETS, draw_values
from coverage_moments import checked_windows, measured_rows, numbers

from ldp_telemetry.ldp.estimation.bin_answers import cfo_statistic_linear, hh_statistic_linear
from ldp_telemetry.ldp.estimation.bin_quantiles import RULES, declared_quantiles, quantile_bands
from ldp_telemetry.ldp.estimation.histograms import QUANTILE_LEVELS
from ldp_telemetry.ldp.protocols import make_numeric_protocol
from ldp_telemetry.ldp.protocols.cfo_binning import CfoBinning

#: The results file's windows; the declarations are chosen on CHOICE_SEED (module docstring).
SEED = 67
CHOICE_SEED = 61
LEVELS = [float(key) for key in QUANTILE_LEVELS]
GOAL = (0.93, 0.97)


def check(protocol, statistic: np.ndarray, n: int, truth: np.ndarray
          ) -> tuple[list[list[bool]], list[list[float]], float]:
    """(covered, width in bins, seconds) of every rule (RULES order) and level in one
    window; `truth` the levels' quantiles on the unit scale."""
    started = time.perf_counter()
    model = (cfo_statistic_linear(protocol, statistic, n) if isinstance(protocol, CfoBinning)
             else hh_statistic_linear(protocol, statistic))
    assert model is not None, "a window with reports at every depth"
    bands = [quantile_bands(model, LEVELS, rule) for rule in RULES]
    seconds = time.perf_counter() - started
    covered = [[bool(lo <= t <= hi) for (lo, hi), t in zip(band, truth, strict=True)]
               for band in bands]
    widths = [list(map(float, (band[:, 1] - band[:, 0]) * model.bins)) for band in bands]
    return covered, widths, seconds


def simulate(name: str, n: int, epsilons: tuple[float, ...], protocols: tuple[str, ...],
             windows: int, bins: int, seed: int) -> list[dict]:
    """The rows of one (data set, n): one per (ε, protocol)."""
    low, high = DOMAIN[name]
    made = {(e, p): make_numeric_protocol(p, e, bins) for e in epsilons for p in protocols}
    rng = np.random.default_rng([seed, n, SETS.index(name), bins])

    def window() -> tuple[np.ndarray, np.ndarray]:
        unit = (draw_values(name, rng, n) - low) / (high - low)
        return unit, np.quantile(unit, LEVELS, method="inverted_cdf")
    results = checked_windows(made, windows, rng, window,
                              lambda protocol, statistic, truth: check(
                                  protocol, statistic, n, truth), columns=3)
    rows = []
    for (epsilon, protocol), (covered, widths, seconds) in results.items():
        family = "cfo" if protocol.startswith("cfo") else "hh"
        covered_, widths_ = np.array(covered), np.array(widths)  # (W, rules, levels)
        rows.append({
            "dataset": name, "n": n, "windows": windows, "seed": seed, "epsilon": epsilon,
            "protocol": protocol, "buckets": bins,
            "declared": sorted(declared_quantiles(family, epsilon, n)),
            "coverage": {rule: dict(zip(QUANTILE_LEVELS, map(float, covered_[:, at].mean(0)),
                                        strict=True)) for at, rule in enumerate(RULES)},
            "median_width_bins": {rule: dict(zip(QUANTILE_LEVELS,
                                                 map(float, np.median(widths_[:, at], 0)),
                                                 strict=True))
                                  for at, rule in enumerate(RULES)},
            "median_band_ms": 1000.0 * statistics.median(seconds)})
    return rows


def simulate_cell(args: tuple) -> list[dict]:
    return simulate(*args)


#: The bin counts `--cost` times (the documented range: d up to 4096).
COST_BINS = (64, 256, 1024, 4096)


def cost(protocols: tuple[str, ...], repeats: int, seed: int) -> list[dict]:
    """Median milliseconds of one window's nine quantile bands by each rule, from its
    statistic (the linear model included), per protocol and bin count (COST_BINS): one window
    of 10⁴ lognormal values at ε = 1 (the cost does not depend on n), timed `repeats` times."""
    rng = np.random.default_rng([seed, 1])
    values = draw_values(LOGNORMAL, rng, 10_000)
    low, high = DOMAIN[LOGNORMAL]
    rows = []
    for name in protocols:
        for bins in COST_BINS:
            protocol = make_numeric_protocol(name, 1.0, bins)
            statistic = protocol.new_statistic()
            protocol.accumulate(statistic, protocol.perturb((values - low) / (high - low), rng))
            timed = {}
            for rule in RULES:
                seconds = []
                for _ in range(repeats):
                    started = time.perf_counter()
                    model = (cfo_statistic_linear(protocol, statistic, values.size)
                             if isinstance(protocol, CfoBinning)
                             else hh_statistic_linear(protocol, statistic))
                    assert model is not None, "a window with reports"
                    quantile_bands(model, LEVELS, rule)
                    seconds.append(time.perf_counter() - started)
                timed[rule] = 1000.0 * statistics.median(seconds)
            rows.append({"protocol": name, "buckets": bins, "median_ms": timed})
            print(f"{name:<8} {bins:>5} bins  " + "  ".join(
                f"{rule} {ms:8.2f} ms" for rule, ms in timed.items()), flush=True)
    return rows


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--windows", type=int, default=200)
    parser.add_argument("--epsilons", default="0.5,1,2,4")
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--protocols", default="cfo-grr,cfo-olh,hh")
    parser.add_argument("--buckets", type=int, default=64, help="bins (a power of 4 for hh)")
    parser.add_argument("--large", action="store_true", help="n = 10⁶, cfo-grr and hh")
    parser.add_argument("--cost", type=int, default=0, metavar="REPEATS",
                        help="time the bands at 64-4096 bins instead (`cost`)")
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--jobs", type=int, default=1, help="processes measuring cells")
    add_json_argument(parser)
    args = parser.parse_args(argv)
    sets = available((LOGNORMAL, DISTANCE, DELAY)) + (
        [MINUTE] if DISTANCE in available((DISTANCE,)) else [])
    if args.cost:
        with Run("coverage_bin_quantiles_cost", args.json, vars(args)) as run:
            run.save({"cells": cost(tuple(args.protocols.split(",")), args.cost, args.seed),
                      "rules": list(RULES)})
        return
    if args.large:
        args.sizes, args.protocols = "1000000", "cfo-grr,hh"
    epsilons = tuple(numbers(args.epsilons))
    protocols = tuple(args.protocols.split(","))
    sizes = sorted(numbers(args.sizes, int), reverse=True)  # the longest cells first
    cells = [(name, n, epsilons, protocols, args.windows, args.buckets, args.seed)
             for n in sizes for name in sets]
    print(f"{'data set':<20} {'protocol':<8} {'ε':>4} {'n':>7} {'rule':<12} "
          + " ".join(f"{key:>5}" for key in QUANTILE_LEVELS) + "  width(0.5)  ms", flush=True)
    rows = []
    name = "coverage_bin_quantiles_large" if args.large else "coverage_bin_quantiles"
    with Run(name, args.json, vars(args)) as run:
        for row in measured_rows(simulate_cell, cells, args.jobs):
            rows.append(row)
            for rule in RULES:
                c = row["coverage"][rule]
                print(f"{row['dataset']:<20} {row['protocol']:<8} {row['epsilon']:>4g} "
                      f"{row['n']:>7} {rule:<12} "
                      + " ".join(f"{c[key]:5.3f}" for key in QUANTILE_LEVELS)
                      + f"  {row['median_width_bins'][rule]['0.5']:6.2f}"
                      f"  {row['median_band_ms']:.2f}"
                      + (f"  declared {','.join(row['declared'])}"
                         if row["declared"] else ""), flush=True)
        run.save({"cells": rows, "goal": list(GOAL), "seed": args.seed,
                  "levels": list(QUANTILE_LEVELS), "rules": list(RULES)})


if __name__ == "__main__":
    sys.exit(main())
