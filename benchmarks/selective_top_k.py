"""Coverage of the top-k answers' selective 95% bands (conditional on the ranking), of the union
of the bootstrap and the score band, and of their join (`ldp query`'s band), on the same windows.

The windows are those of benchmarks/calibrate_top_k.py: each dump of
`benchmarks/coverage_frequency.py --dump` (module docstring of calibrate_top_k.py) is redrawn
here from its seed (the same generator calls, checked against the dumped selected truths), and
every method's top 10 gets the bands of ldp_telemetry.ldp.estimation.selective_bands:

    hybrid        conditional on the value's rank, the hybrid interval ([Andrews24]; β =
                  PROJECTION_LEVEL)
    set           conditional on the value's membership of the top 10, hybrid

the dumped union of the bootstrap and the score band ("union", clipped to [0, 1]), and the
smallest interval holding both the union and the hybrid ("both": `ldp query`'s band for a pure
one-stage oracle, frequency_bands.joined_bands; the union alone for an answer
post-processing merged with values of other f~, frequency_bands.merged_answers). The 40-value Zipf
population of tests/ldp/test_frequency_bands.py (a fixed population, 2,000 or 20,000 users,
OUE and GRR at ε = 1, drawn through the channel) has no dump: its windows and its "union" band
(`top_k_parts`, R = 40) are made here (--population-windows, seed --seed).

Per (data set, protocol, ε, n, method): coverage over the 10 ranks of every window, that of the
answers tied in f' with another value (ranked by domain order, not by f~; module docstring of
selective_bands) and of the untied ones, the median width against the union's, the time per
answer. Summary per family: pairs inside [0.93, 0.97], above, below, more than two standard
errors (√(0.95 · 0.05 / W), W windows) from 0.95 — a calibrated band lands there in about
4.6% of pairs; and per (method, cell, rank) triple: inside, above, below, below 0.90, more than
two standard errors below 0.95 against how many a calibrated band gives by chance (binomial),
the lowest, and the median and largest width against the union's (`rank_summary`).

With --wiener FILTER... the windows are drawn here instead (--datasets, --protocols,
--epsilons, --sizes, --windows, --seed; coverage_frequency's data and samplers, OLH's windows of
more than --full-limit (report, value) hash tests from its uniform-hash model) and each Wiener
filter's top-k band (`ldp query`'s, frequency_bands.top_k_filtered_bands) is measured per rank;
with --unfiltered, on the same windows, the band of the oracles' own f~ post-processed
(frequency_bands.top_k_rank_conditional_bands: for the pure one-stage oracles the calibration
windows did not hold). --benchmark names the results (one file per run).

    nice python benchmarks/selective_top_k.py --dumps top_k_held_out_airports.pkl \\
        top_k_held_out_olh.pkl top_k_held_out_emoji.pkl top_k_words.pkl top_k_zipf.pkl \\
        --json benchmarks/results/top_k_selective.json
"""
from __future__ import annotations

import argparse
import math
import pickle
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from bench_json import Run, add_json_argument, default_datasets_dir
from coverage_frequency import DATASETS, TOP, default_sampler, query_weights, support_counts
from coverage_summary import GOAL, coverage_standard_error

from ldp_telemetry.ldp.estimation.frequency_bands import (joined_bands, merged_answers,
                                                          rank_conditional_applies, top_k_parts)
from ldp_telemetry.ldp.estimation.postprocess import METHODS, error_plug_in
from ldp_telemetry.ldp.estimation.replay import choose
from ldp_telemetry.ldp.estimation.selective_bands import selective_bands
from ldp_telemetry.ldp.protocols import make_protocol
from ldp_telemetry.ldp.protocols.noise import unbiased_estimate

FAMILIES = ("hybrid", "set", "union", "both")
#: Families whose rows the results file keeps ("set" is summarised only: it is no band of each
#: answer, and the file stays small).
ROW_FAMILIES = ("hybrid", "union", "both")
#: family -> (event, β) of selective_bands (None: its default β)
SELECTIVE = {"hybrid": ("rank", None), "set": ("set", None)}
POPULATION_SIZES = (2_000, 20_000)
POPULATION_METHODS = ("base", "norm-sub", "norm-hyb", "base-cut", "ibu", "auto")


