"""Evaluation of the integrity statistics against simulated poisoning attacks.

For each protocol and ε: `--honest` windows of n honest reports (the false-alarm rate of each
statistic and of the window's flag), and for each attack (MGA, RIA, ROA; ldp.integrity.attacks),
fake fraction and number of targets, `--windows` windows of n reports of which that fraction are
fake (the detection rate of each statistic and of the window's flag), with the attack's gain,
the mean over targets of f~_t - f_t (the estimate's error the attack causes), and the same with
the section's labelled recovered estimate where it has one (ldp.integrity.recovery; the
pipeline reports it beside the plain estimate and never applies it). Honest values are drawn
from the emoji frequencies of ../shared/datasets (d = 969), or without it a Zipf(1.1) domain
of 969 values; targets are drawn among the values ranked 500 and below. The jump test, which
readers compute from earlier windows, is run against the last `history` honest windows: for
the honest rate, the earlier honest windows against them; for detection, each attacked window.

    python benchmarks/evaluate_integrity.py --goal --json benchmarks/results/integrity_goal.json
    python benchmarks/evaluate_integrity.py --reports 20000 --windows 4 --honest 20 \\
        --json benchmarks/results/integrity_grid.json
    python benchmarks/evaluate_integrity.py --real-days --protocols oue,olh,ss --epsilons 1 \\
        --json benchmarks/results/integrity_days.json
"""
from __future__ import annotations

import argparse
import csv
import itertools
import os
import time
from pathlib import Path

import numpy as np
from bench_json import Run, add_json_argument

from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.ldp.engine.window import window_with_integrity
from ldp_telemetry.ldp.integrity.attacks import ATTACKS, fake_reports
from ldp_telemetry.ldp.integrity.spec import DEFAULT
from ldp_telemetry.ldp.integrity.statistics import jump_statistic

CHECKOUT = Path(__file__).resolve().parents[1]
DATASETS = Path(os.environ.get("LDP_DATASETS", CHECKOUT.parent / "shared" / "datasets"))
STATISTICS = ("sum", "support_size", "co_support", "jump")
PROTOCOLS = ("grr", "oue", "olh", "ss", "rws")


def frequencies() -> tuple[np.ndarray, str]:
    path = DATASETS / "emoji_sentiment_occurrences.csv"
    if path.exists():
        with open(path, encoding="utf-8") as handle:
            counts = np.array([int(r["Occurrences"]) for r in csv.DictReader(handle)], float)
        return counts / counts.sum(), "emoji (d = 969)"
    f = 1.0 / np.arange(1, 970) ** 1.1
    return f / f.sum(), "Zipf(1.1), d = 969 (no ../shared/datasets)"


def config_of(protocol: str, d: int, epsilon: float):
    return parse_registry({"metrics": [{"name": "m", "protocol": protocol, "epsilon": epsilon,
                                        "domain": {"size": d}}]})["m"]


def one_window(config, f, n, rng, attack=None, fraction=0.0, targets=()):
    """(result, section) of one window, a `fraction` of its n reports fake."""
    m = int(round(fraction * n)) if attack else 0
    columns = config.protocol.perturb(rng.choice(len(f), size=n - m, p=f), rng)
    if m:
        fake = fake_reports(config.protocol, attack, targets, m, rng)
        columns = {k: np.concatenate([columns[k], fake[k]]) for k in columns}
    return window_with_integrity(config, columns, rng.integers(0, 2 ** 62, size=n))


def recovered_targets(section, unbiased, targets) -> np.ndarray:
    """The targets' estimates with the section's recovery where it has one (by label), else
    the plain unbiased estimate."""
    recovered = section.get("recovered") or {"labels": [], "estimate": []}
    by_label = dict(zip(recovered["labels"], recovered["estimate"], strict=True))
    return np.array([by_label.get(str(t), unbiased[t]) for t in targets])


