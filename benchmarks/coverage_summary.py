"""Coverage of every 95% band the records and `ldp query` print, by family, in one table.

Read from the results of the coverage benchmarks (benchmarks/results/): coverage_frequency
(frequency values, sets, ranges, combined versions), top_k_selective (top-k answers, rank by
rank; top_k_pooled and top_k_memoized for the pooled-hash and memoized oracles),
memoized_values (the memoized oracles' value bands, value by value), pooled_sets (set and
range bands of pooled-hash windows under a fixed pool), combined_pooled_values (combined
pooled-hash versions, value by value),
coverage_moments and coverage_moments_large (the mean and the variance of Square Wave, n up to
10⁵ and n = 10⁶), coverage_cfo_moments (those of
CFO-binning), coverage_bins_fourth and
coverage_bins_large_fourth (the ranges, mean and variance of CFO-binning and hierarchical
histograms on windows of a seed no rule read; coverage_bins and coverage_bins_large without
them), coverage_bin_quantiles and coverage_bin_quantiles_large (their quantiles),
coverage_set4 (Square Wave's quantiles on the newest held-out set; coverage, set 3, without it)
and
quantile_lr (the profile-likelihood quantile band, measured and not used). Each family's
measured (setting, statistic or group) pairs are counted inside the goal [0.93, 0.97], above
and below it, and more than two standard errors from 0.95 beside the number an exactly
calibrated band would give by chance there. A pair's standard error is taken as
√(0.95 · 0.05 / W), W its windows: an upper bound for a group of values, whose checks within
one window are correlated, so the count is of pairs that are off, not of noise. Pairs a record
declares without a band are counted apart; families a record never bands are listed with the
reason.

    python benchmarks/coverage.py --summary
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
from scipy import stats

from ldp_telemetry.ldp.estimation.uncertainty import CONSERVATIVE_LABEL

RESULTS = Path(__file__).resolve().parent / "results"
GOAL = (0.93, 0.97)
NOMINAL = 0.95
#: Frequency groups of coverage_frequency's rows: each value, the 10 largest, the other values
#: with users, those without; a random set and range (their own answers), and Norm's.
VALUE_GROUPS = ("values", "top", "rest", "zeros")
QUERY_GROUPS = ("set", "range", "set norm", "range norm")


def _load(results: Path, name: str) -> dict | None:
    """A results file's `results`, with its run's `parameters` under "parameters"."""
    path = results / f"{name}.json"
    if not path.exists():
        return None
    run = json.loads(path.read_text())
    return {**run["results"], "parameters": run.get("parameters", {})}


#: The domain size of each data set of benchmarks/coverage_frequency.py (rows written before
#: the script recorded `d`) and of the small ordinal ones of selective_top_k.py --wiener
#: (ordinal_windows.ORDINAL_DATASETS).
FREQUENCY_DATASET_SIZES = {"airports": 229, "emoji": 969, "words": 4096, "names": 1024,
                           "common words": 256, "zipf": 64, "taxi 48": 48, "minute 64": 64,
                           "minute 128": 128, "dep_min 32": 32}


#: The chance that a calibrated band's coverage lies more than two standard errors from 0.95, by
#: the normal law (the per-benchmark tables quote it; the summary uses the exact binomial
#: law, `chance_shares`, which puts 3.4% there at W = 100).
OFF_BY_TWO_CHANCE = 2.0 * stats.norm.sf(2.0)


def coverage_standard_error(windows: int, checks: int) -> float:
    """The standard error of a 95% band's coverage over `windows` windows of `checks` checks in
    all: √(0.95 · 0.05 / min(W, m)) (the checks of one window are not independent; a group of
    one check per window, or fewer, has exactly this error, one of several per window less)."""
    return math.sqrt(NOMINAL * (1 - NOMINAL) / max(1, min(windows, checks)))


def off_by_two(coverage: float, windows: int, checks: int | None = None) -> bool:
    """Whether a coverage over `windows` windows (of `checks` checks) is more than two standard
    errors from 0.95."""
    return abs(coverage - NOMINAL) > 2.0 * coverage_standard_error(
        windows, windows if checks is None else checks)


def over_covered(cell: dict, level: str) -> bool:
    """Whether records give the band of quantile `level` in a Square Wave coverage results
    cell (benchmarks/coverage.py: its ε, n and buckets) as the conservative band, not a 95%
    band: a cell of the calibrated grid (CALIBRATED_BUCKETS) whose setting lists the level in
    SET4_OVER_COVERAGE (ldp_telemetry.ldp.estimation.band_declarations)."""
    from ldp_telemetry.ldp.estimation.band_declarations import SET4_OVER_COVERAGE
    from ldp_telemetry.ldp.estimation.uncertainty import CALIBRATED_BUCKETS
    return (cell.get("buckets", CALIBRATED_BUCKETS) == CALIBRATED_BUCKETS
            and level in SET4_OVER_COVERAGE.get((float(cell["epsilon"]), int(cell["n"])), {}))


def bin_over_covered(cell: dict, statistic: str) -> bool:
    """Whether records give the band of the mean or variance (`statistic`) in a CFO-binning or
    hierarchical-histogram coverage results cell (its protocol, ε and n) as the conservative
    band, not a 95% band: cfo_moments.conservative_moment_statistics names it there, as it
    does for records (BIN_OVER_COVERAGE of ldp_telemetry.ldp.estimation.bin_band_declarations,
    in the cell's grid cell)."""
    from ldp_telemetry.ldp.estimation.cfo_moments import conservative_moment_statistics
    return statistic in conservative_moment_statistics(cell["protocol"], float(cell["epsilon"]),
                                                       int(cell["n"]))


def bin_declared(cell: dict) -> set[str]:
    """The statistics records declare without a band in a CFO-binning or hierarchical-histogram
    coverage results cell: those it names (`declared`: the declarations before the pooled rule, as
    records made them when it was measured) and those records declare today
    (cfo_moments.declared_moment_statistics)."""
    from ldp_telemetry.ldp.estimation.cfo_moments import declared_moment_statistics
    return set(cell.get("declared", ())) | set(declared_moment_statistics(
        cell["protocol"], float(cell["epsilon"]), int(cell["n"])))


def bin_moment_pairs(cells: list[dict]) -> tuple[list, int, list]:
    """(95% pairs, declared, conservative pairs) of the mean and the variance of CFO-binning or
    hierarchical-histogram coverage cells: each (coverage, windows) pair, apart the statistics
    records declare (`bin_declared`, counted) and those they give as the conservative band
    (`bin_over_covered`)."""
    pairs, declared, conservative = [], 0, []
    for cell in cells:
        for statistic in ("mean", "variance"):
            pair = (cell["coverage"][statistic], cell["windows"])
            if statistic in bin_declared(cell):
                declared += 1
            elif bin_over_covered(cell, statistic):
                conservative.append(pair)
            else:
                pairs.append(pair)
    return pairs, declared, conservative


def below_by_two(coverage: float, windows: int) -> bool:
    """Whether a coverage over `windows` windows lies more than two standard errors below 0.95
    (a band too narrow: what a declaration is for)."""
    return coverage < NOMINAL - 2.0 * coverage_standard_error(windows, windows)


def below_by_two_chance(windows: int) -> float:
    """The chance that an exactly calibrated band's coverage over `windows` windows lies more
    than two standard errors below 0.95: the binomial tail (0.028 at W = 100, 0.024 at
    W = 200), not the normal one."""
    cut = NOMINAL - 2.0 * coverage_standard_error(windows, windows)
    return float(stats.binom.cdf(math.ceil(cut * windows) - 1, windows, NOMINAL))


def declared_values(row: dict) -> bool:
    """Whether records of a coverage_frequency cell declare their values without a band (too
    few expected supports, ldp_telemetry.ldp.estimation.frequency_bands.few_supports_reason)."""
    from ldp_telemetry.ldp.estimation.frequency_bands import few_supports_reason
    from ldp_telemetry.ldp.protocols import make_protocol
    d = row.get("d", FREQUENCY_DATASET_SIZES[row["dataset"]])
    noise = make_protocol(row["protocol"], row["epsilon"], d).noise(row["n"])
    return few_supports_reason(noise) is not None


def cell_key(row: dict) -> tuple:
    """A coverage_frequency row's cell: data set, protocol, ε and n."""
    return row["dataset"], row["protocol"], row["epsilon"], row["n"]


def verifying_row(row: dict, rows: list[dict]) -> bool:
    """Whether a record row is a --verify row: the second sampler of its cell, measured to
    check the first."""
    first = next(other for other in rows if cell_key(other) == cell_key(row))
    return first is not row


def chance_shares(windows: int) -> dict[str, float]:
    """The chance that an exactly calibrated band's coverage over `windows` windows (one
    check a window: Binomial(W, 0.95) hits) lies inside the goal, above it, below it, and more
    than two standard errors from 0.95 (`off_by_two`) — the exact binomial law, whose
    atoms at the goal's edges the normal approximation misses (inside: 0.754 at W = 100, 0.860
    at W = 200, against 0.64 and 0.81 from the normal law)."""
    law = stats.binom(windows, NOMINAL)
    hits = np.arange(windows + 1)
    mass = law.pmf(hits)
    share = hits / windows
    # the goal's edges as the counts compare them (93 of 100 is inside), free of float dust
    inside = (share >= GOAL[0] - 1e-12) & (share <= GOAL[1] + 1e-12)
    off = np.array([off_by_two(float(c), windows) for c in share])
    return {"inside": float(mass[inside].sum()),
            "above": float(mass[share > GOAL[1] + 1e-12].sum()),
            "below": float(mass[share < GOAL[0] - 1e-12].sum()),
            "off": float(mass[off].sum())}


def tally(family: str, band: str, pairs: list[tuple[float, int]], declared: int = 0,
          note: str = "") -> dict:
    """One family's row: its (coverage, windows) pairs counted against the goal, each count
    beside the number an exactly calibrated band would put there by chance (`chance_shares`
    of each pair's windows, summed; for a group of values checked together in a window, whose
    coverage spreads less than one check's, the chance inside is a lower bound)."""
    values = [c for c, _ in pairs]
    shares = {w: chance_shares(w) for w in {n for _, n in pairs}}
    return {"family": family, "band": band, "pairs": len(pairs),
            "inside": sum(GOAL[0] <= c <= GOAL[1] for c in values),
            "above": sum(c > GOAL[1] for c in values),
            "below": sum(c < GOAL[0] for c in values),
            "off": sum(off_by_two(c, n) for c, n in pairs),
            **{f"expected_{key}": sum(shares[n][key] for _, n in pairs)
               for key in ("inside", "above", "below", "off")},
            "lowest": min(values, default=None), "highest": max(values, default=None),
            "declared": declared, "note": note}


def frequency_rows(results: dict) -> list[dict]:
    """Frequency values (score band of the unbiased estimate, whatever the post-processing or
    Wiener filter), set and range answers, combined versions, by protocol family."""
    windows = int(results["parameters"].get("windows", 200))
    every = [row for row in results["rows"] if row.get("method", "record") == "record"]
    rows = [row for row in every if not verifying_row(row, every)]
    pure = [r for r in rows if r["protocol"] not in ("cms", "hcms", "flh")]
    pooled = [r for r in rows if r["protocol"] in ("cms", "hcms", "flh")]
    out = []
    for family, chosen in (("frequency values, pure oracles", pure),
                           ("frequency values, pooled-hash oracles, pooled over values",
                            pooled)):
        if not chosen:
            continue
        pairs = [(r["coverage"][g], windows) for r in chosen for g in VALUE_GROUPS
                 if r["coverage"].get(g) is not None and not declared_values(r)]
        declared = sum(len(VALUE_GROUPS) for r in chosen if declared_values(r))
        protocols = ", ".join(sorted({r["protocol"].upper() for r in chosen}))
        out.append(tally(family, "exact-variance", pairs, declared,
                         f"{protocols}; every post-processing and Wiener filter prints this "
                         "band of the unbiased estimate"
                         + (" (a Wiener record from its unbiased_std_error)"
                            if chosen is pooled else "")))
    queries = [(r["coverage"][g], windows) for r in rows for g in QUERY_GROUPS
               if r["coverage"].get(g) is not None]
    if queries:
        out.append(tally("set and range answers", "exact-variance", queries))
    combined = results.get("combined") or []
    if combined:
        pairs = [(r["coverage"][g], windows) for r in combined
                 for g in VALUE_GROUPS if r["coverage"].get(g) is not None]
        out.append(tally("combined versions", "exact-variance", pairs))
    return out


def pooled_value_rows(*measured: dict | None) -> list[dict]:
    """The values of the pooled-hash oracles one by one under one fixed pool, as records give
    them today (benchmarks/pooled_values.py --band shipped: the record's band below the
    pool-bias share, the pool-corrected one past it for CMS and HCMS, none where declared):
    one (coverage, windows with a band) pair per (cell, value), the values of a cell whose
    every window is declared counted as declared. The row above pools a window's values,
    which hides a value whose band misses in every window."""
    rows = [row for results in measured if results for row in results["rows"]
            if row.get("band") == "shipped"]
    if not rows:
        return []
    pairs = [(int(held) / row["windows"], row["windows"]) for row in rows if row["windows"]
             for held, count in row["held"].items() for _ in range(count)]
    declared = sum(row["values"] for row in rows if not row["windows"])
    protocols = ", ".join(sorted({r["protocol"].upper() for r in rows}))
    return [tally("frequency values, pooled-hash oracles, value by value under one pool",
                  "exact-variance, pool-corrected", pairs, declared,
                  f"{protocols}; per (cell, value); pool-corrected past the pool-bias share")]


def query_pairs(row: dict, key: str, windows: int) -> list[tuple[float, int]]:
    """(coverage, windows) of each fixed query of a pooled_values.py --queries row, from its
    `query_<key>_held` histogram over `windows` windows (none without windows)."""
    if not windows:
        return []
    return [(int(held) / windows, windows)
            for held, count in row[f"query_{key}_held"].items() for _ in range(count)]


def pooled_query_rows(results: dict | None) -> list[dict]:
    """Fixed sets and ranges of the pooled-hash oracles followed over windows of one pool
    (benchmarks/pooled_values.py --queries), one pair per (cell, query) and kind of window:
    the band `ldp query` gives — below the pool-bias share Σ_S f~ ± z · its error over pools,
    past it the sum of g with its variance given the pool — and past it the f~ band,
    measured and not used."""
    rows = [row for row in (results or {}).get("rows", []) if row.get("queries")]
    if not rows:
        return []

    def below(row: dict) -> int:
        return row["windows"] - row["corrected_windows"]

    exact = [pair for row in rows for pair in query_pairs(row, "exact", below(row))]
    past = [row for row in rows if row["corrected_windows"]]
    corrected = [pair for row in past
                 for pair in query_pairs(row, "corrected", row["corrected_windows"])]
    out = [tally("set and range answers, pooled-hash, one pool", "exact-variance, pool-corrected",
                 exact + corrected, 0, "fixed sets and ranges followed over windows of one "
                 "pool; the sum of g past the pool-bias share")]
    for key, family, band in (
            ("plain", "set and range answers, pooled-hash, one pool, past the share, f~ band",
             "(measured, not used)"),):
        pairs = [pair for row in past
                 for pair in query_pairs(row, key, row["corrected_windows"])]
        if pairs:
            out.append(tally(family, band, pairs))
    return out


def top_k_rows(calibration: dict | None, selective: dict | None = None,
               *unfiltered: dict | None, conditional: dict | None = None,
               alone: tuple[dict | None, ...] = ()) -> list[dict]:
    """The top-k answers' bands `ldp query` gives, counted per (method, cell, rank) triple —
    each answer's band is stated for that answer, and pooled over the ranks the top answer's
    dips hide — from benchmarks/selective_top_k.py: the join with the rank-conditional band
    (pure one-stage oracles: GRR, OUE and OLH on the calibration windows, and the other oracles
    `unfiltered` measured, selective_top_k.py --unfiltered: the triples of the cells that ship
    a band, those declared counted apart, `unfiltered_shipped`) and the union of the bootstrap
    and the score band alone (pooled-hash and memoized oracles, answers merged by
    post-processing; measured on GRR, OUE and OLH); with `conditional` (selective_top_k.py
    --families, top_k_selective_conditional), the conditional interval alone, measured and not
    used; with `alone` (selective_top_k.py --unfiltered --alone: the rank-conditional band alone
    where the window expects enough supports, frequency_bands.rank_conditional_alone_bands, the
    join elsewhere; every pure oracle, fresh windows), that rule, measured and not used, the
    cells declared (or without value bands, `declared_values`) apart. Without those results:
    the union per (method, cell) pair on the held-out windows of benchmarks/calibrate_top_k.py."""
    if selective:
        rows = selective["rows"]
        more = [row for results in unfiltered if results for row in results["rows"]]

        def triples(family: str) -> list[tuple[float, int]]:
            return [(float(c), r["windows"]) for r in rows
                    for c in r[family]["by_rank"].split()]
        joined = triples("both") + [(float(c), row["windows"]) for row in more
                                    if unfiltered_shipped(row) for c in row["by_rank"].split()]
        declared = sum(len(row["by_rank"].split()) for row in more
                       if not unfiltered_shipped(row))
        measured = ", ".join(["GRR", "OUE", "OLH"] + sorted(
            {row["protocol"].upper() for row in more} - {"GRR", "OUE", "OLH"}))
        out = [tally("top-k answers, per rank", CONSERVATIVE_LABEL, joined, declared,
                     note=f"pure one-stage oracles (measured: {measured}); (method, cell, "
                          "rank) triples"),
               tally("top-k answers, per rank, union alone", CONSERVATIVE_LABEL,
                     triples("union"),
                     note="answers merged by post-processing (measured on GRR, OUE, OLH; "
                          "the pooled-hash and memoized oracles apart, below); (method, "
                          "cell, rank) triples")]
        if conditional:
            line = conditional["summary"]["all"]["conditional"]
            out.append(tally("top-k answers, per rank, conditional alone",
                             "(measured, not used)",
                             [(float(c), r["windows"]) for r in conditional["rows"]
                              for c in r["conditional"]["by_rank"].split()],
                             note=f"β = 0 (GRR, OUE, OLH): all of [0, 1] for "
                                  f"{line['full'] / max(line['answers'], 1):.0%} of the "
                                  "answers; (method, cell, rank) triples"))
        rule = [row for results in alone if results for row in results["rows"]]
        if rule:
            from ldp_telemetry.ldp.estimation.frequency_bands import (
                RANK_CONDITIONAL_ALONE_MIN_SUPPORTS as least)
            counted = [row for row in rule
                       if unfiltered_shipped(row) and not declared_values(row)]
            oracles = ", ".join(sorted({row["protocol"].upper() for row in rule}))
            out.append(tally(
                f"top-k answers, per rank, rank-conditional alone where n·q* ≥ {least:g}",
                "(measured, not used)",
                [(float(c), row["windows"]) for row in counted for c in row["by_rank"].split()],
                sum(len(row["by_rank"].split()) for row in rule if row not in counted),
                note=f"the join elsewhere; fresh windows of {oracles}; (method, cell, rank) "
                     "triples"))
        return out
    if not calibration:
        return []
    windows = int(calibration["held_out"]["windows"])
    pairs = [(row[5]["union at 1"], windows) for row in calibration["fits"][0]["rows"]]
    return [tally("top-k answers", CONSERVATIVE_LABEL, pairs,
                  note="conservative: the union of the bootstrap and the score band")]


def pooled_top_k_rows(*measured: dict | None,
                      family: str = "top-k answers, per rank, pooled and memoized"
                      ) -> list[dict]:
    """The top-k answers' band of the pooled-hash and memoized oracles (the union of the
    bootstrap and the score band alone, `bias-corrected-bootstrap`), per (method, cell, rank)
    triple, from benchmarks/pooled_top_k.py: the triples of the cells that ship a band, those
    declared (frequency_bands.top_k_declared for the row's oracle key and ε∞) counted apart."""
    rows = [row for results in measured if results for row in results["rows"]]
    if not rows:
        return []
    shipped = [(float(c), row["windows"]) for row in rows if pooled_shipped(row)
               for c in row["by_rank"].split()]
    declared = sum(len(row["by_rank"].split()) for row in rows if not pooled_shipped(row))
    oracles = ", ".join(sorted({row["protocol"].upper() for row in rows}))
    return [tally(family, CONSERVATIVE_LABEL, shipped, declared,
                  note=f"measured: {oracles}; (method, cell, rank) triples")]


def memoized_value_rows(*measured: dict | None,
                        family: str = "frequency values, memoized oracles, value by value"
                        ) -> list[dict]:
    """The record's value bands of the memoized oracles followed value by value
    (benchmarks/memoized_values.py): one pair per (cell, value), its coverage over the cell's
    windows; the values of cells whose records have no value bands counted as declared."""
    rows = [row for results in measured if results for row in results["rows"]]
    if not rows:
        return []
    pairs = [(float(c), row["windows"]) for row in rows for c in row["coverages"].split()]
    declared = sum(FREQUENCY_DATASET_SIZES[cell["dataset"]] for results in measured if results
                   for cell in results.get("declared", []))
    oracles = ", ".join(sorted({row["protocol"].upper()
                                + (" (LOLOHA's g)" if row.get("g_rule") == "loloha" else "")
                                for row in rows}))
    return [tally(family, "exact-variance", pairs, declared,
                  note=f"measured: {oracles}; (cell, value) pairs")]


def combined_pooled_rows(*measured: dict | None) -> list[dict]:
    """The band of combined pooled-hash versions followed value by value under their shared
    pool (benchmarks/combined_pooled_values.py): one pair per (cell, value), its coverage over
    the cell's banded windows; the values of cells whose windows mostly have no band counted as
    declared."""
    rows = [row for results in measured if results for row in results["rows"]]
    if not rows:
        return []
    pairs = [(float(c), row["windows"]) for row in rows for c in row["coverages"].split()]
    declared = sum(FREQUENCY_DATASET_SIZES[cell["dataset"]] for results in measured if results
                   for cell in results.get("declared", []))
    versions = ", ".join(sorted({row["protocol"].upper() for row in rows}))
    return [tally("combined versions, pooled-hash, value by value", "exact-variance", pairs,
                  declared, note=f"measured: {versions}; (cell, value) pairs")]


def pooled_set_rows(*measured: dict | None) -> list[dict]:
    """`ldp query`'s set and range bands of pooled-hash windows below the pool-bias share,
    the same queries followed over the windows of one pool (benchmarks/pooled_sets.py): one pair
    per (cell, query), its coverage over the cell's banded windows; the queries of cells whose
    windows mostly have no band counted as declared."""
    rows = [row for results in measured if results for row in results["rows"]]
    if not rows:
        return []
    pairs = [(float(c), row["windows"]) for row in rows for c in row["coverages"].split()]
    queries = rows[0]["queries"]
    declared = sum(queries for results in measured if results
                   for _ in results.get("declared", []))
    oracles = ", ".join(sorted({row["protocol"].upper() for row in rows}))
    return [tally("set and range answers, pooled-hash, under a fixed pool", "exact-variance",
                  pairs, declared, note=f"measured: {oracles}; (cell, query) pairs")]


def pooled_shipped(row: dict) -> bool:
    """Whether a row of benchmarks/pooled_top_k.py is of a cell whose answers have a band
    (frequency_bands.top_k_declared for its oracle key and method)."""
    from ldp_telemetry.ldp.estimation.frequency_bands import top_k_declared
    return top_k_declared(row["method"], row["epsilon"], row["n"], row["oracle"],
                          row.get("lifetime_epsilon")) is None


def unfiltered_shipped(row: dict) -> bool:
    """Whether a row of selective_top_k.py --unfiltered is of a cell whose answers have a band
    (frequency_bands.top_k_declared for its protocol and method)."""
    from ldp_telemetry.ldp.estimation.frequency_bands import top_k_declared
    return top_k_declared(row["method"], row["epsilon"], row["n"], row["protocol"]) is None


def wiener_top_k_rows(*measured: dict | None) -> list[dict]:
    """The top-k answers `ldp query` gives a Wiener record (frequency_bands.top_k_filtered_bands),
    counted per (filter, method, cell, rank) triple from benchmarks/selective_top_k.py --wiener:
    the triples of the (filter, oracle, post-processing method) and cells that ship a band, and
    as declared those `ldp query` declares (frequency_bands.wiener_top_k_declared, the filter at
    the registry defaults the benchmark runs; or too few expected supports: `ldp query` gives no
    value of such a window a band, `declared_values`)."""
    from ldp_telemetry.ldp.estimation.frequency_bands import wiener_top_k_declared
    from ldp_telemetry.ldp.protocols import make_protocol
    rows = [row for results in measured if results for row in results["rows"]]
    if not rows:
        return []

    def shipped(row: dict) -> bool:
        protocol = make_protocol(row["protocol"], row["epsilon"],
                                 row.get("d", FREQUENCY_DATASET_SIZES[row["dataset"]]))
        return (wiener_top_k_declared(row["filter"], False, row["method"], protocol,
                                      row["epsilon"], row["n"]) is None
                and not declared_values(row))
    pairs = [(float(c), row["windows"]) for row in rows if shipped(row)
             for c in row["by_rank"].split()]
    declared = sum(len(row["by_rank"].split()) for row in rows if not shipped(row))
    filters = ", ".join(sorted({row["filter"].upper() for row in rows if shipped(row)}))
    # which filters were measured on which data sets, e.g. "airports (DW, GF-DW, IIW)"
    where = "; ".join(
        f"{dataset}: " + ", ".join(sorted({row["filter"].upper() for row in rows
                                           if row["dataset"] == dataset}))
        for dataset in sorted({row["dataset"] for row in rows}))
    *others, last = sorted({row["protocol"].upper() for row in rows})
    protocols = f"{', '.join(others)} and {last}" if others else last
    return [tally("Wiener top-k answers, per rank", CONSERVATIVE_LABEL, pairs, declared,
                  f"{filters} then base, norm-sub or norm-hyb (measured: {protocols} on "
                  f"{where}); (filter, method, cell, rank) triples")]


def moment_pairs(cells: list[dict]) -> tuple[list[tuple[float, int]], list[tuple[float, int]]]:
    """(95% pairs, conservative pairs) of coverage_moments' cells, each (coverage, windows) of
    one (cell, statistic): a cell's windows whose band is widened past CONSERVATIVE_SHARE
    (`conservative_windows`: records give that band as the conservative band) are a
    conservative pair, its other windows a 95% pair (a cell measured before the count was
    kept: every window a 95% one); sw-discrete's band holds the values as the client bucketed
    them (its `bucketed` coverage; it is never widened)."""
    pairs, conservative = [], []
    for cell in cells:
        measured = cell["bucketed"] if cell["protocol"] == "sw-discrete" else cell
        windows = cell["windows"]
        for key in ("mean", "variance"):
            widened = (measured.get("conservative_windows") or {}).get(key, 0)
            if widened:
                conservative.append((measured["coverage_conservative"][key], widened))
            if widened < windows:
                pairs.append(((measured["coverage_95"] if widened else
                               measured["coverage"])[key], windows - widened))
    return pairs, conservative


def numeric_rows(moments: dict | None, quantiles: dict | None, likelihood: dict | None,
                 cfo: dict | None = None, moments_large: dict | None = None) -> list[dict]:
    """Square Wave's mean and variance (exact-variance; `moments_large` its n = 10⁶ cells), its
    quantiles (the bias-corrected bootstrap, and the profile-likelihood band measured beside
    it), CFO-binning's mean and variance (exact-variance)."""
    out = []
    if moments:
        cells = moments["cells"] + (moments_large["cells"] if moments_large else [])
        pairs, conservative = moment_pairs(cells)
        out.append(tally("Square Wave mean and variance", "exact-variance", pairs,
                         len(conservative),
                         note="128, 1,024 and 4,096 output buckets; sw-discrete against "
                              "the bucketed values; declared: the windows whose band the "
                              "bucketing bound widens past 10%, given as the conservative "
                              "band"))
        if conservative:
            out.append(tally("Square Wave mean and variance where the bucketing bound widens "
                             "the band", CONSERVATIVE_LABEL, conservative, 0,
                             "the same cells' windows whose band is widened by more than 10% "
                             "of its half-width (moments.widened_past_share): records give it "
                             "as the conservative band"))
    if cfo:
        pairs, declared, conservative = bin_moment_pairs(cfo["cells"])
        protocols = sorted({c["protocol"] for c in cfo["cells"]})
        bins = sorted({c["output_buckets"] for c in cfo["cells"]})
        out.append(tally("CFO-binning mean and variance", "exact-variance", pairs,
                         declared + len(conservative),
                         f"{', '.join(protocols)} over {', '.join(map(str, bins))} bins, "
                         "against the bin-centre mean and the values spread in their bins; "
                         "declared: no band, or a conservative one"))
        if conservative:
            out.append(tally("CFO-binning mean and variance where the band over-covered",
                             CONSERVATIVE_LABEL, conservative, 0,
                             "the same cells' pairs in the (protocol, ε, n) settings where "
                             "the band covered above 0.97 pooled over three runs of "
                             "coverage_bins.py: records give it as the conservative band"))
    if quantiles:
        levels = [s for s in quantiles["statistics"] if s not in ("mean", "variance")]
        pairs, conservative, declared = [], [], 0
        from ldp_telemetry.ldp.estimation.band_declarations import SET4_MISSES
        from ldp_telemetry.ldp.estimation.uncertainty import CALIBRATED_BUCKETS
        for cell in quantiles["cells"]:
            # since the set was measured, declared in the cell (below 0.94 on a data shape
            # pooled over set 4's runs: no record there bands it) or given as the conservative
            # band (above 0.97 so: no record there gives it as a 95% band)
            key = (float(cell["epsilon"]), int(cell["n"]))
            grid = cell.get("buckets", CALIBRATED_BUCKETS) == CALIBRATED_BUCKETS
            for level in levels:
                if level in cell.get("declared_without_band", ()) or (
                        grid and level in SET4_MISSES.get(key, {})):
                    declared += 1
                elif over_covered(cell, level):
                    declared += 1
                    conservative.append((cell["coverage"][level], cell["windows"]))
                else:
                    pairs.append((cell["coverage"][level], cell["windows"]))
        below = sum(below_by_two(c, w) for c, w in pairs)
        chance = sum(below_by_two_chance(w) for _, w in pairs)
        shapes = ", ".join(quantiles.get("held_out_sets", []))
        out.append(tally("Square Wave quantiles", "bias-corrected-bootstrap", pairs, declared,
                         f"set {quantiles.get('set', 3)}, seed {quantiles['cells'][0]['seed']}: "
                         f"held-out windows of data shapes no margin saw ({shapes}), windows "
                         f"no declaration read; {below} more than 2 s.e. below 0.95 "
                         f"({chance:.1f} by chance); declared: no band, or a conservative one"))
        if conservative:
            out.append(tally("Square Wave quantiles where the band over-covered",
                             CONSERVATIVE_LABEL, conservative, 0,
                             "the same windows' pairs in the (ε, n, level) cells where a band "
                             "covered above 0.97 pooled over set 4's runs of a data shape: "
                             "records give it as the conservative band"))
    if likelihood:
        pairs = [(c["profile_likelihood_split"]["coverage"][level], c["windows"])
                 for c in likelihood["cells"] for level in likelihood["levels"]]
        out.append(tally("Square Wave quantiles, profile likelihood", "(measured, not used)",
                         pairs))
    return out


def bin_rows(bins: dict | None, large: dict | None = None) -> list[dict]:
    """The exact-variance bands of CFO-binning and hierarchical histograms on held-out windows
    (`newest_bin_set`: coverage_bins_fourth, and its n = 10⁶ cells): range answers of both,
    HH's mean and variance, CFO-binning's mean and variance re-measured, each apart the pairs
    records give as conservative bands (`bin_moment_pairs`)."""
    if not bins:
        return []
    cells = bins["cells"] + (large["cells"] if large else [])
    keys = ("central", "tail", "cut")
    found = [(c["coverage"][k], c["windows"]) for c in cells for k in keys
             if k not in c.get("declared", ())]
    declared = sum(k in c.get("declared", ()) for c in cells for k in keys)
    out = [tally("CFO-binning and HH range answers", "exact-variance", found, declared,
                 "central, tail and cutting ranges, the score form; against the probability "
                 f"with the mass spread in its bins; held-out windows (seed {bins['seed']}) "
                 "and data set")]
    wald = [(c["wald"][k]["in"], c["windows"]) for c in cells if "wald" in c
            for k in ("central", "tail", "cut")]
    if wald:
        out.append(tally("CFO-binning and HH range answers, plug-in Wald band",
                         "(measured, not used)", wald, 0,
                         "x ± 1.96 · the s.e. at the plug-in, on the same windows: what the "
                         "score form replaced"))
    for family, kept, protocols, note in (
            ("HH mean and variance", "HH mean and variance where the band over-covered",
             ("hh",), "against the bin-centre mean and the values spread in their bins"),
            ("CFO-binning mean and variance, held out",
             "CFO-binning mean and variance where the band over-covered, held out", ("cfo",),
             "the row above re-measured on windows no declaration was chosen on, and flights3m "
             "minute")):
        found, declared, conservative = bin_moment_pairs(
            [c for c in cells if c["protocol"].startswith(protocols)])
        out.append(tally(family, "exact-variance", found, declared + len(conservative),
                         note + "; declared: no band, or a conservative one"))
        if conservative:
            out.append(tally(kept, CONSERVATIVE_LABEL,
                             conservative, 0,
                             "the same windows' pairs in the (protocol, ε, n) settings where "
                             "the band covered above 0.97 pooled over three runs of "
                             "coverage_bins.py: records give it as the conservative band"))
    return out


def bin_quantile_rows(quantiles: dict | None, large: dict | None = None) -> list[dict]:
    """The quantile bands of CFO-binning and hierarchical histograms (the inverted exact CDF
    bands, by whole bins, that records give as conservative bands, not as 95% bands:
    CONSERVATIVE_LABEL) on held-out windows (coverage_bin_quantiles, and its n = 10⁶ cells,
    coverage_bin_quantiles_large): every (cell, level) pair."""
    if not quantiles:
        return []
    from ldp_telemetry.ldp.estimation.uncertainty import CONSERVATIVE_LABEL
    cells = quantiles["cells"] + (large["cells"] if large else [])
    found = [(c["coverage"]["whole-bins"][k], c["windows"]) for c in cells
             for k in quantiles["levels"] if k not in c.get("declared", ())]
    declared = sum(len(c.get("declared", ())) for c in cells)
    return [tally("CFO-binning and HH-ADMM quantiles", CONSERVATIVE_LABEL, found, declared,
                  "the CDF's exact bands inverted, whole bins: conservative by construction; "
                  "against the values' own quantile")]


#: The family of DECLARED's row for the top-k answers, which have no 95% band: the band
#: `ldp query` gives them is conservative (CONSERVATIVE_LABEL rows above), given beside.
TOP_K_DECLARED = "top-k answers (every oracle, Wiener records)"
DECLARED = [
    ("Square Wave range probabilities", "none", "EM's buckets are not linear in the reports "
     "and the record keeps no covariance of them"),
    (TOP_K_DECLARED, "none",
     "no calibrated 95% band: the conservative band is given instead (conservative_lower, "
     "conservative_upper; the rows above measure it)"),
    ("Wiener top-k answers: smooth, keep_extremes, other post-processing, a filter after an "
     "oracle it was not measured after, with other parameters than its defaults, over fewer "
     "or more values than measured after that oracle with that method (32–4,096 after GRR "
     "and OUE, 48–4,096, 48–969 or 48–229 after the others), a window size not measured "
     "over that many values (after the others, 10⁶ reports over more than 229 values, or "
     "969 for base after SUE, OLH and HR; after GRR, 10³ over more than 229 and 10⁴ over "
     "more than 969) or "
     "outside 10³–10⁶ reports or ε 0.5–4, pooled-hash and memoized oracles",
     "none",
     "not measured, or not linear in f~ at fixed gains, or no rank event in the exact "
     "covariance (docs/error-bars.md)"),
    ("heavy hitters of a string metric (its records; `ldp query --top`, `--labels`)", "none",
     "chosen by the search for their estimates (the winner's curse); how often the band of a "
     "string fixed in advance holds the truth of the strings found was never measured "
     "(benchmarks/open_domains.py measures the search's precision, recall and F1); the "
     "standard error is given; a record written before string records declared none states "
     "exact-variance and is read as none"),
    ("Square Wave quantiles in the (ε, n, level) settings where the band over-covered",
     "none",
     "no calibrated 95% band: above 0.97 on held-out windows of a data shape, pooled over "
     "set 4's runs; the conservative band is given instead (conservative_bands; "
     "benchmarks/declare_bands.py, SET4_OVER_COVERAGE)"),
    ("Square Wave mean and variance where the bucketing bound widens the band by more than "
     "10% of its half-width", "none",
     "no 95% band: the band holds an unbiased error with probability above 0.969, so it is "
     "conservative; the conservative band is given instead (conservative_bands; "
     "benchmarks/coverage_moments.py counts those windows)"),
    ("CFO-binning and HH mean and variance in the (protocol, ε, n) settings where the band "
     "over-covered", "none",
     "no calibrated 95% band: above 0.97 on held-out windows of a data shape, pooled over three "
     "runs of benchmarks/coverage_bins.py; the conservative band is given instead "
     "(conservative_bands; benchmarks/declare_bin_bands.py, BIN_OVER_COVERAGE)"),
    ("CFO-binning and HH quantiles", "none",
     "no calibrated 95% band: the band of whole bins identifies the quantile only to a bin "
     "and is conservative; the conservative band is given instead (conservative_bands; "
     "benchmarks/coverage_bin_quantiles.py)"),
]


#: benchmarks/coverage.py's results files of its held-out sets of windows, newest first: set 4's
#: shapes on a sixth seed (windows the rule never read), then set 4's own runs and set 3 (whose
#: windows now fit the declarations too)
QUANTILE_SETS = ("coverage_set4_sixth", "coverage_set4_fifth", "coverage_set4_fresh",
                 "coverage_set4", "coverage")


def newest_quantile_set(results: Path) -> dict | None:
    """The Square Wave quantile coverage of the newest held-out set of windows measured."""
    return next((found for name in QUANTILE_SETS
                 if (found := _load(results, name)) is not None), None)


#: benchmarks/coverage_bins.py's results files (n up to 10⁵, n = 10⁶), newest first: the
#: windows of a seed (127) that benchmarks/declare_bin_bands.py's rule never read, then seed
#: 47's, one of the three runs it reads
BIN_SETS = (("coverage_bins_fourth", "coverage_bins_large_fourth"),
            ("coverage_bins", "coverage_bins_large"))


def newest_bin_set(results: Path) -> tuple[dict | None, dict | None]:
    """The CFO-binning and HH coverage of the newest set of windows measured and its n = 10⁶
    cells."""
    for name, large in BIN_SETS:
        found = _load(results, name)
        if found is not None:
            return found, _load(results, large)
    return None, None


#: Results of benchmarks/selective_top_k.py --unfiltered (the oracles other than GRR, OUE and
#: OLH, n up to 10⁵; at 10⁶ all but SS and RWS; SS and RWS a run apart, and at 10⁶ one run
#: each; SUE at 10⁶ again on a fresh seed, the windows its declaration was not chosen on) and
#: --wiener (airports after GRR and OUE; its in-sample cell on two more seeds; DW and GF-DW
#: after SUE, HR and OLH; DW after RUE, BLH and RLH; every filter on other data, its dips on
#: another seed; DW and GF-DW over 4,096 words).
UNFILTERED_TOP_K = ("top_k_unfiltered", "top_k_unfiltered_large", "top_k_unfiltered_ss_rws",
                    "top_k_unfiltered_ss_large", "top_k_unfiltered_rws_large",
                    "top_k_unfiltered_sue_fresh")
#: Results of benchmarks/selective_top_k.py --unfiltered --alone (the rank-conditional band
#: alone where n·q* ≥ 5, the join elsewhere: frequency_bands.rank_conditional_alone_bands,
#: measured and not shipped), seed 34: GRR, OUE and OLH on airports and emoji at 10³–10⁵; the
#: other oracles at 10³–10⁵; all but OLH, SS and RWS at 10⁶; SS and RWS at 10³–10⁵ and, 50
#: windows a cell, at 10⁶.
ALONE_TOP_K = ("top_k_alone_grr_oue_olh", "top_k_alone", "top_k_alone_large",
               "top_k_alone_ss_rws", "top_k_alone_ss_large", "top_k_alone_rws_large")
#: Results of benchmarks/pooled_top_k.py (pooled-hash oracles; memoized oracles; the cells
#: declared, re-measured on another seed; the pooled-hash oracles between grid sizes; the other
#: memoized oracles and their failing cells again; all seven at n = 10⁶ and their failing cells
#: again, and their channel's windows at 10⁴–10⁵ checked against the clients'; memoized OLH and
#: RLH with LOLOHA's g).
POOLED_TOP_K = ("top_k_pooled", "top_k_memoized", "top_k_pooled_confirm",
                "top_k_memoized_confirm", "top_k_pooled_between", "top_k_memoized_more",
                "top_k_memoized_more_confirm", "top_k_memoized_million",
                "top_k_memoized_million_confirm", "top_k_memoized_channel",
                "top_k_memoized_loloha", "top_k_memoized_loloha_confirm",
                "top_k_memoized_loloha_million")
#: Results of benchmarks/memoized_values.py (memoized OLH and RLH with LOLOHA's g; the seven
#: memoized oracles at n = 10⁶).
MEMOIZED_VALUES = ("memoized_values_loloha", "memoized_values_million")
#: Results of both scripts at the other budget ratios, ε∞ = 1.25 ε1 and 5 ε1 (every memoized
#: oracle, LOLOHA's g apart; clients at 10³–10⁴, the composed channel above, failing top-k cells
#: again on another seed): counted in rows of their own.
MEMOIZED_RATIO_VALUES = ("memoized_values_ratio_low", "memoized_values_ratio_high",
                         "memoized_values_ratio_low_loloha", "memoized_values_ratio_high_loloha")
MEMOIZED_RATIO_TOP_K = tuple(f"top_k_memoized_ratio_{end}{g}{sampler}{again}"
                             for end in ("low", "high") for g in ("", "_loloha")
                             for sampler in ("", "_channel") for again in ("", "_confirm"))
#: The family of those rows.
OTHER_RATIOS = "memoized oracles at ε∞ = 1.25 ε1 and 5 ε1"
#: Results of benchmarks/selective_top_k.py --wiener of every filter after every pure oracle
#: they were not measured after (AMRP on the emoji data and its dip on another seed; DW and
#: GF-DW after RUE, BLH and RLH at every n, every post-processing; IIW, IIW-G, AMRP after the
#: other oracles; DW, GF-DW, IIW and IIW-G after them on the emoji data, d = 969, then each
#: method the table bands; DW and GF-DW after SUE, HR and OLH over 4,096 words), each run a
#: file.
WIENER_TOP_K_ALL_ORACLES = ("top_k_wiener_amrp_emoji", "top_k_wiener_rue",
                            "top_k_wiener_amrp_emoji_confirm", "top_k_wiener_amrp_emoji_grr",
                            "top_k_wiener_blh", "top_k_wiener_rlh", "top_k_wiener_amrp_oracles",
                            "top_k_wiener_oracles_methods", "top_k_wiener_amrp_olh_confirm",
                            "top_k_wiener_iiw_oracles", "top_k_wiener_iiw_oracles_more",
                            "top_k_wiener_iiw_methods", "top_k_wiener_emoji_oracles",
                            "top_k_wiener_emoji_oracles_more",
                            "top_k_wiener_emoji_hr_confirm", "top_k_wiener_emoji_methods",
                            "top_k_wiener_emoji_methods_more", "top_k_wiener_words_sue",
                            "top_k_wiener_words_hr_olh")
#: Results of benchmarks/selective_top_k.py --wiener over small ordinal domains
#: (ordinal_windows.py: 48 taxi slots, 32, 64 and 128 departure-time buckets; every filter
#: after GRR and OUE, then base, norm-sub and norm-hyb; after SUE, RUE, OLH, BLH, RLH and HR
#: over the taxi slots, then base, and norm-sub and norm-hyb where the table bands them) and
#: of AMRP after RUE, BLH and RLH (airports, base).
WIENER_TOP_K_SMALL = ("top_k_wiener_taxi", "top_k_wiener_minute64", "top_k_wiener_amrp_more",
                      "top_k_wiener_dep_min", "top_k_wiener_taxi_oracles",
                      "top_k_wiener_minute128", "top_k_wiener_taxi_oracles_more",
                      "top_k_wiener_taxi_methods", "top_k_wiener_taxi_methods_more")
WIENER_TOP_K = ("top_k_wiener", "top_k_wiener_amrp", "top_k_wiener_unseen",
                "top_k_wiener_recheck", "top_k_wiener_recheck_again", "top_k_wiener_oracles",
                "top_k_wiener_olh", "top_k_wiener_iiw_unseen", "top_k_wiener_amrp_unseen",
                "top_k_wiener_words", "top_k_wiener_words_gf", "top_k_wiener_oracles_more",
                "top_k_wiener_confirm_amrp", "top_k_wiener_confirm_iiw",
                *WIENER_TOP_K_ALL_ORACLES, "top_k_wiener_iiw_words", *WIENER_TOP_K_SMALL)


#: Results of benchmarks/pooled_values.py --band shipped (CMS and HCMS; FLH).
POOLED_VALUES = ("pooled_values_shipped", "pooled_values_shipped_flh")


def summary(results: Path = RESULTS) -> list[dict]:
    """Every family's row, in the order of docs/error-bars.md, from the results folder."""
    rows = []
    frequency = _load(results, "coverage_frequency")
    if frequency:
        rows += frequency_rows(frequency)
    rows += memoized_value_rows(*(_load(results, name) for name in MEMOIZED_VALUES))
    rows += memoized_value_rows(*(_load(results, name) for name in MEMOIZED_RATIO_VALUES),
                                family=f"frequency values, {OTHER_RATIOS}, value by value")
    rows += pooled_set_rows(_load(results, "pooled_sets"))
    rows += combined_pooled_rows(_load(results, "combined_pooled_values"))
    rows += pooled_value_rows(*(_load(results, name) for name in POOLED_VALUES))
    rows += pooled_query_rows(_load(results, "pooled_values_queries"))
    rows += top_k_rows(_load(results, "top_k_calibration"), _load(results, "top_k_selective"),
                       *(_load(results, name) for name in UNFILTERED_TOP_K),
                       conditional=_load(results, "top_k_selective_conditional"),
                       alone=tuple(_load(results, name) for name in ALONE_TOP_K))
    rows += pooled_top_k_rows(*(_load(results, name) for name in POOLED_TOP_K))
    rows += pooled_top_k_rows(*(_load(results, name) for name in MEMOIZED_RATIO_TOP_K),
                              family=f"top-k answers, per rank, {OTHER_RATIOS}")
    rows += wiener_top_k_rows(*(_load(results, name) for name in WIENER_TOP_K))
    rows += numeric_rows(_load(results, "coverage_moments"), newest_quantile_set(results),
                         _load(results, "quantile_lr"), _load(results, "coverage_cfo_moments"),
                         _load(results, "coverage_moments_large"))
    rows += bin_rows(*newest_bin_set(results))
    rows += bin_quantile_rows(_load(results, "coverage_bin_quantiles"),
                              _load(results, "coverage_bin_quantiles_large"))
    rows += [{"family": family, "band": band, "pairs": 0, "declared": None, "note": why}
             for family, band, why in DECLARED]
    return rows


def text(rows: list[dict]) -> str:
    """The summary as a plain-text table, each count followed by its chance (`tally`)."""
    keys = ("inside", "above", "below", "off")
    head = " ".join(f"{name:>15s}" for name in ("in (chance)", "above (chance)",
                                                 "below (chance)", ">2se (chance)"))
    lines = [f"{'family':44s} {'band':31s} {'pairs':>6s} {head} {'decl.':>6s}  range"]
    for r in rows:
        if not r["pairs"]:
            blank = " ".join(f"{'':>15s}" for _ in keys)
            lines.append(f"{r['family']:44s} {r['band']:31s} {'':>6s} {blank} {'all':>6s}  "
                         f"{r['note']}")
            continue
        counts = " ".join(f"{_with_chance(r, key, 0):>15s}" for key in keys)
        lines.append(f"{r['family']:44s} {r['band']:31s} {r['pairs']:6d} {counts} "
                     f"{r['declared']:6d}  {r['lowest']:.3f}–{r['highest']:.3f}")
    return "\n".join(lines)


def markdown(rows: list[dict]) -> str:
    """The summary as a Markdown table (docs/error-bars.md)."""
    header = ("| family | band | pairs | inside [0.93, 0.97] (chance) | above (chance) | "
              "below (chance) | off by 2 s.e. (chance) | declared | range |\n"
              "|---|---|--:|--:|--:|--:|--:|--:|---|")
    lines = [header]
    for r in rows:
        if not r["pairs"]:
            lines.append(f"| {r['family']} | `{r['band']}` | | | | | | all | {r['note']} |")
            continue
        counts = " | ".join(_with_chance(r, key, 1) for key in ("inside", "above", "below", "off"))
        lines.append(f"| {r['family']} | {_band(r['band'])} | {r['pairs']} | {counts} | "
                     f"{r['declared']} | {r['lowest']:.3f}–{r['highest']:.3f} |")
    return "\n".join(lines)


def _with_chance(row: dict, key: str, digits: int) -> str:
    """A row's count and, in parentheses, the number an exact band would put there by chance."""
    return f"{row[key]} ({row['expected_' + key]:.{digits}f})"


def _band(band: str) -> str:
    return band if band.startswith("(") else f"`{band}`"
