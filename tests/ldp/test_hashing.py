"""The portable hash: SplitMix64 and the local hash, against an independent pure-Python reference.

The reference (tests/ldp/hashing_reference.py) uses only Python integers, so it shares no code
and no numpy overflow behaviour with ldp_telemetry.ldp.protocols.hashing.
"""
from __future__ import annotations

import numpy as np
import pytest

from ldp_telemetry.ldp.protocols import hashing
from tests.ldp.hashing_reference import ref_local_hash, ref_splitmix64


# (seed, index, output). The first row is the well-known first output of SplitMix64 seeded
# with 0 (0xE220A8397B1DCDAF); the seed-1234567 rows are its first five outputs.
SPLITMIX_VECTORS = [
    (0, 0, 16294208416658607535),
    (0, 1, 7960286522194355700),
    (1, 0, 10451216379200822465),
    (1234567, 0, 6457827717110365317),
    (1234567, 1, 3203168211198807973),
    (1234567, 2, 9817491932198370423),
    (1234567, 3, 4593380528125082431),
    (1234567, 4, 16408922859458223821),
    (2**64 - 1, 0, 16490336266968443936),
    (2**64 - 1, 7, 4638043754431676516),
    (2**63, 3, 6426116064599561977),
    (42, 1000, 6153847732809348270),
    (0xDEADBEEFCAFEBABE, 2**32 + 5, 14079980161782618549),
]

# (seed, v, g, H(seed, v)).
LOCAL_HASH_VECTORS = [
    (0, 0, 2, 0),
    (1, 5, 4, 2),
    (1234567, 3, 5, 2),
    (2**64 - 1, 2**32 - 1, 8, 0),
    (2**63 + 11, 100, 1000, 29),
    (987654321, 228, 9, 0),
    (0xDEADBEEFCAFEBABE, 17, 3, 2),
]


def test_reference_reproduces_the_literal_tables():
    assert [ref_splitmix64(s, i) for s, i, _ in SPLITMIX_VECTORS] == \
        [o for *_, o in SPLITMIX_VECTORS]
    assert [ref_local_hash(s, v, g) for s, v, g, _ in LOCAL_HASH_VECTORS] == \
        [h for *_, h in LOCAL_HASH_VECTORS]


@pytest.mark.parametrize("seed, index, expected", SPLITMIX_VECTORS)
def test_splitmix64_vectors(seed, index, expected):
    assert int(hashing.splitmix64(np.uint64(seed), index)) == expected


def test_splitmix64_first_outputs_of_a_stream_vectorised():
    out = hashing.splitmix64(np.uint64(1234567), np.arange(5))
    assert out.dtype == np.uint64
    assert out.tolist() == [6457827717110365317, 3203168211198807973, 9817491932198370423,
                            4593380528125082431, 16408922859458223821]


def test_splitmix64_matches_reference_on_random_seeds_and_broadcasts():
    rng = np.random.default_rng(20240501)
    seeds = rng.integers(0, 2**64 - 1, size=200, dtype=np.uint64, endpoint=True)
    indices = np.array([0, 1, 2, 31, 2**40])
    out = hashing.splitmix64(seeds[:, None], indices[None, :])
    assert out.shape == (200, 5)
    expected = [[ref_splitmix64(int(s), int(i)) for i in indices] for s in seeds]
    assert out.tolist() == expected


def test_splitmix64_accepts_the_int64_view_of_a_seed():
    # Seeds travel as Avro longs (two's complement); the int64 view must hash like the uint64.
    seeds = np.array([2**64 - 1, 2**63, 5], dtype=np.uint64)
    assert hashing.splitmix64(seeds.view(np.int64), 0).tolist() == \
        hashing.splitmix64(seeds, 0).tolist()


@pytest.mark.parametrize("seed, v, g, expected", LOCAL_HASH_VECTORS)
def test_local_hash_vectors(seed, v, g, expected):
    assert int(hashing.local_hash(np.uint64(seed), np.uint64(v), g)) == expected


@pytest.mark.parametrize("g", [2, 3, 7, 1000])
def test_local_hash_matches_reference(g):
    rng = np.random.default_rng(g)
    seeds = rng.integers(0, 2**64 - 1, size=300, dtype=np.uint64, endpoint=True)
    values = rng.integers(0, 5000, size=300)
    out = hashing.local_hash(seeds, values, g)
    assert out.tolist() == [ref_local_hash(int(s), int(v), g)
                            for s, v in zip(seeds, values, strict=True)]
    assert out.min() >= 0 and out.max() < g