def flags(section) -> dict:
    out = {s["name"]: bool(s["flagged"]) for s in section["statistics"]}
    out["window"] = bool(section["flagged"])
    return out


def rates(rows: list[dict]) -> dict:
    names = sorted({k for r in rows for k in r})
    return {k: float(np.mean([r.get(k, False) for r in rows])) for k in names}


def evaluate(protocol, epsilon, f, args, rng, cells) -> dict:
    """False alarms over honest windows, then detection per attack cell."""
    config = config_of(protocol, len(f), epsilon)
    level = DEFAULT.level
    honest, baseline = [], []
    for _ in range(args.honest):
        result, section = one_window(config, f, args.reports, rng)
        honest.append(flags(section))
        baseline.append((result.unbiased, result.std_error))
    history = baseline[-DEFAULT.history:]
    jump_alarms = [jump_statistic(u, e, history, range(len(f)), DEFAULT.top_k, level)["flagged"]
                   for u, e in baseline[:-DEFAULT.history]]
    out = {"protocol": protocol, "epsilon": epsilon, "honest_windows": args.honest,
           "false_alarm": {**rates(honest),
                           "jump": float(np.mean(jump_alarms)) if jump_alarms else None},
           "attacks": []}
    order = np.argsort(-f)
    for attack, fraction, count in cells:
        targets = rng.choice(order[500:], size=count, replace=False)
        rows, gains, recovered_gains, recoveries = [], [], [], 0
        for _ in range(args.windows):
            result, section = one_window(config, f, args.reports, rng, attack, fraction, targets)
            row = flags(section)
            jump = jump_statistic(result.unbiased, result.std_error, history, range(len(f)),
                                  DEFAULT.top_k, level)
            row["jump"] = bool(jump["flagged"])
            row["window"] = row["window"] or row["jump"]
            rows.append(row)
            gains.append(float(np.mean(result.unbiased[targets] - f[targets])))
            recovered = recovered_targets(section, result.unbiased, targets)
            recovered_gains.append(float(np.mean(recovered - f[targets])))
            recoveries += section.get("recovered") is not None
        out["attacks"].append({"attack": attack, "fraction": fraction, "targets": count,
                               "windows": args.windows, "detection": rates(rows),
                               "target_gain": float(np.mean(gains)),
                               "recovered_gain": float(np.mean(recovered_gains)),
                               "recovered_windows": recoveries / args.windows})
    return out


def real_days(protocols, epsilon: float, rng, minimum: int = 1000) -> dict:
    """Honest windows with real drift: each day of the 2001 flights (destination airport,
    d = 229) one window, every protocol; per day the window tests, and the jump test against the
    `history` days before. Returns the false-alarm rates and the flagged days."""
    data = np.load(DATASETS / "flights3m_2001H1.npz")
    days = [data["dest"][data["day"] == day] for day in np.unique(data["day"])]
    days = [values for values in days if len(values) >= minimum]
    out = {"data": "flights3m_2001H1 destination per day (d = 229)", "days": len(days),
           "protocols": []}
    for protocol in protocols:
        config = config_of(protocol, 229, epsilon)
        rows, earlier = [], []
        for values in days:
            columns = config.protocol.perturb(values, rng)
            result, section = window_with_integrity(
                config, columns, rng.integers(0, 2 ** 62, size=len(values)))
            row = flags(section)
            jump = jump_statistic(result.unbiased, result.std_error,
                                  earlier[-DEFAULT.history:], range(229), DEFAULT.top_k,
                                  DEFAULT.level)
            row["jump"] = bool(jump["flagged"]) if earlier else False
            row["window"] = row["window"] or row["jump"]
            rows.append(row)
            earlier.append((result.unbiased, result.std_error))
        block = {"protocol": protocol, "epsilon": epsilon, "reports_per_day":
                 int(np.median([len(v) for v in days])), "false_alarm": rates(rows)}
        fa = block["false_alarm"]
        print(f"{protocol} ε={epsilon:g} over {len(days)} real days: "
              + ", ".join(f"{k} {fa.get(k, 0):.3f}" for k in (*STATISTICS, "window")),
              flush=True)
        out["protocols"].append(block)
    return out


