"""The peer column of benchmarks/open_domains.py: pure-ldp's PEM, TreeHist and HCMS on given
users' strings. Runs in an interpreter that has pure-ldp (a separate benchmark environment; it
is not a dependency of this project) and needs nothing of this project.

    python open_domains_peers.py < job.json > result.json

job: {"values": [...] (strings of at most max_len characters of the alphabet),
      "epsilon": e, "ks": [10, 50], "max_len": L, "alphabet": [...],
      "dictionary": [...], "seed": s, "methods": ["pem-hcms", "treehist-hcms", "hcms"],
      "hash_functions": K, "sketch_width": m}
result: {method: {"top": {"10": [...]}, "client_s": t, "aggregate_s": t,
                  "decode_s": {"10": t}}}
Each user reports once; pure-ldp's clients and servers are used as they are, one report at a
time (their API). Install: pure-ldp 1.2.0 needs numpy < 2 and xxhash < 2 (it hashes str), and
imports scikit-learn and statsmodels. PEM and TreeHist use HCMS as their frequency oracle:
pure-ldp's default (local hashing) enumerates the whole domain of each level, |alphabet|^L
values, per report.
"""
from __future__ import annotations

import json
import random
import sys
import time

import numpy as np
from pure_ldp.frequency_oracles.apple_cms import CMSClient, CMSServer
from pure_ldp.heavy_hitters.prefix_extending import PEMClient, PEMServer
from pure_ldp.heavy_hitters.treehistogram import TreeHistClient, TreeHistServer

PAD = "\x01"  # pure-ldp's padding character; never in the data
END = "\x02"  # ends a string: values arrive padded with it to max_len, and it is in the alphabet


def hcms(epsilon, job):
    server = CMSServer(epsilon, job["hash_functions"], job["sketch_width"], is_hadamard=True)
    client = CMSClient(epsilon, server.get_hash_funcs(), job["sketch_width"], is_hadamard=True)
    return client, server


def identity(x):
    return x


def run(method, job):
    epsilon, ks = job["epsilon"], job["ks"]
    alphabet, max_len = [*job["alphabet"], END], job["max_len"]
    values = job["values"] if method == "hcms" else [v.ljust(max_len, END) for v in job["values"]]
    if method == "pem-hcms":
        fo_client, fo_server = hcms(epsilon, job)
        client = PEMClient(epsilon, 1, max_len, 1, alphabet=alphabet, index_mapper=identity,
                           fo_client=fo_client, padding_char=PAD)
        server = PEMServer(epsilon, 1, max_len, 1, alphabet=alphabet, index_mapper=identity,
                           fo_server=fo_server, padding_char=PAD)
    elif method == "treehist-hcms":
        fo_client, fo_server = hcms(epsilon, job)
        client = TreeHistClient(epsilon, 1, max_len, alphabet=alphabet, index_mapper=identity,
                                fo_client=fo_client, padding_char=PAD)
        server = TreeHistServer(epsilon, max_len, 1, alphabet=alphabet, index_mapper=identity,
                                fo_server=fo_server, padding_char=PAD)
    else:
        client, server = hcms(epsilon, job)
    started = time.perf_counter()
    reports = [client.privatise(value) for value in values]
    client_s = time.perf_counter() - started
    started = time.perf_counter()
    for report in reports:
        server.aggregate(report)
    aggregate_s = time.perf_counter() - started
    top, decode_s = {}, {}
    for k in ks:
        started = time.perf_counter()
        if method == "hcms":
            dictionary = job["dictionary"]
            estimates = np.array([server.estimate(v, suppress_warnings=True)
                                  for v in dictionary])
            found = [dictionary[i] for i in np.argsort(-estimates, kind="stable")[:k]]
        else:
            found = [v.split(PAD)[0].split(END)[0]
                     for v in server.find_heavy_hitters(k=k)[0]][:k]
        decode_s[str(k)] = time.perf_counter() - started
        top[str(k)] = found
    return {"top": top, "client_s": client_s, "aggregate_s": aggregate_s, "decode_s": decode_s}


def main() -> None:
    job = json.load(sys.stdin)
    random.seed(job["seed"])
    np.random.seed(job["seed"] % 2**32)
    json.dump({method: run(method, job) for method in job["methods"]}, sys.stdout)


if __name__ == "__main__":
    main()
