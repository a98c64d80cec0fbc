"""The pooled-hash oracles (CMS, HCMS, FLH): unbiasedness and the exact variance over the draw of
the pool, [Apple17]'s own estimator, the HCMS transform, limits, fingerprint and envelopes.

The statistical checks draw R fresh pools (another root each, `with_pool`) with fixed seeds, on a
small pool (k = 3 hashes, m = 4 buckets) and a skewed population, where the pool's collision
term is most of the variance: a formula without it fails these checks.
"""
from __future__ import annotations

import io
import math

import numpy as np
import pytest

from ldp_telemetry.ldp.base.errors import RegistryError
from ldp_telemetry.ldp.config.fingerprint import derived_parameters
from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.ldp.engine.batches import REPORT_ID, ReportBatch
from ldp_telemetry.ldp.estimation.queries import linear_variance, set_indicator
from ldp_telemetry.ldp.protocols import PROTOCOLS
from ldp_telemetry.ldp.protocols.hash_pool import (MAX_POOL_CELLS, MAX_POOL_HASHES, POOL_ROOT,
                                                   PoolNoise, pool_hash)
from ldp_telemetry.ldp.protocols.hr import hadamard_parity
from ldp_telemetry.ldp.protocols.noise import SupportNoise, unbiased_estimate
from ldp_telemetry.schemas.codec import ReportDecoder, write_reports
from ldp_telemetry.schemas.envelopes import write_envelopes

POOLED = ("cms", "hcms", "flh")
POPULATION = np.array([150, 60, 40, 25, 15, 10])   # n = 300, d = 6
POOLS = 2000
Z = 4.5


def small(name: str, epsilon: float = 1.0, **sizes):
    return PROTOCOLS[name](epsilon=epsilon, d=len(POPULATION),
                           **{"hashes": 3, "buckets": 4, **sizes})


def over_pools(protocol, pools: int, seed: int) -> np.ndarray:
    """(pools, d) unbiased estimates of POPULATION, each from a fresh pool and fresh coins."""
    rng = np.random.default_rng(seed)
    values = np.repeat(np.arange(len(POPULATION)), POPULATION)
    noise = protocol.noise(len(values))
    out = np.empty((pools, protocol.d))
    for r in range(pools):
        pooled = protocol.with_pool(int(rng.integers(0, 2**63)))
        statistic = pooled.new_statistic()
        pooled.accumulate(statistic, pooled.perturb(values, rng))
        out[r] = unbiased_estimate(pooled.support_counts(statistic), noise)
    return out


def variance_bound(samples: np.ndarray) -> float:
    """Z standard errors of the sample variance, relative to the variance: the standard error of
    a sample variance is sigma² sqrt((kurtosis - (R - 3)/(R - 1)) / R), with the kurtosis
    estimated from the samples (the estimates are far from normal on so small a pool)."""
    r = len(samples)
    centred = samples - samples.mean()
    kurtosis = np.mean(centred ** 4) / np.mean(centred ** 2) ** 2
    return Z * math.sqrt((kurtosis - (r - 3) / (r - 1)) / r)


@pytest.mark.parametrize("name", POOLED)
def test_unbiased_with_the_exact_variance_over_the_pool(name):
    protocol = small(name)
    f = POPULATION / POPULATION.sum()
    n = int(POPULATION.sum())
    estimates = over_pools(protocol, POOLS, seed=POOLED.index(name))
    variance = protocol.noise(n).variance(f)
    private = SupportNoise(protocol.p_star, protocol.q_star, n).variance(f)
    # The collision term is most of the variance of the values other than the mode: without it
    # the formula would be off by far more than the tolerance below.
    assert (variance[1:] / private[1:]).min() > 1.5
    # Mean: |z| < 4.5 for each of 6 values, false-failure rate <= 6 * 6.8e-6 per protocol
    # (normal approximation of a mean of 2000 pools).
    z_mean = (estimates.mean(axis=0) - f) / np.sqrt(variance / POOLS)
    assert np.abs(z_mean).max() < Z, z_mean
    # Variance: 4.5 standard errors of each sample variance (variance_bound), same budget.
    for v in range(protocol.d):
        ratio = estimates[:, v].var(ddof=1) / variance[v]
        assert abs(ratio - 1) < variance_bound(estimates[:, v]), (v, ratio)