def print_rows(block: dict) -> None:
    fa = block["false_alarm"]
    print(f"{block['protocol']} ε={block['epsilon']:g}: false alarms "
          + ", ".join(f"{k} {fa.get(k) if fa.get(k) is None else round(fa[k], 3)}"
                      for k in (*STATISTICS, "window")), flush=True)
    for cell in block["attacks"]:
        det = cell["detection"]
        print(f"   {cell['attack']} {cell['fraction']:.0%} x{cell['targets']}: window "
              f"{det['window']:.2f} (" + ", ".join(f"{k} {det.get(k, 0):.2f}"
                                                   for k in STATISTICS)
              + f"), target gain {cell['target_gain']:+.4f}, recovered "
              f"{cell['recovered_gain']:+.4f} ({cell['recovered_windows']:.0%} of windows)",
              flush=True)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--goal", action="store_true",
                        help="the issue's goal case only: OUE and OLH, ε = 1, 2%% MGA fakes, "
                             "3 targets, 100,000 reports (defaults: 100 attacked and 100 "
                             "honest windows)")
    parser.add_argument("--reports", type=int, default=None)
    parser.add_argument("--windows", type=int, default=None)
    parser.add_argument("--honest", type=int, default=None)
    parser.add_argument("--protocols", default=",".join(PROTOCOLS))
    parser.add_argument("--epsilons", default="1,2,4")
    parser.add_argument("--attacks", default=",".join(ATTACKS))
    parser.add_argument("--fractions", default="0.01,0.02,0.05")
    parser.add_argument("--targets", default="1,3,10")
    parser.add_argument("--seed", type=int, default=21)
    parser.add_argument("--real-days", action="store_true",
                        help="honest windows with real drift instead: each day of the 2001 "
                             "flights (destination) a window, for --protocols at the first of "
                             "--epsilons")
    add_json_argument(parser)
    args = parser.parse_args(argv)
    if args.goal:
        args.protocols, args.epsilons, args.attacks = "oue,olh", "1", "mga"
        args.fractions, args.targets = "0.02", "3"
        args.reports = args.reports or 100_000
        args.windows = args.windows or 100
        args.honest = args.honest or 100
    args.reports = args.reports or 20_000
    args.windows = args.windows or 4
    args.honest = args.honest or 20
    rng = np.random.default_rng(args.seed)
    if args.real_days:
        with Run("evaluate_integrity_days", args.json, vars(args)) as run:
            run.save(real_days(args.protocols.split(","),
                               float(args.epsilons.split(",")[0]), rng))
        return
    f, data = frequencies()
    cells = list(itertools.product(args.attacks.split(","),
                                   [float(x) for x in args.fractions.split(",")],
                                   [int(x) for x in args.targets.split(",")]))
    print(f"data: {data}; {args.reports:,} reports per window, {args.windows} attacked windows "
          f"per cell, {args.honest} honest windows per protocol and ε")
    started = time.perf_counter()
    with Run("evaluate_integrity" + ("_goal" if args.goal else ""), args.json,
             vars(args)) as run:
        blocks = []
        for protocol in args.protocols.split(","):
            for epsilon in (float(x) for x in args.epsilons.split(",")):
                block = evaluate(protocol, epsilon, f, args, rng, cells)
                print_rows(block)
                blocks.append(block)
        run.save({"data": data, "reports": args.reports, "level": DEFAULT.level,
                  "alpha": DEFAULT.alpha, "sample": DEFAULT.sample, "top_k": DEFAULT.top_k,
                  "seconds": time.perf_counter() - started, "blocks": blocks})


if __name__ == "__main__":
    main()
