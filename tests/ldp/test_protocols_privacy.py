"""ε-LDP of every protocol, by exact enumeration of its output distribution on small domains.

For each protocol the exact probability of every output (or output class) is computed from the
mechanism's definition with the protocol's own parameters (p*, q*, g, k, K) and its own seed-
derived structures (ldp_telemetry.ldp.protocols.hashing): seed-based protocols are conditioned on
the seed, which does not depend on the input, so each of SEEDS many seeds is enumerated separately.
For every pair of inputs the largest probability ratio must be <= e^ε (1 + 1e-9), and equal e^ε
(every one of these mechanisms is tight). A second test checks that `perturb` really samples that
distribution (chi-square / binomial z tests on seeded draws).
"""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from ldp_telemetry.ldp.protocols import PROTOCOLS, hashing, make_protocol
from ldp_telemetry.ldp.protocols.hash_pool import pool_hash
from ldp_telemetry.ldp.protocols.hr import hadamard_parity

DOMAINS = [2, 3, 4, 5, 6]
EPSILONS = [0.1, 0.7, 1.0, 2.5, 4.0]
SEEDS = np.random.default_rng(2024).integers(0, 2**64 - 1, size=64, dtype=np.uint64,
                                               endpoint=True)


def output_distribution(protocol, v: int) -> dict:
    """Exact Pr[output | v] over every output (class) of the protocol."""
    name, d, e = protocol.name, protocol.d, math.exp(protocol.epsilon)
    if name == "grr":
        p = protocol.p_star
        return {y: p if y == v else (1 - p) / (d - 1) for y in range(d)}
    if name in ("oue", "sue", "rue"):
        p, q = protocol.p_star, protocol.q_star
        return {bits: math.prod((p if i == v else q) if b else (1 - (p if i == v else q))
                                for i, b in enumerate(bits))
                for bits in itertools.product((0, 1), repeat=d)}
    if name in ("olh", "blh", "rlh"):
        g, p = protocol.g, e / (e + protocol.g - 1)
        hashed = hashing.local_hash(SEEDS, np.full(len(SEEDS), v), g).tolist()
        return {(s, y): (p if y == h else (1 - p) / (g - 1)) / len(SEEDS)
                for s, h in enumerate(hashed) for y in range(g)}
    if name == "hr":
        K, p = protocol.K, e / (e + 1)
        return {(j, b): (p if int(hadamard_parity(j, v)) == b else 1 - p) / (K - 1)
                for j in range(1, K) for b in (0, 1)}
    if name == "ss":
        k, p = protocol.k, protocol.p_star
        with_v, without_v = math.comb(d - 1, k - 1), math.comb(d - 1, k)
        return {subset: p / with_v if v in subset else (1 - p) / without_v
                for subset in itertools.combinations(range(d), k)}
    if name == "rws":
        k, z = protocol.k, protocol.k * e + d - protocol.k
        subsets = hashing.seeded_subsets(SEEDS, d, k).tolist()
        return {(s, y): (e / z if (v - y) % d in subset else 1 / z) / len(SEEDS)
                for s, subset in enumerate(subsets) for y in range(d)}
    if name in ("cms", "hcms", "flh"):
        return pooled_distribution(protocol, v)
    raise AssertionError(f"no exact model for {name}")


def pooled_distribution(protocol, v: int) -> dict:
    """Exact Pr[output | v] of a pooled-hash oracle: the hash index j is uniform on [0, k) and
    the bucket a = h_j(v) comes from the protocol's own pool (ldp.protocols.hash_pool)."""
    k, m, name = protocol.k, protocol.m, protocol.name
    buckets = pool_hash(np.arange(k), np.full(k, v), m, protocol.root).tolist()
    if name == "flh":
        p = protocol.bucket_p
        return {(j, y): (p if y == a else (1 - p) / (m - 1)) / k
                for j, a in enumerate(buckets) for y in range(m)}
    if name == "hcms":
        p = protocol.bucket_p
        return {(j, row, b): (p if int(hadamard_parity(row, a)) == b else 1 - p) / (k * m)
                for j, a in enumerate(buckets) for row in range(m) for b in (0, 1)}
    # CMS: every bit of the one-hot vector of a is kept with probability p, independently
    patterns = np.array(list(itertools.product((0, 1), repeat=m)), dtype=bool)
    p = protocol.bucket_p
    out = {}
    for j, a in enumerate(buckets):
        one_hot = np.arange(m) == a
        kept = (patterns == one_hot).sum(axis=1)
        chances = (p ** kept * (1 - p) ** (m - kept) / k).tolist()
        out.update(zip(((j, bits) for bits in map(tuple, patterns.astype(int).tolist())),
                       chances, strict=True))
    return out


@pytest.mark.parametrize("name", list(PROTOCOLS))
@pytest.mark.parametrize("d", DOMAINS)
@pytest.mark.parametrize("epsilon", EPSILONS)
def test_exact_privacy_ratio(name, d, epsilon):
    protocol = make_protocol(name, epsilon, d)
    dists = [output_distribution(protocol, v) for v in range(d)]
    for dist in dists:
        assert math.isclose(math.fsum(dist.values()), 1.0, rel_tol=1e-12)
    worst = max(dist_a[o] / dist_b[o] for dist_a, dist_b in itertools.permutations(dists, 2)
                for o in dist_a)
    bound = math.exp(epsilon)
    assert worst <= bound * (1 + 1e-9)
    assert worst == pytest.approx(bound, rel=1e-9)   # tight


