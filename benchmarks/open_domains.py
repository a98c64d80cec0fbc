"""Heavy hitters of open string domains: this project's PEM beside pure-ldp's PEM, TreeHist and
HCMS, on the same users' strings.

For each data set, ε and n, n users are drawn (seeded) from real string frequencies; the true
top k are the k most frequent strings among them. Each method perturbs every user's string
once and returns its top k; the scores ([Wang19] §VI, as pure-ldp's evaluations use them):

    precision  |found ∩ true top k| / |found|       recall  |found ∩ true top k| / k
    F1         2 · precision · recall / (precision + recall)
    NCR        Σ_{v ∈ found ∩ top k} (k + 1 − rank(v)) / Σ_{i=1..k} i    (normalised cumulative
               rank: a hit on the first string counts k, on the k-th 1)

Methods: `pem` is this project's (ldp_telemetry.ldp.protocols.pem, decoded by
ldp_telemetry.ldp.estimation.heavy_hitters; one level per byte, pool 1,024), `pem-dictionary`
the same statistic decoded with the sample's true dictionary beside the search; with
`--final-share s`, `pem-share` and `pem-dictionary-share` are the same two decodings of a second
round of the same users' reports made with `domain.strings.final_share` = s (a share s of the
devices sent to level m); the peers are
pure-ldp's PEM and TreeHist over its HCMS frequency oracle, and HCMS alone decoding the true
dictionary of the sample (it is told the domain: an upper bound no open-domain method has).
pure-ldp runs in a separate interpreter (`--peer-python`, an environment with pure-ldp from
the package index; never a dependency of this project) through benchmarks/open_domains_peers.py;
without it the peer columns are left empty. Peers run up to `--peer-max-n` users (they handle
one report at a time in Python). `--reuse-peers JSON` takes the peer columns from an earlier
run's file instead (the same seed, data and settings draw the same users), to measure a change
of this project's method without running the peers again.

Rates: aggregation reports/s is n over the server's time (counting every report, then decoding
the top k); this project counts with one `bincount` and decodes in time independent of n.
Memory: the bytes of one window's statistic (the memory model's `statistic_nbytes`).

Data: `words` (wordfreq_en_large: English word frequencies, words of lower-case ASCII letters and
apostrophes), `names` (babynames 2017: name counts, letters only), strings of at most
`--max-bytes` bytes (longer ones dropped; the share kept is reported).

    LDP_PEERS_PYTHON=/path/to/peers-venv/bin/python python benchmarks/open_domains.py \
        --json benchmarks/results/open_domains.json
"""
from __future__ import annotations

import argparse
import csv
import gzip
import json
import os
import re
import subprocess
import sys
import time
from collections import Counter

import numpy as np
from bench_json import Run, add_json_argument, default_datasets_dir

from ldp_telemetry.ldp.estimation.heavy_hitters import find_heavy_hitters
from ldp_telemetry.ldp.protocols import make_string_protocol
from ldp_telemetry.ldp.protocols.string_keys import padded_rows

PEERS = ("pem-hcms", "treehist-hcms", "hcms")
PEER_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "open_domains_peers.py")
PATTERNS = {"words": re.compile(r"^[a-z']+$"), "names": re.compile(r"^[A-Za-z]+$")}


def load(name: str, folder: str, max_bytes: int) -> tuple[list[str], np.ndarray, float]:
    """(strings, frequencies, share of the mass kept) of a data set."""
    counts: Counter = Counter()
    if name == "words":
        with gzip.open(os.path.join(folder, "wordfreq_en_large.csv.gz"), "rt",
                       encoding="utf-8") as handle:
            for row in csv.DictReader(handle):
                counts[row["word"]] += float(row["freq"])
    else:
        with gzip.open(os.path.join(folder, "babynames_ssa_1880_2017.csv.gz"), "rt",
                       encoding="utf-8") as handle:
            for row in csv.DictReader(handle):
                if row["year"] == "2017":
                    counts[row["name"]] += int(row["n"])
    total = sum(counts.values())
    kept = {s: c for s, c in counts.items()
            if PATTERNS[name].match(s) and len(s.encode("utf-8")) <= max_bytes}
    strings = sorted(kept, key=lambda s: (-kept[s], s))
    weights = np.array([kept[s] for s in strings], dtype=np.float64)
    return strings, weights / weights.sum(), float(weights.sum() / total)


