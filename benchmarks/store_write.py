"""Measure the estimate store: panes written per second (SQLite file; PostgreSQL when a server
can be started here), and how long a dashboard poll takes with a `since` cursor against reading
every window.

    python benchmarks/store_write.py [--windows 200] [--domain 105] [--repeats 3] [--json PATH]

Prints medians over the repeats; asserts nothing. The PostgreSQL server is started by the test
suite's helper (tests/store/postgres_server.py, loaded from this checkout by its path).
"""
from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from bench_json import Run, add_json_argument

from ldp_telemetry.dashboard.source import StoreSource
from ldp_telemetry.store import open_store

POSTGRES_SERVER = Path(__file__).resolve().parents[1] / "tests" / "store" / "postgres_server.py"
T0_MS = 1_709_251_200_000
HOUR_MS = 3_600_000


def panes(windows: int, d: int, index: int, rng) -> list[dict]:
    """One pane per window of a GRR metric over d labels (random but well-formed numbers)."""
    out = []
    for k in range(windows):
        estimate = rng.dirichlet(np.ones(d))
        start = T0_MS + k * HOUR_MS
        out.append({"metric": "bench.metric", "n": 10_000 + index,
                    "window_start": _iso(start), "window_end": _iso(start + HOUR_MS),
                    "protocol": "grr", "epsilon": 2.0,
                    "estimator": {"method": "unbiased", "params": {}},
                    "postprocess": {"method": "norm-sub", "params": {}},
                    "labels": [f"v{i}" for i in range(d)], "estimate": estimate.tolist(),
                    "unbiased_estimate": estimate.tolist(),
                    "std_error": np.full(d, 0.01).tolist(),
                    "pane": {"timing": "EARLY" if index == 0 else "LATE", "index": index,
                             "is_last": False}})
    return out


def _iso(ms: int) -> str:
    import datetime as dt
    return dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def postgres_server():
    """The test suite's throw-away PostgreSQL server module, loaded by its file path."""
    spec = importlib.util.spec_from_file_location("postgres_server", POSTGRES_SERVER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def measure(url_factory, args, name: str) -> dict:
    rng = np.random.default_rng(1)
    rates, full_reads, polls = [], [], []
    for repeat in range(args.repeats):
        url = url_factory(repeat)
        with open_store(url) as store:
            first = panes(args.windows, args.domain, 0, rng)
            started = time.perf_counter()
            for record in first:  # one pane per call: how a live sink writes
                store.write_panes([record])
            rates.append(len(first) / (time.perf_counter() - started))
        source = StoreSource(url)
        started = time.perf_counter()
        cursor, everything = source.windows("bench.metric")
        full_reads.append(time.perf_counter() - started)
        with open_store(url) as store:
            store.write_panes(panes(1, args.domain, 1, rng))
        started = time.perf_counter()
        _, changed = source.windows("bench.metric", cursor)
        polls.append(time.perf_counter() - started)
        source.close()
        assert len(everything) == args.windows and len(changed) == 1
    row = {"store": name, "panes_written_per_s": statistics.median(rates),
           "read_all_ms": statistics.median(full_reads) * 1000,
           "poll_since_cursor_ms": statistics.median(polls) * 1000}
    row["read_all_over_poll"] = row["read_all_ms"] / row["poll_since_cursor_ms"]
    print(f"{name:<11} panes written/s (one per transaction, d={args.domain}): "
          f"{row['panes_written_per_s']:,.0f}; read all {args.windows} windows: "
          f"{row['read_all_ms']:.1f} ms; poll since cursor (1 new pane): "
          f"{row['poll_since_cursor_ms']:.1f} ms; ratio {row['read_all_over_poll']:.1f}x")
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--windows", type=int, default=200)
    parser.add_argument("--domain", type=int, default=105)
    parser.add_argument("--repeats", type=int, default=3)
    add_json_argument(parser)
    args = parser.parse_args()
    with Run("store_write", args.json, vars(args)) as run:
        run.save(measure_stores(args))
    return 0


def measure_stores(args) -> dict:
    """SQLite, then PostgreSQL when a server can be started here."""
    with tempfile.TemporaryDirectory() as folder:
        rows = [measure(lambda r: f"sqlite:///{folder}/bench-{r}.db", args, "SQLite")]
    server = postgres_server()
    try:
        base, stop = server.start_server()
    except server.Unavailable as reason:
        print(f"PostgreSQL  not measured: {reason}")
        return {"stores": rows, "not_measured": {"PostgreSQL": str(reason)}}
    try:
        import psycopg

        def database(repeat: int) -> str:
            with psycopg.connect(base, autocommit=True) as admin:
                admin.execute(f"CREATE DATABASE bench_{repeat}")
            return base.replace("/postgres?", f"/bench_{repeat}?")
        rows.append(measure(database, args, "PostgreSQL"))
    finally:
        stop()
    return {"stores": rows}


if __name__ == "__main__":
    sys.exit(main())
