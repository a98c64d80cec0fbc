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
smallest interval holding both the union and the hybrid ("both", frequency_bands.joined_bands;
the union alone for an answer post-processing merged with values of other f~,
frequency_bands.merged_answers: `ldp query`'s band for a pure one-stage oracle). --families
adds the families that separate the causes of the join's over-coverage (measured, none
shipped):

    conditional            the conditional interval alone (β = 0: no projection set)
    conditional-nolattice  the same without the half-count moves of the thresholds
    hybrid-0.001, -0.02    the hybrid at a smaller and a larger β
    conditional-union      the conditional interval joined with the union
    conditional-randomized the conditional test randomized on the lattice of support counts
                           (`randomized_bands`: exact there; a band that depends on a coin is
                           not shipped), which also counts the answers the rank pins to one
                           count ("pinned") and every family's coverage without them
    conditional-plugin     the conditional interval with σ at the plug-in f~_v, not at each μ

and --benchmark names the results (top_k_selective_conditional). The 40-value Zipf
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
more than --full-limit (report, value) hash tests from its uniform-hash model; the small
ordinal domains of ordinal_windows.py too, "taxi 48", "dep_min 32", "minute 64", "minute 128",
one real day per window; each row states its d) and each Wiener
filter's top-k band (`ldp query`'s, frequency_bands.top_k_filtered_bands) is measured per rank;
with --unfiltered, on the same windows, the band of the oracles' own f~ post-processed
(frequency_bands.top_k_rank_conditional_bands: for the pure one-stage oracles the calibration
windows did not hold; with --alone, instead of the join, the rank-conditional band alone where
the window expects n·q* ≥ 5 supports at f = 0, measured and not shipped,
frequency_bands.rank_conditional_alone_bands: each row counts its answers given it alone,
"alone", and the band's median width against the join's, "width_vs_join"), and with
--conditional also the
conditional interval, its join with the union, the randomized conditional test and the
randomized hybrid per rank (UNFILTERED_PARTS).
--benchmark names the results (one file per run).

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
from dataclasses import replace
from pathlib import Path

import numpy as np
from bench_json import Run, add_json_argument, default_datasets_dir
from coverage_frequency import DATASETS, TOP, default_sampler, query_weights, support_counts
from ordinal_windows import ORDINAL_DATASETS
from coverage_summary import GOAL, coverage_standard_error

from ldp_telemetry.ldp.estimation.frequency_bands import (joined_bands, merged_answers,
                                                          rank_conditional_applies, top_k_parts)
from ldp_telemetry.ldp.estimation.postprocess import METHODS, error_plug_in
from ldp_telemetry.ldp.estimation.replay import choose
from ldp_telemetry.ldp.estimation.selective_bands import (ALPHA, PROJECTION_LEVEL, hybrid_band,
                                                          selections, selective_bands)
from ldp_telemetry.ldp.protocols import make_protocol
from ldp_telemetry.ldp.protocols.noise import unbiased_estimate

#: Every family --families can name; DEFAULT_FAMILIES: the run of top_k_selective.json.
FAMILIES = ("hybrid", "set", "union", "both", "conditional", "conditional-nolattice",
            "hybrid-nolattice", "hybrid-0.001", "hybrid-0.02", "conditional-union",
            "conditional-randomized", "conditional-plugin")
DEFAULT_FAMILIES = ("hybrid", "set", "union", "both")
#: Families whose rows the results file keeps ("set" is summarised only: it is no band of each
#: answer, and the file stays small); with --families other than the default, those of
#: CONDITIONAL_ROW_FAMILIES (the others' rows are those of top_k_selective.json, and every
#: family's summary is kept).
ROW_FAMILIES = ("hybrid", "union", "both")
CONDITIONAL_ROW_FAMILIES = ("conditional", "conditional-randomized")
#: family -> (event, β, lattice) of selective_bands (None: its default β). "conditional*":
#: β = 0, the conditional interval alone ([Lee16] Theorem 5.2, no projection set).
SELECTIVE = {"hybrid": ("rank", None, True), "set": ("set", None, True),
             "conditional": ("rank", 0.0, True),
             "conditional-nolattice": ("rank", 0.0, False),
             "hybrid-nolattice": ("rank", None, False),
             "hybrid-0.001": ("rank", 0.001, True), "hybrid-0.02": ("rank", 0.02, True)}
