"""PEM over strings: ε-LDP by exact enumeration, the statistic, unbiasedness, variance and
discovery of the heavy hitters.

Tolerances: a cell frequency from N draws has standard error sqrt(P(1 − P)/N); K = 4.5 of them,
two-sided 6.8e-6 per cell; the enumeration test checks about 2 × 128 cells, so its false-failure
rate is below 2e-3. Other statistical checks state theirs; every seed is fixed.
"""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from ldp_telemetry.ldp.base.errors import RegistryError
from ldp_telemetry.ldp.estimation.heavy_hitters import estimate_strings, find_heavy_hitters
from ldp_telemetry.ldp.protocols import hashing, make_string_protocol
from ldp_telemetry.ldp.protocols.pem import MAX_FINAL_SHARE, MAX_STATISTIC_BYTES
from ldp_telemetry.ldp.protocols.string_keys import (PREFIX_KEY_ROOT, extend_keys, padded_rows,
                                                     prefix_keys, row_strings, string_problem)

K = 4.5
SLACK = 1e-9


def exact_distribution(protocol, value: bytes) -> np.ndarray:
    """P[(level, hash, y) | value] over every output, flattened as the statistic's cells."""
    m, pool, g, p = protocol.levels, protocol.pool, protocol.g, protocol.p_star
    keys = prefix_keys(padded_rows([value], m))[0]
    prob = np.empty((m, pool, g))
    for level in range(1, m + 1):
        h = hashing.local_hash(protocol.pool_seeds[level - 1], np.full(pool, keys[level - 1]), g)
        prob[level - 1] = np.where(np.arange(g)[None, :] == h[:, None], p, (1 - p) / (g - 1))
    share = protocol.level_probabilities
    return (prob * share[:, None, None] / pool).ravel()


@pytest.mark.parametrize("epsilon, final_share", [(0.5, 0.0), (1.0, 0.0), (2.5, 0.0),
                                                  (1.0, 0.5), (2.5, MAX_FINAL_SHARE)])
def test_every_output_is_eps_ldp_over_a_small_alphabet(epsilon, final_share):
    """All strings of at most 2 bytes over {a, b} (7 of them): every output's likelihood ratio
    between two of them is at most e^ε, and reaches it; also when a `final_share` of the
    devices reports at level m (the level's draw does not depend on the value)."""
    protocol = make_string_protocol("pem", epsilon, 2, 16, final_share)
    strings = [bytes(s) for length in range(3)
               for s in itertools.product(b"ab", repeat=length)]
    prob = np.array([exact_distribution(protocol, s) for s in strings])
    np.testing.assert_allclose(prob.sum(axis=1), 1.0, rtol=1e-12)
    ratio = float((prob.max(axis=0) / prob.min(axis=0)).max())
    assert ratio <= math.exp(epsilon) + SLACK
    assert ratio == pytest.approx(math.exp(epsilon), rel=1e-12)


@pytest.mark.parametrize("value, final_share", [(b"", 0.0), (b"ab", 0.0), (b"ab", 0.6)])
def test_perturb_draws_the_exact_distribution(value, final_share):
    protocol = make_string_protocol("pem", 1.0, 2, 16, final_share)
    n = 400_000
    columns = protocol.perturb(padded_rows([value] * n, 2), np.random.default_rng(len(value)))
    statistic = protocol.new_statistic()
    protocol.accumulate(statistic, columns)
    prob = exact_distribution(protocol, value)
    observed = statistic[protocol.levels:] / n
    assert np.all(np.abs(observed - prob) <= K * np.sqrt(prob * (1 - prob) / n))
    assert statistic[: protocol.levels].sum() == n


def test_prefix_keys_chain_one_byte_at_a_time():
    rows = padded_rows([b"abc", b"ab", b""], 4)
    keys = prefix_keys(rows)
    assert keys[0, 1] == keys[1, 1]  # "ab" is a prefix of both
    assert keys[1, 2] != keys[0, 2]  # "ab\0" vs "abc"
    step = PREFIX_KEY_ROOT
    for byte in b"abc\0":
        step = extend_keys(np.array([step]), byte)[0]
    assert keys[0, 3] == step
    assert row_strings(rows) == [b"abc", b"ab", b""]


def _splitmix64(seed: int, index: int) -> int:
    """SplitMix64 as docs/client.md states it, in plain integers (not the project's numpy)."""
    mask = (1 << 64) - 1
    z = (seed + (index + 1) * 0x9E3779B97F4A7C15) & mask
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
    return z ^ (z >> 31)


