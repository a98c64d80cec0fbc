"""Coverage of quantile bands by profile-likelihood test inversion, beside the record's
bias-corrected bootstrap bands, on the same held-out windows.

For each data set, ε and n, W windows are drawn and perturbed exactly as benchmarks/coverage.py
draws its held-out windows (its `draw` and `reports`, the same seed and stream: the bootstrap
coverages below equal its quantile cells), and each window gets

* the profile-likelihood bands of ldp_telemetry.ldp.estimation.quantile_bands (the test of
  "F(t) = p" through the exact channel at χ²₁,₀.₉₅, inverted), started from the EM fit the
  record's interval estimator makes, twice: ends at bucket edges (LR) and moved into their
  buckets by 6 split-test bisection steps (LR split);
* the record's bias-corrected bootstrap bands (`bootstrap_statistics`, `band_limits` and the
  calibrated margins of `band_scales`; R replicates), with "*" where the record has none (its
  coverage at c = 1 is shown and left out of the counts).

It prints per cell the coverage of each quantile level for each band, the levels inside
[0.93, 0.97] and more than two standard errors (√(0.95 · 0.05 / W)) from 0.95, the median
width ratio to the bootstrap band (over the windows and levels the bootstrap bands) and the
median CPU seconds per window; the JSON adds the median widths in buckets and the bands whose
tests the optimiser did not certify. Simulated windows (report histograms and true quantiles)
and the bootstrap bands are kept in `--cache DIR` and re-read from it.

    nice python benchmarks/quantile_lr.py --windows 100 --jobs 2 --cache /tmp/quantile_lr \\
        --json benchmarks/results/quantile_lr.json
"""
from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
from bench_json import Run, add_json_argument
from coverage import (CALIBRATION_SETS, DOMAINS, SET3_SHAPES, SETS, available, draw,
                      registry_of, reports, truth)

from ldp_telemetry.ldp.engine.finalize import interval_fit
from ldp_telemetry.ldp.estimation.histograms import QUANTILE_LEVELS
from ldp_telemetry.ldp.estimation.quantile_bands import ProfileLikelihood
from ldp_telemetry.ldp.estimation.uncertainty import (BAND_STATISTICS, band_limits, band_scales,
                                                      bootstrap_statistics)

#: the windows and unseen shapes of benchmarks/coverage.py's set 3, which this measures on
HELD_OUT_SETS = SET3_SHAPES
EVALUATION_SEED = SETS[3][1]
LEVELS = [float(level) for level in QUANTILE_LEVELS]
#: columns of BAND_STATISTICS holding the quantiles
QUANTILE_COLUMNS = [BAND_STATISTICS.index(level) for level in QUANTILE_LEVELS]
GOAL = (0.93, 0.97)
#: The profile-likelihood bands measured: band ends at bucket edges, and moved into their
#: buckets by split tests (`refine` bisection steps: within 1/64 of a bucket).
VARIANTS = {"profile_likelihood": 0, "profile_likelihood_split": 6}


def windows_of(name: str, epsilon: float, n: int, buckets: int, windows: int, seed: int,
               cache: Path | None) -> tuple[np.ndarray, np.ndarray]:
    """(report histograms (W, d̃), true quantiles (W, levels)) of coverage.py's held-out
    windows of this cell, from `cache` when it holds them."""
    path = None
    if cache is not None:
        path = cache / f"{name.replace(' ', '_')}-{epsilon:g}-{n}-{buckets}-{windows}-{seed}.npz"
        if path.exists():
            stored = np.load(path)
            return stored["counts"], stored["truth"]
    config = registry_of("sw", {"method": "ems"}, epsilon, (*DOMAINS[name], buckets))
    rng = np.random.default_rng([seed, n, int(epsilon * 100), buckets])  # coverage.simulate's
    counts, true = [], []
    for _ in range(windows):
        values = draw(name, rng, n)
        counts.append(reports(config, values, rng))
        true.append(truth(values)[QUANTILE_COLUMNS])
    counts_array, true_array = np.array(counts), np.array(true)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        np.savez(path, counts=counts_array, truth=true_array)
    return counts_array, true_array