#: family -> the rank-conditional family joined with the union (`joined_bands`)
JOINS = {"both": "hybrid", "conditional-union": "conditional"}
#: Measured only, never shipped: the conditional test made exact on the lattice by an auxiliary
#: uniform (`randomized_bands`), to learn whether the support counts' discreteness is what
#: makes the conditional interval conservative.
RANDOMIZED = "conditional-randomized"
#: An answer is "pinned" where the rank's thresholds, each moved half a support count, lie
#: less than this many counts apart: one count of the lattice between them (with independent
#: counts, OUE's, the moved thresholds fall halfway between counts, so one count spans 1 and
#: two span 2; GRR's conditioning direction moves them slightly).
PINNED_STEPS = 1.5
#: Measured only: the conditional interval with σ held at the plug-in Var(f~_v) at f_v =
#: max(f~_v, 0) instead of eq. 2 at each μ tested (`plug_in_bands`).
PLUG_IN = "conditional-plugin"
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


def randomized_bands(unbiased: np.ndarray, protocol, n: int, plug_in: np.ndarray,
                     selected: np.ndarray, uniforms: np.ndarray, alpha: float = ALPHA,
                     beta: float = 0.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The hybrid interval of each selected value at `beta` (0: the conditional interval
    alone) with the test randomized on the lattice of f~ (`hybrid_band` with a U: step s = 1
    / (n (p* − q*)), thresholds moved half a step as `thresholds` does; G(μ) = F(y − s/2) + U
    (F(y + s/2) − F(y − s/2)) is uniform when f~_v is the Gaussian law rounded to the
    lattice, so the conditional band holds exactly 95% there). `uniforms`: one U per selected
    value. Measured only (a band that depends on a coin is not shipped). Third: whether the
    rank confines f~_v to one lattice point (V⁺ − V⁻ < `PINNED_STEPS` steps), where the
    conditional law is one point whatever μ, and a test that is not randomized accepts every
    μ."""
    step = 1.0 / (n * (protocol.p_star - protocol.q_star))
    lower, upper, pinned = [], [], []
    for s, u in zip(selections(unbiased, protocol, n, plug_in, selected), uniforms,
                    strict=True):
        pinned.append(s.high - s.low < PINNED_STEPS * step)
        low, high = hybrid_band(s, alpha, beta, uniform=float(u), step=step)
        lower.append(low)
        upper.append(high)
    return (np.array(lower, dtype=np.float64), np.array(upper, dtype=np.float64),
            np.array(pinned, dtype=bool))


def plug_in_bands(unbiased: np.ndarray, protocol, n: int, plug_in: np.ndarray,
                  selected: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The conditional interval (β = 0) with one σ for every μ tested: eq. 2 at f_v =
    f~_v clipped to [0, 1], the plug-in a Wald interval uses (`PLUG_IN`)."""
    bands = [hybrid_band(replace(s, a=s.a + s.b * min(max(s.estimate, 0.0), 1.0), b=0.0),
                         beta=0.0)
             for s in selections(unbiased, protocol, n, plug_in, selected)]
    return (np.array([band[0] for band in bands], dtype=np.float64),
            np.array([band[1] for band in bands], dtype=np.float64))


def measure(unbiased: np.ndarray, truth: np.ndarray, protocol, n: int, method: str,
            tally: dict, union: tuple[np.ndarray, np.ndarray] | None, cache: dict,
            window: int = 0) -> np.ndarray:
    """One window's checks of one method into `tally` (the families it holds); the selected
    truths. `cache`: the window's selective bands by selection (they depend on f~ and the
    selected order only). `window`: the window's index, which seeds RANDOMIZED's uniforms
    (one per value, the same for every method)."""
    noise = protocol.noise(n)
    run = chosen_run(method, unbiased, noise)
    estimate = run(unbiased)
    order = np.argsort(-estimate, kind="stable")[:TOP]
    selected = truth[order]
    # an answer tied in f' with another value (in or out of the top k)
    tied = np.array([np.count_nonzero(estimate == estimate[v]) > 1 for v in order])
    plug_in = error_plug_in(unbiased)
    needed = set(tally) | {JOINS[family] for family in tally if family in JOINS}
    for family, (event, beta, lattice) in SELECTIVE.items():
        if family not in needed:
            continue
        key = (family, order.tobytes())
        if key not in cache:
            started = time.perf_counter()
            extra = {} if beta is None else {"beta": beta}
            cache[key] = selective_bands(unbiased, protocol, n, plug_in, order, event=event,
                                         lattice=lattice, **extra)
            if family in tally:
                tally[family]["seconds"].append((time.perf_counter() - started) / order.size)
        if family in tally:
            _add(tally[family], *cache[key], selected, tied)
    if RANDOMIZED in tally:
        key = (RANDOMIZED, order.tobytes())
        if key not in cache:
            uniforms = np.random.default_rng([RANDOMIZED_STREAM, window, n]).random(
                unbiased.size)[order]
            cache[key] = randomized_bands(unbiased, protocol, n, plug_in, order, uniforms)
        _add(tally[RANDOMIZED], *cache[key][:2], selected, tied)
        for mine in tally.values():
            mine["pinned"].append(cache[key][2])
    if PLUG_IN in tally:
        key = (PLUG_IN, order.tobytes())
        if key not in cache:
            cache[key] = plug_in_bands(unbiased, protocol, n, plug_in, order)
        _add(tally[PLUG_IN], *cache[key], selected, tied)
    if union is None:
        started = time.perf_counter()
        centre, low, high = top_k_parts(unbiased, noise, run, TOP)
        tally["union"]["seconds"].append((time.perf_counter() - started) / order.size)
        union = (np.clip(low, 0, 1), np.clip(high, 0, 1))
    _add(tally["union"], *union, selected, tied)
    merged = merged_answers(estimate, unbiased, order)
    for family, part in JOINS.items():
        if family in tally:
            _add(tally[family], *joined_bands(*union, *cache[(part, order.tobytes())], merged),
                 selected, tied)
    return selected


#: The uniforms' stream of RANDOMIZED (apart from the windows' own draws).
RANDOMIZED_STREAM = 4711
#: A band at least this many times the union's width counts as "wide" in the summary (beside
#: one that is all of [0, 1]).
WIDE = 3.0


def _add(mine: dict, lower: np.ndarray, upper: np.ndarray, truth: np.ndarray,
         tied: np.ndarray) -> None:
    empty = ~(lower < upper)  # a point: no μ in [0, 1] accepted
    inside = ~empty & (lower <= truth + 1e-12) & (truth <= upper + 1e-12)
    mine["inside"].append(inside)
    mine["tied"].append(tied)
    mine["width"].append(np.where(empty, 0.0, upper - lower))
    mine["empty"] += int(empty.sum())
    mine["full"] += _full(lower, upper)


def new_tally(families: tuple[str, ...] = DEFAULT_FAMILIES) -> dict:
    return {family: {"inside": [], "tied": [], "width": [], "seconds": [], "empty": 0,
                     "full": 0, "pinned": []}
            for family in families}


def row(key: tuple, tally: dict, windows: int) -> dict:
    """One (data set, protocol, ε, n, method) row: coverage, tied and untied, widths."""
    out = {"dataset": key[0], "protocol": key[1], "epsilon": key[2], "n": key[3],
           "method": key[4], "windows": windows}
    union_width = np.concatenate(tally["union"]["width"])
    for family, mine in tally.items():
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
            # answers whose band is all of [0, 1], and at least WIDE times the union's width
            "full": mine["full"],
            "wide": int(np.count_nonzero(width >= WIDE * union_width)),
            # with RANDOMIZED measured: answers the rank pins to one lattice point, and the
            # coverage of the others
            **({"pinned": int(pinned.sum()),
                "unpinned_coverage": (round(float(inside[~pinned].mean()), 4)
                                      if (~pinned).any() else None)}
               if (pinned := _pinned(mine)) is not None else {}),
            "median_width_vs_union": round(float(np.median(ratio)), 3) if ratio.size else None,
            "median_ms_per_answer": (round(1e3 * statistics.median(mine["seconds"]), 4)
                                     if mine["seconds"] else None),
            # per rank: the median over windows of the width against the union's (the summary
            # reads it; not saved)
            "_width_by_rank": rank_width_ratios(np.vstack(mine["width"]),
                                                np.vstack(tally["union"]["width"]))}
    return out


