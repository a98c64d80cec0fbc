"""Coverage of the exact-variance 95% bands of CFO-binning and hierarchical histograms: range
probabilities, the mean and the variance.

For each data set and n, W windows of n values are drawn (benchmarks/coverage.py's lognormal
latency, flights3m `distance` and `delay`, and flights3m `minute`, the departure minute of the
day, which no band of this family was ever fitted on), perturbed by the real client at every
ε and protocol (`cfo-grr`, `cfo-olh` and `hh` over B bins, B a power of 4), and each window's
statistic gets the bands records and `ldp query` print (ldp_telemetry.ldp.estimation
.bin_answers, .cfo_moments, .numeric_queries): three fixed ranges per data set (`RANGES`: a
central one and a tail on bin edges, one cutting bins), the mean and the variance. Each band is
checked against what it holds (the range's probability with the mass uniform within each bin,
the bin-centre mean, the variance of the values spread in their bins) and against the values'
own (*values*). No statistic's band has a tuning parameter fitted here; the declarations of
CFO-binning's variance (chosen in-sample on seed 37 by benchmarks/coverage_moments.py) are
re-measured on this script's seed, and each row names the statistics those declarations
declare without a band there (`declared`, measured all the same; not the pooled rule's,
benchmarks/declare_bin_bands.py, which reads this field: the summary and the report add them,
coverage_summary.bin_declared). With W windows a coverage's standard error
is √(0.95 · 0.05 / W) (0.015 at W = 200).

    python benchmarks/coverage_bins.py --windows 500 --jobs 2 \\
        --json benchmarks/results/coverage_bins.json

`--large` measures n = 10⁶ instead, for `cfo-grr` and `hh` only (OLH's server cost, O(n·B)
a window, makes `cfo-olh` hours there; hh's deep OLH depths are its slowest part), writing the
`coverage_bins_large` results:

    python benchmarks/coverage_bins.py --large --windows 200 --jobs 2 \\
        --json benchmarks/results/coverage_bins_large.json

`--benchmark` names the results of another run (`coverage_bins_confirm`: the n = 10³,
ε = 2 cells where the Wald band fell short, 3,000 windows a cell on a seed no other results
file uses):

    python benchmarks/coverage_bins.py --windows 3000 --epsilons 2 --sizes 1000 \\
        --protocols cfo-grr,hh --seed 59 --benchmark coverage_bins_confirm \\
        --json benchmarks/results/coverage_bins_confirm.json

Printed per cell: the coverage of each range, the mean and the variance, the RMS of the
standardised errors (unbiased answer − truth) / standard error, and the median milliseconds
all five bands cost per window (from one statistic; the client's perturbation not counted).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time

import numpy as np
from bench_json import Run, add_json_argument
from coverage import DELAY, DISTANCE, DOMAINS, LOGNORMAL, _column, available, draw
from coverage_moments import checked_windows, measured_rows, numbers

from ldp_telemetry.ldp.estimation.bin_answers import (cfo_statistic_linear, hh_statistic_linear,
                                                      range_weights)
from ldp_telemetry.ldp.estimation.cfo_moments import (bin_moments, bin_statistic_bands,
                                                      fixed_declared_statistics)
from ldp_telemetry.ldp.estimation.uncertainty import Z95
from ldp_telemetry.ldp.protocols import make_numeric_protocol
from ldp_telemetry.ldp.protocols.cfo_binning import CfoBinning
from ldp_telemetry.ldp.protocols.numeric import unit_buckets

#: The windows of this script: no band of this family was fitted on it (coverage_moments.py
#: uses 37, coverage.py 31, the bootstrap's calibration 131; on 41 the plug-in Wald range band
#: was found too narrow, which the score form replaced).
SEED = 47
MINUTE = "flights3m minute"
SETS = (LOGNORMAL, DISTANCE, DELAY, MINUTE)
DOMAIN = {**DOMAINS, MINUTE: (0.0, 1440.0)}
#: Per data set, (name, lo, hi) in its units for B = 64 bins: a central range and a tail on
#: bin edges, and one that cuts bins.
RANGES = {
    LOGNORMAL: (("central", 2.0, 4.0), ("tail", 6.0, 32.0), ("cut", 1.3, 2.7)),
    DISTANCE: (("central", 312.5, 1015.625), ("tail", 2031.25, 5000.0), ("cut", 500.0, 750.0)),
    DELAY: (("central", -13.125, 10.3125), ("tail", 33.75, 240.0), ("cut", -2.0, 2.0)),
    MINUTE: (("central", 562.5, 1080.0), ("tail", 1260.0, 1440.0), ("cut", 700.0, 760.0)),
}
STATISTICS = ("central", "tail", "cut", "mean", "variance")
GOAL = (0.93, 0.97)


def draw_values(name: str, rng: np.random.Generator, n: int) -> np.ndarray:
    """n values of data set `name` (benchmarks/coverage.py's `draw`; `minute` drawn the same
    way: n of the 3 million flights, jittered by up to one minute)."""
    if name != MINUTE:
        return draw(name, rng, n)
    column = _column(name)
    values = column[rng.choice(len(column), n, replace=n > len(column))] + rng.random(n)
    return np.clip(values, *DOMAIN[name])


def truths(name: str, values: np.ndarray, bins: int) -> tuple[list[float], list[float]]:
    """(what the bands hold, the values' own) for STATISTICS."""
    low, high = DOMAIN[name]
    edges = np.linspace(low, high, bins + 1)
    unit = (values - low) / (high - low)
    f = np.bincount(unit_buckets(unit, bins), minlength=bins) / values.size
    width = (high - low) / bins
    centres = low + (np.arange(bins) + 0.5) * width
    mean = float(centres @ f)
    held = [float(range_weights(edges, lo, hi) @ f) for _, lo, hi in RANGES[name]]
    held += [mean, float((centres - mean) ** 2 @ f) + width * width / 12]
    own = [float(np.mean((values >= lo) & (values <= hi))) for _, lo, hi in RANGES[name]]
    own += [float(values.mean()), float(values.var())]
    return held, own


def check(name: str, protocol, statistic: np.ndarray, n: int, bins: int, truth: tuple
          ) -> tuple[list[bool], list[float], float, list[bool]]:
    """(covered, z, seconds, values covered) of STATISTICS in one window."""
    low, high = DOMAIN[name]
    started = time.perf_counter()
    model = (cfo_statistic_linear(protocol, statistic, n) if isinstance(protocol, CfoBinning)
             else hh_statistic_linear(protocol, statistic))
    assert model is not None, "a window with reports at every depth"
    edges = np.linspace(low, high, bins + 1)
    found, wald = [], []
    for _, lo, hi in RANGES[name]:
        weights = range_weights(edges, lo, hi)
        value, error = model.value(weights), model.variance(weights) ** 0.5
        found.append((value, error, *model.score_band(weights)))
        wald.append((max(value - Z95 * error, 0.0), min(value + Z95 * error, 1.0)))
    bands = bin_statistic_bands(model, n, low, high, {})
    seconds = time.perf_counter() - started
    moments = bin_moments(model)
    assert moments is not None, "a window with reports"
    span = high - low
    for key, value, error in (("mean", low + span * moments[0], span * moments[1]),
                              ("variance", span * span * moments[2], span * span * moments[3])):
        found.append((value, error, bands[key].lower, bands[key].upper))
    held, own = truth
    covered = [lo <= t <= hi for (_, _, lo, hi), t in zip(found, held, strict=True)]
    values = [lo <= t <= hi for (_, _, lo, hi), t in zip(found, own, strict=True)]
    z = [(v - t) / e if e > 0 else 0.0 for (v, e, _, _), t in zip(found, held, strict=True)]
    # the Wald band at the plug-in (measured, not used): which side its misses fall on (the
    # ranges only: `held` goes on with the mean's and the variance's truths)
    sides = [("above" if t > hi else "below" if t < lo else "in")
             for (lo, hi), t in zip(wald, held[:len(wald)], strict=True)]
    return covered, z, seconds, values, sides


def simulate(name: str, n: int, epsilons: tuple[float, ...], protocols: tuple[str, ...],
             windows: int, bins: int, seed: int) -> list[dict]:
    """The rows of one (data set, n): one per (ε, protocol)."""
    low, high = DOMAIN[name]
    made = {(e, p): make_numeric_protocol(p, e, bins) for e in epsilons for p in protocols}
    rng = np.random.default_rng([seed, n, SETS.index(name), bins])

    def window() -> tuple[np.ndarray, tuple]:
        values = draw_values(name, rng, n)
        return (values - low) / (high - low), truths(name, values, bins)
    results = checked_windows(made, windows, rng, window,
                              lambda protocol, statistic, truth: check(
                                  name, protocol, statistic, n, bins, truth), columns=5)
    rows = []
    for (epsilon, protocol), (covered, z, seconds, own, sides) in results.items():
        # the declarations made before the pooled rule, not the rule's own (BIN_MISSES):
        # benchmarks/declare_bin_bands.py reads this field and must not read its output back
        declared = fixed_declared_statistics(protocol, epsilon, n)
        z_ = np.array(z)
        rows.append({
            "dataset": name, "n": n, "windows": windows, "seed": seed, "epsilon": epsilon,
            "protocol": protocol, "buckets": bins, "declared": sorted(declared),
            "ranges": {key: [lo, hi] for key, lo, hi in RANGES[name]},
            "coverage": dict(zip(STATISTICS, map(float, np.mean(covered, axis=0)), strict=True)),
            "z_mean": dict(zip(STATISTICS, map(float, z_.mean(axis=0)), strict=True)),
            "z_rms": dict(zip(STATISTICS, map(float, np.sqrt((z_ ** 2).mean(axis=0))),
                              strict=True)),
            "values": {"coverage": dict(zip(STATISTICS, map(float, np.mean(own, axis=0)),
                                            strict=True))},
            "wald": {key: {side: float(np.mean([window[j] == side for window in sides]))
                           for side in ("in", "above", "below")}
                     for j, (key, _, _) in enumerate(RANGES[name])},
            "median_band_ms": 1000.0 * statistics.median(seconds)})
    return rows


def simulate_cell(args: tuple) -> list[dict]:
    return simulate(*args)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--windows", type=int, default=200)
    parser.add_argument("--epsilons", default="0.5,1,2,4")
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--protocols", default="cfo-grr,cfo-olh,hh")
    parser.add_argument("--buckets", type=int, default=64,
                        help="bins (a power of 4 for hh; RANGES are given for 64)")
    parser.add_argument("--large", action="store_true",
                        help="n = 10⁶, cfo-grr and hh (module docstring)")
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--jobs", type=int, default=1, help="processes measuring cells")
    parser.add_argument("--benchmark", default=None,
                        help="the results' benchmark name (default: coverage_bins, "
                             "coverage_bins_large with --large)")
    add_json_argument(parser)
    args = parser.parse_args(argv)
    sets = available((LOGNORMAL, DISTANCE, DELAY)) + (
        [MINUTE] if DISTANCE in available((DISTANCE,)) else [])
    if args.large:
        args.sizes, args.protocols = "1000000", "cfo-grr,hh"
    epsilons = tuple(numbers(args.epsilons))
    protocols = tuple(args.protocols.split(","))
    sizes = sorted(numbers(args.sizes, int), reverse=True)  # the longest cells first
    cells = [(name, n, epsilons, protocols, args.windows, args.buckets, args.seed)
             for n in sizes for name in sets]
    print(f"{'data set':<20} {'protocol':<8} {'ε':>4} {'n':>7}  "
          + " ".join(f"{s[:7]:>7}" for s in STATISTICS) + "   z rms (mean, var)  ms  values",
          flush=True)
    rows = []
    name = args.benchmark or ("coverage_bins_large" if args.large else "coverage_bins")
    with Run(name, args.json, vars(args)) as run:
        for row in measured_rows(simulate_cell, cells, args.jobs):
            rows.append(row)
            c, zr, v = row["coverage"], row["z_rms"], row["values"]["coverage"]
            print(f"{row['dataset']:<20} {row['protocol']:<8} {row['epsilon']:>4g} "
                  f"{row['n']:>7}  " + " ".join(f"{c[s]:7.3f}" for s in STATISTICS)
                  + f"   {zr['mean']:5.2f} {zr['variance']:5.2f}  "
                  f"{row['median_band_ms']:.2f}  cut {v['cut']:.3f} mean {v['mean']:.3f} "
                  f"var {v['variance']:.3f}"
                  + "  wald " + " ".join(f"{row['wald'][key]['in']:.3f}"
                                         for key, _, _ in RANGES[row["dataset"]])
                  + (f"  declared {','.join(row['declared'])}" if row["declared"] else ""),
                  flush=True)
        run.save({"cells": rows, "goal": list(GOAL), "seed": args.seed,
                  "statistics": list(STATISTICS)})


if __name__ == "__main__":
    sys.exit(main())