@pytest.mark.parametrize("name", ["grr", "oue", "sue", "rue", "hr", "ss"])
@pytest.mark.parametrize("d", [3, 5, 6])
def test_exact_distribution_is_pure_with_the_declared_support_probabilities(name, d):
    """Pr[v' ∈ Support(output) | v] is p* for v' = v and q* otherwise (Definition 2)."""
    protocol = make_protocol(name, 1.3, d)
    for v in range(d):
        support = np.zeros(d)
        for output, probability in output_distribution(protocol, v).items():
            if name == "grr":
                members = [output]
            elif name in ("oue", "sue", "rue"):
                members = [i for i, b in enumerate(output) if b]
            elif name == "hr":
                members = [u for u in range(d) if int(hadamard_parity(output[0], u)) == output[1]]
            else:
                members = list(output)
            support[members] += probability
        expected = np.full(d, protocol.q_star)
        expected[v] = protocol.p_star
        np.testing.assert_allclose(support, expected, rtol=1e-12)


# perturb() must sample the enumerated distribution. Each check is a goodness-of-fit test on a
# fixed seed with rejection level 1e-6, so a correct mechanism fails with probability <= 1e-6
# per check (the seeds are fixed, so the outcome is reproducible).
DRAWS = 40_000
ALPHA = 1e-6


def output_class(protocol, columns, i: int):
    """The output class of report i as keyed in output_distribution (seed-free for LH/RWS)."""
    name = protocol.name
    if name == "grr":
        return int(columns["value"][i])
    if name in ("oue", "sue", "rue"):
        bits = np.unpackbits(columns["bits"][i], bitorder="little")[: protocol.d]
        return tuple(int(b) for b in bits)
    if name == "hr":
        return int(columns["row"][i]), int(columns["bit"][i])
    if name == "ss":
        return tuple(sorted(int(x) for x in columns["items"][i]))
    if name == "flh":
        return int(columns["hash"][i]), int(columns["y"][i])
    if name == "hcms":
        return int(columns["hash"][i]), int(columns["row"][i]), int(columns["bit"][i])
    if name == "cms":
        bits = np.unpackbits(columns["bits"][i], bitorder="little")[: protocol.m]
        return int(columns["hash"][i]), tuple(int(b) for b in bits)
    raise AssertionError(name)


@pytest.mark.parametrize("name", ["grr", "oue", "sue", "rue", "hr", "ss"])
def test_perturb_samples_the_exact_distribution(name):
    protocol = make_protocol(name, 1.1, 5)
    v = 2
    columns = protocol.perturb(np.full(DRAWS, v), np.random.default_rng(99))
    expected = output_distribution(protocol, v)
    keys = list(expected)
    index = {key: i for i, key in enumerate(keys)}
    observed = np.zeros(len(keys))
    for i in range(DRAWS):
        observed[index[output_class(protocol, columns, i)]] += 1
    probabilities = np.array([expected[k] for k in keys])
    assert stats.chisquare(observed, probabilities * DRAWS).pvalue > ALPHA


@pytest.mark.parametrize("name", ["cms", "hcms", "flh"])
def test_pooled_perturb_samples_the_exact_distribution(name):
    """A small pool (k = 2, m = 4: every output class expects >= 5 draws at ε = 1.1), so that
    the chi-square test over (hash, output) is valid."""
    protocol = PROTOCOLS[name](epsilon=1.1, d=5, hashes=2, buckets=4)
    v = 3
    columns = protocol.perturb(np.full(DRAWS, v), np.random.default_rng(41))
    expected = output_distribution(protocol, v)
    keys = list(expected)
    index = {key: i for i, key in enumerate(keys)}
    observed = np.zeros(len(keys))
    for i in range(DRAWS):
        observed[index[output_class(protocol, columns, i)]] += 1
    probabilities = np.array([expected[k] for k in keys])
    assert probabilities.min() * DRAWS >= 5
    assert stats.chisquare(observed, probabilities * DRAWS).pvalue > ALPHA


@pytest.mark.parametrize("name", ["olh", "blh", "rlh", "rws"])
def test_seeded_perturb_hits_the_favoured_outputs_with_the_exact_probability(name):
    """Given its seed, a report lands on the e^ε-weighted outputs with probability P, where
    P = p for local hashing (y = H(seed, v)) and k e^ε / Z for RWS ((v - y) mod d in S(seed));
    the other outputs are uniform (chi-square on the non-favoured y for local hashing)."""
    protocol = make_protocol(name, 1.1, 6)
    v = 4
    columns = protocol.perturb(np.full(DRAWS, v), np.random.default_rng(5))
    seeds = columns["seed"].view(np.uint64)
    y = columns["y"]
    if name == "rws":
        subsets = hashing.seeded_subsets(seeds, protocol.d, protocol.k)
        favoured = ((v - y) % protocol.d)[:, None] == subsets
        hit = favoured.any(axis=1)
    else:
        hashed = hashing.local_hash(seeds, np.full(DRAWS, v), protocol.g)
        hit = y == hashed
        if protocol.g > 2:
            offset = (y[~hit] - hashed[~hit]) % protocol.g   # uniform on 1..g-1 if correct
            counts = np.bincount(offset, minlength=protocol.g)[1:]
            assert stats.chisquare(counts).pvalue > ALPHA
    z = stats.binomtest(int(hit.sum()), DRAWS, protocol.p_star).pvalue
    assert z > ALPHA
