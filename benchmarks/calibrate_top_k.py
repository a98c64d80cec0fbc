"""Calibrate the top-k answers' 95% bands by a scale per method and cell: fitted on calibration
windows, measured on held-out ones (the study behind docs/error-bars.md; nothing is written
into the package).

A band of a selected value stretched or shrunk around its centre by a scale s (`scaled_bands`
of ldp_telemetry.ldp.estimation.frequency_bands). For a family of bands, each (channel, method,
ε, n) cell and each calibration data set, s is the smallest scale holding the truth of at least
95% of the calibration checks (every rank 1..10 of every window; `needed_scales`), rounded up
to 0.01; the cell keeps the largest over the data sets (a band holding 95% on every
calibration shape), None beyond MAX_SCALE. Families:

    union      the bootstrap band united with the selected value's score band, around the
               bootstrap's centre (scale 1: the band `ldp query` gives, `top_k_bands`)
    bootstrap  the bias-corrected bootstrap band alone, around its centre
    score      the selected value's score band alone, around its midpoint

The fit is repeated on the first calibration data set, the first two, and so on, and each fit
measured on the held-out windows per (data set, protocol): the calibration windows are
`benchmarks/coverage_frequency.py --dump` at seed 131 (GRR and OUE); the held-out ones its
dumps at seed 31 (other windows, and protocols and data sets the fit never saw: a protocol
other than GRR takes OUE's scales, `top_k_channel`).

    M="base base-pos post-pos base-cut norm norm-mul norm-sub norm-cut norm-hyb mle-apx ibu auto"
    python benchmarks/coverage_frequency.py --datasets airports --protocols grr oue \\
        --windows 100 --seed 131 --methods $M --dump /tmp/top_k_airports.pkl
    (the same with --datasets "common words", then zipf: top_k_words.pkl, top_k_zipf.pkl)
    python benchmarks/coverage_frequency.py --datasets airports --protocols grr oue \\
        --windows 100 --methods $M --dump /tmp/top_k_held_out_airports.pkl
    python benchmarks/coverage_frequency.py --datasets airports --protocols olh --epsilons 1 4 \\
        --sizes 1000 10000 100000 --windows 100 --methods $M --dump /tmp/top_k_held_out_olh.pkl
    python benchmarks/coverage_frequency.py --datasets emoji --protocols grr oue --epsilons 1 4 \\
        --sizes 10000 100000 --windows 100 --methods $M --dump /tmp/top_k_held_out_emoji.pkl
    python benchmarks/calibrate_top_k.py --calibration top_k_airports.pkl top_k_words.pkl \\
        top_k_zipf.pkl --held-out top_k_held_out_airports.pkl top_k_held_out_olh.pkl \\
        top_k_held_out_emoji.pkl --json benchmarks/results/top_k_calibration.json
"""
from __future__ import annotations

import argparse
import math
import pickle
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np
from bench_json import Run, add_json_argument
from coverage_summary import GOAL, coverage_standard_error

from ldp_telemetry.ldp.estimation.frequency_bands import needed_scales, top_k_cell

FAMILIES = ("union", "bootstrap", "score")
TARGET = 0.95
#: Largest scale kept: a band that must be stretched further than this is declared.
MAX_SCALE = 4.0


def top_k_channel(protocol: str) -> str:
    """The calibrated channel a protocol's scales come from: "grr" (single support) for GRR,
    "oue" (independent supports) for every other frequency oracle."""
    return "grr" if protocol == "grr" else "oue"


