"""Aggregation-step throughput of every protocol: reports folded into the statistic per second.

Perturbs N reports once per protocol (uniform values, fixed seed), then times
`protocol.accumulate` over batches of `--batch` reports (median of `--repeats` runs) and
prints a table. Only the server's aggregation step is timed: no decoding, no Beam.

    python -m benchmarks.aggregation [--d 1024] [--epsilon 2] [--reports 200000]

Measured on a shared 2-core AMD EPYC VM (d = 1024, ε = 2, 200k reports, median of 5; other
jobs were running, so expect ±40% between runs):

| protocol | reports/s | how |
|---|---:|---|
| grr | 830,000,000 | bincount of y |
| oue | 661,000 | byte-value histogram per byte position |
| sue | 1,139,000 | same |
| rue | 997,000 | same |
| olh | 249,000 | (report x value) interval hash test, g = 8 |
| blh | 157,000 | same, g = 2 |
| rlh | 299,000 | same, g = 8 |
| hr | 661,000,000 | bincount of (row, bit); the Walsh-Hadamard transform runs at finalisation |
| ss | 6,398,000 | bincount of the items, k = 122 |
| rws | 216,000 | k-step seeded Fisher-Yates over report blocks, one bincount, k = 122 |
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from ldp.protocols import PROTOCOLS, make_protocol


def measure(name: str, epsilon: float, d: int, reports: int, batch: int, repeats: int) -> float:
    """Median reports per second of `accumulate` for one protocol."""
    protocol = make_protocol(name, epsilon, d)
    rng = np.random.default_rng(20240601)
    columns = protocol.perturb(rng.integers(0, d, size=reports), rng)
    batches = [{key: column[start:start + batch] for key, column in columns.items()}
               for start in range(0, reports, batch)]
    rates = []
    for _ in range(repeats):
        statistic = protocol.new_statistic()
        began = time.perf_counter()
        for columns_batch in batches:
            protocol.accumulate(statistic, columns_batch)
        rates.append(reports / (time.perf_counter() - began))
    return statistics.median(rates)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--d", type=int, default=1024)
    parser.add_argument("--epsilon", type=float, default=2.0)
    parser.add_argument("--reports", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=65_536)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--protocols", nargs="*", default=list(PROTOCOLS))
    args = parser.parse_args(argv)
    print(f"aggregation step, d = {args.d}, ε = {args.epsilon:g}, {args.reports:,} reports, "
          f"batches of {args.batch:,}, median of {args.repeats}")
    print(f"{'protocol':<9} {'reports/s':>14}")
    for name in args.protocols:
        rate = measure(name, args.epsilon, args.d, args.reports, args.batch, args.repeats)
        print(f"{name:<9} {rate:>14,.0f}")


if __name__ == "__main__":
    main()