def brute_force_support(seeds, y, d, g):
    h = hashing.local_hash(seeds[:, None], np.arange(d)[None, :], g)
    return (h == y[:, None]).sum(axis=0)


@pytest.mark.parametrize("d, g, n", [(8, 2, 1000), (8, 5, 70_000), (229, 9, 5000),
                                     (3000, 1000, 400), (2, 3, 50)])
def test_add_local_hash_support_equals_brute_force(d, g, n):
    # (8, 5, 70_000) spans several (reports x values) blocks; y covers 0 and g - 1.
    rng = np.random.default_rng(d * 7919 + g)
    seeds = rng.integers(0, 2**64 - 1, size=n, dtype=np.uint64, endpoint=True)
    y = rng.integers(0, g, size=n)
    y[:2] = [0, g - 1]
    counts = np.full(d, 3, dtype=np.int64)  # the function adds onto existing counts
    hashing.add_local_hash_support(counts, seeds, y, g)
    np.testing.assert_array_equal(counts, 3 + brute_force_support(seeds, y, d, g))


def test_add_local_hash_support_of_reports_built_from_the_hash_itself():
    # Each report names the bucket of a chosen value: that value is supported by every report.
    rng = np.random.default_rng(5)
    seeds = rng.integers(0, 2**64 - 1, size=500, dtype=np.uint64, endpoint=True)
    y = hashing.local_hash(seeds, np.full(500, 3), 6)
    counts = np.zeros(10, dtype=np.int64)
    hashing.add_local_hash_support(counts, seeds, y, 6)
    assert counts[3] == 500
    np.testing.assert_array_equal(counts, brute_force_support(seeds, y, 10, 6))


def test_add_local_hash_support_with_no_reports_changes_nothing():
    counts = np.arange(5, dtype=np.int64)
    hashing.add_local_hash_support(counts, np.array([], dtype=np.uint64),
                                   np.array([], dtype=np.int64), 4)
    assert counts.tolist() == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("d, g, n", [(1024, 2, 1021), (1023, 3, 600), (65, 2**31 - 1, 2000),
                                     (7, 2**32 - 1, 300), (1, 5, 700), (4099, 97, 130),
                                     (16, 11, 33_000)])
def test_add_local_hash_support_equals_brute_force_at_edges(d, g, n):
    # d not a multiple of 8 or 64, g at both ends of its range, n across and off the
    # 255-row byte slabs and the (reports x values) blocks of the support test.
    rng = np.random.default_rng(d * 31 + g % 1000)
    seeds = rng.integers(0, 2**64 - 1, size=n, dtype=np.uint64, endpoint=True)
    seeds[:3] = [0, 2**64 - 1, 2**63]
    y = rng.integers(0, g, size=n)
    y[:2] = [0, g - 1]
    counts = np.zeros(d, dtype=np.int64)
    hashing.add_local_hash_support(counts, seeds, y, g)
    np.testing.assert_array_equal(counts, brute_force_support(seeds, y, d, g))


def test_add_local_hash_support_counts_past_a_byte_in_one_block():
    # Every one of 1000 reports supports value 3 (with g = 2, others about half the time): each
    # byte slab of 255 rows sums to 255 there, and the slabs add without wrapping.
    rng = np.random.default_rng(11)
    seeds = rng.integers(0, 2**64 - 1, size=1000, dtype=np.uint64, endpoint=True)
    y = hashing.local_hash(seeds, np.full(1000, 3), 2)
    counts = np.zeros(1024, dtype=np.int64)
    hashing.add_local_hash_support(counts, seeds, y, 2)
    assert counts[3] == 1000
    np.testing.assert_array_equal(counts, brute_force_support(seeds, y, 1024, 2))


def test_add_local_hash_support_matches_the_pure_python_reference():
    rng = np.random.default_rng(23)
    seeds = rng.integers(0, 2**64 - 1, size=300, dtype=np.uint64, endpoint=True)
    y = rng.integers(0, 5, size=300)
    counts = np.zeros(77, dtype=np.int64)
    hashing.add_local_hash_support(counts, seeds, y, 5)
    expected = [sum(ref_local_hash(int(s), v, 5) == int(b) for s, b in zip(seeds, y, strict=True))
                for v in range(77)]
    assert counts.tolist() == expected