def population(n: int) -> np.ndarray:
    """The 40-value population of tests/ldp/test_frequency_bands.py scaled to n users."""
    weights = np.concatenate([1.0 / np.arange(1, 33) ** 1.1, np.zeros(8)])
    counts = np.floor(n * weights / weights.sum()).astype(int)
    counts[0] += n - counts.sum()
    return counts


def chosen_run(method: str, unbiased: np.ndarray, noise):
    """The method a record runs ("auto": its replay's choice, held fixed) as f~ -> f'."""
    if method == "auto":
        method = choose(unbiased, noise, "full").method
    return lambda u: METHODS[method].run(u, noise)


def measure(unbiased: np.ndarray, truth: np.ndarray, protocol, n: int, method: str,
            tally: dict, union: tuple[np.ndarray, np.ndarray] | None, cache: dict
            ) -> np.ndarray:
    """One window's checks of one method into `tally`; the selected truths. `cache`: the
    window's selective bands by selection (they depend on f~ and the selected order only)."""
    noise = protocol.noise(n)
    run = chosen_run(method, unbiased, noise)
    estimate = run(unbiased)
    order = np.argsort(-estimate, kind="stable")[:TOP]
    selected = truth[order]
    # an answer tied in f' with another value (in or out of the top k)
    tied = np.array([np.count_nonzero(estimate == estimate[v]) > 1 for v in order])
    plug_in = error_plug_in(unbiased)
    for family, (event, beta) in SELECTIVE.items():
        key = (family, order.tobytes())
        if key not in cache:
            started = time.perf_counter()
            extra = {} if beta is None else {"beta": beta}
            cache[key] = selective_bands(unbiased, protocol, n, plug_in, order, event=event,
                                         **extra)
            tally[family]["seconds"].append((time.perf_counter() - started) / order.size)
        _add(tally[family], *cache[key], selected, tied)
    if union is None:
        started = time.perf_counter()
        centre, low, high = top_k_parts(unbiased, noise, run, TOP)
        tally["union"]["seconds"].append((time.perf_counter() - started) / order.size)
        union = (np.clip(low, 0, 1), np.clip(high, 0, 1))
    _add(tally["union"], *union, selected, tied)
    merged = merged_answers(estimate, unbiased, order)
    _add(tally["both"], *joined_bands(*union, *cache[("hybrid", order.tobytes())], merged),
         selected, tied)
    return selected


def _add(mine: dict, lower: np.ndarray, upper: np.ndarray, truth: np.ndarray,
         tied: np.ndarray) -> None:
    empty = ~(lower < upper)  # a point: no μ in [0, 1] accepted
    inside = ~empty & (lower <= truth + 1e-12) & (truth <= upper + 1e-12)
    mine["inside"].append(inside)
    mine["tied"].append(tied)
    mine["width"].append(np.where(empty, 0.0, upper - lower))
    mine["empty"] += int(empty.sum())


def new_tally() -> dict:
    return {family: {"inside": [], "tied": [], "width": [], "seconds": [], "empty": 0}
            for family in FAMILIES}


def row(key: tuple, tally: dict, windows: int) -> dict:
    """One (data set, protocol, ε, n, method) row: coverage, tied and untied, widths."""
    out = {"dataset": key[0], "protocol": key[1], "epsilon": key[2], "n": key[3],
           "method": key[4], "windows": windows}
    union_width = np.concatenate(tally["union"]["width"])
    for family in FAMILIES:
        mine = tally[family]
        inside, tied = np.concatenate(mine["inside"]), np.concatenate(mine["tied"])
        width = np.concatenate(mine["width"])
        ratio = width[union_width > 0] / union_width[union_width > 0]
        out[family] = {
            "coverage": round(float(inside.mean()), 4),
            # per rank, as one line of text ("0.96 0.95 ..."; `by_rank` reads it back)
            "by_rank": " ".join(f"{value:g}" for value in
                                np.vstack(mine["inside"]).mean(axis=0).round(4)),
            "tied": int(tied.sum()),
            "tied_coverage": round(float(inside[tied].mean()), 4) if tied.any() else None,
            "points": mine["empty"],
            "median_width_vs_union": round(float(np.median(ratio)), 3) if ratio.size else None,
            "median_ms_per_answer": (round(1e3 * statistics.median(mine["seconds"]), 4)
                                     if mine["seconds"] else None),
            # per rank: the median over windows of the width against the union's (the summary
            # reads it; not saved)
            "_width_by_rank": rank_width_ratios(np.vstack(mine["width"]),
                                                np.vstack(tally["union"]["width"]))}
    return out


