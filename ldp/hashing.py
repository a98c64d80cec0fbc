"""Portable randomness that the server re-derives from a client's seed.

Everything a seed-based protocol shares between client and server comes from one function of
(seed, index): the index-th output of Vigna's SplitMix64 generator started at state `seed`,

    z = (seed + (index + 1) * 0x9E3779B97F4A7C15) mod 2^64
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9 mod 2^64
    z = (z ^ (z >> 27)) * 0x94D049BB133111EB mod 2^64
    splitmix64(seed, index) = z ^ (z >> 31)

It is a dozen lines in any language with 64-bit unsigned arithmetic, it never changes with a
library version, and numpy evaluates it over whole arrays of seeds and indices at once.

Local hashing (OLH and its relatives) hashes a value v in [0, d) to [0, g) with the
multiply-add-shift family (Dietzfelbinger 1996), whose two words come from the seed:

    a = splitmix64(seed, 0) | 1,   b = splitmix64(seed, 1)
    t = (a * v + b) mod 2^64
    H(seed, v) = ((t >> 32) * g) >> 32

For v < 2^32 the top 32 bits of t are pairwise independent and uniform over the choice of
(a, b); the final multiply-shift maps them to [0, g) with a bias below g / 2^32.

The server needs, per report (seed, y), the set {v : H(seed, v) = y}. Because the map from the
top 32 bits of t to [0, g) is monotone, H(seed, v) = y exactly when t lies in
[L_y * 2^32, L_{y+1} * 2^32) with L_y = ceil(y * 2^32 / g); written with unsigned wrap-around,

    (a * v + (b - L_y * 2^32)) mod 2^64  <  (L_{y+1} - L_y) * 2^32.

That test is one multiply, one add and one compare per (report, value) pair, done by numpy on
a (reports x values) block; no Python call runs per pair.
"""
from __future__ import annotations

import numpy as np

_U64 = np.uint64
_GOLDEN_GAMMA = _U64(0x9E3779B97F4A7C15)
_MIX_1 = _U64(0xBF58476D1CE4E5B9)
_MIX_2 = _U64(0x94D049BB133111EB)
_TOP_BITS = _U64(32)
#: (reports x values) block size for the support test; ~2 MiB of uint64 stays in cache.
_BLOCK_CELLS = 1 << 18


def splitmix64(seed: np.ndarray | int, index: np.ndarray | int) -> np.ndarray:
    """The index-th SplitMix64 output from state `seed` (broadcasting; uint64 in, uint64 out)."""
    seed = np.asarray(seed).astype(_U64, copy=False)
    index = np.asarray(index).astype(_U64, copy=False)
    with np.errstate(over="ignore"):
        z = seed + (index + _U64(1)) * _GOLDEN_GAMMA
        z = (z ^ (z >> _U64(30))) * _MIX_1
        z = (z ^ (z >> _U64(27))) * _MIX_2
    return z ^ (z >> _U64(31))


def hash_coefficients(seeds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The multiply-add-shift words (a, b) of each seed: a odd, both uint64."""
    seeds = np.asarray(seeds).astype(_U64, copy=False)
    return splitmix64(seeds, 0) | _U64(1), splitmix64(seeds, 1)


def local_hash(seeds: np.ndarray, values: np.ndarray, g: int) -> np.ndarray:
    """H(seed, v) in [0, g) for paired arrays of seeds and values (broadcasting)."""
    a, b = hash_coefficients(seeds)
    values = np.asarray(values).astype(_U64, copy=False)
    with np.errstate(over="ignore"):
        t = a * values + b
    return (((t >> _TOP_BITS) * _U64(g)) >> _TOP_BITS).astype(np.int64)


def bucket_bounds(y: np.ndarray, g: int) -> np.ndarray:
    """L_y = ceil(y * 2^32 / g) as uint64, for y in [0, g]."""
    y = np.asarray(y).astype(_U64, copy=False)
    return ((y << _TOP_BITS) + _U64(g - 1)) // _U64(g)


def add_local_hash_support(counts: np.ndarray, seeds: np.ndarray, y: np.ndarray, g: int) -> None:
    """counts[v] += #{reports i : H(seeds[i], v) = y[i]}, for v in [0, len(counts)).

    Vectorised over (report, value) blocks with the interval test of the module docstring.
    """
    d = counts.shape[0]
    if len(seeds) == 0 or d == 0:
        return
    a, b = hash_coefficients(seeds)
    low = bucket_bounds(y, g)
    width = (bucket_bounds(np.asarray(y) + 1, g) - low) << _TOP_BITS
    with np.errstate(over="ignore"):
        offset = b - (low << _TOP_BITS)
    values = np.arange(d, dtype=_U64)
    rows = max(1, _BLOCK_CELLS // d)
    block = np.empty((min(rows, len(seeds)), d), dtype=_U64)
    inside = np.empty(block.shape, dtype=bool)
    with np.errstate(over="ignore"):
        for start in range(0, len(seeds), rows):
            stop = min(start + rows, len(seeds))
            t, hit = block[: stop - start], inside[: stop - start]
            np.multiply.outer(a[start:stop], values, out=t)
            t += offset[start:stop, None]
            np.less(t, width[start:stop, None], out=hit)
            counts += np.count_nonzero(hit, axis=0)