def bootstrap_bands(config, histograms: np.ndarray, replicates: int, seed: int, scales,
                    path: Path | None) -> tuple[np.ndarray, np.ndarray, list[float]]:
    """The record's bias-corrected bootstrap quantile bands of each window (lower, upper of
    shape (W, levels)) and the CPU seconds of each, from `path` when it holds them."""
    if path is not None and path.exists():
        stored = np.load(path)
        return stored["lower"], stored["upper"], stored["seconds"].tolist()
    fit = interval_fit(config)
    forward, edges, n = config.protocol.channel().forward, config.bucket_edges, None
    lower, upper, seconds = [], [], []
    for window, histogram in enumerate(histograms):
        n = int(histogram.sum())
        started = time.process_time()
        theta, replicated = bootstrap_statistics(forward, fit, histogram, n, edges, replicates,
                                                 seed * 100_003 + window)
        low, high = band_limits(theta, replicated, edges, np.nan_to_num(scales, nan=1.0))
        seconds.append(time.process_time() - started)
        lower.append(low[QUANTILE_COLUMNS])
        upper.append(high[QUANTILE_COLUMNS])
    if path is not None:
        np.savez(path, lower=np.array(lower), upper=np.array(upper), seconds=np.array(seconds))
    return np.array(lower), np.array(upper), seconds


def measure(cell: tuple) -> dict:
    """Both methods' bands over one cell's windows: coverage, widths, CPU seconds."""
    name, epsilon, n, buckets, windows, replicates, seed, cache, bootstrap = cell
    counts, true = windows_of(name, epsilon, n, buckets, windows, seed,
                              None if cache is None else Path(cache))
    config = registry_of("sw", {"method": "ems", "bootstrap": replicates, "seed": seed},
                         epsilon, (*DOMAINS[name], buckets))
    fit = interval_fit(config)
    channel = config.protocol.channel()
    matrix, column = channel.dense(), channel.interval_column
    edges = config.bucket_edges
    bucket_width = float(edges[1] - edges[0])
    scales, _ = band_scales(epsilon, n, buckets, replicates)
    declared = np.isnan(scales[QUANTILE_COLUMNS])
    found = {variant: {"lower": [], "upper": [], "seconds": [], "certified": [], "tests": []}
             for variant in VARIANTS}
    for histogram in counts:
        started = time.process_time()
        profile = ProfileLikelihood(matrix, histogram, fit(histogram), column=column)
        pilot = time.process_time() - started
        for variant, refine in VARIANTS.items():
            started = time.process_time()
            bands = [profile.band(level, edges, refine=refine) for level in LEVELS]
            kept = found[variant]
            kept["seconds"].append(pilot + time.process_time() - started)
            kept["lower"].append([band.lower for band in bands])
            kept["upper"].append([band.upper for band in bands])
            kept["certified"].append([band.certified for band in bands])
            kept["tests"].append(sum(band.tests for band in bands))
    if bootstrap:
        path = None if cache is None else Path(cache) / (
            f"{name.replace(' ', '_')}-{epsilon:g}-{n}-{buckets}-{windows}-{seed}"
            f"-bootstrap{replicates}.npz")
        bs_low_a, bs_high_a, bs_seconds = bootstrap_bands(config, counts, replicates, seed,
                                                          scales, path)
    row = {"dataset": name, "epsilon": epsilon, "n": n, "buckets": buckets, "windows": windows,
           "held_out_shape": name in HELD_OUT_SETS}
    widths = {}
    for variant, kept in found.items():
        low, high = np.array(kept["lower"]), np.array(kept["upper"])
        widths[variant] = high - low
        row[variant] = {
            "coverage": dict(zip(QUANTILE_LEVELS, map(
                float, ((low <= true) & (true <= high)).mean(axis=0)), strict=True)),
            "median_width_buckets": dict(zip(QUANTILE_LEVELS, map(
                float, np.median(high - low, axis=0) / bucket_width), strict=True)),
            "uncertified_bands": int(np.size(kept["certified"]) - np.sum(kept["certified"])),
            "median_tests_per_window": float(statistics.median(kept["tests"])),
            "median_cpu_s": statistics.median(kept["seconds"]),
            "max_cpu_s": max(kept["seconds"])}
    if bootstrap:
        bs_cover = ((bs_low_a <= true) & (true <= bs_high_a)).mean(axis=0)
        bs_width = bs_high_a - bs_low_a
        row["bootstrap"] = {
            "coverage": dict(zip(QUANTILE_LEVELS, map(float, bs_cover), strict=True)),
            "declared_without_band": [level for level, gone in
                                      zip(QUANTILE_LEVELS, declared, strict=True) if gone],
            "median_width_buckets": dict(zip(QUANTILE_LEVELS, map(
                float, np.median(bs_width, axis=0) / bucket_width), strict=True)),
            "median_cpu_s": statistics.median(bs_seconds)}
        for variant, width in widths.items():
            ratio = np.divide(width, bs_width, out=np.full(width.shape, np.nan),
                              where=bs_width > 0)[:, ~declared]
            row[variant]["median_width_ratio"] = (float(np.nanmedian(ratio))
                                                  if np.isfinite(ratio).any() else None)
    return row


