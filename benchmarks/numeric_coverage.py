"""Coverage of the 95% intervals of numeric estimates (bootstrap standard errors) on real data.

Each day of flights3m `minute` (departure minute of day, ~16,900 flights a day) is one window:
its values (plus a uniform offset within the minute) are perturbed with Square Wave and
reconstructed by the metric's estimator (EMS by default) on B buckets of [0, 1440], with a
seeded parametric bootstrap of R replicates. For the mean and each record quantile, the
interval estimate ± 1.96 · standard error is checked against the day's true value; the script
prints the fraction of days covered, the mean standardised error (bias / se) and the RMS of
(estimate − truth) / se (1 when the errors are honest).

    python benchmarks/numeric_coverage.py --days 40 --epsilon 1 --buckets 144 --replicates 20
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.ldp.engine.finalize import finalize_window, histogram_bootstrap
from ldp_telemetry.ldp.estimation.histograms import QUANTILE_LEVELS, summary

DATA = Path(os.environ.get("LDP_DATASETS", Path(__file__).resolve().parents[2] / "shared"
                           / "datasets")) / "flights3m_2001H1.npz"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=40)
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--buckets", type=int, default=144)
    parser.add_argument("--replicates", type=int, default=20)
    parser.add_argument("--estimator", default="ems")
    args = parser.parse_args(argv)
    if not DATA.exists():
        sys.exit(f"data set not found: {DATA}")
    data = np.load(DATA)
    registry = parse_registry({"metrics": [{
        "name": "minute", "protocol": "sw", "epsilon": args.epsilon,
        "domain": {"low": 0, "high": 1440, "buckets": args.buckets},
        "estimator": {"method": args.estimator, "bootstrap": args.replicates}}]})
    config = registry["minute"]
    rng = np.random.default_rng(2001)
    keys = ["mean"] + list(QUANTILE_LEVELS)
    z = {key: [] for key in keys}
    started = time.perf_counter()
    for day in range(args.days):
        values = data["minute"][data["day"] == day] + rng.random(np.count_nonzero(
            data["day"] == day))
        statistic = config.protocol.new_statistic()
        config.protocol.accumulate(statistic, config.protocol.perturb(config.to_unit(values), rng))
        result = finalize_window(config, statistic, len(values))
        truth = {"mean": values.mean(),
                 **{key: np.quantile(values, float(key)) for key in QUANTILE_LEVELS}}
        # the histogram's mean and its bootstrap error (a record prints its exact band's
        # centre and standard error since: docs/error-bars.md)
        estimate = {"mean": summary(result.estimate, result.bucket_edges)["mean"],
                    **result.quantiles}
        error = {"mean": histogram_bootstrap(config, result.estimate, result.n).mean_std_error,
                 **result.errors.quantiles}
        for key in keys:
            z[key].append((estimate[key] - truth[key]) / error[key])
    print(f"flights3m minute, {args.days} days (n ≈ 16,900 each), sw ε={args.epsilon:g}, "
          f"{args.estimator}, B={args.buckets}, R={args.replicates} bootstrap replicates, "
          f"{time.perf_counter() - started:.0f} s")
    print(f"{'statistic':>10} {'coverage':>9} {'mean z':>8} {'rms z':>7}")
    for key in keys:
        values = np.asarray(z[key])
        covered = np.mean(np.abs(values) <= 1.96)
        print(f"{key:>10} {covered:>9.2f} {values.mean():>8.2f} "
              f"{np.sqrt(np.mean(values ** 2)):>7.2f}", flush=True)


if __name__ == "__main__":
    main()
