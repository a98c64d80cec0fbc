"""Aggregation cost of CMS, HCMS and FLH at sketches other than their defaults, against the
planner's scaling of the cost model (ldp_telemetry.ldp.config.cost.sketch_costs).

The cost model is fitted to the defaults' measurements (benchmarks/aggregation_cost.py); a
registry's `sketch` (k hash functions, m buckets) changes the cost, and `ldp plan --sketch-k K
--sketch-m M` scales the model: finalize by k/k0, CMS's counting by m/m0. Each row here measures
one (protocol, d, k, m) exactly as aggregation_cost.py measures a protocol (CPU seconds of one
core: counting in batches of up to 65,536 reports, seconds per report; finalize per window; each
the median of --repeats) and gives the scaled model beside it and their ratio, measured / model
(tests/ldp/test_sketch_cost.py holds every committed ratio within a factor of 2).

    python benchmarks/sketch_cost.py [--json PATH]
"""
from __future__ import annotations

import argparse
import sys

import numpy as np
from aggregation_cost import protocol_seconds
from bench_json import Run, add_json_argument

from ldp_telemetry.ldp.config.cost import cost_model, sketch_costs
from ldp_telemetry.ldp.protocols import make_protocol

POOLED = ("cms", "hcms", "flh")
DOMAINS = (4096, 65536)
#: Sketches measured, as factors of the defaults (k0, m0): k/4, 4k, m/4, 4m.
FACTORS = ((0.25, 1.0), (4.0, 1.0), (1.0, 0.25), (1.0, 4.0))


def sketches(name: str, epsilon: float, d: int) -> list[tuple[int, int]]:
    """The (k, m) measured for `name` at d: each of FACTORS applied to the defaults, HCMS's m
    kept a power of two, m at least 2."""
    default = make_protocol(name, epsilon, d)
    out = []
    for k_factor, m_factor in FACTORS:
        k, m = max(1, int(default.k * k_factor)), max(2, int(default.m * m_factor))
        if name == "hcms":
            m = 1 << (m - 1).bit_length()
        if (k, m) != (default.k, default.m) and (k, m) not in out:
            out.append((k, m))
    return out


def measure(name: str, epsilon: float, d: int, k: int, m: int, args,
            rng: np.random.Generator) -> dict:
    """One row: counting seconds per report and finalize seconds at (d, k, m), and the model's."""
    protocol = make_protocol(name, epsilon, d, hashes=k, buckets=m)
    n, _, count_seconds, final_seconds = protocol_seconds(protocol, d, args, rng)
    per_second, finalize = sketch_costs(cost_model(), protocol)
    return {"protocol": name, "d": d, "k": k, "m": m, "parameter": protocol.parameter,
            "reports": n, "count_seconds_per_report": count_seconds,
            "finalize_seconds": final_seconds,
            "model_count_seconds_per_report": 1.0 / per_second,
            "model_finalize_seconds": finalize,
            "count_ratio": count_seconds * per_second,
            "finalize_ratio": final_seconds / finalize}


def parser() -> argparse.ArgumentParser:
    out = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    out.add_argument("--epsilon", type=float, default=2.0)
    out.add_argument("--domains", type=int, nargs="+", default=list(DOMAINS))
    out.add_argument("--protocols", nargs="+", default=list(POOLED), choices=list(POOLED))
    out.add_argument("--repeats", type=int, default=3)
    out.add_argument("--target", type=float, default=0.1,
                     help="seconds of CPU one counting run should last")
    out.add_argument("--batch", type=int, default=65_536)
    out.add_argument("--batch-bytes", type=int, default=1 << 26)
    out.add_argument("--sample", type=int, default=256)
    out.add_argument("--min-reports", type=int, default=256)
    out.add_argument("--min-seconds", type=float, default=0.01)
    out.add_argument("--max-reports", type=int, default=1 << 20)
    out.add_argument("--seed", type=int, default=7)
    add_json_argument(out)
    return out


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    rng = np.random.default_rng(args.seed)
    with Run("sketch_cost", args.json, vars(args)) as bench:
        rows = []
        for name in args.protocols:
            for d in args.domains:
                for k, m in sketches(name, args.epsilon, d):
                    row = measure(name, args.epsilon, d, k, m, args, rng)
                    rows.append(row)
                    print(f"{name:<5} d={d:<7,} k={k:<5} m={m:<5} "
                          f"{1 / row['count_seconds_per_report']:>14,.0f} reports/s "
                          f"(x{row['count_ratio']:.2f} of the model) "
                          f"{row['finalize_seconds'] * 1e3:>10.2f} ms finalize "
                          f"(x{row['finalize_ratio']:.2f})", flush=True)
        bench.save({"epsilon": args.epsilon, "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