def tally(coverages: list[float], windows: int) -> dict:
    """Levels inside the goal and more than two standard errors from 0.95."""
    error = math.sqrt(0.95 * 0.05 / windows)
    return {"inside": sum(GOAL[0] <= c <= GOAL[1] for c in coverages),
            "above": sum(c > GOAL[1] for c in coverages),
            "below": sum(c < GOAL[0] for c in coverages),
            "off_two_se": sum(abs(c - 0.95) > 2 * error for c in coverages),
            "off_two_se_below": sum(c < 0.95 - 2 * error for c in coverages),
            "cells": len(coverages)}


def numbers(text: str, kind=float) -> list:
    return [kind(value) for value in text.split(",") if value]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--windows", type=int, default=100)
    parser.add_argument("--replicates", type=int, default=20)
    parser.add_argument("--epsilons", default="0.5,1,2,4")
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--buckets", type=int, default=128)
    parser.add_argument("--datasets", default=",".join(HELD_OUT_SETS + CALIBRATION_SETS))
    parser.add_argument("--no-bootstrap", action="store_true",
                        help="the profile-likelihood bands only")
    parser.add_argument("--cache", metavar="DIR", default=None,
                        help="keep the simulated windows in DIR and re-read them from it")
    parser.add_argument("--seed", type=int, default=EVALUATION_SEED)
    parser.add_argument("--jobs", type=int, default=1, help="processes measuring cells")
    add_json_argument(parser)
    args = parser.parse_args(argv)
    sets = available([name for name in args.datasets.split(",") if name])
    cells = [(name, e, n, args.buckets, args.windows, args.replicates, args.seed, args.cache,
              not args.no_bootstrap)
             for name in sets for e in numbers(args.epsilons) for n in numbers(args.sizes, int)]
    print(f"{'data set':<19} {'ε':>3} {'n':>6}  method "
          + " ".join(f"{level:>5}" for level in QUANTILE_LEVELS)
          + "  in  off  width  cpu s", flush=True)
    rows = []
    with Run("quantile_lr", args.json, vars(args)) as run:
        if args.jobs > 1:
            pool = ProcessPoolExecutor(args.jobs)
            results = pool.map(measure, cells)
        else:
            results = map(measure, cells)
        for row in results:
            rows.append(row)
            head = f"{row['dataset']:<19} {row['epsilon']:>3g} {row['n']:>6}"
            for method, label in (("profile_likelihood", "LR"),
                                  ("profile_likelihood_split", "LR-spl"), ("bootstrap", "boot")):
                if method not in row:
                    continue
                part = row[method]
                counted = tally([c for level, c in part["coverage"].items()
                                 if level not in part.get("declared_without_band", ())],
                                args.windows)
                ratio = part.get("median_width_ratio")
                width = "" if ratio is None else f"{ratio:.2f}x"
                print(f"{head}  {label:<6} " + " ".join(
                    f"{c:5.2f}" + ("*" if level in part.get("declared_without_band", ()) else "")
                    for level, c in part["coverage"].items())
                    + f"  {counted['inside']:>2} {counted['off_two_se']:>4} {width:>6}"
                    f"  {part['median_cpu_s']:.3f}", flush=True)
                head = " " * len(head)
        if args.jobs > 1:
            pool.shutdown()
        summary = {}
        for method in (*VARIANTS, "bootstrap"):
            for group, keep in (("all", lambda row: True),
                                ("held_out_shape", lambda row: row["held_out_shape"]),
                                ("calibration_shapes", lambda row: not row["held_out_shape"])):
                coverages = [c for row in rows if method in row and keep(row)
                             for level, c in row[method]["coverage"].items()
                             if level not in row[method].get("declared_without_band", ())]
                if coverages:
                    summary[f"{method}/{group}"] = tally(coverages, args.windows)
        for key, counted in summary.items():
            print(f"{key:<34} {counted['inside']:>3} of {counted['cells']:>3} inside "
                  f"[{GOAL[0]}, {GOAL[1]}], {counted['above']} above, {counted['below']} below, "
                  f"{counted['off_two_se']} off by > 2 s.e. ({counted['off_two_se_below']} "
                  "below)", file=sys.stderr)
        run.save({"cells": rows, "levels": list(QUANTILE_LEVELS), "goal": list(GOAL),
                  "summary": summary, "critical_value": "chi2(1) 0.95 = 3.841"})


if __name__ == "__main__":
    main()