def rank_width_ratios(width: np.ndarray, union_width: np.ndarray) -> list[float | None]:
    """Per rank (columns of windows × ranks), the median over windows of width / the union's
    width, where the union's is not 0 (None where it is 0 in every window)."""
    out: list[float | None] = []
    for mine, union in zip(width.T, union_width.T, strict=True):
        kept = union > 0
        out.append(float(np.median(mine[kept] / union[kept])) if kept.any() else None)
    return out


def chance_below(windows: int) -> float:
    """The probability that a calibrated band's coverage over `windows` windows (Binomial(W,
    0.95) / W) lies more than two standard errors below 0.95."""
    from scipy.stats import binom
    limit = 0.95 - 2 * coverage_standard_error(windows, windows)
    return float(binom.cdf(math.ceil(limit * windows) - 1, windows, 0.95))


def rank_summary(rows: list[dict], family: str) -> dict:
    """Per (method, cell, rank) triple: inside GOAL, above, below, below 0.90, more than two
    s.e. below 0.95 (and how many chance gives a calibrated band), the lowest coverage (and
    at rank 1), the median and the largest of the triples' median width against the union's."""
    low, high = GOAL
    triples = [(c, r["windows"], ratio) for r in rows
               for c, ratio in zip(by_rank(r[family]), r[family]["_width_by_rank"], strict=True)]
    ratios = [ratio for _, _, ratio in triples if ratio is not None]
    return {
        "triples": len(triples),
        "inside": sum(low <= c <= high for c, _, _ in triples),
        "above": sum(c > high for c, _, _ in triples),
        "below": sum(c < low for c, _, _ in triples),
        "below_090": sum(c < 0.90 for c, _, _ in triples),
        "below_by_two": sum(0.95 - c > 2 * coverage_standard_error(w, w) for c, w, _ in triples),
        "below_by_two_chance": round(sum(chance_below(w) for _, w, _ in triples), 1),
        "lowest": min((c for c, _, _ in triples), default=None),
        "lowest_rank_1": min((by_rank(r[family])[0] for r in rows), default=None),
        "median_width_vs_union": round(statistics.median(ratios), 3) if ratios else None,
        "largest_width_vs_union": round(max(ratios), 3) if ratios else None}


def by_rank(family: dict) -> list[float]:
    """A row's coverage per rank (1 first), from its line of text."""
    return [float(value) for value in family["by_rank"].split()]


def summary(rows: list[dict]) -> dict:
    """Per family: pairs inside GOAL, above, below, off by two s.e.; median width ratio."""
    low, high = GOAL
    out = {}
    for family in FAMILIES:
        values = [(r[family]["coverage"], r["windows"]) for r in rows]
        ratios = [r[family]["median_width_vs_union"] for r in rows
                  if r[family]["median_width_vs_union"] is not None]
        out[family] = {
            "pairs": len(values),
            "inside": sum(low <= v <= high for v, _ in values),
            "above": sum(v > high for v, _ in values),
            "below": sum(v < low for v, _ in values),
            "off_by_two": sum(abs(v - 0.95) > 2 * coverage_standard_error(w, w)
                              for v, w in values),
            "off_by_two_below": sum(0.95 - v > 2 * coverage_standard_error(w, w)
                                    for v, w in values),
            "median": statistics.median(v for v, _ in values) if values else None,
            "lowest": min((v for v, _ in values), default=None),
            "median_width_vs_union": statistics.median(ratios) if ratios else None,
            "points": sum(r[family]["points"] for r in rows),
            # each rank apart: (pair, rank) cells more than two s.e. below 0.95, and rank 1
            "ranks_below_by_two": sum(0.95 - c > 2 * coverage_standard_error(r["windows"],
                                                                               r["windows"])
                                      for r in rows for c in by_rank(r[family])),
            "ranks": sum(len(by_rank(r[family])) for r in rows),
            "median_rank_1": (statistics.median(by_rank(r[family])[0] for r in rows)
                              if rows else None),
            "lowest_rank_1": min((by_rank(r[family])[0] for r in rows), default=None),
            "by_rank": rank_summary(rows, family)}
    return out


