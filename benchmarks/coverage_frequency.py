"""Coverage of the 95% bands of frequency values, query answers and combined versions, on real
categorical data, for every post-processing method.

For each data set, protocol, ε and n, W windows of n users are drawn (airports: one day of
flights3m's departure airports per window, d = 229, resampled to n; emoji: the occurrence
frequencies, d = 969; words: wordfreq's 4,096 most frequent English words, d = 4,096; names:
the 1,024 most given (name, sex) pairs of the 2017 US births, d = 1,024 — users drawn by
frequency; common words: the 256 most frequent of them, d = 256; zipf: a synthetic Zipf(1.1)
head over 64 values), perturbed and estimated.
The support counts come from (`SAMPLERS`, the row's `sampler`):

    exact    GRR, OUE, SUE: their exact distribution (`channel_support_counts`); CMS: its
             (hash, bucket) table's exact distribution given the pool (`cms_table`: per hash
             j, the users hashed to bucket b keep its bit with p, every other bit is set
             with q, independently), read by the protocol's own `support_counts`
    client   OLH, HR, HCMS, FLH (and CMS with --verify): the client's own `perturb`, the
             server's `accumulate` and `support_counts`, the real code path
    model    OLH windows of more than --full-limit (report, value) hash tests: independent
             c_v ~ Binomial(n_v, p*) + Binomial(n - n_v, 1/g), what a uniformly random hash
             gives (`channel_support_counts`)

--verify adds, for each cell of n <= 10⁵, the other sampler's row: OLH's model beside its
client, CMS's client beside its exact table (n <= 10⁴), so that the model and the table are
checked against the client in the same run.
Each band is checked against the window's true frequencies.

Row "record" — the bands records and point/set/range answers carry, the same whatever the
post-processing (ldp_telemetry.ldp.estimation.frequency_bands):

    values   the score band of every value's unbiased estimate (for CMS, HCMS and FLH f~ ± z ·
             its standard error with the collision term: `record_bands`), and by group: top (the 10
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
error is about √(0.95 · 0.05 / m) for m checks (the count per group is in the JSON); the
criterion printed at the end (`off_by_two`) takes √(0.95 · 0.05 / min(W, m)): the checks of one
window are not independent, and a group of one check per window has exactly that error. A
calibrated band lands more than two such errors from 0.95 in at most 4.6% of (cell, group)
pairs, and outside [0.93, 0.97] in about 19% of them at W = 200.

    nice python benchmarks/coverage_frequency.py --methods --protocols grr oue sue olh hr cms \\
        hcms flh --windows 200 --full-limit 300000000 --combined --verify \\
        --json benchmarks/results/coverage_frequency.json
    nice python benchmarks/coverage_frequency.py --datasets airports --protocols grr oue \\
        --sizes 1000 10000 100000 --windows 40 \\
        --json benchmarks/results/coverage_frequency_methods.json
"""
from __future__ import annotations

import argparse
import csv
import gzip
import pickle
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from bench_json import Run, add_json_argument, default_datasets_dir
from report import frequency_criterion, verifying_row

from evaluate_postprocess import babynames_counts, emoji_counts, support_counts_full

from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.ldp.engine.finalize import WindowResult
from ldp_telemetry.ldp.estimation.combine import combine_versions
from ldp_telemetry.ldp.estimation.frequency_bands import (BAND_REPLICATES, bootstrap_spread,
                                                          channel_support_counts, exact_bands,
                                                          score_bands, with_score_bands)
from ldp_telemetry.ldp.estimation.postprocess import METHODS, error_plug_in
from ldp_telemetry.ldp.estimation.replay import choose
from ldp_telemetry.ldp.estimation.uncertainty import Z95
from ldp_telemetry.ldp.protocols import is_pooled, make_protocol
from ldp_telemetry.ldp.protocols.hash_pool import pool_hash
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


