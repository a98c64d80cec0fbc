"""Simulated poisoning attacks on frequency oracles: fake reports that promote target values.

The three attacks of Cao, Jia and Gong [Cao21], used by the integrity tests and
benchmarks/evaluate_integrity.py (never by the pipeline):

* "mga" (maximal gain): each fake report supports as many targets as the protocol allows.
  GRR: one target, drawn uniformly. Unary encoding: every target bit set, and further
  non-target bits drawn at random so that the report has as many ones as an honest report has
  on average (round(p* + (d - 1) q*)), so that the number of ones looks honest. Local hashing:
  among `tries` random seeds, the one whose hash puts the most targets in one bucket, and that
  bucket as y. SS (our extension): the targets (k of them at most) and random others up to k.
  RWS (our extension): among `tries` random seeds, the seed and displacement y whose support
  covers the most targets.
* "ria" (random item): a target drawn uniformly, perturbed by the protocol as an honest client
  would: indistinguishable from an honest report of that value.
* "roa" (random output): a uniformly random output of the protocol's output space (unary
  encoding: each bit 1 with probability 1/2).
"""
from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from ldp_telemetry.ldp.protocols import hashing
from ldp_telemetry.ldp.protocols.base import FrequencyOracle, random_seeds
from ldp_telemetry.ldp.protocols.grr import GRR
from ldp_telemetry.ldp.protocols.local_hashing import LocalHashing
from ldp_telemetry.ldp.protocols.rws import RWS
from ldp_telemetry.ldp.protocols.ss import SS
from ldp_telemetry.ldp.protocols.unary_encoding import UnaryEncoding

ATTACKS = ("mga", "ria", "roa")
#: Random seeds a local-hashing MGA fake report tries.
HASH_TRIES = 1000
#: Random seeds an RWS MGA fake report tries (each costs a seeded k-subset).
RWS_TRIES = 16
_ROWS = 4096


def fake_reports(protocol: FrequencyOracle, attack: str, targets: ArrayLike, m: int,
                 rng: np.random.Generator) -> dict:
    """Payload columns of m fake reports of `attack` promoting `targets` (distinct values)."""
    targets = np.asarray(targets, dtype=np.int64)
    if attack not in ATTACKS:
        raise ValueError(f"attack must be one of {ATTACKS}, got {attack!r}")
    if attack == "ria":
        return protocol.perturb(rng.choice(targets, size=m), rng)
    if attack == "roa":
        return _random_output(protocol, m, rng)
    return _maximal_gain(protocol, targets, m, rng)


def _bits(protocol: FrequencyOracle, dense: np.ndarray) -> dict:
    return {"bits": np.packbits(dense, axis=1, bitorder="little")}


def _random_output(protocol: FrequencyOracle, m: int, rng: np.random.Generator) -> dict:
    d = protocol.d
    if isinstance(protocol, GRR):
        return {"value": rng.integers(0, d, size=m)}
    if isinstance(protocol, UnaryEncoding):
        return _bits(protocol, rng.random((m, d)) < 0.5)
    if isinstance(protocol, LocalHashing):
        return {"seed": random_seeds(m, rng).view(np.int64),
                "y": rng.integers(0, protocol.g, size=m)}
    if isinstance(protocol, SS):
        return {"items": np.argsort(rng.random((m, d)), axis=1)[:, : protocol.k]}
    if isinstance(protocol, RWS):
        return {"seed": random_seeds(m, rng).view(np.int64), "y": rng.integers(0, d, size=m)}
    raise ValueError(f"no random-output attack for protocol {protocol.name!r}")


def _maximal_gain(protocol: FrequencyOracle, targets: np.ndarray, m: int,
                  rng: np.random.Generator) -> dict:
    d, r = protocol.d, len(targets)
    if isinstance(protocol, GRR):
        return {"value": rng.choice(targets, size=m)}
    if isinstance(protocol, UnaryEncoding):
        ones = max(r, int(round(protocol.p_star + (d - 1) * protocol.q_star)))
        keys = rng.random((m, d))
        keys[:, targets] = -1.0  # targets first, then random others
        chosen = np.argpartition(keys, ones - 1, axis=1)[:, :ones]
        dense = np.zeros((m, d), dtype=bool)
        dense[np.arange(m)[:, None], chosen] = True
        return _bits(protocol, dense)
    if isinstance(protocol, SS):
        keys = rng.random((m, d))
        keys[:, targets] = -rng.random((m, r)) - 1.0  # targets first (a random k if r > k)
        return {"items": np.argpartition(keys, protocol.k - 1, axis=1)[:, : protocol.k]}
    if isinstance(protocol, LocalHashing):
        return _hashing_gain(protocol, targets, m, rng)
    if isinstance(protocol, RWS):
        return _wheel_gain(protocol, targets, m, rng)
    raise ValueError(f"no maximal-gain attack for protocol {protocol.name!r}")


def _hashing_gain(protocol: LocalHashing, targets: np.ndarray, m: int,
                  rng: np.random.Generator) -> dict:
    g = protocol.g
    seeds, ys = np.empty(m, dtype=np.uint64), np.empty(m, dtype=np.int64)
    rows = max(1, _ROWS * 64 // HASH_TRIES)
    for start in range(0, m, rows):
        count = min(rows, m - start)
        tried = random_seeds((count, HASH_TRIES), rng)
        buckets = hashing.local_hash(tried[:, :, None], targets[None, None, :], g)
        flat = (buckets + (np.arange(count * HASH_TRIES) * g).reshape(count, HASH_TRIES, 1))
        tally = np.bincount(flat.ravel(), minlength=count * HASH_TRIES * g).reshape(
            count, HASH_TRIES, g)
        best = tally.max(axis=2)
        pick = best.argmax(axis=1)
        seeds[start:start + count] = tried[np.arange(count), pick]
        ys[start:start + count] = tally[np.arange(count), pick].argmax(axis=1)
    return {"seed": seeds.view(np.int64), "y": ys}


def _wheel_gain(protocol: RWS, targets: np.ndarray, m: int, rng: np.random.Generator) -> dict:
    d, k = protocol.d, protocol.k
    seeds, ys = np.empty(m, dtype=np.uint64), np.empty(m, dtype=np.int64)
    rows = max(1, _ROWS // RWS_TRIES)
    for start in range(0, m, rows):
        count = min(rows, m - start)
        tried = random_seeds(count * RWS_TRIES, rng)
        subsets = hashing.seeded_subsets(tried, d, k)  # (count*tries, k)
        # y puts target t on member u when y = (t - u) mod d: tally y over (targets x members)
        shifts = (targets[None, :, None] - subsets[:, None, :]) % d
        flat = shifts.reshape(len(tried), -1) + (np.arange(len(tried)) * d)[:, None]
        tally = np.bincount(flat.ravel(), minlength=len(tried) * d).reshape(
            count, RWS_TRIES, d)
        best = tally.max(axis=2)
        pick = best.argmax(axis=1)
        seeds[start:start + count] = tried.reshape(count, RWS_TRIES)[np.arange(count), pick]
        ys[start:start + count] = tally[np.arange(count), pick].argmax(axis=1)
    return {"seed": seeds.view(np.int64), "y": ys}
