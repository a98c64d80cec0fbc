"""Coverage of the exact-variance 95% bands of the mean and the variance of Square Wave metrics.

For each data set, ε and n, W windows of n values are drawn (the data sets of
benchmarks/coverage.py: a lognormal latency, flights3m `distance` and `delay`, each value
jittered and clipped to its domain), perturbed once with continuous Square Wave (the client's
mechanism: its reports do not depend on the bucket counts), and counted into report histograms
of each d̃ of --output-buckets; each histogram gets the record's mean and variance bands
(`statistic_bands` of ldp_telemetry.ldp.estimation.moments: unbiased moment estimates, the
window's own values' standard errors, the bucketing bound in the half-width), checked against
the window's true mean and (population) variance. These bands need no EM, so W can be large:
with W windows a coverage's standard error is √(0.95 · 0.05 / W) (0.007 at W = 1,000).

`--discrete B` measures the discrete protocol (`sw-discrete` over B buckets) too, at
`--discrete-sizes`, against the values' own mean and variance and against those of the values
as the client bucketed them (bucket centres; the variance plus w²/12), which is what its band
holds.

`--cfo B` measures CFO-binning instead (its exact-variance bands,
ldp_telemetry.ldp.estimation.cfo_moments: `--cfo-protocols` over B bins, the window's values
perturbed once per ε and protocol) against what its bands hold, the bin-centre mean and the
variance of the values spread uniformly in their bins (the centres' variance plus w²/12), and
against the values' own mean and variance (*values*), writing the `coverage_cfo_moments`
results; each row names the statistics records declare without a band there (`declared`, its
coverage measured all the same):

    python benchmarks/coverage_moments.py --cfo 64 --windows 500 --jobs 2 \\
        --json benchmarks/results/coverage_cfo_moments.json

Printed per cell: the coverage of the mean and of the variance, the mean and RMS of the
standardised errors (estimate − truth) / standard error, and the median milliseconds the two
bands cost per window (both from one report histogram).

    python benchmarks/coverage_moments.py --windows 1000 --sizes 1000,10000,100000 \\
        --discrete 128 --json benchmarks/results/coverage_moments.json
    python benchmarks/coverage_moments.py --windows 500 --sizes 1000000 \\
        --benchmark coverage_moments_large --json benchmarks/results/coverage_moments_large.json

(n = 10⁶ apart, at W = 500: each of its windows perturbs a million values at every ε.)

`--benchmark` names the results of another run (`coverage_moments_confirm`: the cells where
the bucketing bound matters, 128 output buckets at ε 2 and 4, n 10⁵ and 10⁶, on windows of
another seed than the table's):

    python benchmarks/coverage_moments.py --windows 500 --epsilons 2,4 \\
        --sizes 100000,1000000 --output-buckets 128 --seed 41 \\
        --benchmark coverage_moments_confirm \\
        --json benchmarks/results/coverage_moments_confirm.json

Each window's values are drawn once and perturbed at every ε (the windows of one data set and
n are shared by the ε; the reports are not).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor

import numpy as np
from bench_json import Run, add_json_argument
from coverage import DELAY, DISTANCE, DOMAINS, LOGNORMAL, available, draw

from ldp_telemetry.ldp.estimation.cfo_moments import (cfo_moments, cfo_statistic_bands,
                                                      declared_statistics)
from ldp_telemetry.ldp.estimation.moments import (moment_bands, protocol_model,
                                                  widened_past_share)
from ldp_telemetry.ldp.protocols import make_numeric_protocol
from ldp_telemetry.ldp.protocols.sw import DiscreteSquareWave, SquareWave

#: The windows of this script (not the bootstrap's calibration seed 131 nor coverage.py's 31).
SEED = 37
SETS = (LOGNORMAL, DISTANCE, DELAY)
GOAL = (0.93, 0.97)


def _check(model, counts, low: float, high: float, true_mean: float, true_variance: float
           ) -> tuple[list[bool], list[float], float, list[bool]]:
    """([mean covered, variance covered], [z of the mean, z of the variance], seconds,
    [mean's band conservative, variance's]: widened past CONSERVATIVE_SHARE by the bucketing
    bound (`widened_past_share`), which a record gives as the conservative band, not a 95%
    band)."""
    started = time.perf_counter()
    found = moment_bands(model, counts)
    seconds = time.perf_counter() - started
    assert found is not None, "a window of n > 0 reports"
    span = high - low
    mean, variance = low + span * found.mean, span * span * found.variance
    mean_band = [low + span * v for v in found.mean_band]
    variance_band = [span * span * v for v in found.variance_band]
    covered = [mean_band[0] <= true_mean <= mean_band[1],
               variance_band[0] <= true_variance <= variance_band[1]]
    z = [(mean - true_mean) / (span * found.mean_std_error),
         (variance - true_variance) / (span * span * found.variance_std_error)]
    conservative = [widened_past_share(found.mean_std_error, found.bounds[0]),
                    widened_past_share(found.variance_std_error, found.bounds[1])]
    return covered, z, seconds, conservative


def _split_coverage(covered: np.ndarray, conservative: np.ndarray, among: bool) -> dict:
    """statistic -> coverage over the windows whose band is (`among` True) or is not
    conservative; None where there is no such window."""
    out = {}
    for column, key in enumerate(("mean", "variance")):
        chosen = conservative[:, column] == among
        out[key] = float(covered[chosen, column].mean()) if chosen.any() else None
    return out


def _summary(covered: list, z: list, seconds: list, conservative: list | None = None) -> dict:
    """A cell's coverage (every window), z statistics and median band time; with
    `conservative` (per window, per statistic), how many windows' band is conservative and the
    coverage of the 95% bands and of the conservative bands apart."""
    covered_, z_ = np.array(covered, dtype=float), np.array(z)
    split = {}
    if conservative is not None:
        flags = np.array(conservative, dtype=bool).reshape(covered_.shape)
        split = {"conservative_windows": dict(zip(("mean", "variance"),
                                                  map(int, flags.sum(axis=0)), strict=True)),
                 "coverage_95": _split_coverage(covered_, flags, False),
                 "coverage_conservative": _split_coverage(covered_, flags, True)}
    return {**split,
            "coverage": dict(zip(("mean", "variance"), map(float, covered_.mean(axis=0)),
                                 strict=True)),
            "z_mean": dict(zip(("mean", "variance"), map(float, z_.mean(axis=0)), strict=True)),
            "z_rms": dict(zip(("mean", "variance"),
                              map(float, np.sqrt((z_ ** 2).mean(axis=0))), strict=True)),
            "median_band_ms": 1000.0 * statistics.median(seconds)}


def simulate(name: str, n: int, epsilons: tuple[float, ...], output_buckets: tuple[int, ...],
             windows: int, discrete: int, seed: int) -> list[dict]:
    """The rows of one (data set, n): W windows of values, each perturbed at every ε (the
    values and their truth are shared by the ε, the reports are not); per ε one row per d̃ of
    continuous Square Wave and, with `discrete` (B > 0), one of sw-discrete over B buckets."""
    low, high = DOMAINS[name]
    protocols = {(e, d_out): SquareWave(epsilon=e, d=128, output_buckets=d_out)
                 for e in epsilons for d_out in output_buckets}
    discretes = {e: DiscreteSquareWave(epsilon=e, d=discrete) for e in epsilons} if discrete else {}
    rng = np.random.default_rng([seed, n, SETS.index(name)])
    results = {key: ([], [], [], []) for key in protocols}
    exact = {e: ([], [], [], []) for e in discretes}
    bucketed = {e: ([], [], [], []) for e in discretes}

    def add(into, found) -> None:
        for column, item in zip(into, found, strict=True):
            column.append(item)
    for _ in range(windows):
        values = draw(name, rng, n)
        truth = float(values.mean()), float(values.var())
        unit = (values - low) / (high - low)
        if discrete:
            width = (high - low) / discrete
            centres = low + (np.clip(np.floor(unit * discrete), 0, discrete - 1) + 0.5) * width
            client = float(centres.mean()), float(centres.var()) + width * width / 12
        for epsilon in epsilons:
            reports = None
            for d_out in output_buckets:
                protocol = protocols[(epsilon, d_out)]
                if reports is None:  # one perturbation per window and ε, counted at each d̃
                    reports = protocol.perturb(unit, rng)
                counts = protocol.new_statistic()
                protocol.accumulate(counts, reports)
                add(results[(epsilon, d_out)],
                    _check(protocol_model(protocol), counts, low, high, *truth))
            if discrete:
                protocol = discretes[epsilon]
                counts = protocol.new_statistic()
                protocol.accumulate(counts, protocol.perturb(unit, rng))
                model = protocol_model(protocol)
                add(exact[epsilon], _check(model, counts, low, high, *truth))
                add(bucketed[epsilon], _check(model, counts, low, high, *client))
    base = {"dataset": name, "n": n, "windows": windows, "seed": seed}
    rows = []
    for epsilon in epsilons:
        rows += [{**base, "epsilon": epsilon, "protocol": "sw", "output_buckets": d_out,
                  **_summary(*results[(epsilon, d_out)])} for d_out in output_buckets]
        if discrete:
            rows.append({**base, "epsilon": epsilon, "protocol": "sw-discrete",
                         "buckets": discrete,
                         "output_buckets": discretes[epsilon].output_buckets,
                         **_summary(*exact[epsilon]), "bucketed": _summary(*bucketed[epsilon])})
    return rows


def _check_cfo(protocol, statistic, n: int, low: float, high: float, truths: tuple
               ) -> tuple[list[bool], list[float], float, list[bool]]:
    """`_check` of a CFO-binning window against (what its bands hold, the values' own): the
    mean's and the variance's coverage and z of the first, seconds, and coverage of the second."""
    started = time.perf_counter()
    bands = cfo_statistic_bands(protocol, statistic, n, low, high, declare=False)
    seconds = time.perf_counter() - started
    found = cfo_moments(protocol, statistic, n)
    assert found is not None, "a window of n > 0 reports"
    span = high - low
    estimates = (low + span * found[0], span * span * found[2])
    errors = (span * found[1], span * span * found[3])
    held, own = truths
    covered, z, values = [], [], []
    for key, true, mine, estimate, error in zip(("mean", "variance"), held, own, estimates,
                                                errors, strict=True):
        band = bands[key]
        assert band.lower is not None and band.upper is not None, f"a {key} band at n > 0"
        covered.append(band.lower <= true <= band.upper)
        values.append(band.lower <= mine <= band.upper)
        z.append((estimate - true) / error)
    return covered, z, seconds, values


def checked_windows(made: dict, windows: int, rng: np.random.Generator,
                    window: Callable[[], tuple[np.ndarray, tuple]],
                    check: Callable[..., tuple], columns: int = 4) -> dict:
    """key -> the `columns` lists of `check`'s results over `windows` windows: each window's
    values (`window()` -> (values on the unit scale, their truths)) are perturbed once by every
    protocol of `made` (key -> protocol), in its order, and checked (`check(protocol,
    statistic, truths)` -> one item per column)."""
    results = {key: tuple([] for _ in range(columns)) for key in made}
    for _ in range(windows):
        unit, truths = window()
        for key, protocol in made.items():
            statistic = protocol.new_statistic()
            protocol.accumulate(statistic, protocol.perturb(unit, rng))
            for column, item in zip(results[key], check(protocol, statistic, truths),
                                    strict=True):
                column.append(item)
    return results


def simulate_cfo(name: str, n: int, epsilons: tuple[float, ...], protocols: tuple[str, ...],
                 windows: int, bins: int, seed: int) -> list[dict]:
    """The CFO-binning rows of one (data set, n): W windows of values, perturbed at every ε
    by every protocol over `bins` bins; one row per (ε, protocol)."""
    low, high = DOMAINS[name]
    made = {(e, p): make_numeric_protocol(p, e, bins) for e in epsilons for p in protocols}
    rng = np.random.default_rng([seed, n, SETS.index(name), bins])

    def window() -> tuple[np.ndarray, tuple]:
        values = draw(name, rng, n)
        unit = (values - low) / (high - low)
        width = (high - low) / bins
        centres = low + (np.clip(np.floor(unit * bins), 0, bins - 1) + 0.5) * width
        return unit, ((float(centres.mean()), float(centres.var()) + width * width / 12),
                      (float(values.mean()), float(values.var())))
    results = checked_windows(made, windows, rng, window,
                              lambda protocol, statistic, truths: _check_cfo(
                                  protocol, statistic, n, low, high, truths))
    rows = []
    for (epsilon, protocol), (covered, z, seconds, own) in results.items():
        rows.append({"dataset": name, "n": n, "windows": windows, "seed": seed,
                     "epsilon": epsilon, "protocol": protocol, "output_buckets": bins,
                     "declared": sorted(declared_statistics(epsilon, n)),
                     **_summary(covered, z, seconds),
                     "values": {"coverage": dict(zip(("mean", "variance"),
                                                     map(float, np.mean(own, axis=0)),
                                                     strict=True))}})
    return rows


def simulate_cell(args: tuple) -> list[dict]:
    if args[0] == "cfo":
        return simulate_cfo(*args[1:])
    return simulate(*args)


def measured_rows(simulate, cells: list, jobs: int):
    """Every row `simulate` gives for `cells`, cell by cell in their order (a cell's rows by ε
    and protocol), measured by `jobs` processes (in this one for 1), as each cell finishes."""
    if jobs <= 1:
        for found in map(simulate, cells):
            yield from sorted(found, key=lambda row: (row["epsilon"], row["protocol"]))
        return
    with ProcessPoolExecutor(jobs) as pool:
        for found in pool.map(simulate, cells):
            yield from sorted(found, key=lambda row: (row["epsilon"], row["protocol"]))


def numbers(text: str, kind=float) -> list:
    return [kind(value) for value in text.split(",") if value]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--windows", type=int, default=1000)
    parser.add_argument("--epsilons", default="0.5,1,2,4")
    parser.add_argument("--sizes", default="1000,10000,100000,1000000")
    parser.add_argument("--output-buckets", default="128,1024,4096",
                        help="d̃ of the continuous protocol's report histogram")
    parser.add_argument("--discrete", type=int, default=0, metavar="B",
                        help="also measure sw-discrete over B buckets (0: not)")
    parser.add_argument("--discrete-sizes", default="1000,10000,100000",
                        help="the sizes at which sw-discrete is measured")
    parser.add_argument("--cfo", type=int, default=0, metavar="B",
                        help="measure CFO-binning over B bins instead of Square Wave (0: not)")
    parser.add_argument("--cfo-protocols", default="cfo-grr,cfo-olh")
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--jobs", type=int, default=1, help="processes measuring cells")
    parser.add_argument("--benchmark", default=None,
                        help="the results' name (default: coverage_moments, or "
                             "coverage_cfo_moments with --cfo)")
    add_json_argument(parser)
    args = parser.parse_args(argv)
    sets = available(SETS)
    d_outs = tuple(numbers(args.output_buckets, int))
    epsilons = tuple(numbers(args.epsilons))
    discrete_sizes = numbers(args.discrete_sizes, int)
    # the largest windows first (the longest cells), each (data set, n) one cell
    sizes = sorted(numbers(args.sizes, int), reverse=True)
    cells = [(name, n, epsilons, d_outs, args.windows,
              args.discrete if n in discrete_sizes else 0, args.seed)
             for n in sizes for name in sets]
    if args.cfo:
        protocols = tuple(args.cfo_protocols.split(","))
        cells = [("cfo", name, n, epsilons, protocols, args.windows, args.cfo, args.seed)
                 for n in sizes for name in sets]
    print(f"{'data set':<20} {'protocol':<12} {'ε':>4} {'n':>8} {'d̃':>5}  {'mean':>5} "
          f"{'var':>5}  {'z mean':>14} {'z rms':>11}  band ms", flush=True)
    rows = []
    name = args.benchmark or ("coverage_cfo_moments" if args.cfo else "coverage_moments")
    with Run(name, args.json, vars(args)) as run:
        for row in measured_rows(simulate_cell, cells, args.jobs):
            rows.append(row)
            c, zm, zr = row["coverage"], row["z_mean"], row["z_rms"]
            print(f"{row['dataset']:<20} {row['protocol']:<12} {row['epsilon']:>4g} "
                  f"{row['n']:>8} {row['output_buckets']:>5}  {c['mean']:5.3f} "
                  f"{c['variance']:5.3f}  {zm['mean']:6.2f} {zm['variance']:6.2f}  "
                  f"{zr['mean']:5.2f} {zr['variance']:5.2f}  {row['median_band_ms']:.2f}"
                  + (f"  bucketed {row['bucketed']['coverage']['mean']:.3f} "
                     f"{row['bucketed']['coverage']['variance']:.3f}"
                     if "bucketed" in row else "")
                  + (f"  conservative {row['conservative_windows']['mean']} "
                     f"{row['conservative_windows']['variance']}"
                     if row.get("conservative_windows", {}).get("mean")
                     or row.get("conservative_windows", {}).get("variance") else "")
                  + (f"  values {row['values']['coverage']['mean']:.3f} "
                     f"{row['values']['coverage']['variance']:.3f}"
                     if "values" in row else ""), flush=True)
        run.save({"cells": rows, "goal": list(GOAL), "seed": args.seed})


if __name__ == "__main__":
    sys.exit(main())
