"""Accuracy of every post-processing method on real and synthetic values ([Wang20] journal §4).

A fixed population of n users (true counts n_v, true frequencies f_v = n_v / n) is perturbed
and estimated --repeats times with the project's protocol code; every method post-processes the
same unbiased estimate f~, and three errors are averaged over the repeats (§4.1):

    full      (1/d) sum_v (f'_v - f_v)^2                                 full-domain MSE (§4.2)
    set rho   mean over random sets S of rho% of the domain (drawn without replacement, fresh
              sets every repeat, --sets of them per rho) of (f'_S - f_S)^2   set-value MSE (§4.3)
    top k     (1/k) sum over the k values of highest TRUE frequency of (f'_v - f_v)^2   (§4.4)

Post-Pos answers every query from f~ and clips the answer at 0 (a set sum, or each value).

Perturbation: --perturb full runs protocol.perturb, accumulate and support_counts on all n
users (any protocol; ~3 s per repeat for OUE at n = 10^6, d = 1024). --perturb exact (the
default, OUE and GRR) draws the support counts directly. OUE: every bit of every report is
perturbed independently, so c_v ~ Binomial(n_v, p*) + Binomial(n - n_v, q*), independently across
v. GRR: a report is its value with probability p* - q*, otherwise a uniform value (p* + (d-1) q*
= 1 makes that GRR), so c = Binomial(n_v, p* - q*) per v plus a uniform Multinomial of the rest.
Both are the exact distribution of the same statistic, not an approximation; a test checks that
both paths agree at small n. Power-NS is Norm-Sub applied to Power's output (its definition), so
it is computed from the Power output of the same repeat instead of running Power twice.

    python benchmarks/evaluate_postprocess.py --dataset zipf --epsilon 0.5 1 2 --repeats 30
    python benchmarks/evaluate_postprocess.py --dataset emoji --users 1000000 --epsilon 1
    python benchmarks/evaluate_postprocess.py --dataset babynames --year 1940 --epsilon 1
    python benchmarks/evaluate_postprocess.py --dataset emoji babynames --users 1000000 \
        --protocol oue grr --methods base norm-sub norm-hyb mle-apx ibu --json PATH
"""
from __future__ import annotations

import argparse
import csv
import gzip
import os
import sys
import time
from dataclasses import dataclass

import numpy as np
from bench_json import Run, add_json_argument, default_datasets_dir

from ldp_telemetry.ldp.estimation import postprocess as pp
from ldp_telemetry.ldp.protocols import FrequencyOracle, make_protocol
from ldp_telemetry.ldp.protocols.noise import unbiased_estimate

METHOD_ORDER = ["base", "post-pos", "base-pos", "base-cut", "norm", "norm-mul", "norm-sub",
                "norm-cut", "norm-hyb", "mle-apx", "ibu", "power", "power-ns"]
DEFAULT_RHOS = (10, 50, 90)
PERTURB_CHUNK = 1 << 16


# ---------------------------------------------------------------------------------------------
# Populations: true counts per value


def zipf_counts(d: int, s: float, n: int, rng: np.random.Generator) -> np.ndarray:
    """n users drawn from Zipf(s) over d values (value i has probability ~ (i + 1)^-s)."""
    p = np.arange(1, d + 1, dtype=np.float64) ** -s
    return rng.multinomial(n, p / p.sum())


def emoji_counts(path: str) -> np.ndarray:
    """Occurrences per emoji (d = 969)."""
    with open(path, encoding="utf-8", newline="") as handle:
        return np.array([int(row["Occurrences"]) for row in csv.DictReader(handle)])


def babynames_counts(path: str, year: int) -> np.ndarray:
    """Births per (name, sex) in one year, every pair with at least 5 uses (1940: d = 8,961)."""
    counts = []
    with gzip.open(path, "rt", encoding="utf-8", newline="") as handle:
        for row in csv.DictReader(handle):
            if int(row["year"]) == year:
                counts.append(int(row["n"]))
    if not counts:
        raise ValueError(f"no rows for year {year} in {path}")
    return np.array(counts)


def resample(counts: np.ndarray, users: int | None, rng: np.random.Generator) -> np.ndarray:
    """The counts themselves, or `users` users drawn from their frequencies."""
    if users is None:
        return np.asarray(counts, dtype=np.int64)
    return rng.multinomial(users, counts / counts.sum())