def saved(r: dict) -> dict:
    """A row as the results file keeps it: ROW_FAMILIES, without the per-rank widths."""
    return {key: ({k: v for k, v in value.items() if k != "_width_by_rank"}
                  if key in FAMILIES else value)
            for key, value in r.items() if key not in FAMILIES or key in ROW_FAMILIES}


def redraw(dump: dict, folder: Path, methods: list[str] | None) -> list[dict]:
    """The rows of one dump's cells, its windows redrawn (module docstring)."""
    rows = []
    cells: dict[tuple, list[str]] = {}
    for (dataset, protocol, epsilon, n, method) in dump["cells"]:
        if methods is None or method in methods:
            cells.setdefault((dataset, protocol, epsilon, n), []).append(method)
    for (dataset_name, protocol_name, epsilon, n), mine in cells.items():
        dataset = DATASETS[dataset_name](folder)
        d = dataset(0).size
        protocol = make_protocol(protocol_name, epsilon, d)
        noise = protocol.noise(n)
        sampler = default_sampler(protocol_name, n, d, 300_000_000)
        seed = dump["seed"]
        rng = np.random.default_rng([seed, n, int(epsilon * 100), len(protocol_name)])
        tallies = {method: new_tally() for method in mine}
        for w in range(dump["windows"]):
            counts = rng.multinomial(n, dataset(w))
            truth = counts / n
            unbiased = unbiased_estimate(support_counts(protocol, counts, rng, sampler), noise)
            query_weights(d, 5, rng)  # coverage_frequency's draws, in its order
            cache: dict = {}
            for method in mine:
                parts = dump["cells"][(dataset_name, protocol_name, epsilon, n, method)]
                union = (np.clip(parts["union_lo"][w], 0, 1), np.clip(parts["union_hi"][w], 0, 1))
                selected = measure(unbiased, truth, protocol, n, method, tallies[method], union,
                                   cache)
                if not np.allclose(selected, parts["truth"][w]):
                    raise ValueError(f"window {w} of {dataset_name}, {protocol_name}, "
                                     f"ε = {epsilon:g}, n = {n}, {method} is not the dump's")
        for method in mine:
            rows.append(row((dataset_name, protocol_name, epsilon, n, method), tallies[method],
                            dump["windows"]))
            print(_line(rows[-1]), flush=True)
    return rows


def population_rows(windows: int, seed: int) -> list[dict]:
    """The 40-value population's rows (module docstring), union band made here."""
    rows = []
    for protocol_name in ("oue", "grr"):
        for n in POPULATION_SIZES:
            counts = population(n)
            truth = counts / n
            protocol = make_protocol(protocol_name, 1.0, counts.size)
            noise = protocol.noise(n)
            rng = np.random.default_rng([seed, n, len(protocol_name)])
            tallies = {method: new_tally() for method in POPULATION_METHODS}
            for _ in range(windows):
                unbiased = unbiased_estimate(support_counts(protocol, counts, rng, "exact"),
                                             noise)
                cache: dict = {}
                for method in POPULATION_METHODS:
                    measure(unbiased, truth, protocol, n, method, tallies[method], None, cache)
            for method in POPULATION_METHODS:
                rows.append(row(("population 40", protocol_name, 1.0, n, method),
                                tallies[method], windows))
                print(_line(rows[-1]), flush=True)
    return rows


#: The Wiener filters measured with --wiener (each with its registry defaults), the
#: post-processing methods applied after them, and the grid of their rows.
WIENER_FILTERS = ("dw", "iiw", "iiw-g", "gf-dw", "amrp")
WIENER_METHODS = ("base", "norm-sub")


#: The pseudo-filter of --unfiltered: the pure one-stage oracle's own top-k band
#: (frequency_bands.top_k_rank_conditional_bands) on the windows --wiener draws.
UNFILTERED = "none"
#: Largest n · d of a window drawn through OLH's client with --wiener or --unfiltered (more:
#: coverage_frequency's uniform-hash model; coverage_frequency.default_sampler).
FULL_LIMIT = 300_000_000