def scores(found: list[str], truth: list[str]) -> dict:
    k = len(truth)
    rank = {value: i for i, value in enumerate(truth)}
    hits = [v for v in dict.fromkeys(found) if v in rank]
    precision = len(hits) / len(found) if found else 0.0
    recall = len(hits) / k
    f1 = 2 * precision * recall / (precision + recall) if hits else 0.0
    ncr = sum(k - rank[v] for v in hits) / (k * (k + 1) / 2)
    return {"precision": precision, "recall": recall, "f1": f1, "ncr": ncr}


def ours(values: list[str], epsilon: float, ks: list[int], max_bytes: int, pool: int,
         rng: np.random.Generator, dictionary: list[str], final_share: float = 0.0,
         suffix: str = "") -> dict:
    """This project's PEM on the users' strings: "pem" decodes by the prefix search alone,
    "pem-dictionary" from the same statistic with `dictionary` (the sample's true one, as HCMS
    is told) beside the search; the reports made with `final_share`, the names + `suffix`."""
    protocol = make_string_protocol("pem", epsilon, max_bytes, pool, final_share)
    rows = padded_rows([v.encode("utf-8") for v in values], max_bytes)
    started = time.perf_counter()
    columns = protocol.perturb(rows, rng)
    client_s = time.perf_counter() - started
    statistic = protocol.new_statistic()
    started = time.perf_counter()
    protocol.accumulate(statistic, columns)
    aggregate_s = time.perf_counter() - started
    known = [v.encode("utf-8") for v in dictionary]
    results = {}
    for name, candidates in (("pem", []), ("pem-dictionary", known)):
        top, decode_s = {}, {}
        for k in ks:
            started = time.perf_counter()
            found = find_heavy_hitters(protocol, statistic, top=k, dictionary=candidates)
            decode_s[str(k)] = time.perf_counter() - started
            top[str(k)] = found.labels
        results[name + suffix] = {"top": top, "client_s": client_s, "aggregate_s": aggregate_s,
                         "decode_s": decode_s, "statistic_bytes": protocol.statistic_nbytes()}
    return results