# ---------------------------------------------------------------------------------------------
# One repeat: support counts


def support_counts_full(protocol: FrequencyOracle, counts: np.ndarray,
                        rng: np.random.Generator) -> np.ndarray:
    """Perturb every user with the protocol's client code and aggregate with its server code."""
    values = rng.permutation(np.repeat(np.arange(protocol.d), counts))
    statistic = protocol.new_statistic()
    for start in range(0, values.size, PERTURB_CHUNK):
        protocol.accumulate(statistic, protocol.perturb(values[start:start + PERTURB_CHUNK], rng))
    return np.asarray(protocol.support_counts(statistic), dtype=np.int64)


def support_counts_exact(protocol: FrequencyOracle, counts: np.ndarray,
                         rng: np.random.Generator) -> np.ndarray:
    """OUE's or GRR's support counts drawn from their exact distribution (module docstring)."""
    n = int(counts.sum())
    if protocol.name == "grr":
        kept = rng.binomial(counts, protocol.p_star - protocol.q_star)
        return (kept + rng.multinomial(n - int(kept.sum()), np.full(protocol.d, 1.0 / protocol.d))
                ).astype(np.int64)
    if protocol.name != "oue":
        raise ValueError(f"exact support-count sampling exists for oue and grr only, not "
                         f"{protocol.name!r}; use --perturb full")
    return (rng.binomial(counts, protocol.p_star)
            + rng.binomial(n - counts, protocol.q_star)).astype(np.int64)


SAMPLERS = {"exact": support_counts_exact, "full": support_counts_full}


# ---------------------------------------------------------------------------------------------
# Evaluation


@dataclass
class Result:
    """Mean errors per method over `repeats` repeats, and the setting they come from."""

    label: str
    d: int
    n: int
    epsilon: float
    protocol: str
    repeats: int
    rhos: tuple[int, ...]
    k: int
    mse: dict[str, dict[str, float]]  # method -> column -> mean MSE
    seconds: float

    @property
    def columns(self) -> list[str]:
        return ["full", *(f"set {rho}%" for rho in self.rhos), f"top {self.k}"]

    def markdown(self) -> str:
        head = (f"{self.label}: d = {self.d:,}, n = {self.n:,}, {self.protocol.upper()}, "
                f"ε = {self.epsilon:g}, {self.repeats} repeats")
        lines = [head, "", "| method | " + " | ".join(self.columns) + " |",
                 "|---|" + "---:|" * len(self.columns)]
        for method, row in self.mse.items():
            lines.append(f"| {method} | " + " | ".join(f"{row[c]:.3g}" for c in self.columns)
                         + " |")
        return "\n".join(lines)


def evaluate(counts: np.ndarray, protocol_name: str, epsilon: float, repeats: int, seed: int,
             *, methods: list[str] | None = None, rhos=DEFAULT_RHOS, k: int = 10,
             sets: int = 100, perturb: str = "exact", label: str = "") -> Result:
    """Repeat perturb + estimate + every method on the population `counts` (module docstring)."""
    counts = np.asarray(counts, dtype=np.int64)
    d, n = counts.size, int(counts.sum())
    protocol = make_protocol(protocol_name, epsilon, d)
    noise = protocol.noise(n)
    methods = list(methods or METHOD_ORDER)
    truth = counts / n
    top = np.argsort(-truth, kind="stable")[:k]
    rng = np.random.default_rng(seed)
    sampler = SAMPLERS[perturb]
    columns = ["full", *(f"set {rho}%" for rho in rhos), f"top {k}"]
    totals = {m: dict.fromkeys(columns, 0.0) for m in methods}
    started = time.perf_counter()
    for _ in range(repeats):
        unbiased = unbiased_estimate(sampler(protocol, counts, rng), noise)
        set_matrices = {rho: _random_sets(d, max(1, round(rho * d / 100)), sets, rng)
                        for rho in rhos}
        outputs: dict[str, np.ndarray] = {}
        for method in methods:
            if method == "power-ns" and "power" in outputs:
                outputs[method] = pp.project_to_simplex(outputs["power"], 1.0)
            else:  # post-pos leaves the distribution as is; its answers are clipped below
                outputs[method] = pp.apply(method, unbiased, noise)
            values = outputs[method]
            clip = method == "post-pos"
            point = np.maximum(values, 0.0) if clip else values
            row = totals[method]
            row["full"] += np.mean((point - truth) ** 2)
            for rho, matrix in set_matrices.items():
                answers = matrix @ values
                if clip:
                    answers = np.maximum(answers, 0.0)
                row[f"set {rho}%"] += np.mean((answers - matrix @ truth) ** 2)
            row[f"top {k}"] += np.mean((point[top] - truth[top]) ** 2)
    mse = {m: {c: v / repeats for c, v in row.items()} for m, row in totals.items()}
    return Result(label, d, n, epsilon, protocol_name, repeats, tuple(rhos), k, mse,
                  time.perf_counter() - started)


