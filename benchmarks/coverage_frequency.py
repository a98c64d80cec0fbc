"""Coverage of the 95% bands of frequency values, query answers and combined versions, on real
categorical data, for every post-processing method.

For each data set, protocol, ε and n, W windows of n users are drawn (airports: one day of
flights3m's departure airports per window, d = 229, resampled to n; emoji: the occurrence
frequencies, d = 969), perturbed through the protocol's channel (GRR and OUE: their support
counts drawn from their exact distribution, `channel_support_counts`; OLH and HR: the client's
own `perturb` and the server's `support_counts`, up to --full-limit reports) and estimated.
Each band is checked against the window's true frequencies.

Row "record" — the bands records and point/set/range answers carry, the same whatever the
post-processing (ldp_telemetry.ldp.estimation.frequency_bands):

    values   the score band of every value's unbiased estimate, and by group: top (the 10
             highest true frequencies), rest (the other values with users), zeros (values
             without users); "... wald": f~ ± z · eq. 2 at the Norm-Sub plug-in, for comparison
    set      --sets random sets of 10% of the domain per window (exact band of the unbiased
             sum; "set norm": Norm's own answer)
    range    --sets random ranges of 1-25% of the domain per window (domain order)

One row per post-processing method (--methods; "auto" holds the replay's choice fixed):

    top-k            the 10 values ranked highest by the method's estimate, with the band
                     `ldp query` gives them (bootstrap through the channel widened to the
                     selected value's score band); "top-k bootstrap": the bootstrap alone;
                     "top-k exact": the score band alone
    old, old top     the band records had before: f' ± z · eq. 2 error of f~, every value and
                     the top ones
    tried, tried top a bias-corrected bootstrap of every post-processed value (the same
                     replicates), the alternative measured and not kept

Combined versions (--combined): per data set, ε and n, half the users report under OUE at ε and
half under GRR at ε; `combine_versions` gives the inverse-variance combination and its exact
standard error (band estimate ± z · s.e.).

With --methods and no method the results are the record's bands alone (benchmark
"coverage_frequency"), else per method ("coverage_frequency_methods"). A coverage's standard
error is about √(0.95 · 0.05 / m) for m checks (the count per group is in the JSON).

    nice python benchmarks/coverage_frequency.py --methods --windows 200 --combined \\
        --json benchmarks/results/coverage_frequency.json
    nice python benchmarks/coverage_frequency.py --datasets airports --protocols grr oue \\
        --sizes 1000 10000 100000 --windows 40 \\
        --json benchmarks/results/coverage_frequency_methods.json
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from bench_json import Run, add_json_argument, default_datasets_dir
from evaluate_postprocess import emoji_counts, support_counts_full

from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.ldp.engine.finalize import WindowResult
from ldp_telemetry.ldp.estimation.combine import combine_versions
from ldp_telemetry.ldp.estimation.frequency_bands import (BAND_REPLICATES, bootstrap_bands,
                                                          channel_support_counts, exact_bands,
                                                          score_bands, with_score_bands)
from ldp_telemetry.ldp.estimation.postprocess import METHODS, error_plug_in
from ldp_telemetry.ldp.estimation.replay import choose
from ldp_telemetry.ldp.estimation.uncertainty import Z95
from ldp_telemetry.ldp.protocols import make_protocol
from ldp_telemetry.ldp.protocols.noise import standard_error, unbiased_estimate

METHOD_ORDER = ("base", "base-pos", "post-pos", "base-cut", "norm", "norm-mul", "norm-sub",
                "norm-cut", "norm-hyb", "mle-apx", "power", "power-ns", "ibu", "auto")
TOP = 10
RECORD = "record"
#: The record's bands, the same whatever the post-processing (row "record").
RECORD_GROUPS = ("values", "top", "rest", "zeros", "set", "range", "set norm", "range norm",
                 "values wald", "top wald", "rest wald", "zeros wald")
#: Per post-processing method.
METHOD_GROUPS = ("top-k", "top-k bootstrap", "top-k exact", "old", "old top", "tried",
                 "tried top")


def airports(datasets: Path):
    """One day of flights3m per window: its departure airports' frequencies (d = 229)."""
    data = np.load(datasets / "flights3m_2001H1.npz")
    days, origin = data["day"], data["origin"]
    d = int(origin.max()) + 1
    frequencies = [np.bincount(origin[days == day], minlength=d) for day in range(182)]
    return lambda w: frequencies[w % len(frequencies)] / frequencies[w % len(frequencies)].sum()