@pytest.mark.parametrize("name", POOLED)
def test_linear_variance_is_exact_over_the_pool(name):
    protocol = small(name)
    f = POPULATION / POPULATION.sum()
    n = int(POPULATION.sum())
    estimates = over_pools(protocol, POOLS, seed=10 + POOLED.index(name))
    weights = {"set 0..2": set_indicator(6, [0, 1, 2]), "set 1, 4": set_indicator(6, [1, 4]),
               "mixed": np.array([1.0, -2.0, 0.5, 0.0, 3.0, -1.0])}
    for case, w in weights.items():
        answers = estimates @ w
        ratio = answers.var(ddof=1) / linear_variance(protocol, n, w, f)
        # 4.5 standard errors of the sample variance: false-failure rate ~7e-6 per case.
        assert abs(ratio - 1) < variance_bound(answers), (case, ratio)


def test_the_window_noise_is_linear_variance_of_one_value():
    protocol = small("flh", epsilon=2.0)
    f = POPULATION / POPULATION.sum()
    noise = protocol.noise(300)
    assert isinstance(noise, PoolNoise) and noise.collision == 1 / (3 * 3)
    for v in range(protocol.d):
        assert noise.variance(f)[v] == pytest.approx(
            linear_variance(protocol, 300, np.eye(protocol.d)[v], f), rel=1e-12)
    assert np.isinf(protocol.noise(0).variance(f)).all()


def test_cms_estimate_is_apples_count_mean_sketch_estimate():
    """[Apple17], the CMS server: M[j] += k (c_ε/2 ṽ + 1/2) with ṽ in {-1, +1}^m and
    c_ε = (e^{ε/2} + 1)/(e^{ε/2} - 1); f(v) = m/(m - 1) ((1/k) Σ_j M[j, h_j(v)] - n/m)."""
    protocol = PROTOCOLS["cms"](epsilon=2.0, d=50, hashes=16, buckets=32)
    rng = np.random.default_rng(3)
    values = rng.integers(0, 50, 5000)
    columns = protocol.perturb(values, rng)
    statistic = protocol.new_statistic()
    protocol.accumulate(statistic, columns)
    ours = unbiased_estimate(protocol.support_counts(statistic), protocol.noise(len(values)))
    k, m, half = protocol.k, protocol.m, math.exp(1.0)
    c = (half + 1) / (half - 1)
    bits = np.unpackbits(columns["bits"], axis=1, count=m, bitorder="little").astype(float)
    sketch = np.zeros((k, m))
    np.add.at(sketch, columns["hash"], k * (c / 2 * (2 * bits - 1) + 0.5))
    buckets = pool_hash(np.arange(k)[:, None], np.arange(50)[None, :], m)
    apple = m / (m - 1) * (sketch[np.arange(k)[:, None], buckets].mean(axis=0) - len(values) / m)
    np.testing.assert_allclose(ours * len(values), apple, rtol=1e-9, atol=1e-6)


def test_hcms_bucket_support_is_the_direct_count():
    protocol = PROTOCOLS["hcms"](epsilon=1.0, d=40, hashes=5, buckets=16)
    rng = np.random.default_rng(8)
    columns = protocol.perturb(rng.integers(0, 40, 3000), rng)
    statistic = protocol.new_statistic()
    protocol.accumulate(statistic, columns)
    direct = np.zeros((5, 16), dtype=np.int64)
    for u in range(16):
        supported = hadamard_parity(columns["row"], u) == columns["bit"]
        direct[:, u] = np.bincount(columns["hash"][supported], minlength=5)
    np.testing.assert_array_equal(protocol.bucket_support(statistic), direct)
    buckets = pool_hash(np.arange(5)[:, None], np.arange(40)[None, :], 16)
    np.testing.assert_array_equal(protocol.support_counts(statistic),
                                  direct[np.arange(5)[:, None], buckets].sum(axis=0))


