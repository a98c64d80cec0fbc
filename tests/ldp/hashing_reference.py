"""An independent pure-Python reference of ldp_telemetry.ldp.protocols.hashing, written from its
docstring alone.

Only Python integers (arbitrary precision, reduced mod 2^64 by hand): no code and no numpy
overflow behaviour is shared with the module under test.
"""
from __future__ import annotations

MASK = (1 << 64) - 1


def ref_splitmix64(seed: int, index: int) -> int:
    z = (seed + (index + 1) * 0x9E3779B97F4A7C15) & MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def ref_local_hash(seed: int, v: int, g: int) -> int:
    a, b = ref_splitmix64(seed, 0) | 1, ref_splitmix64(seed, 1)
    return ((((a * ref_splitmix64(0, v) + b) & MASK) >> 32) * g) >> 32


def ref_subset(seed: int, d: int, k: int) -> list[int]:
    perm = list(range(d))
    for i in range(k):
        j = i + ((ref_splitmix64(seed, i) * (d - i)) >> 64)
        perm[i], perm[j] = perm[j], perm[i]
    return perm[:k]