def test_the_client_guides_key_seed_and_hash_figures():
    """docs/client.md's worked example of a PEM client (metric v.app of the test vectors, value
    "mail"), computed from the guide's steps in plain integers, equals the documented figures and
    the protocol's own code; the vector's draw (level 1, j = 11) kept its hash (y = H = 4)."""
    mask = (1 << 64) - 1
    protocol = make_string_protocol("pem", 2.0, 8, 16)
    padded = b"mail".ljust(8, b"\0")
    keys, key = [], 0x3C6EF372FE94F82B
    for byte in padded:
        key = _splitmix64(key, byte)
        keys.append(key)
    assert (keys[0], keys[3], keys[7]) == (0x263346A69DD14426, 0x30A2862398BC65DB,
                                           0xA4AEBEE5BFD753FB)
    assert keys == prefix_keys(padded_rows([b"mail"], 8))[0].tolist()
    seed = _splitmix64(0x6A09E667F3BCC908, (1 << 32) + 11)
    assert seed == 0x6F38141EAD516929 == int(protocol.pool_seeds[0, 11])
    a, b = _splitmix64(seed, 0) | 1, _splitmix64(seed, 1)
    t = (a * _splitmix64(0, keys[0]) + b) & mask
    assert protocol.g == 8 and ((t >> 32) * 8) >> 32 == 4
    assert int(hashing.local_hash(protocol.pool_seeds[0, 11], keys[0], 8)) == 4
    columns = protocol.perturb(padded_rows([b"mail"], 8), np.random.default_rng(27))
    assert {k: int(v[0]) for k, v in columns.items()} == {"level": 1, "hash": 11, "y": 4}


def test_string_rules_and_registry_errors():
    assert string_problem(b"abcde", 4).startswith("is 5 bytes long")
    assert "NUL" in string_problem(b"a\0", 4)
    assert string_problem("é".encode(), 2) is None
    with pytest.raises(RegistryError) as error:
        make_string_protocol("pem", 2.0, 0, 64)
    assert error.value.field == "domain.strings.max_bytes"
    with pytest.raises(RegistryError) as error:
        make_string_protocol("pem", 2.0, 8, 8)
    assert error.value.field == "domain.strings.pool"
    with pytest.raises(RegistryError) as error:
        make_string_protocol("pem", 6.0, 64, 65_536)
    assert error.value.field == "domain.strings.pool" and "MAX_STATISTIC_BYTES" in str(error.value)
    assert make_string_protocol("pem", 6.0, 16, 1024).statistic_nbytes() < MAX_STATISTIC_BYTES
    for share in (-0.1, MAX_FINAL_SHARE + 0.01, float("nan"), "0.5", True):
        with pytest.raises(RegistryError) as error:
            make_string_protocol("pem", 2.0, 8, 64, share)
        assert error.value.field == "domain.strings.final_share"
        assert "MAX_FINAL_SHARE" in str(error.value)


def test_a_zero_final_share_reports_bit_identically():
    """final_share 0 draws nothing more: the same generator gives the same reports as the
    uniform levels (0.5: level m holds 0.5 + 0.5/m of them)."""
    rows = padded_rows([b"mail", b"maps", b"x"] * 1_000, 6)
    uniform = make_string_protocol("pem", 2.0, 6, 64).perturb(rows, np.random.default_rng(4))
    zero = make_string_protocol("pem", 2.0, 6, 64, 0.0).perturb(rows, np.random.default_rng(4))
    for key in uniform:
        np.testing.assert_array_equal(uniform[key], zero[key])
    half = make_string_protocol("pem", 2.0, 6, 64, 0.5)
    np.testing.assert_allclose(half.level_probabilities, [1 / 12] * 5 + [7 / 12])


def test_invalid_payloads_are_flagged_and_statistics_add_up():
    protocol = make_string_protocol("pem", 2.0, 3, 16)
    columns, invalid = protocol.check_payloads({
        "level": np.array([1, 0, 4, 3, 2]), "hash": np.array([0, 0, 0, 16, 15]),
        "y": np.array([protocol.g - 1, 0, 0, 0, protocol.g])})
    assert invalid.tolist() == [False, True, True, True, True]
    rng = np.random.default_rng(5)
    rows = padded_rows([b"x", b"yz", b"abc"] * 100, 3)
    first, second = protocol.perturb(rows[:120], rng), protocol.perturb(rows[120:], rng)
    whole, a, b = (protocol.new_statistic() for _ in range(3))
    protocol.accumulate(a, first)
    protocol.accumulate(b, second)
    protocol.accumulate(whole, {k: np.concatenate([first[k], second[k]]) for k in first})
    protocol.accumulate(whole, {k: v[:0] for k, v in first.items()})  # an empty batch
    np.testing.assert_array_equal(a + b, whole)
    assert len(whole) * 8 == protocol.statistic_nbytes()


