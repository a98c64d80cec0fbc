"""Portable randomness that the server re-derives from a client's seed.

Everything a seed-based protocol shares between client and server comes from one function of
(seed, index): the index-th output of Vigna's SplitMix64 generator started at state `seed`,

    z = (seed + (index + 1) * 0x9E3779B97F4A7C15) mod 2^64
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9 mod 2^64
    z = (z ^ (z >> 27)) * 0x94D049BB133111EB mod 2^64
    splitmix64(seed, index) = z ^ (z >> 31)

It is a dozen lines in any language with 64-bit unsigned arithmetic, it never changes with a
library version, and numpy evaluates it over whole arrays of seeds and indices at once.

Local hashing (OLH and its relatives) hashes a value v in [0, d) to [0, g) with a
multiply-add-shift hash (Dietzfelbinger 1996) of the value's fixed 64-bit key, its two words
coming from the seed:

    k_v = splitmix64(0, v)                                  (the same for every client)
    a = splitmix64(seed, 0) | 1,   b = splitmix64(seed, 1)
    t = (a * k_v + b) mod 2^64
    H(seed, v) = ((t >> 32) * g) >> 32

Over the choice of (a, b), t_v is uniform and t_u - t_v = a (k_u - k_v) has uniform top bits
whenever k_u - k_v has fewer than ~30 trailing zero bits, so the hashes of two values are
independent and uniform on [0, g) up to a bias of order g / 2^32 — what the estimator's unbiasedness
and [Wang20] journal eq. 2 need. The keys matter for sets of values: hashing the raw index v would
put consecutive values on an arithmetic progression (t_{v+1} - t_v = a for all v), so that three
consecutive values share a bucket twice as often as independent ones, inflating the variance of
range and set queries; pseudo-random keys remove that structure.

The server needs, per report (seed, y), the set {v : H(seed, v) = y}. Because the map from the
top 32 bits of t to [0, g) is monotone, H(seed, v) = y exactly when t lies in
[L_y * 2^32, L_{y+1} * 2^32) with L_y = ceil(y * 2^32 / g); written with unsigned wrap-around,

    (a * k_v + (b - L_y * 2^32)) mod 2^64  <  (L_{y+1} - L_y) * 2^32.

That test is one multiply, one add and one compare per (report, value) pair, done by numpy on
a (reports x values) block; no Python call runs per pair. The block's hits are summed per value
as bytes (ldp.protocols.bytesums), not as 64-bit integers. The three passes over the block
(multiply, add, compare) each run at a few G pairs/s, so in numpy the test is bounded near
1 G pairs/s: about 1 M reports/s at d = 1024 (docs/benchmarks.md).

A seeded k-subset of [0, d) (the wheel subset of RWS) is the first k entries of a partial
Fisher-Yates shuffle driven by the same function:

    perm = [0, 1, ..., d - 1]
    for i in 0 .. k - 1:
        j = i + bounded(splitmix64(seed, i), d - i)
        swap perm[i], perm[j]
    subset(seed) = perm[0 .. k - 1]        (perm[k .. d - 1] is its complement)

with bounded(x, m) = floor(x * m / 2^64), the top word of a 64 x 64-bit product (exact here
for m < 2^32 with 64-bit arithmetic only, see `bounded`). Each j is uniform on [i, d) up to a
relative bias below m / 2^64, so the subset is a uniform k-subset for all practical purposes.
numpy runs the k steps over a block of reports at once: k vectorised swaps per block.
"""
from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from ldp_telemetry.ldp.protocols.bytesums import add_column_counts, slab_rows

_U64 = np.uint64
_GOLDEN_GAMMA = _U64(0x9E3779B97F4A7C15)
_MIX_1 = _U64(0xBF58476D1CE4E5B9)
_MIX_2 = _U64(0x94D049BB133111EB)
_TOP_BITS = _U64(32)
_LOW_WORD = _U64(0xFFFFFFFF)
#: (reports x values) block size for the support test; ~2 MiB of uint64 stays in cache.
_BLOCK_CELLS = 1 << 18
#: entries per block of seeded permutations (rows x d int16/int32 entries: 4-8 MiB).
_PERMUTATION_CELLS = 1 << 21


def splitmix64(seed: np.ndarray | int, index: np.ndarray | int) -> np.ndarray:
    """The index-th SplitMix64 output from state `seed` (broadcasting; uint64 in, uint64 out)."""
    seed = np.asarray(seed).astype(_U64, copy=False)
    index = np.asarray(index).astype(_U64, copy=False)
    with np.errstate(over="ignore"):
        z = seed + (index + _U64(1)) * _GOLDEN_GAMMA
        z = (z ^ (z >> _U64(30))) * _MIX_1
        z = (z ^ (z >> _U64(27))) * _MIX_2
    return z ^ (z >> _U64(31))