def shipped_parts(name: str, unbiased: np.ndarray, noise, protocol, post, seed: int):
    """(the parts `ldp query --top` joins, f~ -> the estimate the answers are ranked by) for
    filter `name` (UNFILTERED: the oracle's f~ post-processed, no filter)."""
    from ldp_telemetry.ldp.estimation.frequency_bands import (top_k_filtered_parts,
                                                              top_k_rank_conditional_parts)
    if name == UNFILTERED:
        return (top_k_rank_conditional_parts(unbiased, noise, protocol,
                                             lambda u: post(u, noise), TOP, seed=seed),
                lambda u: post(u, noise))
    run = wiener_fit(name, noise, protocol)
    return (top_k_filtered_parts(unbiased, noise, protocol, run,
                                 lambda u: post(u, noise), TOP, seed=seed),
            lambda u: post(run(u)[0], noise))


def wiener_fit(name: str, noise, protocol):
    """f~ -> (the filter's estimate, its filter at the gains f~ gave), registry defaults."""
    from ldp_telemetry.ldp.estimation.estimators import METHODS as ESTIMATORS
    from ldp_telemetry.ldp.estimation.wiener import fit
    defaults = {key: parameter.default
                for key, parameter in ESTIMATORS.lookup(name).parameters.items()}

    def run(unbiased: np.ndarray):
        result = fit(name, unbiased, noise, protocol, **defaults)
        return result.estimate, result.filter
    return run


def wiener_rows(folder: Path, datasets: list[str], protocols: list[str], epsilons: list[float],
                sizes: list[int], filters: list[str], methods: list[str], windows: int,
                seed: int, full_limit: int = FULL_LIMIT) -> list[dict]:
    """Per (data set, protocol, ε, n, filter + method): the coverage per rank of the band
    `ldp query --top` gives a Wiener record (frequency_bands.top_k_filtered_bands: the
    bootstrap replaying the filter joined with the band conditional on the rank by the
    filter at its gains; each part alone too, `union_by_rank` and `hybrid_by_rank`: the
    latter says whether conditioning on the window's own gains holds), W windows drawn here
    (coverage_frequency's data and samplers)."""
    rows = []
    for dataset_name in datasets:
        dataset = DATASETS[dataset_name](folder)
        d = dataset(0).size
        for protocol_name in protocols:
            for epsilon in epsilons:
                protocol = make_protocol(protocol_name, epsilon, d)
                for n in sizes:
                    noise = protocol.noise(n)
                    sampler = default_sampler(protocol_name, n, d, full_limit)
                    rng = np.random.default_rng([seed, n, int(epsilon * 100), d])
                    keys = [(name, method) for name in filters for method in methods]
                    inside = {key: [] for key in keys}
                    # the parts alone: the union (bootstrap replaying the filter + score band)
                    # and the band conditional on the rank at the window's gains
                    parts = {key: {"union": [], "hybrid": []} for key in keys}
                    widths = {key: [] for key in keys}
                    seconds = {key: [] for key in keys}
                    for w in range(windows):
                        counts = rng.multinomial(n, dataset(w))
                        truth = counts / n
                        unbiased = unbiased_estimate(
                            support_counts(protocol, counts, rng, sampler), noise)
                        for name, method in keys:
                            started = time.perf_counter()
                            found, ranked = shipped_parts(name, unbiased, noise, protocol,
                                                            METHODS[method].run, w)
                            lower, upper = joined_bands(*found)
                            seconds[(name, method)].append(time.perf_counter() - started)
                            estimate = ranked(unbiased)
                            order = np.argsort(-estimate, kind="stable")[:TOP]
                            selected = truth[order]
                            inside[(name, method)].append(
                                (lower <= selected + 1e-12) & (selected <= upper + 1e-12))
                            for part, (low, high) in (("union", found[:2]),
                                                      ("hybrid", found[2:4])):
                                parts[(name, method)][part].append(
                                    (low <= selected + 1e-12) & (selected <= high + 1e-12))
                            widths[(name, method)].append(upper - lower)
                    for name, method in keys:
                        held = np.vstack(inside[(name, method)])
                        rows.append({
                            "dataset": dataset_name, "protocol": protocol_name,
                            "epsilon": epsilon, "n": n, "filter": name, "method": method,
                            "windows": windows,
                            "coverage": round(float(held.mean()), 4),
                            "by_rank": " ".join(f"{value:g}"
                                                for value in held.mean(axis=0).round(4)),
                            **{f"{part}_by_rank": " ".join(
                                f"{value:g}" for value in
                                np.vstack(held_part).mean(axis=0).round(4))
                               for part, held_part in parts[(name, method)].items()},
                            "median_width": round(float(np.median(widths[(name, method)])), 6),
                            "median_ms_per_query": round(
                                1e3 * statistics.median(seconds[(name, method)]), 2)})
                        r = rows[-1]
                        print(f"{dataset_name} {protocol_name} ε={epsilon:g} n={n:,} {name} + "
                              f"{method}: {r['coverage']:.3f} by rank {r['by_rank']} "
                              f"({r['median_ms_per_query']} ms)", flush=True)
    return rows