def test_estimate_is_unbiased_and_its_variance_is_the_formula():
    """A string held by 30% of users among 5,000 others that are each rare (their collisions
    with it add nothing measurable): 300 windows of 20,000 reports. The mean is within K
    standard errors of the mean (false failure 6.8e-6); the sample variance's ratio to the
    formula lies in the chi-square(299) 1e-5 two-sided interval [0.70, 1.37]."""
    protocol = make_string_protocol("pem", 2.0, 4, 256)
    rng = np.random.default_rng(33)
    others = [bytes(rng.integers(97, 123, size=4, dtype=np.uint8)) for _ in range(5_000)]
    n, windows, f = 20_000, 300, 0.3
    estimates, errors = [], []
    for _ in range(windows):
        held = np.where(rng.random(n) < f, -1, rng.integers(0, len(others), size=n))
        rows = padded_rows([b"hit" if i < 0 else others[i] for i in held], 4)
        statistic = protocol.new_statistic()
        protocol.accumulate(statistic, protocol.perturb(rows, rng))
        result = estimate_strings(protocol, statistic, [b"hit"])
        estimates.append(result.estimate[0])
        errors.append(result.std_error[0])
    estimates = np.array(estimates)
    formula = float(np.mean(np.square(errors)))
    assert abs(estimates.mean() - f) <= K * math.sqrt(formula / windows)
    assert 0.70 <= estimates.var(ddof=1) / formula <= 1.37


def test_estimate_under_a_final_share_is_unbiased_with_the_formulas_variance():
    """The same check with 60% of the devices at level m (m = 4: level 4 holds 70% of the
    reports, levels 1-3 10% each) and a string of 2 bytes pooled over levels 3 and 4 (unequal
    n_ℓ: the pool term's Σ n_ℓ²/N² is exact), 300 windows of 20,000 reports. Mean within K
    standard errors (false failure 6.8e-6); variance ratio in the chi-square(299) 1e-5
    two-sided interval [0.70, 1.37]. The estimator's level counts are the window's own."""
    protocol = make_string_protocol("pem", 2.0, 4, 256, 0.6)
    rng = np.random.default_rng(34)
    others = [bytes(rng.integers(97, 123, size=4, dtype=np.uint8)) for _ in range(5_000)]
    n, windows, f = 20_000, 300, 0.3
    estimates, errors = [], []
    for _ in range(windows):
        held = np.where(rng.random(n) < f, -1, rng.integers(0, len(others), size=n))
        rows = padded_rows([b"hi" if i < 0 else others[i] for i in held], 4)
        statistic = protocol.new_statistic()
        protocol.accumulate(statistic, protocol.perturb(rows, rng))
        reports = protocol.level_reports(statistic)
        result = estimate_strings(protocol, statistic, [b"hi"])
        assert result.level_reports.tolist() == reports.tolist()
        estimates.append(result.estimate[0])
        errors.append(result.std_error[0])
    assert abs(reports[-1] / n - 0.7) <= K * math.sqrt(0.7 * 0.3 / n)
    estimates = np.array(estimates)
    formula = float(np.mean(np.square(errors)))
    assert abs(estimates.mean() - f) <= K * math.sqrt(formula / windows)
    assert 0.70 <= estimates.var(ddof=1) / formula <= 1.37


def zipf_words(rng, n, words):
    weights = 1.0 / np.arange(1, len(words) + 1)
    held = rng.choice(len(words), size=n, p=weights / weights.sum())
    return padded_rows([words[i] for i in held], 8), weights / weights.sum()


def test_finds_the_heavy_hitters_of_zipf_words():
    """500 random words, Zipf(1); n = 200,000, ε = 4: the top 10 have frequencies from 14.7%
    down to 1.5%, above 5 standard errors (~0.3%) of every level: found exactly, each estimate
    within K of its standard errors (4.5σ per word; 10 words: false failure < 1e-4)."""
    rng = np.random.default_rng(8)
    words = list(dict.fromkeys(bytes(rng.integers(97, 123, size=rng.integers(2, 8),
                                                  dtype=np.uint8)) for _ in range(500)))
    rows, truth = zipf_words(rng, 200_000, words)
    protocol = make_string_protocol("pem", 4.0, 8, 1024)
    statistic = protocol.new_statistic()
    protocol.accumulate(statistic, protocol.perturb(rows, rng))
    result = find_heavy_hitters(protocol, statistic, top=10)
    assert set(result.values) == set(words[:10])
    truth = dict(zip(words, truth, strict=True))
    truth = np.array([truth[value] for value in result.values])
    assert np.all(np.abs(result.estimate - truth) <= K * result.std_error)
    # no 95% band is offered (HEAVY_HITTER_BAND_REASON): the standard errors, positive, only
    assert np.all(result.std_error > 0)
    assert not hasattr(result, "lower") and not hasattr(result, "upper")
    over = find_heavy_hitters(protocol, statistic, top=10, threshold=0.05)
    assert over.values == [v for v, e in zip(result.values, result.estimate, strict=True)
                           if e > 0.05]
    assert all(e > 0.05 for e in over.estimate)


