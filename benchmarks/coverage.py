"""Coverage of the numeric 95% bands that window-estimate records carry, on real and skewed data.

For each data set, ε and n, W windows of n values are drawn (a real column sampled without
replacement, or a lognormal latency), perturbed with Square Wave (the client mechanism) and
given to `ldp_telemetry.ldp.engine.finalize.numeric_bands` (the bias-corrected parametric bootstrap
through EM that finalize_window puts in the record, R replicates). Each record statistic's band
is checked against the window's true value; the script prints the fraction of windows covered
per statistic (goal: [0.93, 0.97] at nominal 0.95; with W windows its standard error is
√(0.95 · 0.05 / W)), measured for every statistic, with "*" where the record declares the
statistic without a band at this ε (CALIBRATED_FROM_EPSILON of
ldp_telemetry.ldp.estimation.uncertainty), and the median seconds the bands cost per window. Range
queries have no band in the record (declared, not measured).

    python benchmarks/coverage.py --windows 40 --json benchmarks/results/coverage.json
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
from ldp_telemetry.ldp.engine.finalize import numeric_bands
from ldp_telemetry.ldp.estimation.histograms import QUANTILE_LEVELS
from ldp_telemetry.ldp.estimation.uncertainty import BAND_STATISTICS, uncalibrated_statistics

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


def cell(name, draw, domain, epsilon, n, windows, replicates, seed) -> dict:
    """Coverage of one (data set, ε, n) over `windows` windows."""
    registry = parse_registry({"metrics": [{
        "name": "x", "protocol": "sw", "epsilon": epsilon,
        "domain": {"low": domain[0], "high": domain[1], "buckets": domain[2]},
        "estimator": {"method": "ems", "bootstrap": replicates, "seed": seed}}]})
    config = registry["x"]
    rng = np.random.default_rng([seed, n, int(epsilon * 100)])
    hits = {key: [] for key in BAND_STATISTICS}
    seconds = []
    method = None
    for _ in range(windows):
        values = draw(rng, n)
        statistic = config.protocol.new_statistic()
        config.protocol.accumulate(statistic, config.protocol.perturb(config.to_unit(values),
                                                                      rng))
        started = time.perf_counter()
        method, bands = numeric_bands(config, statistic, n, uncalibrated={})
        seconds.append(time.perf_counter() - started)
        true = truth(values)
        for key, band in bands.items():
            if band.lower is not None:
                hits[key].append(band.lower <= true[key] <= band.upper)
    coverage = {key: (float(np.mean(h)) if h else None) for key, h in hits.items()}
    declared = sorted(uncalibrated_statistics(epsilon))
    return {"dataset": name, "epsilon": epsilon, "n": n, "windows": windows,
            "band_method": method, "coverage": coverage, "declared_without_band": declared,
            "median_band_s": statistics.median(seconds)}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--windows", type=int, default=40)
    parser.add_argument("--replicates", type=int, default=20)
    parser.add_argument("--epsilons", default="0.5,1,2,4")
    parser.add_argument("--sizes", default="1000,10000,100000")
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
    rows = []
    with Run("coverage", args.json, vars(args)) as run:
        for name, draw, domain in sets:
            for epsilon in epsilons:
                for n in sizes:
                    row = cell(name, draw, domain, epsilon, n, args.windows, args.replicates,
                               args.seed)
                    rows.append(row)
                    print(f"{name:<20} {epsilon:>4g} {n:>7} " + " ".join(
                        f"{row['coverage'][k]:5.2f}" + ("*" if k in row["declared_without_band"]
                                                        else " ") for k in keys)
                        + f"  {row['median_band_s']:.2f}", flush=True)
        run.save({"cells": rows, "statistics": keys, "goal": [0.93, 0.97],
                  "range_queries": "no band in the record (declared, not measured)"})


if __name__ == "__main__":
    main()