#: Words of wordfreq's English list kept as the words domain (its most frequent ones).
WORDS = 4_096
#: Words of the common-words domain (the top of the words domain).
COMMON_WORDS = 256
#: (name, sex) pairs of one year's US births kept as the names domain, and the year.
NAMES, NAMES_YEAR = 1_024, 2017


def words(datasets: Path):
    """wordfreq's WORDS most frequent English words, users drawn by frequency (d = 4,096)."""
    with gzip.open(datasets / "wordfreq_en_large.csv.gz", "rt", encoding="utf-8",
                   newline="") as handle:
        frequencies = np.array([float(row["freq"]) for row in csv.DictReader(handle)])
    top = np.sort(frequencies)[::-1][:WORDS]
    return lambda w: top / top.sum()


def names(datasets: Path):
    """The NAMES most given (name, sex) pairs of NAMES_YEAR's births (d = 1,024)."""
    counts = babynames_counts(str(datasets / "babynames_ssa_1880_2017.csv.gz"), NAMES_YEAR)
    top = np.sort(counts)[::-1][:NAMES].astype(np.float64)
    return lambda w: top / top.sum()


def common_words(datasets: Path):
    """wordfreq's COMMON_WORDS most frequent English words (d = 256: a steep Zipf head, the top
    word 9% of the uses), users drawn by frequency."""
    top = words(datasets)(0)[:COMMON_WORDS]
    return lambda w: top / top.sum()


def zipf(datasets: Path):
    """A synthetic head-heavy shape (no data file): Zipf(1.1) over 48 of 64 values, 16 held by
    nobody (the top value 22% of the users)."""
    weights = np.concatenate([1.0 / np.arange(1, 49) ** 1.1, np.zeros(16)])
    return lambda w: weights / weights.sum()


DATASETS = {"airports": airports, "emoji": emoji, "words": words, "names": names,
            "common words": common_words, "zipf": zipf}
#: Protocols whose support counts are drawn from their exact distribution by default.
EXACT = ("grr", "oue", "sue", "cms")
#: The samplers --verify compares, per protocol: (the default's other one).
VERIFIED = {"olh": "model", "cms": "client"}
#: Largest n of a --verify row (CMS's client: n · m bits per window).
VERIFY_SIZES = {"olh": 100_000, "cms": 10_000}