def bounded(x: np.ndarray, m: np.ndarray | int) -> np.ndarray:
    """floor(x * m / 2^64) for uint64 x and 0 < m < 2^32 (broadcasting), exactly.

    With x = xh * 2^32 + xl: x * m / 2^64 = (xh * m + xl * m / 2^32) / 2^32, and both partial
    products fit in 64 bits, so floor((xh * m + floor(xl * m / 2^32)) / 2^32) is exact.
    """
    x = np.asarray(x).astype(_U64, copy=False)
    m = np.asarray(m).astype(_U64, copy=False)
    with np.errstate(over="ignore"):
        return ((x >> _TOP_BITS) * m + (((x & _LOW_WORD) * m) >> _TOP_BITS)) >> _TOP_BITS


def hash_coefficients(seeds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The multiply-add-shift words (a, b) of each seed: a odd, both uint64."""
    seeds = np.asarray(seeds).astype(_U64, copy=False)
    return splitmix64(seeds, 0) | _U64(1), splitmix64(seeds, 1)


def value_keys(values: np.ndarray | int) -> np.ndarray:
    """k_v = splitmix64(0, v): the fixed 64-bit key every client and the server hash for v."""
    return splitmix64(0, values)


def local_hash(seeds: np.ndarray, values: np.ndarray, g: int) -> np.ndarray:
    """H(seed, v) in [0, g) for paired arrays of seeds and values (broadcasting)."""
    a, b = hash_coefficients(seeds)
    with np.errstate(over="ignore"):
        t = a * value_keys(values) + b
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
    keys = value_keys(np.arange(d))
    rows = slab_rows(_BLOCK_CELLS, d)
    block = np.empty((min(rows, len(seeds)), d), dtype=_U64)
    inside = np.empty(block.shape, dtype=bool)
    with np.errstate(over="ignore"):
        for start in range(0, len(seeds), rows):
            stop = min(start + rows, len(seeds))
            t, hit = block[: stop - start], inside[: stop - start]
            np.multiply.outer(a[start:stop], keys, out=t)
            t += offset[start:stop, None]
            np.less(t, width[start:stop, None], out=hit)
            add_column_counts(counts, hit)


def seeded_permutations(seeds: np.ndarray, d: int, k: int, rows: int | None = None
                        ) -> Iterator[tuple[int, np.ndarray]]:
    """Partial Fisher-Yates shuffles of [0, d), k steps, one per seed (module docstring).

    Yields (start, block): block[i] is the permutation of seeds[start + i]; its first k entries
    are the seeded k-subset, the rest its complement. Blocks are reused between yields.
    """
    if not 0 <= k <= d or d >= 1 << 31:
        raise ValueError(f"need 0 <= k <= d < 2^31, got k={k}, d={d}")
    seeds = np.asarray(seeds).astype(_U64, copy=False)
    rows = rows or max(1, _PERMUTATION_CELLS // max(d, 1))
    dtype = np.int16 if d <= np.iinfo(np.int16).max else np.int32
    identity = np.arange(d, dtype=dtype)
    steps = np.arange(k, dtype=_U64)
    spans = d - steps
    buffer = np.empty((min(rows, len(seeds)), d), dtype=dtype)
    for start in range(0, len(seeds), rows):
        block = buffer[: min(rows, len(seeds) - start)]
        block[...] = identity
        flat = block.reshape(-1)
        # flat position of the swap partner of step i in every row
        partner = bounded(splitmix64(seeds[start:start + len(block), None], steps), spans)
        partner = partner.astype(np.intp)
        partner += np.arange(k, dtype=np.intp)
        partner += (np.arange(len(block), dtype=np.intp) * d)[:, None]
        partner = np.ascontiguousarray(partner.T)
        for i in range(k):
            held = block[:, i].copy()
            block[:, i] = flat.take(partner[i])
            flat.put(partner[i], held)
        yield start, block


def seeded_subsets(seeds: np.ndarray, d: int, k: int) -> np.ndarray:
    """The seeded k-subset of [0, d) of every seed, as an (n, k) int64 array (in draw order)."""
    out = np.empty((len(seeds), k), dtype=np.int64)
    for start, block in seeded_permutations(seeds, d, k):
        out[start:start + len(block)] = block[:, :k]
    return out