def family_parts(parts: dict, family: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(centre, lower, upper) of a family's band from a dumped cell (module docstring)."""
    if family == "union":
        return parts["centre"], parts["union_lo"], parts["union_hi"]
    if family == "bootstrap":
        return parts["centre"], parts["centre"] - parts["half"], parts["centre"] + parts["half"]
    middle = (parts["score_lo"] + parts["score_hi"]) / 2.0
    return middle, parts["score_lo"], parts["score_hi"]


def fit_scale(needed: np.ndarray) -> float | None:
    """The smallest scale (rounded up to 0.01) holding TARGET of the checks; None beyond
    MAX_SCALE."""
    ordered = np.sort(needed.ravel())
    scale = float(ordered[math.ceil(TARGET * ordered.size) - 1])  # holds ≥ TARGET of them
    if not math.isfinite(scale) or scale > MAX_SCALE:
        return None
    return math.ceil(scale * 100 - 1e-9) / 100


def fit(calibration: dict) -> dict[str, dict[str, dict[str, dict[tuple, float | None]]]]:
    """family -> channel -> method -> (ε, n) -> scale, from the calibration dump's cells: fitted
    on each data set's checks, and the largest over the data sets kept (a band that holds 95%
    on every calibration shape; None where one of them declares it)."""
    fitted: dict = {}
    for (dataset, protocol, epsilon, n, method), parts in calibration["cells"].items():
        for family in FAMILIES:
            needed = needed_scales(*family_parts(parts, family), parts["truth"])
            key = (family, top_k_channel(protocol), method, top_k_cell(epsilon, n))
            fitted.setdefault(key, {})[dataset] = fit_scale(needed)
    scales: dict = {family: {} for family in FAMILIES}
    for (family, channel, method, cell), by_dataset in fitted.items():
        values = list(by_dataset.values())
        scale = None if None in values else max(values)
        scales[family].setdefault(channel, {}).setdefault(method, {})[cell] = scale
    return scales


def evaluate(held_out: dict, scales: dict) -> list[dict]:
    """Per held-out cell and method: each family's coverage at its fitted scale, and its mean
    width relative to the union at scale 1."""
    rows = []
    for (dataset, protocol, epsilon, n, method), parts in held_out["cells"].items():
        row = {"dataset": dataset, "protocol": protocol, "epsilon": epsilon, "n": n,
               "method": method, "coverage": {}, "width": {}, "scale": {}}
        base = np.mean(parts["union_hi"] - parts["union_lo"])
        for family in FAMILIES:
            cells = scales[family].get(top_k_channel(protocol), {}).get(method, {})
            scale = cells.get(top_k_cell(epsilon, n), 1.0)
            row["scale"][family] = scale
            if scale is None:
                row["coverage"][family] = row["width"][family] = None
                continue
            centre, lower, upper = family_parts(parts, family)
            needed = needed_scales(centre, lower, upper, parts["truth"])
            row["coverage"][family] = float(np.mean(needed <= scale + 1e-12))
            width = np.clip(centre + scale * (upper - centre), 0, 1) - np.clip(
                centre - scale * (centre - lower), 0, 1)
            row["width"][family] = float(np.mean(width) / base) if base > 0 else None
        row["coverage"]["union at 1"] = float(np.mean(
            needed_scales(*family_parts(parts, "union"), parts["truth"]) <= 1 + 1e-12))
        rows.append(row)
    return rows


def summary(rows: list[dict], windows: int) -> list[dict]:
    """Per family: (method, cell) pairs inside the goal, above, below, more than two standard
    errors from 0.95, declared; the median width relative to the union at scale 1."""
    low, high = GOAL
    se = coverage_standard_error(windows, windows)
    out = []
    for family in (*FAMILIES, "union at 1"):
        values = [row["coverage"][family] for row in rows
                  if row["coverage"].get(family) is not None]
        widths = [row["width"][family] for row in rows
                  if row["width"].get(family) is not None]
        out.append({"family": family, "pairs": len(values),
                    "inside": sum(low <= v <= high for v in values),
                    "above": sum(v > high for v in values),
                    "below": sum(v < low for v in values),
                    "off_by_two": sum(abs(v - 0.95) > 2 * se for v in values),
                    "declared": sum(row["coverage"].get(family) is None for row in rows),
                    "median": statistics.median(values) if values else None,
                    "lowest": min(values) if values else None,
                    "median_width": statistics.median(widths) if widths else None})
    return out


def merged(folder: Path, names: list[str]) -> dict:
    """The dumps of coverage_frequency.py --dump named (relative to `folder`) as one: their
    cells, the fewest windows, and their seed (ValueError when they differ)."""
    out: dict = {"cells": {}, "windows": None, "seed": None, "datasets": []}
    for name in names:
        with (folder / name).open("rb") as file:
            dump = pickle.load(file)  # a file coverage_frequency.py wrote (trusted, local)
        if out["seed"] not in (None, dump["seed"]):
            raise ValueError(f"{name} was drawn with seed {dump['seed']}, not {out['seed']}")
        out.update({key: dump[key] for key in ("seed", "top", "replicates")})
        out["cells"].update(dump["cells"])
        out["windows"] = min(out["windows"] or dump["windows"], dump["windows"])
    out["datasets"] = sorted({key[0] for key in out["cells"]})
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calibration", required=True, nargs="+",
                        help="the calibration windows' dumps (relative to --cache-dir), merged")
    parser.add_argument("--held-out", nargs="+", required=True,
                        help="dumps of held-out windows (other seeds; relative to --cache-dir), "
                             "merged")
    parser.add_argument("--cache-dir", default=tempfile.gettempdir(),
                        help="where the dumps of coverage_frequency.py --dump are")
    add_json_argument(parser)
    args = parser.parse_args(argv)
    folder = Path(args.cache_dir)
    held_out = merged(folder, args.held_out)
    fits = []
    with Run("top_k_calibration", args.json, {"calibration": args.calibration,
                                               "held_out": args.held_out}) as run:
        for used in range(1, len(args.calibration) + 1):  # the first data set, then more
            calibration = merged(folder, args.calibration[:used])
            if held_out["seed"] == calibration["seed"]:
                parser.error("--held-out holds the calibration's seed: its windows are not "
                             "held out")
            rows = evaluate(held_out, fit(calibration))
            sets = {"all held-out": rows}
            for dataset in held_out["datasets"]:
                for protocol in sorted({row["protocol"] for row in rows}):
                    mine = [row for row in rows
                            if (row["dataset"], row["protocol"]) == (dataset, protocol)]
                    if mine:
                        sets[f"{dataset}, {protocol}"] = mine
            by_set = {name: summary(mine, held_out["windows"]) for name, mine in sets.items()}
            fits.append({"calibration_datasets": calibration["datasets"], "summary": by_set,
                         # per (cell, method): the coverage of each family at its scale
                         "rows": [[row["dataset"], row["protocol"], row["epsilon"], row["n"],
                                   row["method"], row["coverage"]] for row in rows]})
            for name, families in by_set.items():
                for line in families:
                    print(f"fit on {'+'.join(calibration['datasets'])}; {name}: "
                          f"{line['family']:<11} {line['inside']:>4} of {line['pairs']} "
                          f"inside, {line['above']} above, {line['below']} below, "
                          f"{line['off_by_two']} off by two s.e.; lowest {line['lowest']}, "
                          f"width {line['median_width']}", flush=True)
        run.save({"fits": fits,
                  "calibration": {"seed": calibration["seed"],
                                  "windows": calibration["windows"]},
                  "held_out": {"seed": held_out["seed"], "windows": held_out["windows"],
                               "datasets": held_out["datasets"]}})
    return 0


if __name__ == "__main__":
    sys.exit(main())