def _pinned(mine: dict) -> np.ndarray | None:
    """The answers pinned to one lattice point (`randomized_bands`), None if not measured."""
    return np.concatenate(mine["pinned"]) if mine["pinned"] else None


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
    for family in (f for f in FAMILIES if rows and f in rows[0]):
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
            "answers": sum(r["windows"] * len(by_rank(r[family])) for r in rows),
            "full": sum(r[family].get("full", 0) for r in rows),
            "wide": sum(r[family].get("wide", 0) for r in rows),
            "pinned": sum(r[family].get("pinned", 0) for r in rows),
            # pooled over the answers the rank does not pin to one lattice point
            "unpinned_coverage": _pooled_unpinned(rows, family),
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


def _pooled_unpinned(rows: list[dict], family: str) -> float | None:
    """The coverage over every row's answers that are not pinned (`randomized_bands`)."""
    held = total = 0.0
    for r in rows:
        mine = r[family]
        if mine.get("unpinned_coverage") is None:
            continue
        count = r["windows"] * len(by_rank(mine)) - mine["pinned"]
        held += mine["unpinned_coverage"] * count
        total += count
    return round(held / total, 4) if total else None


def saved(r: dict, kept: tuple[str, ...] = ROW_FAMILIES) -> dict:
    """A row as the results file keeps it: the families `kept`, without the per-rank
    widths."""
    return {key: ({k: v for k, v in value.items() if k != "_width_by_rank"}
                  if key in FAMILIES else value)
            for key, value in r.items() if key not in FAMILIES or key in kept}


