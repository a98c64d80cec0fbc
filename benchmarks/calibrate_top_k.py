"""Fit the scales of the top-k answers' 95% bands on calibration windows; compare band families
on held-out ones.

A top-k answer's band (`top_k_bands` of ldp_telemetry.ldp.estimation.frequency_bands) is a band
of the selected value stretched or shrunk around its centre by a scale s (`scaled_bands`). For
a family of bands and each (channel, method, ε, n) cell, the scale is the smallest s holding
the truth of at least 95% of the calibration checks (the 0.95 quantile of `needed_scales`;
every rank 1..10 of every window), rounded up to 0.01. Families compared:

    union      the bootstrap band united with the selected value's score band, around the
               bootstrap's centre (scale 1: the conservative band kept before)
    bootstrap  the bias-corrected bootstrap band alone, around its centre
    score      the selected value's score band alone, around its midpoint

Calibration windows: `benchmarks/coverage_frequency.py --dump` at seed 131 (GRR and OUE on the
airports data); held-out: the same script's dump at seed 31 (other windows, other protocols
and data sets: the channel of a protocol other than GRR takes OUE's scales, `top_k_channel`).
A cell whose scale exceeds MAX_SCALE, or whose truth a side of zero width faces in more than
5% of the checks, is declared without a band (`None`). `--write` regenerates
ldp/estimation/top_k_calibration.py with the kept family's scales (union).

    python benchmarks/coverage_frequency.py --datasets airports --protocols grr oue \\
        --windows 100 --seed 131 --methods base base-pos post-pos base-cut norm norm-mul \\
        norm-sub norm-cut norm-hyb mle-apx ibu auto --dump /tmp/top_k_calibration.pkl
    python benchmarks/calibrate_top_k.py --calibration top_k_calibration.pkl --write
    python benchmarks/coverage_frequency.py ... --seed 31 --dump /tmp/top_k_held_out.pkl
    python benchmarks/calibrate_top_k.py --calibration top_k_calibration.pkl \\
        --held-out top_k_held_out.pkl --json benchmarks/results/top_k_calibration.json
"""
from __future__ import annotations

import argparse
import math
import pickle
import statistics
import sys
import tempfile
import textwrap
from pathlib import Path

import numpy as np
from bench_json import Run, add_json_argument
from report import FREQUENCY_GOAL, coverage_standard_error

from ldp_telemetry.ldp.estimation.frequency_bands import (needed_scales, top_k_cell,
                                                          top_k_channel)

FAMILIES = ("union", "bootstrap", "score")
KEPT = "union"
TARGET = 0.95
#: Largest scale kept: a band that must be stretched further than this is declared.
MAX_SCALE = 4.0
MODULE = Path(__file__).resolve().parents[1] / "ldp" / "estimation" / "top_k_calibration.py"


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
    """family -> channel -> method -> (ε, n) -> scale, from the calibration dump's cells."""
    scales: dict = {family: {} for family in FAMILIES}
    for (_, protocol, epsilon, n, method), parts in calibration["cells"].items():
        for family in FAMILIES:
            needed = needed_scales(*family_parts(parts, family), parts["truth"])
            cell = top_k_cell(epsilon, n)
            (scales[family].setdefault(top_k_channel(protocol), {})
             .setdefault(method, {})[cell]) = fit_scale(needed)
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
    low, high = FREQUENCY_GOAL
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


def module_text(scales: dict, calibration: dict) -> str:
    lines = [
        '"""The top-k bands\' scales per channel, post-processing method and (ε, n) cell:',
        "generated by benchmarks/calibrate_top_k.py (do not edit by hand; rerun it with --write).",
        "",
        f"Fitted on {calibration['windows']} calibration windows per cell (seed "
        f"{calibration['seed']}) of the airports data",
        f"(flights3m, d = 229), top {calibration['top']}, R = {calibration['replicates']}: the "
        "smallest scale of the union band",
        "holding 95% of the checks. None: declared without a band in that cell.",
        '"""',
        "",
        "#: channel -> method -> (ε, n) -> scale of `scaled_bands` (None: declared without a band)",
        "TOP_K_SCALES: dict[str, dict[str, dict[tuple[float, int], float | None]]] = {"]
    for channel, methods in sorted(scales.items()):
        lines.append(f'    "{channel}": {{')
        for method, cells in methods.items():
            body = ", ".join(f"({epsilon!r}, {n:_}): {scale!r}"
                             for (epsilon, n), scale in sorted(cells.items()))
            lines += textwrap.wrap(f'"{method}": {{{body}}},', 99, initial_indent=" " * 8,
                                   subsequent_indent=" " * 12, break_on_hyphens=False)
        lines.append("    },")
    lines.append("}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calibration", required=True,
                        help="the calibration windows' dump (relative to --cache-dir)")
    parser.add_argument("--held-out", nargs="+", default=[],
                        help="dumps of held-out windows (other seeds; relative to --cache-dir), "
                             "merged")
    parser.add_argument("--cache-dir", default=tempfile.gettempdir(),
                        help="where the dumps of coverage_frequency.py --dump are")
    parser.add_argument("--write", action="store_true",
                        help="regenerate ldp/estimation/top_k_calibration.py (the kept family)")
    add_json_argument(parser)
    args = parser.parse_args(argv)
    folder = Path(args.cache_dir)
    with (folder / args.calibration).open("rb") as file:
        calibration = pickle.load(file)  # a file coverage_frequency.py wrote (trusted, local)
    scales = fit(calibration)
    if args.write:
        MODULE.write_text(module_text(scales[KEPT], calibration), encoding="utf-8")
        print(f"wrote {MODULE}")
    if not args.held_out:
        return 0
    held_out = {"cells": {}, "windows": None, "seed": None}
    for path in args.held_out:
        with (folder / path).open("rb") as file:
            dump = pickle.load(file)
        if dump["seed"] == calibration["seed"]:
            parser.error(f"--held-out {path} holds the calibration's seed: its windows are "
                         f"not held out")
        held_out["cells"].update(dump["cells"])
        held_out["seed"] = dump["seed"]
        held_out["windows"] = min(held_out["windows"] or dump["windows"], dump["windows"])
    with Run("top_k_calibration", args.json, {"calibration": args.calibration,
                                               "held_out": args.held_out}) as run:
        rows = evaluate(held_out, scales)
        families = summary(rows, held_out["windows"])
        for line in families:
            print(f"{line['family']:<11} {line['inside']:>4} of {line['pairs']} inside, "
                  f"{line['above']} above, {line['below']} below, {line['off_by_two']} off by "
                  f"two s.e., {line['declared']} declared; median {line['median']}, width "
                  f"{line['median_width']}", flush=True)
        run.save({"families": families, "kept": KEPT, "rows": rows,
                  "calibration": {"seed": calibration["seed"],
                                  "windows": calibration["windows"]},
                  "held_out": {"seed": held_out["seed"], "windows": held_out["windows"]},
                  "scales": {family: {channel: {method: {f"{e:g}/{n}": s
                                                         for (e, n), s in cells.items()}
                                                for method, cells in methods.items()}
                                      for channel, methods in by_channel.items()}
                             for family, by_channel in scales.items()}})
    return 0


if __name__ == "__main__":
    sys.exit(main())
