"""The printed mean and variance of numeric records against the centre of their bands.

A numeric record's mean and variance bands are centred on unbiased moment estimates
(ldp_telemetry.ldp.estimation.moments for Square Wave, .cfo_moments for CFO-binning and
hierarchical histograms); the record printed the moments of its estimated histogram (EMS's or
EM's, Norm-Sub's, ADMM's). For each data set, family, ε and n, W windows of n values are drawn
(benchmarks/coverage.py's data sets), perturbed by the real client and estimated by the
family's estimator; per window, against the values' own mean and (population) variance:

* *histogram*: the estimated histogram's moments (`histograms.summary`, what records printed
  before this script's change);
* *unbiased*: the bands' centre clipped to what the statistic can take (the mean to
  [low, high], the variance to [0, (high − low)²/4]);
* *clamped*: the histogram's moved to the nearer end of the band where it lies outside;
* *pretest*: the histogram's where the band holds it, else the band's centre;

and how often each lies inside the record's band (the bands as finalize makes them, declared
cells measured all the same). Printed per cell: RMSE of the first two, their RMSE ratio
(histogram / unbiased: above 1 the unbiased estimate is the better) and the share of the
histogram's inside the band; per family, the medians and largest of each RMSE ratio over the
cells (the results keep RMSE, bias and the share inside of each).

    python benchmarks/printed_moments.py --windows 40 --large-windows 20 --jobs 2 \\
        --json benchmarks/results/printed_moments.json

Each window's values are drawn once and perturbed for every family and ε (the truth is shared,
the reports are not). n = 10⁶ is measured for `--large-families` only (OLH's server cost is
O(n · B) a window).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time

import numpy as np
from bench_json import Run, add_json_argument
from coverage import (DELAY, DISTANCE, DOMAINS, LOGNORMAL, MINUTE, SCHEDULED, TAXI, available,
                      draw, registry_of)
from coverage_moments import measured_rows, numbers

from ldp_telemetry.ldp.estimation.bin_answers import cfo_statistic_linear, hh_statistic_linear
from ldp_telemetry.ldp.estimation.cfo_moments import (bin_moments, cfo_statistic_bands,
                                                      hh_statistic_bands)
from ldp_telemetry.ldp.estimation.histograms import summary
from ldp_telemetry.ldp.estimation.moments import (MOMENT_STATISTICS, moment_bands,
                                                  protocol_model, statistic_bands)

#: The windows of this script (no other results file uses it).
SEED = 61
SETS = (LOGNORMAL, DISTANCE, DELAY, MINUTE, SCHEDULED, TAXI)
#: family -> (protocol, estimator, buckets): the registry's defaults but the bootstrap, which
#: neither the printed moments nor their bands need
FAMILIES = {"sw-ems": ("sw", "ems", 128), "sw-em": ("sw", "em", 128),
            "cfo-grr": ("cfo-grr", "norm-sub", 64), "cfo-olh": ("cfo-olh", "norm-sub", 64),
            "hh": ("hh", "admm", 64)}
LARGE = 1_000_000
#: The values a record could print per statistic: the estimated histogram's, the band's centre
#: (the unbiased estimate, clipped), the histogram's moved to the nearer end of the band where
#: it lies outside, and the histogram's where the band holds it, else the centre.
KINDS = ("histogram", "unbiased", "clamped", "pretest")


def _centres(family: str, config, counts: np.ndarray, n: int, low: float, high: float
             ) -> tuple[tuple[float, float], dict]:
    """((mean, variance) the bands are centred on, in metric units), the bands records make."""
    protocol, span = config.protocol, high - low
    if family.startswith("sw"):
        model = protocol_model(protocol)
        found = moment_bands(model, counts)
        assert found is not None, "a window of n > 0 reports"
        return ((low + span * found.mean, span * span * found.variance),
                statistic_bands(model, counts, low, high))
    if family == "hh":
        linear, bands = (hh_statistic_linear(protocol, counts),
                         hh_statistic_bands(protocol, counts, n, low, high, declare=False))
    else:
        linear, bands = (cfo_statistic_linear(protocol, counts, n),
                         cfo_statistic_bands(protocol, counts, n, low, high, declare=False))
    found = bin_moments(linear)
    assert found is not None, "a window of n > 0 reports"
    return (low + span * found[0], span * span * found[2]), bands


def simulate(name: str, n: int, epsilons: tuple[float, ...], families: tuple[str, ...],
             windows: int, seed: int) -> list[dict]:
    """The rows of one (data set, n): one per (family, ε)."""
    low, high = DOMAINS[name]
    span = high - low
    limits = {"mean": (low, high), "variance": (0.0, span * span / 4.0)}
    configs = {(f, e): registry_of(FAMILIES[f][0], {"method": FAMILIES[f][1], "bootstrap": 0},
                                   e, (low, high, FAMILIES[f][2]))
               for f in families for e in epsilons}
    rng = np.random.default_rng([seed, n, SETS.index(name)])
    kept = {key: {"truth": [], "seconds": [], **{kind: [] for kind in KINDS},
                  **{"inside_" + kind: [] for kind in KINDS}} for key in configs}
    for _ in range(windows):
        values = draw(name, rng, n)
        truth = (float(values.mean()), float(values.var()))
        for (family, epsilon), config in configs.items():
            protocol = config.protocol
            counts = protocol.new_statistic()
            protocol.accumulate(counts, protocol.perturb(config.to_unit(values), rng))
            started = time.perf_counter()
            estimate = config.estimator.run(counts, n, protocol).estimate
            printed = summary(np.asarray(estimate, dtype=np.float64), config.bucket_edges)
            seconds = time.perf_counter() - started
            centre, bands = _centres(family, config, counts, n, low, high)
            row = kept[(family, epsilon)]
            row["truth"].append(truth)
            row["seconds"].append(seconds)
            found: dict[str, list] = {kind: [] for kind in KINDS}
            for key, value in zip(MOMENT_STATISTICS, centre, strict=True):
                clipped = min(max(value, limits[key][0]), limits[key][1])
                band, smoothed = bands[key], printed[key]
                inside = band.lower <= smoothed <= band.upper
                found["histogram"].append(smoothed)
                found["unbiased"].append(clipped)
                found["clamped"].append(min(max(smoothed, band.lower), band.upper))
                found["pretest"].append(smoothed if inside else clipped)
            for kind, items in found.items():
                row[kind].append(items)
                row["inside_" + kind].append([
                    bands[key].lower <= value <= bands[key].upper
                    for key, value in zip(MOMENT_STATISTICS, items, strict=True)])
    rows = []
    for (family, epsilon), row in kept.items():
        truth = np.array(row["truth"])
        out = {"dataset": name, "n": n, "epsilon": epsilon, "family": family,
               "protocol": FAMILIES[family][0], "windows": windows, "seed": seed,
               "estimate_ms": 1000.0 * statistics.median(row["seconds"])}
        for kind in KINDS:
            error = np.array(row[kind]) - truth
            inside = np.array(row["inside_" + kind], dtype=float)
            out[kind] = {key: {"rmse": float(np.sqrt((error[:, i] ** 2).mean())),
                               "bias": float(error[:, i].mean()),
                               "inside": float(inside[:, i].mean())}
                         for i, key in enumerate(MOMENT_STATISTICS)}
        out["ratio"] = {key: out["histogram"][key]["rmse"] / out["unbiased"][key]["rmse"]
                        for key in MOMENT_STATISTICS}
        out["ratios"] = {kind: {key: out[kind][key]["rmse"] / out["unbiased"][key]["rmse"]
                                for key in MOMENT_STATISTICS} for kind in KINDS}
        rows.append(out)
    return rows


def simulate_cell(args: tuple) -> list[dict]:
    return simulate(*args)


def medians(rows: list[dict]) -> dict:
    """Per family and statistic: the median RMSE ratio over the cells, the cells where the
    histogram's RMSE is lower, and the shares of windows inside the band (histogram's lowest
    and median)."""
    out = {}
    for family in sorted({row["family"] for row in rows}):
        mine = [row for row in rows if row["family"] == family]
        out[family] = {key: {
            "median_ratio": statistics.median(row["ratio"][key] for row in mine),
            "cells": len(mine),
            "histogram_better": sum(row["ratio"][key] < 1.0 for row in mine),
            "histogram_better_by_10pct": sum(row["ratio"][key] < 1 / 1.1 for row in mine),
            **{f"{kind}_median_ratio": statistics.median(row["ratios"][kind][key]
                                                         for row in mine)
               for kind in KINDS[2:]},
            **{f"{kind}_largest_ratio": max(row["ratios"][kind][key] for row in mine)
               for kind in KINDS},
            "histogram_inside_min": min(row["histogram"][key]["inside"] for row in mine),
            "histogram_inside_median": statistics.median(row["histogram"][key]["inside"]
                                                         for row in mine),
            "unbiased_inside_min": min(row["unbiased"][key]["inside"] for row in mine)}
            for key in MOMENT_STATISTICS}
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--windows", type=int, default=40)
    parser.add_argument("--large-windows", type=int, default=10,
                        help="windows per cell at n = 10⁶")
    parser.add_argument("--epsilons", default="0.5,1,2,4")
    parser.add_argument("--sizes", default="1000,10000,100000,1000000")
    parser.add_argument("--families", default=",".join(FAMILIES))
    parser.add_argument("--large-families", default="sw-ems,sw-em,cfo-grr",
                        help="the families measured at n = 10⁶")
    parser.add_argument("--sets", default=",".join(SETS))
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--jobs", type=int, default=1, help="processes measuring cells")
    add_json_argument(parser)
    args = parser.parse_args(argv)
    sets = available(args.sets.split(","))
    epsilons = tuple(numbers(args.epsilons))
    families = tuple(args.families.split(","))
    large = tuple(f for f in args.large_families.split(",") if f in families)
    cells = []
    for n in sorted(numbers(args.sizes, int), reverse=True):
        chosen = large if n >= LARGE else families
        windows = args.large_windows if n >= LARGE else args.windows
        cells += [(name, n, epsilons, chosen, windows, args.seed) for name in sets if chosen]
    print(f"{'data set':<26} {'family':<8} {'ε':>4} {'n':>8}   "
          f"{'mean: RMSE hist':>15} {'unbiased':>9} {'ratio':>6} {'in band':>7}   "
          f"{'variance: RMSE hist':>19} {'unbiased':>9} {'ratio':>6} {'in band':>7}",
          flush=True)
    rows = []
    with Run("printed_moments", args.json, vars(args)) as run:
        for row in measured_rows(simulate_cell, cells, args.jobs):
            rows.append(row)
            h, u, r = row["histogram"], row["unbiased"], row["ratio"]
            print(f"{row['dataset']:<26} {row['family']:<8} {row['epsilon']:>4g} "
                  f"{row['n']:>8}   {h['mean']['rmse']:15.4g} {u['mean']['rmse']:9.4g} "
                  f"{r['mean']:6.2f} {h['mean']['inside']:7.2f}   "
                  f"{h['variance']['rmse']:19.4g} {u['variance']['rmse']:9.4g} "
                  f"{r['variance']:6.2f} {h['variance']['inside']:7.2f}", flush=True)
        summary_ = medians(rows)
        for family, stats in summary_.items():
            for key, found in stats.items():
                print(f"{family:<8} {key:<8} median RMSE ratio {found['median_ratio']:.2f}; "
                      f"histogram better in {found['histogram_better']} of {found['cells']} "
                      f"cells ({found['histogram_better_by_10pct']} by more than 10%); "
                      f"histogram inside its band: lowest {found['histogram_inside_min']:.2f}, "
                      f"median {found['histogram_inside_median']:.2f}; RMSE ratio of the "
                      f"clamped {found['clamped_median_ratio']:.2f} (largest "
                      f"{found['clamped_largest_ratio']:.2f}), of the pretest "
                      f"{found['pretest_median_ratio']:.2f} (largest "
                      f"{found['pretest_largest_ratio']:.2f})", flush=True)
        run.save({"cells": rows, "summary": summary_, "seed": args.seed})


if __name__ == "__main__":
    sys.exit(main())