@pytest.mark.parametrize("name", POOLED)
def test_empty_and_split_batches_count_alike(name):
    protocol = PROTOCOLS[name](epsilon=1.0, d=300)
    rng = np.random.default_rng(4)
    columns = protocol.perturb(rng.integers(0, 300, 4000), rng)
    whole, parts = protocol.new_statistic(), protocol.new_statistic()
    protocol.accumulate(whole, columns)
    for start, stop in ((0, 0), (0, 1234), (1234, 4000)):
        protocol.accumulate(parts, {key: c[start:stop] for key, c in columns.items()})
    np.testing.assert_array_equal(whole, parts)
    assert protocol.statistic_nbytes() == protocol.new_statistic().nbytes


@pytest.mark.parametrize(("name", "sizes", "field", "words"), [
    ("cms", {"hashes": 0}, "sketch.k", "MAX_POOL_HASHES"),
    ("flh", {"hashes": MAX_POOL_HASHES + 1}, "sketch.k", "MAX_POOL_HASHES"),
    ("cms", {"buckets": 1}, "sketch.m", "MAX_SKETCH_BUCKETS"),
    ("hcms", {"buckets": 12}, "sketch.m", "power of two"),
    ("cms", {"hashes": MAX_POOL_HASHES, "buckets": 1024}, "sketch", "MAX_POOL_CELLS"),
    ("flh", {"pool": -1}, "sketch.pool", r"2\^64"),
])
def test_sizes_outside_their_limits_are_registry_errors_naming_the_field(name, sizes, field,
                                                                        words):
    with pytest.raises(RegistryError, match=words) as raised:
        PROTOCOLS[name](epsilon=1.0, d=100, **sizes)
    assert raised.value.field == field
    assert MAX_POOL_CELLS == 1 << 24


def test_defaults_and_the_fingerprint_carry_k_m_and_the_pool():
    cms, hcms, flh = (PROTOCOLS[name](epsilon=2.0, d=5000) for name in POOLED)
    assert (cms.k, cms.m, hcms.k, hcms.m) == (128, 1024, 128, 1024)
    assert (flh.k, flh.m) == (1024, 8)   # g: OLH's e^ε + 1 rounded
    assert flh.p_star == PROTOCOLS["olh"](epsilon=2.0, d=5000).p_star
    assert flh.q_star == pytest.approx(1 / 8, rel=1e-12)
    for protocol in (cms, hcms, flh):
        assert derived_parameters(protocol) == {"k": protocol.k, "m": protocol.m,
                                                "root": POOL_ROOT}
        other = protocol.with_pool(5)
        assert derived_parameters(other)["root"] == 5 and other != protocol


def test_envelopes_decode_to_the_batches_of_the_same_reports_as_records():
    registry = parse_registry({"metrics": [
        {"name": name, "protocol": name, "epsilon": 1.0, "domain": {"size": 1000}}
        for name in POOLED]})
    hour = 3_600_000
    for name in POOLED:
        config = registry[name]
        rng = np.random.default_rng(2)
        ids, times = np.arange(2000) + 7, 1_700_000_000_000 + rng.integers(0, hour, 2000)
        columns = config.protocol.perturb(rng.integers(0, 1000, 2000), rng)
        records, envelopes = io.BytesIO(), io.BytesIO()
        write_reports(records, name, config.protocol, ids, times, columns,
                      fingerprint=config.fingerprint)
        write_envelopes(envelopes, name, config.protocol, ids, times, columns,
                        envelope_reports=300, fingerprint=config.fingerprint)
        decoded = []
        for data in (records.getvalue(), envelopes.getvalue()):
            decoder = ReportDecoder(registry, 24 * hour)
            items = list(decoder.decode_file("x.avro", opener=lambda *_, b=data: io.BytesIO(b)))
            batches = [i for i in items if isinstance(i, ReportBatch)]
            assert sum(b.n for b in batches) == 2000 == decoder.records_read
            merged = {key: np.concatenate([b.columns[key] for b in batches])
                      for key in batches[0].columns}
            order = np.argsort(merged[REPORT_ID], kind="stable")
            decoded.append({key: value[order] for key, value in merged.items()})
        for key, value in decoded[0].items():
            np.testing.assert_array_equal(decoded[1][key], value, err_msg=f"{name}.{key}")