def redraw(dump: dict, folder: Path, methods: list[str] | None,
           families: tuple[str, ...] = DEFAULT_FAMILIES) -> list[dict]:
    """The rows of one dump's cells, its windows redrawn (module docstring), for `families`
    (with "union" always)."""
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
        tallies = {method: new_tally(families) for method in mine}
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
                                   cache, w)
                if not np.allclose(selected, parts["truth"][w]):
                    raise ValueError(f"window {w} of {dataset_name}, {protocol_name}, "
                                     f"ε = {epsilon:g}, n = {n}, {method} is not the dump's")
        for method in mine:
            rows.append(row((dataset_name, protocol_name, epsilon, n, method), tallies[method],
                            dump["windows"]))
            print(_line(rows[-1]), flush=True)
    return rows


def population_rows(windows: int, seed: int, families: tuple[str, ...] = DEFAULT_FAMILIES
                    ) -> list[dict]:
    """The 40-value population's rows (module docstring), union band made here."""
    rows = []
    for protocol_name in ("oue", "grr"):
        for n in POPULATION_SIZES:
            counts = population(n)
            truth = counts / n
            protocol = make_protocol(protocol_name, 1.0, counts.size)
            noise = protocol.noise(n)
            rng = np.random.default_rng([seed, n, len(protocol_name)])
            tallies = {method: new_tally(families) for method in POPULATION_METHODS}
            for w in range(windows):
                unbiased = unbiased_estimate(support_counts(protocol, counts, rng, "exact"),
                                             noise)
                cache: dict = {}
                for method in POPULATION_METHODS:
                    measure(unbiased, truth, protocol, n, method, tallies[method], None, cache,
                            w)
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


