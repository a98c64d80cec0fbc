"""Coverage, rank by rank, of the top-k band `ldp query --top` gives a pooled-hash (CMS, HCMS,
FLH) or memoized (two-stage) oracle: the union of the bias-corrected bootstrap and the selected
value's score band (frequency_bands.top_k_bands; a conservative band, not a 95% band: the
answer's `conservative_method` bias-corrected-bootstrap), which
the pure one-stage oracles' rank-conditional join does not reach (`rank_conditional_applies`).

Windows are drawn here, per (data set, oracle, ε, n): W windows of n users drawn from the data
set's window (coverage_frequency's data sets), their support counts through the oracle — CMS
from its exact distribution given the pool (coverage_frequency.cms_table), HCMS, FLH and the
memoized oracles through their own clients (`perturb`, then the server's aggregation; a
memoized oracle's rows are distinct devices, one report each, the case its exact variance
holds for) — and the band made exactly as `ldp query` does: the window's noise model with the
pool's collision term (`for_window`), R = 40 replicates, the method's top 10. A memoized
oracle runs at ε1 = ε with ε∞ = --lifetime-factor · ε.

Per (data set, oracle, ε, n, method): coverage per rank, the median width and time per query;
per oracle: (method, cell, rank) triples inside [0.93, 0.97], above, below, below 0.90, more
than two standard errors (√(0.95 · 0.05 / W)) below 0.95 beside how many an exactly
calibrated band puts there by chance (coverage_summary.below_by_two_chance), the lowest; and
the triples more than two standard errors below, listed (`failing`: what TOP_K_UNCALIBRATED
declares).

With --confirm RESULTS, only the cells (data set, oracle, ε, n) where a triple of RESULTS fell
more than two standard errors below 0.95 are measured again (pass another --seed): a
declaration chosen on one seed's windows, checked on others.

With --memoized-sampler channel a memoized oracle's support counts are drawn from its composed
channel (frequency_bands.channel_support_counts at the protocol's p* and q*) instead of its
client: exact for memoized GRR and the unary encodings (one report per device: their bits are
randomised independently in both stages), the uniform-hash model for local hashing (as
coverage_frequency's OLH model: exact per value and per pair of values, not jointly — a
report's supports share one seed; tests/ldp/test_memoized_channel.py) — what makes n = 10⁶
affordable (a memoized unary client costs about 6 s a window there). --against RESULTS...
compares each (data set, oracle key, ε, n, method, rank) triple measured here with the same
triple of those results files, pooled over them (another sampler or seed), counting the
triples whose two coverages differ by more than two standard errors of a difference
(`agreement`). --g-rule loloha gives memoized OLH and RLH LOLOHA's lifetime-optimal g
(memoize.g, `make_memoized_protocol`; their key `memoized-olh-loloha`). --declarations RESULTS...
measures nothing and prints, per oracle key, the cells where a triple pooled over every window
of those files lies more than two standard errors below 0.95 (`pooled_failing`): the memoized
oracles' declarations (a ratio-free channel's triple pooled over every ratio, the others per
ratio; one run's rows at several ratios counted once: `_triples`).

    nice python benchmarks/pooled_top_k.py --protocols memoized-grr memoized-oue memoized-olh \\
        memoized-sue memoized-rue memoized-blh memoized-rlh --sizes 1000000 --seed 731 \\
        --memoized-sampler channel --benchmark top_k_memoized_million \\
        --json benchmarks/results/top_k_memoized_million.json
    python benchmarks/pooled_top_k.py --declarations benchmarks/results/top_k_memoized*.json

    nice python benchmarks/pooled_top_k.py --protocols cms hcms flh \\
        --json benchmarks/results/top_k_pooled.json
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import zlib
from pathlib import Path

import numpy as np
from bench_json import (Run, add_json_argument, default_datasets_dir, epsilons_problem, grid_cells,
                        simulation_problem)
from coverage_frequency import DATASETS, TOP, default_sampler, support_counts
from coverage_summary import (FREQUENCY_DATASET_SIZES, GOAL, NOMINAL, OFF_BY_TWO_CHANCE,
                              below_by_two, below_by_two_chance)
from selective_top_k import by_rank

from ldp_telemetry.ldp.estimation.frequency_bands import (MEMOIZED_KEY, channel_support_counts,
                                                          rank_conditional_applies,
                                                          ratio_free_channel, top_k_bands,
                                                          top_k_oracle)
from ldp_telemetry.ldp.estimation.postprocess import METHODS
from ldp_telemetry.ldp.protocols import is_pooled, make_protocol
from ldp_telemetry.ldp.protocols.memoized import (G_RULES, LOCAL_HASHING, MEMOIZED,
                                                  make_memoized_protocol)
from ldp_telemetry.ldp.protocols.noise import unbiased_estimate

#: Prefix of a memoized oracle on the command line ("memoized-grr": L-GRR), its key in
#: TOP_K_UNCALIBRATED.
MEMOIZED_PREFIX = MEMOIZED_KEY
#: How a memoized oracle's windows are drawn (--memoized-sampler; module docstring).
MEMOIZED_SAMPLERS = ("client", "channel")


def oracle(name: str, epsilon: float, d: int, lifetime_factor: float,
           g_rule: str | None = None):
    """The protocol of `name` at ε over d values ("memoized-X": X's two-stage form at ε1 = ε,
    ε∞ = lifetime_factor · ε, local hashing's g by `g_rule`, None the default)."""
    if name.startswith(MEMOIZED_PREFIX):
        member = name[len(MEMOIZED_PREFIX):]
        return make_memoized_protocol(member, epsilon, d, lifetime_factor * epsilon,
                                      g_rule if member in LOCAL_HASHING else None)
    return make_protocol(name, epsilon, d)


def g_rule_problem(protocols: list[str], g_rule: str | None) -> str | None:
    """Why --g-rule cannot apply to --protocols (none is memoized local hashing with a chosen
    g), or None."""
    if g_rule is None or any(name.startswith(MEMOIZED_PREFIX)
                             and name[len(MEMOIZED_PREFIX):] in LOCAL_HASHING
                             for name in protocols):
        return None
    return (f"--g-rule applies to memoized local hashing with a chosen g "
            f"({', '.join(MEMOIZED_PREFIX + m for m in sorted(LOCAL_HASHING))})")


def cell_rows(dataset_name: str, dataset, name: str, epsilon: float, n: int,
              methods: list[str], windows: int, seed: int, lifetime_factor: float,
              memoized_sampler: str = "client", g_rule: str | None = None) -> list[dict]:
    """The rows of one (data set, oracle, ε, n) cell, one per method (module docstring)."""
    d = dataset(0).size
    protocol = oracle(name, epsilon, d, lifetime_factor, g_rule)
    memoized = name.startswith(MEMOIZED_PREFIX)
    sampler = memoized_sampler if memoized else default_sampler(name, n, d, 300_000_000)
    base_noise = protocol.noise(n)
    # the channel's windows are also seeded by the oracle's name (its length alone, the
    # client's key, is the same for every memoized oracle and would share their draws)
    rng = np.random.default_rng([seed, n, int(epsilon * 100), d, len(name)] + (
        [zlib.crc32(name.encode())] if sampler == "channel" else []))
    inside: dict[str, list[np.ndarray]] = {m: [] for m in methods}
    widths: dict[str, list[float]] = {m: [] for m in methods}
    seconds: dict[str, list[float]] = {m: [] for m in methods}
    for w in range(windows):
        counts = rng.multinomial(n, dataset(w))
        truth = counts / n
        if sampler == "channel":
            support = channel_support_counts(counts, base_noise, rng)
        else:
            support = support_counts(protocol, counts, rng, sampler)
        unbiased = unbiased_estimate(support, base_noise)
        noise = base_noise.for_window(unbiased)  # as queries.WindowAnswers.noise
        for method in methods:
            def post(u: np.ndarray, method: str = method, noise=noise) -> np.ndarray:
                return METHODS[method].run(u, noise)
            started = time.perf_counter()
            lower, upper = top_k_bands(unbiased, noise, post, TOP)
            seconds[method].append(time.perf_counter() - started)
            order = np.argsort(-post(unbiased), kind="stable")[:TOP]
            selected = truth[order]
            inside[method].append((lower <= selected + 1e-12) & (selected <= upper + 1e-12))
            widths[method].append(float(np.median(upper - lower)))
    rows = []
    for method in methods:
        held = np.vstack(inside[method])
        rows.append({"dataset": dataset_name, "protocol": name, "oracle": top_k_oracle(protocol),
                     "epsilon": epsilon, "n": n, "method": method, "windows": windows,
                     "lifetime_epsilon": lifetime_factor * epsilon if memoized else None,
                     "sampler": sampler, "d": d,
                     **({"g": protocol.g, "g_rule": protocol.g_rule}
                        if memoized and hasattr(protocol, "g_rule") else {}),
                     "coverage": round(float(held.mean()), 4),
                     "by_rank": " ".join(f"{v:g}" for v in held.mean(axis=0).round(4)),
                     "median_width": round(statistics.median(widths[method]), 6),
                     "median_ms_per_query": round(1e3 * statistics.median(seconds[method]), 2)})
    return rows


def oracle_summary(rows: list[dict]) -> dict:
    """Per oracle: its (method, cell, rank) triples inside GOAL, above, below, below 0.90, more
    than two s.e. below 0.95 (beside chance), the lowest, and those more than two s.e. below
    (`failing`: data set, ε, n, method, rank, coverage)."""
    low, high = GOAL
    out = {}
    for name in sorted({r["protocol"] for r in rows}):
        mine = [r for r in rows if r["protocol"] == name]
        triples = [(c, r, rank) for r in mine
                   for rank, c in enumerate(by_rank({"by_rank": r["by_rank"]}), start=1)]
        out[name] = {
            "triples": len(triples),
            "inside": sum(low <= c <= high for c, _, _ in triples),
            "above": sum(c > high for c, _, _ in triples),
            "below": sum(c < low for c, _, _ in triples),
            "below_090": sum(c < 0.90 for c, _, _ in triples),
            "below_by_two": sum(below_by_two(c, r["windows"]) for c, r, _ in triples),
            "below_by_two_chance": round(sum(below_by_two_chance(r["windows"])
                                             for _, r, _ in triples), 1),
            "lowest": min((c for c, _, _ in triples), default=None),
            "failing": [{"dataset": r["dataset"], "epsilon": r["epsilon"], "n": r["n"],
                         "method": r["method"], "rank": rank, "coverage": c}
                        for c, r, rank in triples if below_by_two(c, r["windows"])]}
    return out


def lifetime_ratio(row: dict) -> float | None:
    """A row's ε∞ / ε1 (rounded to 6 places), None for a one-stage oracle's."""
    lifetime = row.get("lifetime_epsilon")
    return None if lifetime is None else round(lifetime / row["epsilon"], 6)


def row_protocol(row: dict):
    """The protocol a row of this script measured (`oracle` at its ε, ε∞ / ε1, g rule and the
    data set's d: the row's `d`, or coverage_summary.FREQUENCY_DATASET_SIZES for rows written
    before it was recorded)."""
    d = row.get("d", FREQUENCY_DATASET_SIZES[row["dataset"]])
    ratio = lifetime_ratio(row)
    return oracle(row["protocol"], row["epsilon"], d, 2.0 if ratio is None else ratio,
                  row.get("g_rule"))


def channel_ratio(row: dict) -> float | None:
    """The ε∞ / ε1 a row's triple is pooled under: None where its composed channel is the same
    at every ratio (frequency_bands.ratio_free_channel: the windows of every ratio are windows
    of one channel), else `lifetime_ratio`."""
    if lifetime_ratio(row) is None or ratio_free_channel(row_protocol(row)):
        return None
    return lifetime_ratio(row)


def _triples(rows: list[dict]) -> dict[tuple, tuple[float, int]]:
    """(data set, oracle key, ε, n, method, rank, `channel_ratio`) -> (coverage, windows) of
    rows of this script, a triple measured by several rows (a run and its --confirm, other
    seeds, and for a ratio-free channel other ratios) pooled over their windows; keyed by
    `top_k_oracle`, so that another g of one protocol is another triple. Rows of one run — the
    same `seed` (`measured_rows`) and sampler, at other ratios or in another file — drew the same
    data windows with the same random numbers (the composed channel's: the same windows), so
    they count once: their coverage averaged, their windows not added. A row without `seed` is
    a run of its own."""
    runs: dict[tuple, dict[tuple, list[float]]] = {}
    for index, r in enumerate(rows):
        run = (r["seed"], r.get("sampler")) if "seed" in r else ("row", index)
        ratio = channel_ratio(r)
        for rank, c in enumerate(by_rank({"by_rank": r["by_rank"]}), start=1):
            key = (r["dataset"], r["oracle"], r["epsilon"], r["n"], r["method"], rank, ratio)
            total = runs.setdefault(key, {}).setdefault(run, [0.0, 0.0, 0.0])
            total[0] += c * r["windows"]
            total[1] += r["windows"]
            total[2] = max(total[2], r["windows"])
    out = {}
    for key, by_run in runs.items():
        inside = sum(held / windows * most for held, windows, most in by_run.values())
        windows = sum(most for _, _, most in by_run.values())
        out[key] = (inside / windows, int(windows))
    return out


def measured_rows(paths: list[str]) -> list[dict]:
    """The rows of results files of this script, each with its file's `seed` (parameters);
    OSError, ValueError or KeyError when a file cannot be read."""
    rows = []
    for path in paths:
        run = json.loads(Path(path).read_text())
        seed = run["parameters"]["seed"]
        rows += [{**row, "seed": seed} for row in run["results"]["rows"]]
    return rows


def agreement(rows: list[dict], others: list[dict]) -> dict:
    """How the triples of `rows` agree with the same triples of `others` (another sampler or
    seed): how many were compared, how many differ by more than two standard errors of a
    difference (each coverage's from the binomial law at their pooled mean, floored at
    0.95 · 0.05 so that two coverages of 1.00 do not make it 0), beside the share chance gives
    (OFF_BY_TWO_CHANCE, 4.6%), and the median and largest absolute difference."""
    mine, theirs = _triples(rows), _triples(others)
    shared = sorted(set(mine) & set(theirs), key=str)
    differences, off = [], 0
    for key in shared:
        (a, wa), (b, wb) = mine[key], theirs[key]
        pooled = (a * wa + b * wb) / (wa + wb)
        spread = max(pooled * (1.0 - pooled), NOMINAL * (1.0 - NOMINAL))
        off += abs(a - b) > 2.0 * (spread * (1.0 / wa + 1.0 / wb)) ** 0.5
        differences.append(abs(a - b))
    return {"compared": len(shared), "differ_by_two": off,
            "differ_by_two_chance": round(float(OFF_BY_TWO_CHANCE) * len(shared), 1),
            "median_difference": round(statistics.median(differences), 4) if shared else None,
            "largest_difference": round(max(differences), 4) if shared else None}


def pooled_failing(rows: list[dict]) -> dict[str, set[tuple[float, int]]]:
    """Oracle key (`top_k_oracle`) -> the (ε, n) cells where a (data set, method, rank) triple,
    its coverage pooled over every window `rows` measured for it (the runs of several seeds),
    lies more than two standard errors below 0.95 at the pooled W: the rule the memoized
    oracles' declarations follow (frequency_bands.TOP_K_UNCALIBRATED; in-sample). A ratio-free
    channel's triple is pooled over every ratio; one that moves with the ratio (memoized RUE,
    LOLOHA's g) per ratio, and a cell that fails at any ratio is declared at all (`_triples`)."""
    out: dict[str, set[tuple[float, int]]] = {}
    for (_, key, epsilon, n, *_), (coverage, windows) in _triples(rows).items():
        if below_by_two(coverage, windows):
            out.setdefault(key, set()).add((epsilon, n))
    return out


def failing_cells(results: dict) -> set[tuple[str, str, float, int]]:
    """The (data set, oracle, ε, n) cells of a results file of this script where a (method,
    rank) triple fell more than two standard errors below 0.95 (`oracle_summary`)."""
    return {(f["dataset"], name, f["epsilon"], f["n"])
            for name, line in results["summary"].items() for f in line["failing"]}


def print_declarations(paths: list[str]) -> int:
    """--declarations: the cells `pooled_failing` finds over the rows of `paths`, per oracle
    key; 2 when a file cannot be read."""
    try:
        rows = measured_rows(paths)
    except (OSError, ValueError, KeyError) as error:
        print(f"--declarations: cannot read the rows of {' '.join(paths)}: {error}",
              file=sys.stderr)
        return 2
    for key, cells in sorted(pooled_failing(rows).items()):
        print(f"{key}: " + ", ".join(f"({epsilon:g}, {n:,})" for epsilon, n in sorted(cells)))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="*", default=["airports", "common words"],
                        choices=list(DATASETS))
    parser.add_argument("--protocols", nargs="*", default=["cms", "hcms", "flh"],
                        help="pooled-hash oracles, or memoized-X for X's two-stage form")
    parser.add_argument("--epsilons", nargs="*", type=float, default=[0.5, 1.0, 2.0, 4.0])
    parser.add_argument("--sizes", nargs="*", type=int, default=[1_000, 10_000, 100_000])
    parser.add_argument("--methods", nargs="*", default=["base", "norm-sub", "norm-hyb"])
    parser.add_argument("--windows", type=int, default=100)
    parser.add_argument("--lifetime-factor", type=float, default=2.0,
                        help="a memoized oracle's ε∞ as a multiple of ε1 (> 1)")
    parser.add_argument("--memoized-sampler", default="client", choices=MEMOIZED_SAMPLERS,
                        help="a memoized oracle's windows through its client or its composed "
                             "channel (module docstring)")
    parser.add_argument("--g-rule", default=None, choices=G_RULES,
                        help="memoized OLH's and RLH's g (memoize.g; default: the report g)")
    parser.add_argument("--against", nargs="*", default=[], metavar="RESULTS",
                        help="compare each triple with the same triple of these results files")
    parser.add_argument("--declarations", nargs="*", default=None, metavar="RESULTS",
                        help="measure nothing: print the cells `pooled_failing` finds over the "
                             "rows of these results files")
    parser.add_argument("--seed", type=int, default=31)
    parser.add_argument("--datasets-dir", default=default_datasets_dir())
    parser.add_argument("--benchmark", default="top_k_pooled", help="the results' name")
    parser.add_argument("--confirm", default=None, metavar="RESULTS",
                        help="measure only the cells with a failing triple in this results "
                             "file of the script (on another --seed)")
    add_json_argument(parser)
    args = parser.parse_args(argv)
    if args.declarations is not None:
        return print_declarations(args.declarations)
    folder = Path(args.datasets_dir)
    problem = (simulation_problem(folder, args.windows, args.sizes)
               or epsilons_problem(args.epsilons))
    if problem:
        print(problem, file=sys.stderr)
        return 2
    if not args.lifetime_factor > 1.0:
        print(f"--lifetime-factor must exceed 1, got {args.lifetime_factor:g}", file=sys.stderr)
        return 2
    unknown = [m for m in args.methods if m not in METHODS]
    if unknown:
        print(f"--methods: unknown {', '.join(unknown)}", file=sys.stderr)
        return 2
    for name in args.protocols:
        memoized = name.startswith(MEMOIZED_PREFIX)
        if (memoized and name[len(MEMOIZED_PREFIX):] not in MEMOIZED) or (
                not memoized and not is_pooled(name)):
            print(f"--protocols: {name!r} is neither a pooled-hash oracle nor memoized-X for X "
                  f"in {sorted(MEMOIZED)}", file=sys.stderr)
            return 2
        if rank_conditional_applies(oracle(name, 1.0, 64, args.lifetime_factor)):
            print(f"--protocols: {name} gets the rank-conditional band "
                  "(selective_top_k.py --unfiltered measures it)", file=sys.stderr)
            return 2
    problem = g_rule_problem(args.protocols, args.g_rule)
    if problem:
        print(problem, file=sys.stderr)
        return 2
    try:
        others = measured_rows(args.against)  # seeded: one run's rows at several ratios once
    except (OSError, ValueError, KeyError) as error:
        print(f"--against: cannot read the rows of {' '.join(args.against)}: {error}",
              file=sys.stderr)
        return 2
    only = None
    if args.confirm is not None:
        try:
            only = failing_cells(json.loads(Path(args.confirm).read_text())["results"])
        except (OSError, ValueError, KeyError) as error:
            print(f"--confirm: cannot read the failing cells of {args.confirm}: {error}",
                  file=sys.stderr)
            return 2
    with Run(args.benchmark, args.json, vars(args)) as run:
        rows: list[dict] = []
        for dataset_name, dataset, name, epsilon, n in grid_cells(
                args.datasets, lambda key: DATASETS[key](folder), args.protocols,
                args.epsilons, args.sizes):
            if only is not None and (dataset_name, name, epsilon, n) not in only:
                continue
            found = cell_rows(dataset_name, dataset, name, epsilon, n, args.methods,
                              args.windows, args.seed, args.lifetime_factor,
                              args.memoized_sampler, args.g_rule)
            rows += found
            for r in found:
                print(f"{dataset_name} {name} ε={epsilon:g} n={n:,} {r['method']}: "
                      f"{r['coverage']:.3f} by rank {r['by_rank']} "
                      f"({r['median_ms_per_query']} ms)", flush=True)
        found_summary = oracle_summary(rows)
        for name, line in found_summary.items():
            print(f"{name}: {line['inside']} of {line['triples']} triples inside, "
                  f"{line['above']} above, {line['below']} below ({line['below_090']} below "
                  f"0.90), {line['below_by_two']} below by two s.e. (chance "
                  f"{line['below_by_two_chance']}); lowest {line['lowest']}", flush=True)
            for failing in line["failing"]:
                print(f"  {name} {failing}", flush=True)
        saved = {"rows": rows, "summary": found_summary}
        if args.against:
            saved["against"] = agreement(rows, others)
            print(f"against {' '.join(args.against)}: {saved['against']}", flush=True)
        run.save(saved)
    return 0


if __name__ == "__main__":
    sys.exit(main())