def test_a_level_without_reports_gives_no_heavy_hitters():
    protocol = make_string_protocol("pem", 2.0, 3, 16)
    statistic = protocol.new_statistic()
    protocol.accumulate(statistic, {"level": np.array([1, 2]), "hash": np.array([0, 1]),
                                    "y": np.array([0, 1])})
    result = find_heavy_hitters(protocol, statistic)
    assert result.values == [] and "level 3 has no reports" in result.reason


def test_decoding_stays_within_the_memory_model():
    """tracemalloc's peak while one window is decoded is at most `decode_nbytes` (the memory
    model's share of a string metric's window), and not far below it."""
    import tracemalloc

    from ldp_telemetry.ldp.estimation.heavy_hitters import decode_nbytes
    rng = np.random.default_rng(12)
    protocol = make_string_protocol("pem", 2.0, 10, 1024)
    words = [bytes(rng.integers(97, 100, size=rng.integers(1, 10), dtype=np.uint8))
             for _ in range(20_000)]
    statistic = protocol.new_statistic()
    protocol.accumulate(statistic, protocol.perturb(padded_rows(words, 10), rng))
    for top in (10, 100):
        tracemalloc.start()
        find_heavy_hitters(protocol, statistic, top=top)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert 0.7 * decode_nbytes(protocol, 2 * top) <= peak <= decode_nbytes(protocol, 2 * top)


def test_the_pool_term_of_the_variance_over_fresh_pools(monkeypatch):
    """With a small pool (K = 16) the collisions with a heavy string dominate the variance of
    another's estimate: over 200 windows, each with a fresh pool (POOL_ROOT drawn anew), the
    sample variance's ratio to the formula (sampling + pool term) lies in the chi-square(199)
    1e-5 two-sided interval [0.65, 1.45]; without the pool term the ratio would be about 8."""
    import ldp_telemetry.ldp.protocols.pem as pem

    rng = np.random.default_rng(90)
    n, windows = 20_000, 200
    others = [bytes(rng.integers(97, 123, size=4, dtype=np.uint8)) for _ in range(2_000)]
    estimates, errors = [], []
    for _ in range(windows):
        monkeypatch.setattr(pem, "POOL_ROOT", np.uint64(rng.integers(0, 2**63)))
        protocol = make_string_protocol("pem", 2.0, 4, 16)
        u = rng.random(n)
        held = np.where(u < 0.3, -1, np.where(u < 0.7, -2, rng.integers(0, len(others), n)))
        rows = padded_rows([b"hit" if i == -1 else b"big" if i == -2 else others[i]
                            for i in held], 4)
        statistic = protocol.new_statistic()
        protocol.accumulate(statistic, protocol.perturb(rows, rng))
        result = estimate_strings(protocol, statistic, [b"hit", b"big"])
        estimates.append(result.estimate[0])
        errors.append(result.std_error[0])
    ratio = np.var(estimates, ddof=1) / np.mean(np.square(errors))
    assert 0.65 <= ratio <= 1.45, ratio


def test_finds_multibyte_strings_and_only_valid_utf8():
    """Two-, three- and four-byte characters (café, 東京, 🚀 go) among ASCII words, ε = 4,
    n = 100,000: the four strings of 20% or more are found (each ≥ 25 standard errors of a
    level's noise), and every heavy hitter decodes as UTF-8 strictly."""
    rng = np.random.default_rng(14)
    words = ["café".encode(), "東京".encode(), "🚀 go".encode(), b"mail"]
    held = rng.choice(5, size=100_000, p=[0.25, 0.25, 0.2, 0.2, 0.1])
    others = [bytes(rng.integers(97, 123, size=5, dtype=np.uint8)) for _ in range(5_000)]
    values = [words[i] if i < 4 else others[rng.integers(len(others))] for i in held]
    protocol = make_string_protocol("pem", 4.0, 8, 256)
    statistic = protocol.new_statistic()
    protocol.accumulate(statistic, protocol.perturb(padded_rows(values, 8), rng))
    result = find_heavy_hitters(protocol, statistic, top=8)
    assert set(result.values[:4]) == set(words)
    for value in result.values:
        value.decode("utf-8")  # strict: a UnicodeDecodeError fails the test