def measured_bands(name: str, found: tuple, noise, alone: bool = False
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(lower, upper, alone answers) of the band measured from `shipped_parts`' parts: the join
    `ldp query --top` gives (frequency_bands.joined_bands; no answer alone); with `alone`
    (--alone, UNFILTERED only) the rule measured and not shipped that gives the
    rank-conditional band alone where the window expects enough supports
    (frequency_bands.rank_conditional_alone_bands)."""
    from ldp_telemetry.ldp.estimation.frequency_bands import rank_conditional_alone_bands
    if alone and name == UNFILTERED:
        return rank_conditional_alone_bands(*found, noise)
    lower, upper = joined_bands(*found)
    return lower, upper, np.zeros(lower.size, dtype=bool)


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
                seed: int, conditional: bool = False, full_limit: int = FULL_LIMIT,
                alone: bool = False) -> list[dict]:
    """Per (data set, protocol, ε, n, filter + method): the coverage per rank of the band
    `ldp query --top` gives a Wiener record (frequency_bands.top_k_filtered_bands: the
    bootstrap replaying the filter joined with the band conditional on the rank by the
    filter at its gains; each part alone too, `union_by_rank` and `hybrid_by_rank`: the
    latter says whether conditioning on the window's own gains holds), W windows drawn here
    (coverage_frequency's data and samplers). `conditional` (UNFILTERED alone): the
    UNFILTERED_PARTS too (`conditional_parts`)."""
    rows = []
    for dataset_name in datasets:
        dataset = {**DATASETS, **ORDINAL_DATASETS}[dataset_name](folder)
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
                    # and the band conditional on the rank at the window's gains; with
                    # --conditional (unfiltered only), UNFILTERED_PARTS too
                    extra = UNFILTERED_PARTS if conditional and filters == [UNFILTERED] else ()
                    parts = {key: {part: [] for part in ("union", "hybrid", *extra)}
                             for key in keys}
                    part_widths = {key: {part: [] for part in extra} for key in keys}
                    # with --conditional: answers whose band is all of [0, 1] ("join": the
                    # shipped band's)
                    full = {key: dict.fromkeys(("join", *extra), 0) for key in keys}
                    # ... and the parts' answers whose band is a point (no μ accepted: the
                    # empty set, `_add`)
                    points = {key: dict.fromkeys(extra, 0) for key in keys}
                    widths = {key: [] for key in keys}
                    # the band's width against the join's, and its answers given the
                    # rank-conditional band alone (--alone; `measured_bands`)
                    vs_join = {key: [] for key in keys}
                    alone_count = dict.fromkeys(keys, 0)
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
                            lower, upper, alone_now = measured_bands(name, found, noise,
                                                                     alone)
                            seconds[(name, method)].append(time.perf_counter() - started)
                            estimate = ranked(unbiased)
                            order = np.argsort(-estimate, kind="stable")[:TOP]
                            selected = truth[order]
                            inside[(name, method)].append(
                                (lower <= selected + 1e-12) & (selected <= upper + 1e-12))
                            bands = {"union": found[:2], "hybrid": found[2:4]}
                            if extra:
                                bands |= conditional_parts(unbiased, truth.size, protocol, n,
                                                           order, found, w)
                                full[(name, method)]["join"] += _full(lower, upper)
                            for part, (low, high) in bands.items():
                                held_now = (low <= selected + 1e-12) & (
                                    selected <= high + 1e-12)
                                if part in extra:  # a point stands for the empty set (_add)
                                    held_now &= low < high
                                parts[(name, method)][part].append(held_now)
                                if part in extra:
                                    part_widths[(name, method)][part].append(
                                        (high - low) / np.maximum(upper - lower, 1e-300))
                                    full[(name, method)][part] += _full(low, high)
                                    points[(name, method)][part] += int(
                                        np.count_nonzero(~(low < high)))
                            widths[(name, method)].append(upper - lower)
                            join_lower, join_upper = joined_bands(*found)
                            vs_join[(name, method)].append(
                                (upper - lower) / np.maximum(join_upper - join_lower, 1e-300))
                            alone_count[(name, method)] += int(np.count_nonzero(alone_now))
                    for name, method in keys:
                        held = np.vstack(inside[(name, method)])
                        rows.append({
                            "dataset": dataset_name, "d": d, "protocol": protocol_name,
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
                            # answers given the rank-conditional band alone (--alone), and the
                            # band's median width against the join's
                            "alone": alone_count[(name, method)],
                            "width_vs_join": round(float(np.median(np.vstack(
                                vs_join[(name, method)]))), 3),
                            # UNFILTERED_PARTS: median width against the shipped join's
                            **{f"{part}_width_vs_join": round(float(np.median(np.vstack(
                                ratios))), 3)
                               for part, ratios in part_widths[(name, method)].items()},
                            # with --conditional: answers all of [0, 1], the join's and each
                            # part's ("full", "<part>_full")
                            **({("full" if part == "join" else f"{part}_full"): count
                                for part, count in full[(name, method)].items()}
                               if extra else {}),
                            **{f"{part}_points": count
                               for part, count in points[(name, method)].items()},
                            "median_ms_per_query": round(
                                1e3 * statistics.median(seconds[(name, method)]), 2)})
                        r = rows[-1]
                        print(f"{dataset_name} {protocol_name} ε={epsilon:g} n={n:,} {name} + "
                              f"{method}: {r['coverage']:.3f} by rank {r['by_rank']} "
                              f"({r['median_ms_per_query']} ms)", flush=True)
    return rows


#: With --unfiltered --conditional, the parts measured beside the shipped join (`wiener_rows`
#: keeps each one's coverage per rank, "<part>_by_rank", its median width against the join's
#: and its answers that are all of [0, 1] or a point): the conditional interval alone (β = 0),
#: joined with the union, and randomized on the lattice; the hybrid (β = PROJECTION_LEVEL)
#: randomized on the lattice, alone, with the union for the answers merged by post-processing
#: (`ldp query` gives them the union: the rank is not what selected them), and joined with the
#: union (all measured only).
UNFILTERED_PARTS = ("conditional", "conditional_union", "randomized", "randomized_hybrid",
                    "randomized_hybrid_unmerged", "randomized_hybrid_union")


def conditional_parts(unbiased: np.ndarray, d: int, protocol, n: int, order: np.ndarray,
                      found: tuple, window: int) -> dict:
    """UNFILTERED_PARTS of one window's answers (`order`), `found` the shipped parts
    (frequency_bands.top_k_rank_conditional_parts)."""
    plug_in = error_plug_in(unbiased)
    conditional = selective_bands(unbiased, protocol, n, plug_in, order, beta=0.0)
    uniforms = np.random.default_rng([RANDOMIZED_STREAM, window, n]).random(d)[order]
    hybrid = randomized_bands(unbiased, protocol, n, plug_in, order, uniforms,
                              beta=PROJECTION_LEVEL)[:2]
    return {"conditional": conditional,
            "conditional_union": joined_bands(*found[:2], *conditional, found[4]),
            "randomized": randomized_bands(unbiased, protocol, n, plug_in, order,
                                           uniforms)[:2],
            "randomized_hybrid": hybrid,
            "randomized_hybrid_unmerged": (np.where(found[4], found[0], hybrid[0]),
                                           np.where(found[4], found[1], hybrid[1])),
            "randomized_hybrid_union": joined_bands(*found[:2], *hybrid, found[4])}


def _full(lower: np.ndarray, upper: np.ndarray) -> int:
    """How many of the bands are all of [0, 1]."""
    return int(np.count_nonzero((lower <= 0.0) & (upper >= 1.0)))


def wiener_summary(rows: list[dict], key: str = "by_rank") -> dict:
    """Per filter: (filter, method, cell, rank) triples inside GOAL, above, below, below
    0.90, more than two s.e. below 0.95 (and how many chance gives), the lowest; `key`: the
    rows' coverage per rank to count (a part's, "<part>_by_rank")."""
    out = {}
    for name in sorted({r["filter"] for r in rows if key in r}):
        triples = [(c, r["windows"]) for r in rows if r["filter"] == name
                   for c in by_rank({"by_rank": r[key]})]
        out[name] = triple_counts(triples)
    return out


def triple_counts(triples: list[tuple[float, int]]) -> dict:
    """(coverage, windows) triples counted against GOAL: inside, above, below, below 0.90,
    more than two s.e. below 0.95 (and how many chance gives there), the lowest."""
    low, high = GOAL
    return {"triples": len(triples),
            "inside": sum(low <= c <= high for c, _ in triples),
            "above": sum(c > high for c, _ in triples),
            "below": sum(c < low for c, _ in triples),
            "below_090": sum(c < 0.90 for c, _ in triples),
            "below_by_two": sum(0.95 - c > 2 * coverage_standard_error(w, w)
                                for c, w in triples),
            "below_by_two_chance": round(sum(chance_below(w) for _, w in triples), 1),
            "lowest": min((c for c, _ in triples), default=None)}


def _line(r: dict) -> str:
    parts = [f"{family} {r[family]['coverage']:.3f} (tied {r[family]['tied']}: "
             f"{r[family]['tied_coverage'] if r[family]['tied_coverage'] is None else round(r[family]['tied_coverage'], 3)}"  # noqa: E501
             f", width ×{r[family]['median_width_vs_union'] or 0:.2f})"
             for family in FAMILIES if family in r]
    return (f"{r['dataset']} {r['protocol']} ε={r['epsilon']:g} n={r['n']:,} "
            f"{r['method']:<9} " + "  ".join(parts))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dumps", nargs="*", default=[],
                        help="dumps of coverage_frequency.py --dump (relative to --cache-dir)")
    parser.add_argument("--cache-dir", default=tempfile.gettempdir())
    parser.add_argument("--methods", nargs="*", default=None)
    parser.add_argument("--families", nargs="*", default=list(DEFAULT_FAMILIES),
                        choices=FAMILIES, help="the band families measured on the dumps' and "
                        "the population's windows (the union always)")
    parser.add_argument("--population-windows", type=int, default=200)
    parser.add_argument("--seed", type=int, default=31)
    parser.add_argument("--datasets-dir", default=default_datasets_dir())
    parser.add_argument("--wiener", nargs="*", default=None, choices=WIENER_FILTERS,
                        help="measure Wiener top-k bands instead (benchmark top_k_wiener)")
    parser.add_argument("--unfiltered", action="store_true",
                        help="measure the unfiltered top-k band of --protocols on the windows "
                             "--wiener draws (benchmark top_k_unfiltered)")
    parser.add_argument("--conditional", action="store_true",
                        help="with --unfiltered: measure UNFILTERED_PARTS per rank too")
    parser.add_argument("--alone", action="store_true",
                        help="with --unfiltered: measure the rank-conditional band alone where "
                             "n·q* ≥ RANK_CONDITIONAL_ALONE_MIN_SUPPORTS, the join elsewhere "
                             "(frequency_bands."
                             "rank_conditional_alone_bands; measured, not shipped) instead of "
                             "the join")
    parser.add_argument("--benchmark", default=None,
                        help="the results' benchmark name (default: top_k_wiener, "
                             "top_k_wiener_amrp for AMRP alone, top_k_unfiltered)")
    parser.add_argument("--wiener-methods", nargs="*", default=list(WIENER_METHODS))
    parser.add_argument("--datasets", nargs="*", default=["airports"],
                        choices=[*DATASETS, *ORDINAL_DATASETS],
                        help="with --wiener or --unfiltered: the data sets drawn (the small "
                             "ordinal ones of ordinal_windows.ORDINAL_DATASETS too)")
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
                               args.wiener_methods, args.windows, args.seed, args.conditional,
                               args.full_limit, args.alone)
            found = wiener_summary(rows)
            if args.conditional:
                found |= {f"{name} {part}": line for part in ("union", "hybrid",
                                                              *UNFILTERED_PARTS)
                          for name, line in wiener_summary(rows, f"{part}_by_rank").items()}
                answers = sum(r["windows"] * TOP for r in rows)
                for name in {r["filter"] for r in rows}:
                    found[name]["full_share"] = round(
                        sum(r["full"] for r in rows) / answers, 4)
                    for part in UNFILTERED_PARTS:
                        found[f"{name} {part}"] |= {
                            "full_share": round(sum(r[f"{part}_full"] for r in rows) / answers,
                                                4),
                            "point_share": round(sum(r[f"{part}_points"] for r in rows)
                                                 / answers, 4),
                            "median_width_vs_join": round(statistics.median(
                                r[f"{part}_width_vs_join"] for r in rows), 3)}
            for name, line in found.items():
                print(f"{name}: {line['inside']} of {line['triples']} triples inside, "
                      f"{line['above']} above, {line['below']} below ({line['below_090']} "
                      f"below 0.90), {line['below_by_two']} below by two s.e. (chance "
                      f"{line['below_by_two_chance']}); lowest {line['lowest']}"
                      + (f"; all of [0, 1] {line['full_share']:.1%}" if "full_share" in line
                         else "")
                      + (f", width × the join {line['median_width_vs_join']}, a point "
                         f"{line['point_share']:.1%}"
                         if "median_width_vs_join" in line else ""), flush=True)
            run.save({"rows": rows, "summary": found})
        return 0
    if args.dumps and not folder.is_dir():
        print(f"no data sets at {folder}: set LDP_DATASETS", file=sys.stderr)
        return 2
    families = tuple(f for f in FAMILIES if f in set(args.families) | {"union"})
    missing = {JOINS[f] for f in families if f in JOINS} - set(families)
    if missing:
        print(f"--families: a join needs its part: add {', '.join(sorted(missing))}",
              file=sys.stderr)
        return 2
    with Run(args.benchmark or "top_k_selective", args.json, vars(args)) as run:
        rows = []
        for name in args.dumps:
            with (Path(args.cache_dir) / name).open("rb") as file:
                dump = pickle.load(file)  # a file coverage_frequency.py wrote (trusted, local)
            rows += redraw(dump, folder, args.methods, families)
        if args.population_windows:
            rows += population_rows(args.population_windows, args.seed, families)
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
                      f"{ranks['largest_width_vs_union']}); all of [0, 1] {line['full']}, "
                      f"≥ {WIDE:g}× the union {line['wide']} of {line['answers']} answers; "
                      f"pinned {line['pinned']}, coverage of the others "
                      f"{line['unpinned_coverage']}",
                      flush=True)
        kept = (ROW_FAMILIES if set(families) <= set(DEFAULT_FAMILIES)
                else CONDITIONAL_ROW_FAMILIES)
        run.save({"rows": [saved(r, kept) for r in rows], "summary": by_set})
    return 0


if __name__ == "__main__":
    sys.exit(main())
