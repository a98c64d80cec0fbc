"""Declare, or give as conservative, the CFO-binning and hierarchical-histogram mean and variance
bands that missed the goal pooled over two runs of benchmarks/coverage_bins.py.

The exact-variance bands of a CFO-binning or hierarchical-histogram mean and variance
(ldp_telemetry.ldp.estimation.cfo_moments) have no tuning parameter. On seed 47 their coverage
lay above the goal, [0.93, 0.97], more often than chance would put it (18 of 304 banded
pairs above 0.97, 6.6 by chance; 11 below 0.93, 9.7 by chance), most clearly for CFO-GRR's
variance on flights3m `minute` at ε = 1, n = 10⁴ (0.996), where the delta-method standard
error is larger than the error it measures: the oracle's noise dominates the spread. So this
script reads two runs of coverage_bins.py (`RUNS`: seed 47 and seed 109, each with its n = 10⁶
cells) and pools, per (protocol, ε, n) setting, statistic and data set, the two runs' windows
(benchmarks/declare_bands.py's `pooled_by_shape`; a statistic a cell declares without a band,
`declared`, is not read). In a setting:

* where one data set's pooled coverage lies below LEVEL_FLOOR (0.93, the goal's lower edge)
  the statistic is **declared**: records print no band for it (an exact band's coverage pooled
  over 1,000 windows lies there with probability 0.2%, binomial; over 400, the n = 10⁶ cells,
  with 3%);
* where one data set's lies above GOAL_CEILING (0.97) and none below KEEP_FLOOR (0.94) its band
  is **conservative**: records give it as the conservative band, their 95% band none (chance
  0.07% over 1,000 windows, 2% over 400).

Below 0.94 alone declares nothing, unlike Square Wave's rule: the count below the goal was
chance's, and with four data sets a setting such a floor would declare one exact band in four.
Seed 113 (coverage_bins_held_out, and its n = 10⁶ cells) measures the result on windows no
rule read. `--write` regenerates ldp/estimation/bin_band_declarations.py.

    python benchmarks/declare_bin_bands.py --write
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from declare_bands import (GOAL_CEILING, KEEP_FLOOR, LEVEL_FLOOR, RESULTS_DIR, _table,
                           pooled_by_shape)

from ldp_telemetry.ldp.estimation.moments import MOMENT_STATISTICS
from ldp_telemetry.ldp.estimation.uncertainty import coverage_cell

#: the runs the rule reads: coverage_bins.py on seeds 47 and 109, with their n = 10⁶ cells
RUNS = tuple(RESULTS_DIR / f"{name}.json" for name in (
    "coverage_bins", "coverage_bins_large", "coverage_bins_second",
    "coverage_bins_large_second"))
MODULE = Path(__file__).resolve().parents[1] / "ldp" / "estimation" / "bin_band_declarations.py"


def pooled_rule(cells: list[dict]) -> tuple[dict, dict]:
    """(misses, over): (protocol, ε, n) -> statistic -> (data set, coverage, windows, runs) of
    the mean's and the variance's coverage pooled over every run of one data set
    (`pooled_by_shape`; (ε, n) the cell's grid cell, `coverage_cell`, as records look it up):
    `misses` where the lowest data set's lies below LEVEL_FLOOR (the goal's lower edge), `over`
    where none lies below KEEP_FLOOR and the highest's above GOAL_CEILING. A cell's `declared`
    statistics (the declarations before this rule, cfo_moments.fixed_declared_statistics) are
    not read."""
    misses: dict[tuple[str, float, int], dict[str, tuple[str, float, int, int]]] = {}
    over: dict[tuple[str, float, int], dict[str, tuple[str, float, int, int]]] = {}
    pooled = pooled_by_shape(
        cells, lambda cell: (cell["protocol"], *coverage_cell(float(cell["epsilon"]),
                                                              int(cell["n"]))),
        MOMENT_STATISTICS, "declared")
    for key, statistics in pooled.items():
        for statistic, shapes in statistics.items():
            low, high = shapes[0], shapes[-1]
            if low[0] < LEVEL_FLOOR:
                misses.setdefault(key, {})[statistic] = (low[1], low[0], low[2], low[3])
            elif low[0] >= KEEP_FLOOR and high[0] > GOAL_CEILING:
                over.setdefault(key, {})[statistic] = (high[1], high[0], high[2], high[3])
    return misses, over


def run_cells(paths) -> tuple[list[dict], list[tuple[str, int]]]:
    """The cells of the results files `paths` and (file, seed) of each."""
    cells, sources = [], []
    root = Path(__file__).resolve().parents[1]
    for path in paths:
        run = json.loads(Path(path).read_text())
        cells += run["results"]["cells"]
        sources.append((str(Path(path).resolve().relative_to(root)),
                        int(run["parameters"]["seed"])))
    return cells, sources


def _entry(value: tuple[str, float, int, int]) -> str:
    """One (data set, coverage, windows, runs) entry, as the module writes it."""
    return f'("{value[0]}", {value[1]!r}, {value[2]}, {value[3]})'


def module_text(misses: dict, over: dict, sources: list[tuple[str, int]]) -> str:
    lines = [
        '"""CFO-binning and hierarchical-histogram mean and variance bands declared without a band',
        "or given as conservative bands: generated by benchmarks/declare_bin_bands.py (do not",
        "edit by hand; rerun it with --write).",
        "",
        "The bands whose coverage, pooled over the runs of one data set, lies below "
        f"{LEVEL_FLOOR} (declared)",
        f"or above {GOAL_CEILING} with no data set's below {KEEP_FLOOR} (conservative) in",
        *(f"{source} (seed {seed})," for source, seed in sources),
        "windows no band of this family was fitted on.",
        '"""',
        "",
        "#: (protocol, ε, n) -> statistic -> (data set, coverage, windows, runs) pooled over the",
        f"#: runs of that data set, below {LEVEL_FLOOR}: declared without a band in that setting"]
    table = {"key_type": "tuple[str, float, int]", "order": MOMENT_STATISTICS.index}
    lines += _table("BIN_MISSES", "tuple[str, float, int, int]", misses, _entry, **table)
    lines += [
        "",
        "#: (protocol, ε, n) -> statistic -> (data set, coverage, windows, runs) pooled over the",
        f"#: runs of that data set, above {GOAL_CEILING} (and no data set below {KEEP_FLOOR}): its "
        "band conservative",
        "#: in that setting (given as the conservative band, the 95% band none)"]
    lines += _table("BIN_OVER_COVERAGE", "tuple[str, float, int, int]", over, _entry, **table)
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, nargs="+", default=list(RUNS),
                        help="benchmarks/coverage_bins.py results files the rule reads")
    parser.add_argument("--write", action="store_true",
                        help="regenerate ldp/estimation/bin_band_declarations.py")
    args = parser.parse_args(argv)
    cells, sources = run_cells(args.runs)
    misses, over = pooled_rule(cells)
    for name, table in ((f"below {LEVEL_FLOOR}", misses), (f"above {GOAL_CEILING}", over)):
        for (protocol, epsilon, n), row in table.items():
            for statistic, (dataset, coverage, windows, runs) in row.items():
                print(f"{protocol:<8} ε = {epsilon:g}, n = {n:>9,}: {statistic:<8} "
                      f"{coverage:.4f} of {windows} windows of {dataset} pooled over {runs} "
                      f"runs, {name}")
    settings = {(c["protocol"], float(c["epsilon"]), int(c["n"])) for c in cells}
    print(f"of {len(settings) * len(MOMENT_STATISTICS)} (protocol, ε, n, statistic) settings "
          f"{sum(map(len, misses.values()))} declared, {sum(map(len, over.values()))} "
          "conservative")
    if args.write:
        MODULE.write_text(module_text(misses, over, sources))
        print(f"wrote {MODULE.name}")


if __name__ == "__main__":
    main()
