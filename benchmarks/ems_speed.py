"""Time of EM and EMS per window ([Li20] §5.5) at d = d̃, against a dense-matrix EM.

For each ε, one window of n Square Wave reports of real data (flights3m `minute`, one day,
resampled to n; a Beta(5, 2) sample when the data set is absent) is reconstructed by
  ems, em      ldp_telemetry.ldp.estimation.em with the structured model (two O(d) products
               per iteration)
  dense        the same iterations with M as a dense d̃ × d matrix built once (numpy matmul)
each a median of --repeats runs (wall-clock; process CPU time alongside, which a shared
machine inflates less). The dense figure is measured on --dense-iterations iterations and
scaled to the EMS iteration count. The surveyed implementation rebuilds dense arrays every
iteration and needs 84–143 s at d = 1024; the goal here is ≤ 0.1 s per window.

    python benchmarks/ems_speed.py --buckets 1024 --reports 100000 [--json PATH]
"""
from __future__ import annotations

import argparse
import os
import statistics
import time
from functools import partial
from pathlib import Path

import numpy as np
from bench_json import Run, add_json_argument

from ldp_telemetry.ldp.estimation.em import expectation_maximisation, paper_tolerance
from ldp_telemetry.ldp.protocols.sw import SquareWave

DATA = Path(os.environ.get("LDP_DATASETS", Path(__file__).resolve().parents[2] / "shared"
                           / "datasets")) / "flights3m_2001H1.npz"


def sample(n: int, rng: np.random.Generator) -> tuple[np.ndarray, str]:
    if DATA.exists():
        data = np.load(DATA)
        minutes = data["minute"][data["day"] == 10]
        return rng.choice((minutes + rng.random(minutes.size)) / 1440.0, size=n), \
            "flights3m minute, day 10"
    return rng.beta(5, 2, n), "Beta(5, 2)"


def timed(action, repeats: int) -> tuple[float, float, object]:
    walls, cpus, result = [], [], None
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        result = action()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return statistics.median(walls), statistics.median(cpus), result


def dense_em(matrix: np.ndarray, counts: np.ndarray, iterations: int) -> np.ndarray:
    """Algorithm 1 + smoothing with a dense matrix, a fixed number of iterations."""
    x = np.full(matrix.shape[1], 1.0 / matrix.shape[1])
    for _ in range(iterations):
        x = x * (matrix.T @ (counts / (matrix @ x)))
        x /= x.sum()
        x = np.convolve(x, [0.25, 0.5, 0.25], mode="same")
        x /= x.sum()
        np.dot(counts, np.log(matrix @ x))
    return x


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--buckets", type=int, default=1024)
    parser.add_argument("--reports", type=int, default=100_000)
    parser.add_argument("--epsilons", default="0.5,1,2,4")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--dense-iterations", type=int, default=30)
    add_json_argument(parser)
    args = parser.parse_args(argv)
    with Run("ems_speed", args.json, vars(args)) as run:
        run.save(measure(args))


def measure(args) -> dict:
    """Print and return one row per (ε, method)."""
    rng = np.random.default_rng(1)
    values, source = sample(args.reports, rng)
    print(f"d = d̃ = {args.buckets}, n = {args.reports:,} reports of {source}; "
          f"median of {args.repeats} runs; load average {os.getloadavg()[0]:.1f} "
          f"on {os.cpu_count()} cores")
    print(f"{'ε':>4} {'method':>6} {'iterations':>10} {'wall s':>8} {'cpu s':>8} "
          f"{'µs/iter':>8} {'dense s':>8} {'dense/ours':>10}")
    rows = []
    for epsilon in map(float, args.epsilons.split(",")):
        sw = SquareWave(epsilon, args.buckets)
        counts = sw.new_statistic()
        sw.accumulate(counts, sw.perturb(values, rng))
        channel = sw.channel()
        matrix = channel.dense()
        dense_wall, _, _ = timed(partial(dense_em, matrix, counts.astype(float),
                                         args.dense_iterations), 3)
        for name, smoothing in (("ems", True), ("em", False)):
            wall, cpu, result = timed(partial(
                expectation_maximisation, channel, counts, smoothing=smoothing,
                tolerance=paper_tolerance(epsilon, smoothing)), args.repeats)
            dense = dense_wall / args.dense_iterations * result.iterations
            print(f"{epsilon:>4g} {name:>6} {result.iterations:>10} {wall:>8.3f} {cpu:>8.3f} "
                  f"{1e6 * wall / result.iterations:>8.0f} {dense:>8.3f} {dense / wall:>10.1f}",
                  flush=True)
            rows.append({"epsilon": epsilon, "method": name, "iterations": result.iterations,
                         "wall_s": wall, "cpu_s": cpu,
                         "us_per_iteration": 1e6 * wall / result.iterations,
                         "dense_s": dense, "dense_over_ours": dense / wall})
    return {"source": source, "rows": rows}


if __name__ == "__main__":
    main()
