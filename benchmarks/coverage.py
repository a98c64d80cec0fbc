"""Coverage of the numeric 95% bands that window-estimate records carry, on real and skewed data.

For each data set, ε and n, W windows of n values are drawn (a real column sampled without
replacement, or a lognormal latency), perturbed with Square Wave (the client mechanism) and
given the bias-corrected parametric bootstrap through EM that finalize_window puts in the
record (`interval_fit` of ldp_telemetry.ldp.engine.finalize, `bootstrap_statistics` and
`band_limits` of ldp_telemetry.ldp.estimation.uncertainty; R replicates). Each statistic's band
is checked against the window's true value; the script prints the fraction of windows covered
per statistic under the record's margins (RECORD_MARGINS), measured for every statistic,
with "*" where the record declares the statistic without a band at this ε and n
(`uncalibrated_statistics`), and the median seconds the bands cost per window. The same
replicates also give the coverage under each margin rule for every statistic (MARGIN_RULES:
"whole", the rule before, "significant" and "none"), kept in the JSON. Goal: [0.93, 0.97] at
nominal 0.95; with W windows a coverage's standard error is √(0.95 · 0.05 / W) (0.015 at
W = 200).

`--families` adds the numeric estimators without a bias-corrected band (CFO-binning with
Norm-Sub, HH-ADMM): the coverage of estimate ± z · bootstrap standard error, the only band
their bootstrap could give, which is why their records declare none. Range queries have no
band in the record (declared, not measured).

    python benchmarks/coverage.py --windows 200 --families --json benchmarks/results/coverage.json
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from bench_json import Run, add_json_argument

from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.ldp.engine.finalize import finalize_window, interval_fit
from ldp_telemetry.ldp.estimation.histograms import QUANTILE_LEVELS
from ldp_telemetry.ldp.estimation.uncertainty import (BAND_STATISTICS, MARGIN_RULES,
                                                      RECORD_MARGINS, Z95, band_limits,
                                                      bootstrap_statistics,
                                                      uncalibrated_statistics)

DATASETS = Path(os.environ.get("LDP_DATASETS", Path(__file__).resolve().parents[2] / "shared"
                               / "datasets"))
FLIGHTS = DATASETS / "flights3m_2001H1.npz"


def lognormal(rng: np.random.Generator, n: int) -> np.ndarray:
    """A latency in ms: lognormal(μ = 1, σ = 0.6), clipped to the domain [0, 32]."""
    return np.clip(rng.lognormal(1.0, 0.6, n), 0.0, 32.0)


def flights_distance(column: np.ndarray):
    """Flight distances (miles, right-skewed), n of the 3 million at random, jittered by up
    to one mile so that ties do not sit on bucket edges."""
    def draw(rng: np.random.Generator, n: int) -> np.ndarray:
        return column[rng.choice(len(column), n, replace=False)] + rng.random(n)
    return draw


def truth(values: np.ndarray) -> dict[str, float]:
    return {"mean": float(values.mean()), "variance": float(values.var()),
            **{key: float(np.quantile(values, float(key))) for key in QUANTILE_LEVELS}}


def registry_of(protocol: str, estimator: dict, epsilon: float, domain) -> object:
    return parse_registry({"metrics": [{
        "name": "x", "protocol": protocol, "epsilon": epsilon,
        "domain": {"low": domain[0], "high": domain[1], "buckets": domain[2]},
        "estimator": estimator}]})["x"]


def reports(config, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    statistic = config.protocol.new_statistic()
    config.protocol.accumulate(statistic, config.protocol.perturb(config.to_unit(values), rng))
    return statistic


def cell(name, draw, domain, epsilon, n, windows, replicates, seed) -> dict:
    """Coverage of one (data set, ε, n) over `windows` windows, under every margin rule."""
    config = registry_of("sw", {"method": "ems", "bootstrap": replicates, "seed": seed},
                         epsilon, domain)
    fit = interval_fit(config)
    forward = config.protocol.channel().forward
    edges = config.bucket_edges
    rng = np.random.default_rng([seed, n, int(epsilon * 100)])
    rules = (*MARGIN_RULES, "record")
    hits = {rule: {key: 0 for key in BAND_STATISTICS} for rule in rules}
    widths = {rule: {key: [] for key in BAND_STATISTICS} for rule in rules}
    seconds = []
    for _ in range(windows):
        values = draw(rng, n)
        counts = reports(config, values, rng)
        started = time.perf_counter()
        theta, replicated = bootstrap_statistics(forward, fit, counts, n, edges, replicates, seed)
        limits = {rule: band_limits(theta, replicated, edges, rule) for rule in MARGIN_RULES}
        limits["record"] = band_limits(theta, replicated, edges, RECORD_MARGINS)
        seconds.append(time.perf_counter() - started)
        true = truth(values)
        for rule, (lower, upper) in limits.items():
            for key, low, high in zip(BAND_STATISTICS, lower, upper, strict=True):
                hits[rule][key] += bool(low <= true[key] <= high)
                widths[rule][key].append(high - low)
    coverage = {rule: {key: hits[rule][key] / windows for key in BAND_STATISTICS}
                for rule in MARGIN_RULES}
    record = {key: hits["record"][key] / windows for key in BAND_STATISTICS}
    width = {rule: {key: statistics.median(widths[rule][key]) for key in BAND_STATISTICS}
             for rule in rules}
    return {"dataset": name, "epsilon": epsilon, "n": n, "windows": windows,
            "coverage": record, "coverage_by_rule": coverage,
            "median_width_by_rule": width,
            "median_band_s": statistics.median(seconds)}


#: Numeric estimators without a bias-corrected band: (label, protocol, estimator, buckets).
FAMILIES = (("CFO-binning (cfo-grr, norm-sub)", "cfo-grr", "norm-sub", 64),
            ("HH-ADMM (hh, admm)", "hh", "admm", 64))


def family_cell(label, protocol, estimator, buckets, name, draw, domain, epsilon, n, windows,
                replicates, seed) -> dict:
    """Coverage of estimate ± Z95 · bootstrap standard error of a numeric estimator without a
    bias-corrected band (the band its bootstrap could give): mean and quantiles."""
    config = registry_of(protocol, {"method": estimator, "bootstrap": replicates, "seed": seed},
                         epsilon, (domain[0], domain[1], buckets))
    rng = np.random.default_rng([seed, n, int(epsilon * 100), 7])
    keys = ["mean", *QUANTILE_LEVELS]
    hits = dict.fromkeys(keys, 0)
    seconds = []
    for _ in range(windows):
        values = draw(rng, n)
        statistic = reports(config, values, rng)
        started = time.perf_counter()
        result = finalize_window(config, statistic, n)
        seconds.append(time.perf_counter() - started)
        true = truth(values)
        shown = {"mean": (result.mean, result.errors.mean),
                 **{k: (result.quantiles[k], result.errors.quantiles[k]) for k in QUANTILE_LEVELS}}
        for key, (value, error) in shown.items():
            hits[key] += bool(abs(value - true[key]) <= Z95 * error)
    return {"family": label, "dataset": name, "epsilon": epsilon, "n": n, "windows": windows,
            "coverage": {key: hits[key] / windows for key in keys},
            "median_finalize_s": statistics.median(seconds)}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--windows", type=int, default=200)
    parser.add_argument("--replicates", type=int, default=20)
    parser.add_argument("--epsilons", default="0.5,1,2,4")
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--families", action="store_true",
                        help="also measure CFO-binning and HH-ADMM (bootstrap s.e. bands)")
    parser.add_argument("--family-windows", type=int, default=100)
    parser.add_argument("--seed", type=int, default=31)
    add_json_argument(parser)
    args = parser.parse_args(argv)
    sets = [("lognormal latency", lognormal, (0.0, 32.0, 128))]
    if FLIGHTS.exists():
        sets.append(("flights3m distance", flights_distance(
            np.load(FLIGHTS)["distance"].astype(np.float64)), (0.0, 5000.0, 128)))
    else:
        print(f"data set not found, skipped: {FLIGHTS.name}", file=sys.stderr)
    epsilons = [float(e) for e in args.epsilons.split(",")]
    sizes = [int(n) for n in args.sizes.split(",")]
    keys = list(BAND_STATISTICS)
    print(f"{'data set':<20} {'ε':>4} {'n':>7} " + " ".join(f"{k[:5]:>5} " for k in keys)
          + "  band s")
    rows, families = [], []
    with Run("coverage", args.json, vars(args)) as run:
        for name, draw, domain in sets:
            for epsilon in epsilons:
                for n in sizes:
                    row = cell(name, draw, domain, epsilon, n, args.windows, args.replicates,
                               args.seed)
                    rows.append(row)
                    print(f"{name:<20} {epsilon:>4g} {n:>7} " + " ".join(
                        f"{row['coverage'][k]:5.2f}"
                        + ("*" if k in uncalibrated_statistics(epsilon, n) else " ")
                        for k in keys)
                        + f"  {row['median_band_s']:.2f}", flush=True)
        if args.families:
            fkeys = ["mean", *QUANTILE_LEVELS]
            print(f"\nestimate ± {Z95:.2f} · bootstrap s.e. (no record band)\n"
                  f"{'family':<32} {'data set':<20} {'ε':>4} {'n':>7} "
                  + " ".join(f"{k[:5]:>5}" for k in fkeys) + "  finalize s")
            for label, protocol, estimator, buckets in FAMILIES:
                for name, draw, domain in sets:
                    for epsilon in (1.0, 4.0):
                        for n in (10_000,):
                            row = family_cell(label, protocol, estimator, buckets, name, draw,
                                              domain, epsilon, n, args.family_windows,
                                              args.replicates, args.seed)
                            families.append(row)
                            print(f"{label:<32} {name:<20} {epsilon:>4g} {n:>7} " + " ".join(
                                f"{row['coverage'][k]:5.2f}" for k in fkeys)
                                + f"  {row['median_finalize_s']:.2f}", flush=True)
        run.save({"cells": rows, "statistics": keys, "goal": [0.93, 0.97],
                  "margin_rules": list(MARGIN_RULES),
                  "record_margins": dict(zip(BAND_STATISTICS, RECORD_MARGINS, strict=True)),
                  "families": families,
                  "range_queries": "no band in the record (declared, not measured)"})


if __name__ == "__main__":
    main()