def cms_table(protocol, counts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A CMS statistic (k hashes x m buckets of set-bit counts) drawn from its exact
    distribution given the pool: the n_v users of v spread uniformly over the k hashes, and
    per hash j and bucket b, Bin(users hashed to b, p) + Bin(other users of j, q) bits."""
    k, m = protocol.k, protocol.m
    per_hash = rng.multinomial(counts, np.full(k, 1.0 / k))  # (d, k) users of v on hash j
    buckets = pool_hash(np.arange(k)[None, :], np.arange(protocol.d)[:, None], m,
                        protocol.root)
    held = np.zeros((k, m), dtype=np.int64)
    np.add.at(held, (np.broadcast_to(np.arange(k), buckets.shape), buckets), per_hash)
    others = held.sum(axis=1, keepdims=True) - held
    return rng.binomial(held, protocol.bucket_p) + rng.binomial(others, protocol.bucket_q)


def default_sampler(protocol_name: str, n: int, d: int, full_limit: int) -> str:
    """The sampler a cell's row uses (module docstring)."""
    if protocol_name in EXACT:
        return "exact"
    if protocol_name == "olh" and n * d > full_limit:
        return "model"
    return "client"


def support_counts(protocol, counts: np.ndarray, rng: np.random.Generator,
                   sampler: str) -> np.ndarray:
    """The window's support counts through the protocol, by `sampler` (module docstring)."""
    if sampler == "client":
        return support_counts_full(protocol, counts, rng)
    if protocol.name == "cms":
        return np.asarray(protocol.support_counts(cms_table(protocol, counts, rng)), np.int64)
    return channel_support_counts(counts, protocol.noise(int(counts.sum())), rng)


def record_bands(protocol, unbiased: np.ndarray, n: int
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(lower, upper, std_error): the record's band of every value (finalize's noise at the
    Norm-Sub plug-in; the score band, or f~ ± z · std_error for a pooled-hash oracle, whose
    std_error holds the collision term, as output/bands.py reads it). A pooled-hash oracle's
    collision term takes Σ f² from the plug-in here (`given`) where finalize estimates it from f~
    (`for_window`): the standard errors differ by at most 0.6% (median per window over the four
    data sets, common words and Zipf, CMS and HCMS, ε 0.5 and 4, n 10³ and 10⁵), kept so that the
    committed results stay what their recorded commands give."""
    plug_in = error_plug_in(unbiased)
    noise = protocol.noise(n).given(plug_in)
    error = standard_error(plug_in, noise)
    if is_pooled(protocol.name):
        return (*exact_bands(unbiased, error), error)
    return (*score_bands(unbiased, protocol.p_star, protocol.q_star, n), error)


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
                 replicates: int, seed: int, sampler: str, methods,
                 fit: str = "norm-sub") -> dict:
    """Coverage per method and group over `windows` windows (module docstring)."""
    d = dataset(0).size
    protocol = make_protocol(protocol_name, epsilon, d)
    noise = protocol.noise(n)
    rng = np.random.default_rng([seed, n, int(epsilon * 100), len(protocol_name)])
    hits = {m: {g: [0, 0] for g in METHOD_GROUPS} for m in methods}
    hits[RECORD] = {g: [0, 0] for g in RECORD_GROUPS}
    seconds: dict[str, list] = {m: [] for m in methods}
    parts: dict[str, dict[str, list]] = {m: {} for m in methods}  # per window, for --dump
    for w in range(windows):
        counts = rng.multinomial(n, dataset(w))
        truth = counts / n
        observed = support_counts(protocol, counts, rng, sampler)
        unbiased = unbiased_estimate(observed, noise)
        plug_in = error_plug_in(unbiased)
        band_lower, band_upper, error = record_bands(protocol, unbiased, n)
        top = np.argsort(-truth, kind="stable")[:TOP]
        is_top = np.zeros(d, bool)
        is_top[top] = True
        groups = {"values": np.ones(d, bool), "top": is_top, "rest": ~is_top & (counts > 0),
                  "zeros": counts == 0}
        set_rows, range_rows = query_weights(d, sets, rng)
        weights = np.vstack([set_rows, range_rows])
        true_sums = weights @ truth
        # the record's band of every value, and of a set or range (module docstring)
        inside = _inside(band_lower, band_upper, truth)
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
            chosen = method
            if method == "auto":  # the record's choice, held fixed
                chosen = choose(unbiased, noise, "full").method
            run = METHODS[chosen].run
            estimate = run(unbiased, noise)
            # top-k: the bootstrap band of the ranked values; the same replicates give the
            # bias-corrected bootstrap band of every value, the alternative measured ("tried")
            answers = lambda f, t: (np.concatenate([f, f[np.argsort(-f, kind="stable")[:TOP]]]),  # noqa: E731
                                    np.concatenate([t, t[np.argsort(-f, kind="stable")[:TOP]]]))
            centre, half = bootstrap_spread(unbiased, noise, lambda u, run=run: run(u, noise),
                                            answers, replicates, seed + w,
                                            lambda u: METHODS[fit].run(u, noise))
            seconds[method].append(time.perf_counter() - started)
            low, high = np.clip(centre - half, 0, 1), np.clip(centre + half, 0, 1)
            order = np.argsort(-estimate, kind="stable")[:TOP]
            selected = truth[order]
            _add(hits[method]["top-k bootstrap"], _inside(low[d:], high[d:], selected))
            # the union with the selected values' score bands (`top_k_parts`)
            top_c, top_h = centre[d:], half[d:]
            union_lo, union_hi = with_score_bands(top_c - top_h, top_c + top_h,
                                                  unbiased[order], noise)
            _add(hits[method]["top-k"], _inside(union_lo, union_hi, selected))
            _add(hits[method]["top-k exact"], inside[order])
            score_lo, score_hi = score_bands(unbiased[order], noise.p_star, noise.q_star, n,
                                             noise.extra_variance)
            for key, value in (("truth", selected), ("centre", top_c), ("half", top_h),
                               ("union_lo", union_lo), ("union_hi", union_hi),
                               ("score_lo", score_lo), ("score_hi", score_hi)):
                parts[method].setdefault(key, []).append(value)
            tried = _inside(low[:d], high[:d], truth)
            _add(hits[method]["tried"], tried)
            _add(hits[method]["tried top"], tried[is_top])
            old = _inside(estimate - Z95 * error, estimate + Z95 * error, truth)
            _add(hits[method]["old"], old)
            _add(hits[method]["old top"], old[is_top])
    cell = {method: {"coverage": {g: (h[0] / h[1] if h[1] else None)
                                  for g, h in hits[method].items()},
                     "checks": {g: h[1] for g, h in hits[method].items()},
                     "median_top_k_band_s": (statistics.median(seconds[method])
                                             if seconds.get(method) else None)}
            for method in hits}
    return cell, {method: {key: np.array(value) for key, value in mine.items()}
                  for method, mine in parts.items()}


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
    parser.add_argument("--full-limit", type=int, default=300_000_000,
                        help="most (report, value) hash tests of an OLH window perturbed with "
                             "the client's code; larger windows use the model")
    parser.add_argument("--verify", action="store_true",
                        help="also measure OLH's model and CMS's client beside the default "
                             "(module docstring)")
    parser.add_argument("--combined", action="store_true")
    parser.add_argument("--dump", default=None,
                        help="write each top-k band's parts per window (truth, centre, union, "
                             "score band) to this pickle, for benchmarks/calibrate_top_k.py")
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
    dumped: dict[tuple, dict[str, np.ndarray]] = {}
    # two results files: the record's bands alone (--methods with none), and per method
    name = "coverage_frequency_methods" if args.methods else "coverage_frequency"
    with Run(name, args.json, vars(args)) as run:
        for name in args.datasets:
            dataset = DATASETS[name](folder)
            d = dataset(0).size
            for protocol in args.protocols:
                for epsilon in args.epsilons:
                    for n in args.sizes:
                        samplers = [default_sampler(protocol, n, d, args.full_limit)]
                        if (args.verify and protocol in VERIFIED
                                and n <= VERIFY_SIZES[protocol]):
                            samplers.append(VERIFIED[protocol])
                        for sampler in dict.fromkeys(samplers):
                            cell, parts = measure_cell(dataset, protocol, epsilon, n,
                                                       args.windows, args.sets,
                                                       args.replicates, args.seed, sampler,
                                                       args.methods, args.fit)
                            if sampler == samplers[0]:
                                dumped.update({(name, protocol, epsilon, n, method): mine
                                               for method, mine in parts.items()})
                            for method, result in cell.items():
                                rows.append({"dataset": name, "d": d, "protocol": protocol,
                                             "sampler": sampler, "epsilon": epsilon, "n": n,
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
    if args.dump:
        with open(args.dump, "wb") as file:
            pickle.dump({"seed": args.seed, "windows": args.windows, "top": TOP,
                         "replicates": args.replicates, "cells": dumped}, file)
    record_rows = [row for row in rows if row["method"] == RECORD]
    record_rows = [row for row in record_rows if not verifying_row(row, record_rows)]
    if record_rows:
        print(frequency_criterion(record_rows, args.windows), flush=True)
    return 0


def _line(row: dict) -> str:
    coverage = row["coverage"]
    cells = "  ".join(f"{g} {value:.3f}" if value is not None else f"{g} -"
                      for g, value in coverage.items())
    return (f"{row['dataset']} {row['protocol']} ({row['sampler']}) ε={row['epsilon']:g} "
            f"n={row['n']:,} {row['method']:<9} {cells}")


if __name__ == "__main__":
    sys.exit(main())