def brute_force_bias(protocol, f: np.ndarray) -> np.ndarray:
    """E[f~ | pool] − f from the bucket channel's definition, value by value: per (hash j, bucket
    a) the expected supporting reports n Σ_x f_x (1/k)(p if h_j(x) = a else q_b), each value's
    support count Σ_j of its buckets', then the unbiased estimate (a d x k x d enumeration)."""
    k, m, d = protocol.k, protocol.m, protocol.d
    buckets = pool_hash(np.arange(k)[None, :], np.arange(d)[:, None], m, protocol.root)  # (d, k)
    n = 1000
    table = np.zeros((k, m))
    for x in range(d):
        for j in range(k):
            for a in range(m):
                own = buckets[x, j] == a
                table[j, a] += n * f[x] / k * (protocol.bucket_p if own else protocol.bucket_q)
    counts = np.array([sum(table[j, buckets[v, j]] for j in range(k)) for v in range(d)])
    return unbiased_estimate(counts, protocol.noise(n)) - f


@pytest.mark.parametrize("name", POOLED)
@pytest.mark.parametrize("root", [POOL_ROOT, 7, 2**63 + 5])
def test_collision_bias_is_the_exact_expectation_given_the_pool(name, root):
    f = POPULATION / POPULATION.sum()
    protocol = small(name, pool=root)
    bias = protocol.collision_bias(f)
    assert bias == pytest.approx(brute_force_bias(protocol, f), abs=1e-12)
    # and the pairwise form of the docstring, from κ(x, v) counted directly
    buckets = pool_hash(np.arange(3)[None, :], np.arange(6)[:, None], 4, protocol.root)
    kappa = (buckets[:, None, :] == buckets[None, :, :]).mean(axis=2)  # (x, v)
    pairwise = [4 / 3 * sum(f[x] * (kappa[x, v] - 1 / 4) for x in range(6) if x != v)
                for v in range(6)]
    assert bias == pytest.approx(pairwise, abs=1e-12)
    assert abs(bias).max() > 0.01  # a pool of 3 hashes x 4 buckets does bias these values


def test_collision_bias_is_linear_and_zero_on_average_over_pools():
    protocol = small("cms")
    rng = np.random.default_rng(5)
    f, g = rng.dirichlet(np.ones(6)), rng.dirichlet(np.ones(6))
    assert protocol.collision_bias(2 * f - g) == pytest.approx(
        2 * protocol.collision_bias(f) - protocol.collision_bias(g), abs=1e-12)
    # Over 4,000 fresh pools the bias of each value averages 0: its standard deviation per pool
    # is below sqrt(C Σ f²) <= sqrt(1/9) = 0.33, so 4.5 standard errors are 0.024 (false-failure
    # rate 6 · 6.8e-6).
    roots = rng.integers(0, 2**63, size=4000)
    mean = np.mean([protocol.with_pool(int(r)).collision_bias(f) for r in roots], axis=0)
    assert np.abs(mean).max() < Z * math.sqrt(1 / 9 / len(roots))


@pytest.mark.parametrize("name", POOLED)
def test_the_client_mean_on_a_fixed_pool_is_f_plus_the_collision_bias(name):
    """Through the clients' own perturb and the server's aggregation, on ONE pool: the mean of
    f~ over windows is f + collision_bias(f), not f (the pool is fixed, the coins are not)."""
    protocol = small(name)
    f = POPULATION / POPULATION.sum()
    n = int(POPULATION.sum())
    values = np.repeat(np.arange(len(POPULATION)), POPULATION)
    noise = protocol.noise(n)
    rng = np.random.default_rng(40 + POOLED.index(name))
    windows = 3000
    estimates = np.empty((windows, protocol.d))
    for w in range(windows):
        statistic = protocol.new_statistic()
        protocol.accumulate(statistic, protocol.perturb(values, rng))
        estimates[w] = unbiased_estimate(protocol.support_counts(statistic), noise)
    expected = f + protocol.collision_bias(f)
    spread = estimates.std(axis=0, ddof=1) / math.sqrt(windows)
    # |z| < 4.5 for each of 6 values: false-failure rate <= 6 · 6.8e-6 per protocol.
    assert np.abs((estimates.mean(axis=0) - expected) / spread).max() < Z
    # the bias is far beyond that error: a mean of f alone fails
    assert np.abs((estimates.mean(axis=0) - f) / spread).max() > 2 * Z
