"""What memoized (two-stage) reports cost a device and a simulator: encoding with and without
memoization, per protocol.

For each protocol, N values (Zipf-shaped over d) are encoded by the client library
(`ldp_telemetry.client.encode_points`), the median of --repeats runs each, alternating:
  one-stage     the protocol's `perturb` (no memoization);
  cold          a memoized configuration, every value from a new device: each report derives its
                permanent response (HMAC-SHA-256, SHAKE-256, the protocol's mapping), then the
                instantaneous one -- what `ldp simulate` pays with one device per row;
  warm          a memoized configuration, the values of 100 devices that have memoized their
                values already (the permanent responses are cached): what a device pays per
                report from its second report of a value on;
and one report at a time through `encode` (a device's call), one-stage and memoized warm, in
microseconds. Ratios are memoized / one-stage rates.

    python benchmarks/memo_encode.py --reports 20000 [--json PATH]
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from bench_json import Run, add_json_argument

from ldp_telemetry.client import encode, encode_points
from ldp_telemetry.client.device import DeviceMemo
from ldp_telemetry.ldp.config.registry import parse_registry

T0 = 1_700_000_000_000


def registry(names: list[str], d: int, report: float, lifetime: float):
    entries = []
    for name in names:
        base = {"protocol": name, "epsilon": report, "domain": {"size": d}}
        entries += [{"name": f"one.{name}", **base},
                    {"name": f"memo.{name}", **base, "memoize": {"lifetime_epsilon": lifetime}}]
    return parse_registry({"metrics": entries})


def median_seconds(action, repeats: int) -> float:
    spent = []
    for _ in range(repeats):
        start = time.perf_counter()
        action()
        spent.append(time.perf_counter() - start)
    return statistics.median(spent)


def per_call_us(config, value: int, rng, device, repeats: int, calls: int = 2_000) -> float:
    """Median µs of one `encode` call (one report, as a device makes it)."""
    def calls_in_a_row():
        for _ in range(calls):
            encode(config, value, rng, event_time_ms=T0, device=device)
    return median_seconds(calls_in_a_row, repeats) / calls * 1e6


def measure(args) -> list[dict]:
    names = args.protocols.split(",")
    configs = registry(names, args.domain, args.report_epsilon, args.lifetime_epsilon)
    rng = np.random.default_rng(1)
    weights = 1.0 / np.arange(1, args.domain + 1) ** 1.1
    values = rng.choice(args.domain, size=args.reports, p=weights / weights.sum())
    times = np.full(args.reports, T0)
    secrets = [rng.bytes(32) for _ in range(args.reports)]
    print(f"{args.reports:,} reports per protocol, d={args.domain}, ε1={args.report_epsilon:g}, "
          f"ε∞={args.lifetime_epsilon:g}, median of {args.repeats}; rates in reports/s")
    print(f"{'protocol':<9}{'one-stage':>12}{'cold':>10}{'ratio':>7}{'warm':>10}{'ratio':>7}"
          f"{'encode µs':>11}{'memo µs':>9}")
    rows = []
    for name in names:
        one, memo = configs[f"one.{name}"], configs[f"memo.{name}"]
        fleet = [DeviceMemo(secret) for secret in secrets[:100]]
        warm_devices = [fleet[i % 100] for i in range(args.reports)]
        encode_points(memo, values, rng, event_times_ms=times, device=warm_devices)  # warm up

        def one_stage(config=one):
            encode_points(config, values, rng, event_times_ms=times)

        def cold(config=memo):
            encode_points(config, values, rng, event_times_ms=times,
                          device=[DeviceMemo(secret) for secret in secrets])

        def warm(config=memo, devices=warm_devices):
            encode_points(config, values, rng, event_times_ms=times, device=devices)

        seconds = {label: median_seconds(action, args.repeats)
                   for label, action in (("one_stage", one_stage), ("cold", cold),
                                         ("warm", warm))}
        micro = {label: per_call_us(config, int(values[0]), rng, device, args.repeats)
                 for label, config, device in (("one_stage", one, None),
                                               ("warm", memo, fleet[0]))}
        row = {"protocol": name, **{label: args.reports / s for label, s in seconds.items()},
               "cold_ratio": seconds["one_stage"] / seconds["cold"],
               "warm_ratio": seconds["one_stage"] / seconds["warm"],
               "encode_us": micro["one_stage"], "encode_memoized_us": micro["warm"]}
        print(f"{name:<9}{row['one_stage']:>12,.0f}{row['cold']:>10,.0f}{row['cold_ratio']:>7.3f}"
              f"{row['warm']:>10,.0f}{row['warm_ratio']:>7.3f}{row['encode_us']:>11.0f}"
              f"{row['encode_memoized_us']:>9.0f}", flush=True)
        rows.append(row)
    return rows


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reports", type=int, default=20_000)
    parser.add_argument("--domain", type=int, default=105)
    parser.add_argument("--report-epsilon", type=float, default=1.07)
    parser.add_argument("--lifetime-epsilon", type=float, default=4.39)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--protocols", default="grr,oue,olh")
    add_json_argument(parser)
    args = parser.parse_args(argv)
    with Run("memo_encode", args.json, vars(args)) as run:
        run.save({"unit": "reports/s; µs per encode call", "protocols": measure(args)})


if __name__ == "__main__":
    main()