def wiener_summary(rows: list[dict]) -> dict:
    """Per filter: (filter, method, cell, rank) triples inside GOAL, above, below, below
    0.90, more than two s.e. below 0.95 (and how many chance gives), the lowest."""
    low, high = GOAL
    out = {}
    for name in sorted({r["filter"] for r in rows}):
        triples = [(c, r["windows"]) for r in rows if r["filter"] == name
                   for c in by_rank({"by_rank": r["by_rank"]})]
        out[name] = {
            "triples": len(triples),
            "inside": sum(low <= c <= high for c, _ in triples),
            "above": sum(c > high for c, _ in triples),
            "below": sum(c < low for c, _ in triples),
            "below_090": sum(c < 0.90 for c, _ in triples),
            "below_by_two": sum(0.95 - c > 2 * coverage_standard_error(w, w)
                                for c, w in triples),
            "below_by_two_chance": round(sum(chance_below(w) for _, w in triples), 1),
            "lowest": min((c for c, _ in triples), default=None)}
    return out


def _line(r: dict) -> str:
    parts = [f"{family} {r[family]['coverage']:.3f} (tied {r[family]['tied']}: "
             f"{r[family]['tied_coverage'] if r[family]['tied_coverage'] is None else round(r[family]['tied_coverage'], 3)}"  # noqa: E501
             f", width ×{r[family]['median_width_vs_union'] or 0:.2f})"
             for family in FAMILIES]
    return (f"{r['dataset']} {r['protocol']} ε={r['epsilon']:g} n={r['n']:,} "
            f"{r['method']:<9} " + "  ".join(parts))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dumps", nargs="*", default=[],
                        help="dumps of coverage_frequency.py --dump (relative to --cache-dir)")
    parser.add_argument("--cache-dir", default=tempfile.gettempdir())
    parser.add_argument("--methods", nargs="*", default=None)
    parser.add_argument("--population-windows", type=int, default=200)
    parser.add_argument("--seed", type=int, default=31)
    parser.add_argument("--datasets-dir", default=default_datasets_dir())
    parser.add_argument("--wiener", nargs="*", default=None, choices=WIENER_FILTERS,
                        help="measure Wiener top-k bands instead (benchmark top_k_wiener)")
    parser.add_argument("--unfiltered", action="store_true",
                        help="measure the unfiltered top-k band of --protocols on the windows "
                             "--wiener draws (benchmark top_k_unfiltered)")
    parser.add_argument("--benchmark", default=None,
                        help="the results' benchmark name (default: top_k_wiener, "
                             "top_k_wiener_amrp for AMRP alone, top_k_unfiltered)")
    parser.add_argument("--wiener-methods", nargs="*", default=list(WIENER_METHODS))
    parser.add_argument("--datasets", nargs="*", default=["airports"])
    parser.add_argument("--protocols", nargs="*", default=["grr", "oue"])
    parser.add_argument("--epsilons", nargs="*", type=float, default=[0.5, 1.0, 2.0, 4.0])
    parser.add_argument("--sizes", nargs="*", type=int,
                        default=[1_000, 10_000, 100_000, 1_000_000])
    parser.add_argument("--windows", type=int, default=100)
    parser.add_argument("--full-limit", type=int, default=FULL_LIMIT,
                        help="largest n·d of an OLH window drawn through the client with "
                             "--wiener or --unfiltered (more: the uniform-hash model)")
    add_json_argument(parser)
    args = parser.parse_args(argv)
    folder = Path(args.datasets_dir)
    if args.wiener is not None and args.unfiltered:
        print("--wiener and --unfiltered exclude each other", file=sys.stderr)
        return 2
    if args.wiener is not None or args.unfiltered:
        if not folder.is_dir():
            print(f"no data sets at {folder}: set LDP_DATASETS", file=sys.stderr)
            return 2
        unfit = [p for p in args.protocols
                 if not rank_conditional_applies(make_protocol(p, 1.0, 64))]
        if unfit:
            print(f"--protocols: no rank-conditional top-k band for {', '.join(unfit)} "
                  "(frequency_bands.rank_conditional_applies)", file=sys.stderr)
            return 2
        filters = [UNFILTERED] if args.unfiltered else args.wiener or list(WIENER_FILTERS)
        # AMRP alone (its replay costs about 15 times the others') is a results file apart
        name = args.benchmark or ("top_k_unfiltered" if args.unfiltered else
                                  "top_k_wiener_amrp" if filters == ["amrp"] else "top_k_wiener")
        with Run(name, args.json, vars(args)) as run:
            rows = wiener_rows(folder, args.datasets, args.protocols, args.epsilons,
                               args.sizes, filters,
                               args.wiener_methods, args.windows, args.seed,
                               args.full_limit)
            found = wiener_summary(rows)
            for name, line in found.items():
                print(f"{name}: {line['inside']} of {line['triples']} triples inside, "
                      f"{line['above']} above, {line['below']} below ({line['below_090']} "
                      f"below 0.90), {line['below_by_two']} below by two s.e. (chance "
                      f"{line['below_by_two_chance']}); lowest {line['lowest']}", flush=True)
            run.save({"rows": rows, "summary": found})
        return 0
    if args.dumps and not folder.is_dir():
        print(f"no data sets at {folder}: set LDP_DATASETS", file=sys.stderr)
        return 2
    with Run("top_k_selective", args.json, vars(args)) as run:
        rows = []
        for name in args.dumps:
            with (Path(args.cache_dir) / name).open("rb") as file:
                dump = pickle.load(file)  # a file coverage_frequency.py wrote (trusted, local)
            rows += redraw(dump, folder, args.methods)
        if args.population_windows:
            rows += population_rows(args.population_windows, args.seed)
        by_set = {"all": summary(rows)}
        for dataset in sorted({r["dataset"] for r in rows}):
            by_set[dataset] = summary([r for r in rows if r["dataset"] == dataset])
        for name, families in by_set.items():
            for family, line in families.items():
                print(f"{name}: {family:<11} {line['inside']:>4} of {line['pairs']} inside, "
                      f"{line['above']} above, {line['below']} below, {line['off_by_two']} off "
                      f"by two s.e. ({line['off_by_two_below']} below); median "
                      f"{line['median']}, lowest {line['lowest']}, width ×"
                      f"{line['median_width_vs_union']}, points {line['points']}; ranks "
                      f"{line['ranks_below_by_two']} of {line['ranks']} below by two s.e., "
                      f"rank 1 median {line['median_rank_1']} lowest {line['lowest_rank_1']}",
                      flush=True)
        for name, families in by_set.items():
            for family, line in families.items():
                ranks = line["by_rank"]
                print(f"{name}: {family:<11} per rank: {ranks['inside']} of {ranks['triples']} "
                      f"inside, {ranks['above']} above, {ranks['below']} below "
                      f"({ranks['below_090']} below 0.90), {ranks['below_by_two']} below by two "
                      f"s.e. (chance {ranks['below_by_two_chance']}); lowest {ranks['lowest']} "
                      f"(rank 1: {ranks['lowest_rank_1']}); width × "
                      f"{ranks['median_width_vs_union']} (largest "
                      f"{ranks['largest_width_vs_union']})", flush=True)
        run.save({"rows": [saved(r) for r in rows], "summary": by_set})
    return 0


if __name__ == "__main__":
    sys.exit(main())