def peers(values, epsilon, ks, dictionary, seed, args) -> dict | None:
    """pure-ldp's methods on the same values, or None when no interpreter has pure-ldp."""
    if not args.peer_python:
        return None
    alphabet = sorted({c for v in dictionary for c in v})
    job = {"values": values, "epsilon": epsilon, "ks": ks, "alphabet": alphabet,
           "max_len": max(len(v) for v in dictionary), "dictionary": dictionary, "seed": seed,
           "methods": list(args.peers), "hash_functions": args.hcms_hashes,
           "sketch_width": args.hcms_width}
    done = subprocess.run([args.peer_python, PEER_SCRIPT], input=json.dumps(job),
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def peer_python_available(python: str | None) -> str | None:
    """`python` when it imports pure_ldp, else None (the peer columns stay empty)."""
    if not python:
        return None
    probe = subprocess.run([python, "-c", "import pure_ldp"], capture_output=True)
    return python if probe.returncode == 0 else None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", nargs="+", default=["words", "names"],
                        choices=sorted(PATTERNS))
    parser.add_argument("--datasets-dir", default=default_datasets_dir())
    parser.add_argument("--epsilon", nargs="+", type=float, default=[1.0, 2.0, 4.0])
    parser.add_argument("--users", nargs="+", type=int, default=[100_000, 1_000_000])
    parser.add_argument("--k", nargs="+", type=int, default=[10, 50])
    parser.add_argument("--max-bytes", type=int, default=10)
    parser.add_argument("--pool", type=int, default=1024)
    parser.add_argument("--final-share", type=float, default=0.0,
                        help="also run PEM with this domain.strings.final_share on the same "
                             "users (columns pem-share, pem-dictionary-share); 0: not run")
    parser.add_argument("--peer-python", default=os.environ.get("LDP_PEERS_PYTHON"),
                        help="an interpreter with pure-ldp installed (default: "
                             "$LDP_PEERS_PYTHON; without one, no peer columns)")
    parser.add_argument("--peers", nargs="+", default=list(PEERS), choices=PEERS)
    parser.add_argument("--peer-max-n", type=int, default=100_000)
    parser.add_argument("--reuse-peers", metavar="JSON", nargs="+", default=None,
                        help="take the peer columns from earlier runs' --json files (same "
                             "seed, data and settings: the same users) instead of running them; "
                             "a setting in several files is taken from the last")
    parser.add_argument("--hcms-hashes", type=int, default=256)
    parser.add_argument("--hcms-width", type=int, default=1024)
    parser.add_argument("--seed", type=int, default=2026)
    add_json_argument(parser)
    args = parser.parse_args(argv)
    args.peer_python = peer_python_available(args.peer_python)
    if args.peer_python is None and not args.reuse_peers:
        print("pure-ldp not available (--peer-python): peer columns left empty", file=sys.stderr)
    rows = []
    earlier = {}
    for path in args.reuse_peers or ():
        with open(path, encoding="utf-8") as handle:
            document = json.load(handle)
        for key in ("seed", "max_bytes", "hcms_hashes", "hcms_width"):
            if document["parameters"][key] != getattr(args, key):
                parser.error(f"--reuse-peers {path}: the earlier run's {key} differs")
        earlier.update({(r["dataset"], r["n"], r["epsilon"], r["k"]):
                        {name: m for name, m in r["methods"].items() if name in PEERS}
                        for r in document["results"]["settings"]})
        args.peer_python = None
    settings = {k: v for k, v in vars(args).items()
                if k not in ("datasets_dir", "peer_python", "reuse_peers")}  # local paths
    settings["peers_available"] = args.peer_python is not None or bool(earlier)
    settings["peers_from_earlier_run"] = bool(earlier)
    settings["peers_files"] = [os.path.basename(path) for path in args.reuse_peers or ()]
    with Run("open_domains", args.json, settings) as run:
        for dataset in args.dataset:
            strings, frequencies, kept = load(dataset, args.datasets_dir, args.max_bytes)
            for n in args.users:
                for epsilon in args.epsilon:
                    seed = args.seed + n + int(epsilon * 100)
                    rng = np.random.default_rng(seed)
                    values = [strings[i] for i in rng.choice(len(strings), size=n,
                                                             p=frequencies)]
                    counted = Counter(values)
                    ranked = sorted(counted, key=lambda s: (-counted[s], s))
                    methods = ours(values, epsilon, args.k, args.max_bytes, args.pool, rng,
                                   sorted(counted))
                    if args.final_share:
                        methods.update(ours(values, epsilon, args.k, args.max_bytes, args.pool,
                                            rng, sorted(counted), args.final_share, "-share"))
                    if n <= args.peer_max_n:
                        methods.update(peers(values, epsilon, args.k, sorted(counted), seed,
                                             args) or {})
                    for k in args.k:
                        row = {"dataset": dataset, "n": n, "epsilon": epsilon, "k": k,
                               "kept": kept, "distinct": len(counted), "methods": {}}
                        row["methods"].update(earlier.get((dataset, n, epsilon, k), {}))
                        for name, result in methods.items():
                            server_s = result["aggregate_s"] + result["decode_s"][str(k)]
                            row["methods"][name] = {
                                **scores(result["top"][str(k)], ranked[:k]),
                                "aggregation_rate": n / server_s,
                                "client_rate": n / result["client_s"],
                                "decode_s": result["decode_s"][str(k)],
                                "statistic_bytes": result.get("statistic_bytes")}
                        rows.append(row)
                        shown = "  ".join(f"{name} F1 {m['f1']:.2f} NCR {m['ncr']:.2f} "
                                          f"{m['aggregation_rate']:,.0f}/s"
                                          for name, m in row["methods"].items())
                        print(f"{dataset} n={n:,} ε={epsilon:g} k={k}: {shown}", flush=True)
        for row in rows:  # this project's columns first
            row["methods"] = dict(sorted(row["methods"].items(), key=lambda kv: kv[0] in PEERS))
        run.save({"settings": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
