"""The cost of binding reports to their configuration: the same reports with and without a
configuration fingerprint, read by the decoder and by the whole job.

For each protocol, two Avro files hold the same N reports, one whose records carry their
configuration's 16-byte fingerprint and one written with the schema of before fingerprints
existed (read under the registry's current configuration). Runs alternate between the two files
(median of --repeats each), so that the machine's load falls on both alike:
  raw decode   fastavro.reader over the file (the 17 extra bytes per report cost here too);
  decode       ldp_telemetry.schemas.codec.ReportDecoder (fingerprint lookup and grouping);
  end to end   the whole Beam job (FnApiRunner).
Ratios are with / without: 1.00 is free.

    python benchmarks/fingerprint_cost.py --reports 200000 [--json PATH]
"""
from __future__ import annotations

import argparse
import contextlib
import functools
import io
import os
import statistics
import tempfile
import time

import fastavro
import numpy as np
from bench_json import Run, add_json_argument
from throughput import decode_batches, end_to_end, metric_entry, raw_decode

from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.schemas import load_schema, payload_branch, report_schema_json

DAY_MS = 86_400_000
START_MS = 1_700_000_000_000 - 1_700_000_000_000 % DAY_MS


def write_pair(workdir: str, config, n: int, seed: int) -> tuple[str, str]:
    """(file with fingerprints, file without) of the same n reports of `config`."""
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, config.d + 1) ** 1.1
    values = rng.choice(config.d, size=n, p=weights / weights.sum())
    if config.kind == "numeric":
        values = (values + 0.5) / config.d
    columns = config.protocol.perturb(values, rng)
    times = (START_MS + np.sort(rng.integers(0, DAY_MS, size=n))).tolist()
    branch = payload_branch(config.protocol)
    payloads = list(config.protocol.payloads_to_avro(columns))
    old_schema = report_schema_json()
    old_schema["fields"] = [f for f in old_schema["fields"] if f["name"] != "fingerprint"]
    paths = []
    for name, schema, extra in (("with", load_schema("report"),
                                 {"fingerprint": config.fingerprint}),
                                ("without", fastavro.parse_schema(old_schema), {})):
        path = os.path.join(workdir, f"{config.name}-{n}-{name}.avro")
        records = ({"report_id": i, "metric": config.name, "event_time": t,
                    "payload": (branch, p), **extra}
                   for i, (t, p) in enumerate(zip(times, payloads, strict=True)))
        with open(path, "wb") as out:
            fastavro.writer(out, schema, records)
        paths.append(path)
    return paths[0], paths[1]


def alternating_medians(action_with, action_without, repeats: int) -> tuple[float, float]:
    """Median seconds of each action, run alternately."""
    times = ([], [])
    for _ in range(repeats):
        for spent, action in zip(times, (action_with, action_without), strict=True):
            start = time.perf_counter()
            action()
            spent.append(time.perf_counter() - start)
    return statistics.median(times[0]), statistics.median(times[1])


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reports", type=int, default=200_000)
    parser.add_argument("--domain", type=int, default=1024)
    parser.add_argument("--epsilon", type=float, default=2.0)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--protocols", default="grr,oue,olh,sw")
    add_json_argument(parser)
    args, beam_args = parser.parse_known_args(argv)
    with Run("fingerprint_cost", args.json, {**vars(args), "beam_args": beam_args}) as run:
        run.save({"unit": "ratio with / without fingerprints",
                  "protocols": measure(args, beam_args)})


def measure(args, beam_args) -> list[dict]:
    names = args.protocols.split(",")
    registry = parse_registry({"metrics": [metric_entry(name, args) for name in names]})
    print(f"{args.reports:,} reports per protocol, d={args.domain}, ε={args.epsilon:g}, "
          f"median of {args.repeats} alternating runs; rates with fingerprints, and the ratio "
          "with / without")
    print(f"{'protocol':<9}{'raw decode/s':>14}{'ratio':>7}{'decode/s':>12}{'ratio':>7}"
          f"{'end-to-end/s':>14}{'ratio':>7}")
    rows = []
    with tempfile.TemporaryDirectory(prefix="ldp-fingerprint-") as workdir:
        for name in names:
            with_path, without_path = write_pair(workdir, registry[f"bench.{name}"],
                                                 args.reports, seed=1)
            row = {"protocol": name}
            for stage, action in (
                    ("raw_decode", raw_decode),
                    ("decode", lambda path: decode_batches(registry, path)),
                    ("end_to_end", lambda path: end_to_end(registry, path, beam_args))):
                with contextlib.redirect_stderr(io.StringIO()):
                    seconds = alternating_medians(
                        functools.partial(action, with_path),
                        functools.partial(action, without_path), args.repeats)
                row[stage] = args.reports / seconds[0]
                row[f"{stage}_ratio"] = seconds[1] / seconds[0]
            print(f"{name:<9}{row['raw_decode']:>14,.0f}{row['raw_decode_ratio']:>7.3f}"
                  f"{row['decode']:>12,.0f}{row['decode_ratio']:>7.3f}"
                  f"{row['end_to_end']:>14,.0f}{row['end_to_end_ratio']:>7.3f}", flush=True)
            rows.append(row)
    return rows


if __name__ == "__main__":
    main()
