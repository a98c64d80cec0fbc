"""Test vectors of the portable (seed, index) function and every structure derived from it.

The reference (hashing_reference.py) is plain Python integer arithmetic, written from the
ldp_telemetry.ldp.protocols.hashing docstring alone; the tables are literal numbers a client in
another language can check itself against.
splitmix64(0, 0) = 0xE220A8397B1DCDAF is also the first output of Vigna's published SplitMix64
started at state 0.
"""
from __future__ import annotations

import numpy as np
import pytest

from ldp_telemetry.ldp.protocols import hashing, make_protocol

from tests.ldp.hashing_reference import ref_local_hash, ref_splitmix64, ref_subset

SEEDS = [0, 1, 42, 0xDEADBEEFCAFEBABE, 0xFFFFFFFFFFFFFFFF]


SPLITMIX_TABLE = {  # seed: outputs at index 0, 1, 7
    0: [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, 0xC584133AC916AB3C],
    1: [0x910A2DEC89025CC1, 0xBEEB8DA1658EEC67, 0x85E7BB0F12278575],
    42: [0xBDD732262FEB6E95, 0x28EFE333B266F103, 0xCCF635EE9E9E2FA4],
    0xDEADBEEFCAFEBABE: [0x0D7D93560D1929D2, 0x491DFB740E50D43F, 0x796B308A7FE49981],
    0xFFFFFFFFFFFFFFFF: [0xE4D971771B652C20, 0xE99FF867DBF682C9, 0x405DA438A39E8064],
}
LOCAL_HASH_TABLE = {  # seed: H(seed, v) for v = 0..7 with g = 56 (OLH at ε = 4) and g = 2 (BLH)
    0: ([0, 30, 34, 17, 50, 42, 38, 37], [0, 1, 1, 0, 1, 1, 1, 1]),
    1: ([52, 30, 20, 27, 8, 31, 34, 42], [1, 1, 0, 0, 0, 1, 1, 1]),
    42: ([45, 14, 43, 30, 43, 17, 7, 39], [1, 0, 1, 1, 1, 0, 0, 1]),
    0xDEADBEEFCAFEBABE: ([1, 28, 46, 48, 40, 22, 9, 18], [0, 1, 1, 1, 1, 0, 0, 0]),
    0xFFFFFFFFFFFFFFFF: ([39, 21, 31, 45, 52, 18, 44, 51], [1, 0, 1, 1, 1, 0, 1, 1]),
}
SUBSET_TABLE = {  # seed: RWS subset (draw order) for (d, k) = (10, 3) and (1024, 6)
    0: ([8, 4, 2], [904, 442, 29, 994, 112, 338]),
    1: ([5, 7, 9], [580, 763, 994, 456, 457, 782]),
    42: ([7, 2, 4], [759, 164, 286, 354, 42, 889]),
    0xDEADBEEFCAFEBABE: ([0, 3, 4], [53, 293, 267, 859, 716, 734]),
    0xFFFFFFFFFFFFFFFF: ([8, 9, 3], [915, 934, 226, 438, 723, 845]),
}


@pytest.mark.parametrize("seed", SEEDS)
def test_splitmix64_vectors(seed):
    expected = SPLITMIX_TABLE[seed]
    assert [ref_splitmix64(seed, i) for i in (0, 1, 7)] == expected
    got = hashing.splitmix64(np.full(3, seed, dtype=np.uint64), np.array([0, 1, 7]))
    assert [int(x) for x in got] == expected


@pytest.mark.parametrize("seed", SEEDS)
def test_local_hash_vectors(seed):
    wide, binary = LOCAL_HASH_TABLE[seed]
    assert [ref_local_hash(seed, v, 56) for v in range(8)] == wide
    assert [ref_local_hash(seed, v, 2) for v in range(8)] == binary
    seeds = np.full(8, seed, dtype=np.uint64)
    assert hashing.local_hash(seeds, np.arange(8), 56).tolist() == wide
    assert hashing.local_hash(seeds, np.arange(8), 2).tolist() == binary


@pytest.mark.parametrize("seed", SEEDS)
def test_seeded_subset_vectors(seed):
    small, large = SUBSET_TABLE[seed]
    assert ref_subset(seed, 10, 3) == small and ref_subset(seed, 1024, 6) == large
    seeds = np.array([seed], dtype=np.uint64)
    assert hashing.seeded_subsets(seeds, 10, 3).tolist() == [small]
    assert hashing.seeded_subsets(seeds, 1024, 6).tolist() == [large]


def test_bounded_is_the_exact_top_word():
    rng = np.random.default_rng(7)
    x = rng.integers(0, 2**64 - 1, size=2000, dtype=np.uint64, endpoint=True)
    m = rng.integers(1, 2**32 - 1, size=2000, dtype=np.uint64)
    edge_x = np.array([0, 2**64 - 1, 2**63, 2**32 - 1, 2**32], dtype=np.uint64)
    edge_m = np.array([1, 2**32 - 1, 3, 2**32 - 1, 1000], dtype=np.uint64)
    x, m = np.concatenate([x, edge_x]), np.concatenate([m, edge_m])
    assert [int(r) for r in hashing.bounded(x, m)] == [
        (int(a) * int(b)) >> 64 for a, b in zip(x, m, strict=True)]


def test_vectorised_structures_match_the_reference_on_many_seeds():
    rng = np.random.default_rng(11)
    seeds = rng.integers(0, 2**64 - 1, size=300, dtype=np.uint64, endpoint=True)
    subsets = hashing.seeded_subsets(seeds, 37, 9)
    for seed, subset in zip(seeds.tolist(), subsets.tolist(), strict=True):
        assert subset == ref_subset(seed, 37, 9)
    values = rng.integers(0, 1000, size=300)
    hashed = hashing.local_hash(seeds, values, 13)
    assert hashed.tolist() == [ref_local_hash(s, v, 13)
                               for s, v in zip(seeds.tolist(), values.tolist(), strict=True)]


def test_permutation_blocks_cover_every_report_and_stay_permutations():
    rng = np.random.default_rng(3)
    seeds = rng.integers(0, 2**64 - 1, size=50, dtype=np.uint64, endpoint=True)
    seen = 0
    for start, block in hashing.seeded_permutations(seeds, 12, 5, rows=16):
        assert start == seen
        assert (np.sort(block, axis=1) == np.arange(12)).all()
        for offset, row in enumerate(block.tolist()):
            assert row[:5] == ref_subset(int(seeds[start + offset]), 12, 5)
        seen += len(block)
    assert seen == 50


def test_server_support_sets_follow_the_reference():
    """What RLH and RWS count for a report is exactly the reference structure."""
    rlh, rws = make_protocol("rlh", 2.0, 40), make_protocol("rws", 2.0, 40)
    seed, y = 0xDEADBEEFCAFEBABE, 3
    column = {"seed": np.array([seed], dtype=np.uint64).view(np.int64), "y": np.array([y])}
    lh_counts = rlh.new_statistic()
    rlh.accumulate(lh_counts, column)
    assert np.flatnonzero(lh_counts).tolist() == [
        v for v in range(40) if ref_local_hash(seed, v, rlh.g) == y]
    wheel_counts = rws.new_statistic()
    rws.accumulate(wheel_counts, column)
    assert np.flatnonzero(wheel_counts).tolist() == sorted(
        (u + y) % 40 for u in ref_subset(seed, 40, rws.k))
