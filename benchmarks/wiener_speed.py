"""Finalize cost of the Wiener estimators: one window's counts -> estimate + standard errors.

Times `ldp_telemetry.ldp.engine.finalize.finalize_window` (unbiased estimate, the metric's estimator
with its standard errors, Norm-Hyb post-processing) on the support counts of one simulated
window, and the estimator alone (`EstimatorSpec.run`), as medians of --repeats runs after one
warm-up run (the first run also builds the cached noise model). Reported in milliseconds of
wall-clock time and, for finalize, of this process's CPU time: on a shared machine a call
longer than the scheduler's time slice waits for the other processes, so its wall time grows
with the machine's load while its CPU time does not.

    python benchmarks/wiener_speed.py                     # the two cases the docs quote
    python benchmarks/wiener_speed.py --cases iiw:4096 amrp:1024 dw:65536 --repeats 50
    python benchmarks/wiener_speed.py --json PATH        # also the rows as JSON
"""
from __future__ import annotations

import argparse
import statistics
import time
from functools import partial

import numpy as np
from bench_json import Run, add_json_argument

from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.ldp.engine.finalize import finalize_window
from ldp_telemetry.ldp.protocols.noise import unbiased_estimate


def median_ms(call, repeats: int, clock=time.perf_counter) -> float:
    call()
    times = []
    for _ in range(repeats):
        start = clock()
        call()
        times.append(clock() - start)
    return 1e3 * statistics.median(times)


def window_counts(protocol, n: int, rng: np.random.Generator) -> np.ndarray:
    """Support counts of n OUE/GRR-like reports of a smooth two-peak distribution, drawn from
    their exact per-value distribution c_v ~ Bin(n_v, p*) + Bin(n - n_v, q*) (the filter's cost
    does not depend on how the counts arose)."""
    d = protocol.d
    x = np.arange(d)
    f = np.exp(-((x - 0.3 * d) / (0.1 * d)) ** 2) + np.exp(-((x - 0.7 * d) / (0.05 * d)) ** 2)
    true = rng.multinomial(n, f / f.sum())
    return rng.binomial(true, protocol.p_star) + rng.binomial(n - true, protocol.q_star)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", default=["unbiased:4096", "iiw:4096",
                                                       "unbiased:1024", "amrp:1024"],
                        help="METHOD:D pairs (default: the two quoted cases and their baselines)")
    parser.add_argument("--protocol", default="oue")
    parser.add_argument("--epsilon", type=float, default=2.0)
    parser.add_argument("--reports", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=30)
    add_json_argument(parser)
    args = parser.parse_args()
    with Run("wiener_speed", args.json, vars(args)) as run:
        run.save(measure(args))


def measure(args) -> dict:
    """Print and return one row per case (milliseconds)."""
    rng = np.random.default_rng(1)
    print(f"{'estimator':<10} {'d':>6} {'finalize ms':>12} {'(CPU ms)':>9} {'estimator ms':>13}   "
          f"(medians of {args.repeats}; {args.protocol}, ε={args.epsilon:g}, "
          f"n={args.reports:,}, Norm-Hyb)")
    rows = []
    for case in args.cases:
        method, _, size = case.partition(":")
        d = int(size)
        config = parse_registry({"metrics": [{
            "name": "m", "protocol": args.protocol, "epsilon": args.epsilon,
            "domain": {"size": d}, "estimator": method}]})["m"]
        counts = window_counts(config.protocol, args.reports, rng)
        noise = config.protocol.noise(args.reports)
        unbiased = unbiased_estimate(counts, noise)
        finalize = partial(finalize_window, config, counts, args.reports)
        whole = median_ms(finalize, args.repeats)
        cpu = median_ms(finalize, args.repeats, time.process_time)
        alone = median_ms(partial(config.estimator.run, unbiased, noise, config.protocol),
                          args.repeats)
        print(f"{method:<10} {d:>6} {whole:>12.2f} {cpu:>9.2f} {alone:>13.2f}")
        rows.append({"estimator": method, "d": d, "finalize_ms": whole, "finalize_cpu_ms": cpu,
                     "estimator_ms": alone})
    return {"cases": rows}


if __name__ == "__main__":
    main()