def _random_sets(d: int, size: int, count: int, rng: np.random.Generator) -> np.ndarray:
    """(count, d) 0/1 rows, each a uniformly random subset of `size` values."""
    keys = rng.random((count, d))
    chosen = np.argpartition(keys, size - 1, axis=1)[:, :size]
    matrix = np.zeros((count, d))
    np.put_along_axis(matrix, chosen, 1.0, axis=1)
    return matrix


# ---------------------------------------------------------------------------------------------
# Command line


def population(args: argparse.Namespace, dataset: str,
               rng: np.random.Generator) -> tuple[np.ndarray, str]:
    if dataset == "zipf":
        return zipf_counts(args.domain, args.zipf_s, args.users or 1_000_000, rng), \
            f"Zipf({args.zipf_s:g})"
    if dataset == "emoji":
        path = os.path.join(args.datasets, "emoji_sentiment_occurrences.csv")
        return resample(emoji_counts(path), args.users, rng), "emoji"
    path = os.path.join(args.datasets, "babynames_ssa_1880_2017.csv.gz")
    return resample(babynames_counts(path, args.year), args.users, rng), f"babynames {args.year}"


def _run_one(args: argparse.Namespace, counts: np.ndarray, label: str, protocol: str,
             epsilon: float, rng: np.random.Generator) -> dict:
    """Evaluate one (data set, protocol, ε), print its table, return its JSON row."""
    result = evaluate(counts, protocol, epsilon, args.repeats, int(rng.integers(1 << 62)),
                      methods=args.methods, rhos=args.rho, k=args.top_k, sets=args.sets,
                      perturb=args.perturb, label=label)
    print(result.markdown())
    print(f"\n({result.seconds:.0f} s, perturbation: {args.perturb})\n", flush=True)
    return {"label": label, "d": result.d, "n": result.n, "protocol": protocol,
            "epsilon": epsilon, "repeats": result.repeats, "columns": result.columns,
            "mse": result.mse, "seconds": result.seconds}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", choices=["zipf", "emoji", "babynames"], nargs="+",
                        default=["zipf"])
    parser.add_argument("--datasets", default=default_datasets_dir(),
                        help="folder of the real datasets (default: $LDP_DATASETS or "
                             "../shared/datasets)")
    parser.add_argument("--users", type=int, default=None,
                        help="draw this many users from the dataset's frequencies (default: "
                             "the dataset's own counts; 10^6 for zipf)")
    parser.add_argument("--domain", type=int, default=1024, help="zipf: domain size")
    parser.add_argument("--zipf-s", type=float, default=1.5, help="zipf: exponent")
    parser.add_argument("--year", type=int, default=1940, help="babynames: the year")
    parser.add_argument("--protocol", nargs="+", default=["oue"])
    parser.add_argument("--epsilon", type=float, nargs="+", default=[0.5, 1.0, 2.0])
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--sets", type=int, default=100, help="random sets per rho and repeat")
    parser.add_argument("--rho", type=int, nargs="+", default=list(DEFAULT_RHOS),
                        help="set sizes in percent of the domain")
    parser.add_argument("--top-k", type=int, default=10)
    parser.add_argument("--methods", nargs="+", default=None, choices=METHOD_ORDER)
    parser.add_argument("--perturb", choices=sorted(SAMPLERS), default="exact")
    parser.add_argument("--seed", type=int, default=2020)
    add_json_argument(parser)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    rows = []
    with Run("evaluate_postprocess", args.json, vars(args)) as run:
        for dataset in args.dataset:
            counts, label = population(args, dataset, rng)
            for protocol in args.protocol:
                for epsilon in args.epsilon:
                    rows.append(_run_one(args, counts, label, protocol, epsilon, rng))
        run.save({"rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