def emoji(datasets: Path):
    counts = emoji_counts(str(datasets / "emoji_sentiment_occurrences.csv"))
    return lambda w: counts / counts.sum()


DATASETS = {"airports": airports, "emoji": emoji}


def support_counts(protocol, counts: np.ndarray, rng: np.random.Generator,
                   full_limit: int) -> np.ndarray | None:
    """The window's support counts through the protocol (module docstring); None when the
    client path would exceed --full-limit reports."""
    if protocol.name in ("grr", "oue"):
        return channel_support_counts(counts, protocol.noise(int(counts.sum())), rng)
    if counts.sum() > full_limit:
        return None
    return support_counts_full(protocol, counts, rng)


def query_weights(d: int, sets: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(random sets of 10% of the domain, random ranges of 1-25% of it) as 0/1 rows."""
    size = max(1, d // 10)
    set_rows = np.zeros((sets, d))
    for row in set_rows:
        row[rng.choice(d, size, replace=False)] = 1.0
    range_rows = np.zeros((sets, d))
    for row in range_rows:
        length = int(rng.integers(max(1, d // 100), max(2, d // 4)))
        start = int(rng.integers(0, d - length + 1))
        row[start:start + length] = 1.0
    return set_rows, range_rows


def measure_cell(dataset, protocol_name: str, epsilon: float, n: int, windows: int, sets: int,
                 replicates: int, seed: int, full_limit: int, methods,
                 fit: str = "norm-sub") -> dict | None:
    """Coverage per method and group over `windows` windows (module docstring)."""
    d = dataset(0).size
    protocol = make_protocol(protocol_name, epsilon, d)
    noise = protocol.noise(n)
    rng = np.random.default_rng([seed, n, int(epsilon * 100), len(protocol_name)])
    hits = {m: {g: [0, 0] for g in METHOD_GROUPS} for m in methods}
    hits[RECORD] = {g: [0, 0] for g in RECORD_GROUPS}
    seconds: dict[str, list] = {m: [] for m in methods}
    for w in range(windows):
        counts = rng.multinomial(n, dataset(w))
        truth = counts / n
        observed = support_counts(protocol, counts, rng, full_limit)
        if observed is None:
            return None
        unbiased = unbiased_estimate(observed, noise)
        plug_in = error_plug_in(unbiased)
        error = standard_error(plug_in, noise)
        top = np.argsort(-truth, kind="stable")[:TOP]
        is_top = np.zeros(d, bool)
        is_top[top] = True
        groups = {"values": np.ones(d, bool), "top": is_top, "rest": ~is_top & (counts > 0),
                  "zeros": counts == 0}
        set_rows, range_rows = query_weights(d, sets, rng)
        weights = np.vstack([set_rows, range_rows])
        true_sums = weights @ truth
        # the record's band of every value, and of a set or range (module docstring)
        inside = _inside(*score_bands(unbiased, protocol.p_star, protocol.q_star, n), truth)
        for group, mask in groups.items():
            _add(hits[RECORD][group], inside[mask])
        wald = _inside(*exact_bands(unbiased, error), truth)  # f~ ± z · plug-in error
        for group, mask in groups.items():
            _add(hits[RECORD][f"{group} wald"], wald[mask])
        for shifted in ("", " norm"):  # every method's band of a sum; Norm's own answer's
            rows = weights - weights.sum(axis=1, keepdims=True) / d if shifted else weights
            sums = weights @ unbiased + (weights.sum(axis=1) / d * (1.0 - unbiased.sum())
                                         if shifted else 0.0)
            errors = np.sqrt([protocol.linear_variance(n, row, plug_in) for row in rows])
            covered = _inside(*exact_bands(sums, errors), true_sums)
            _add(hits[RECORD]["set" + shifted], covered[:sets])
            _add(hits[RECORD]["range" + shifted], covered[sets:])
        for method in methods:
            started = time.perf_counter()
            run = METHODS[method].run
            if method == "auto":  # the record's choice, held fixed
                run = METHODS[choose(unbiased, noise, "full").method].run
            estimate = run(unbiased, noise)
            # top-k: the bootstrap band of the ranked values; the same replicates give the
            # bias-corrected bootstrap band of every value, the alternative measured ("tried")
            answers = lambda f, t: (np.concatenate([f, f[np.argsort(-f, kind="stable")[:TOP]]]),  # noqa: E731
                                    np.concatenate([t, t[np.argsort(-f, kind="stable")[:TOP]]]))
            low, high = bootstrap_bands(unbiased, noise, lambda u, run=run: run(u, noise),
                                        answers, replicates, seed + w,
                                        lambda u: METHODS[fit].run(u, noise))
            seconds[method].append(time.perf_counter() - started)
            order = np.argsort(-estimate, kind="stable")[:TOP]
            _add(hits[method]["top-k bootstrap"], _inside(low[d:], high[d:], truth[order]))
            top_lo, top_hi = with_score_bands(low[d:], high[d:], unbiased[order], noise)
            _add(hits[method]["top-k"], _inside(top_lo, top_hi, truth[order]))
            _add(hits[method]["top-k exact"], inside[order])
            tried = _inside(low[:d], high[:d], truth)
            _add(hits[method]["tried"], tried)
            _add(hits[method]["tried top"], tried[is_top])
            old = _inside(estimate - Z95 * error, estimate + Z95 * error, truth)
            _add(hits[method]["old"], old)
            _add(hits[method]["old top"], old[is_top])
    return {method: {"coverage": {g: (h[0] / h[1] if h[1] else None)
                                  for g, h in hits[method].items()},
                     "checks": {g: h[1] for g, h in hits[method].items()},
                     "median_top_k_band_s": (statistics.median(seconds[method])
                                             if seconds.get(method) else None)}
            for method in hits}


def _inside(lower: np.ndarray, upper: np.ndarray, truth: np.ndarray) -> np.ndarray:
    return (lower <= truth + 1e-12) & (truth <= upper + 1e-12)


def _top(estimate: np.ndarray, truth: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(-estimate, kind="stable")[:TOP]
    return estimate[order], truth[order]


def _add(pair: list, inside: np.ndarray) -> None:
    pair[0] += int(np.count_nonzero(inside))
    pair[1] += int(inside.size)


def measure_combined(dataset, epsilon: float, n: int, windows: int, seed: int) -> dict:
    """Coverage of the combined estimate of two versions (OUE and GRR at ε, n/2 users each)."""
    d = dataset(0).size
    labels = [f"v{i}" for i in range(d)]
    document = {"metrics": [{"name": "m", "protocol": "grr", "epsilon": epsilon,
                             "domain": {"labels": labels}, "version": 2,
                             "history": [{"protocol": "oue", "epsilon": epsilon,
                                          "domain": {"labels": labels}, "version": 1}]}]}
    configs = parse_registry(document).versions("m")
    rng = np.random.default_rng([seed, n, int(epsilon * 100), 77])
    hits = {g: [0, 0] for g in ("values", "top", "rest", "zeros")}
    for w in range(windows):
        parts, total = [], np.zeros(d)
        for config in configs:
            counts = rng.multinomial(n // 2, dataset(w))
            total += counts
            noise = config.protocol.noise(n // 2)
            unbiased = unbiased_estimate(channel_support_counts(counts, noise, rng), noise)
            parts.append((config, WindowResult(n // 2, unbiased, np.zeros(d), unbiased, noise)))
        combined = combine_versions(parts)
        order = [combined.labels.index(label) for label in labels]
        truth = total / total.sum()
        inside = _inside(*exact_bands(combined.estimate[order], combined.std_error[order]),
                         truth)
        top = np.zeros(d, bool)
        top[np.argsort(-truth, kind="stable")[:TOP]] = True
        for group, mask in (("values", np.ones(d, bool)), ("top", top),
                            ("rest", ~top & (total > 0)), ("zeros", total == 0)):
            _add(hits[group], inside[mask])
    return {g: (h[0] / h[1] if h[1] else None) for g, h in hits.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=DATASETS)
    parser.add_argument("--protocols", nargs="+", default=["grr", "oue", "olh", "hr"])
    parser.add_argument("--epsilons", nargs="+", type=float, default=[0.5, 1.0, 2.0, 4.0])
    parser.add_argument("--sizes", nargs="+", type=int,
                        default=[1_000, 10_000, 100_000, 1_000_000])
    parser.add_argument("--methods", nargs="*", default=list(METHOD_ORDER))
    parser.add_argument("--windows", type=int, default=40)
    parser.add_argument("--sets", type=int, default=5)
    parser.add_argument("--replicates", type=int, default=BAND_REPLICATES)
    parser.add_argument("--full-limit", type=int, default=100_000,
                        help="most reports a window perturbed with the client's code may have")
    parser.add_argument("--combined", action="store_true")
    parser.add_argument("--fit", default="norm-sub",
                        help="the distribution the bootstrap replays (a post-processing method)")
    parser.add_argument("--seed", type=int, default=31)
    parser.add_argument("--datasets-dir", default=default_datasets_dir())
    add_json_argument(parser)
    args = parser.parse_args(argv)
    folder = Path(args.datasets_dir)
    if not folder.is_dir():
        print(f"no data sets at {folder}: set LDP_DATASETS", file=sys.stderr)
        return 2
    rows, combined = [], []
    # two results files: the record's bands alone (--methods with none), and per method
    name = "coverage_frequency_methods" if args.methods else "coverage_frequency"
    with Run(name, args.json, vars(args)) as run:
        for name in args.datasets:
            dataset = DATASETS[name](folder)
            for protocol in args.protocols:
                for epsilon in args.epsilons:
                    for n in args.sizes:
                        cell = measure_cell(dataset, protocol, epsilon, n, args.windows,
                                            args.sets, args.replicates, args.seed,
                                            args.full_limit, args.methods, args.fit)
                        if cell is None:
                            print(f"{name} {protocol} ε={epsilon:g} n={n:,}: not measured "
                                  f"(more than --full-limit reports)", flush=True)
                            continue
                        for method, result in cell.items():
                            rows.append({"dataset": name, "d": dataset(0).size,
                                         "protocol": protocol, "epsilon": epsilon, "n": n,
                                         "method": method, **result})
                            print(_line(rows[-1]), flush=True)
            if args.combined:
                for epsilon in args.epsilons:
                    for n in args.sizes:
                        coverage = measure_combined(dataset, epsilon, n, args.windows,
                                                    args.seed)
                        combined.append({"dataset": name, "epsilon": epsilon, "n": n,
                                         "coverage": coverage})
                        print(f"{name} combined ε={epsilon:g} n={n:,}: "
                              + "  ".join(f"{g} {v:.3f}" for g, v in coverage.items()
                                          if v is not None), flush=True)
        run.save({"rows": rows, "combined": combined})
    return 0


def _line(row: dict) -> str:
    coverage = row["coverage"]
    cells = "  ".join(f"{g} {value:.3f}" if value is not None else f"{g} -"
                      for g, value in coverage.items())
    return (f"{row['dataset']} {row['protocol']} ε={row['epsilon']:g} n={row['n']:,} "
            f"{row['method']:<9} {cells}")


if __name__ == "__main__":
    sys.exit(main())
