"""Hierarchical histograms (branching 4) and the HH-ADMM estimator ([Li20] §4.2–4.3).

Empirical tolerances are K = 4.5 standard errors (two-sided 6.8e-6 per cell); with fewer than
200 cells checked in this file the family-wise false-failure rate is below 1.4e-3 (fixed seeds).
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.stats import beta

from ldp_telemetry.ldp.base.errors import RegistryError
from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.ldp.estimation.admm import admm, tree_projection
from ldp_telemetry.ldp.estimation.estimators import EstimatorSpec
from ldp_telemetry.ldp.protocols import hashing, make_numeric_protocol
from ldp_telemetry.ldp.protocols.hh import node_counts, tree_depth
from ldp_telemetry.ldp.protocols.olh import OLH

K = 4.5


def tree_matrix(h: int) -> np.ndarray:
    """M with x = M @ leaves for the whole tree (depth 0..h), rows in level order."""
    leaves = np.eye(4 ** h)
    return np.vstack([node_counts(leaves.T, depth, h).T for depth in range(h + 1)])


def test_tree_depth_and_the_power_of_four_rule():
    assert [tree_depth(b) for b in (4, 16, 64, 1024, 65536)] == [1, 2, 3, 5, 8]
    assert tree_depth(8) is None and tree_depth(2) is None
    with pytest.raises(RegistryError, match="field 'domain.buckets'.*power of 4"):
        parse_registry({"metrics": [{"name": "x", "protocol": "hh", "epsilon": 1.0,
                                     "domain": {"low": 0, "high": 1, "buckets": 32}}]})


@pytest.mark.parametrize("epsilon", [1.0, 3.0])
def test_client_is_epsilon_ldp_by_exact_output_probabilities(epsilon):
    """P[(ℓ, y) | v, seed] = (1/h)·P_oracle_ℓ[y | node_ℓ(v), seed]; the worst ratio over pairs of
    buckets is e^ε at every depth (GRR: over y; OLH: over y for 16 fixed seeds). The real client
    is checked against these probabilities: depth frequencies, GRR histograms, OLH keep rate."""
    protocol = make_numeric_protocol("hh", epsilon, 16)
    h, bound = protocol.h, math.exp(epsilon)
    seeds = np.arange(1, 17, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    for depth, oracle in enumerate(protocol.oracles, start=1):
        node = np.arange(16) // 4 ** (h - depth)
        if isinstance(oracle, OLH):
            hashed = hashing.local_hash(seeds[:, None, None], node[None, :, None], oracle.g)
            y = np.arange(oracle.g)[None, None, :]
            prob = np.where(hashed == y, oracle.p_star, (1 - oracle.p_star) / (oracle.g - 1)) / h
            ratio = prob.max(axis=1) / prob.min(axis=1)
        else:
            prob = np.where(node[:, None] == np.arange(oracle.d), oracle.p_star, oracle.q_star) / h
            ratio = prob.max(axis=0) / prob.min(axis=0)
            np.testing.assert_allclose(prob.sum(axis=1), 1 / h, rtol=1e-12)
        assert ratio.max() <= bound * (1 + 1e-12)
        assert ratio.max() == pytest.approx(bound, rel=1e-12)

    n = 120_000
    rng = np.random.default_rng(int(epsilon * 10))
    for bucket in (0, 9):
        columns = protocol.perturb(np.full(n, (bucket + 0.5) / 16), rng)
        level = columns["level"]
        se = math.sqrt((1 / h) * (1 - 1 / h) / n)
        assert np.all(np.abs(np.bincount(level, minlength=h + 1)[1:] / n - 1 / h) <= K * se)
        for depth, oracle in enumerate(protocol.oracles, start=1):
            rows = level == depth
            node = bucket // 4 ** (h - depth)
            if isinstance(oracle, OLH):
                seed = columns["seed"][rows].view(np.uint64)
                kept = hashing.local_hash(seed, np.full(rows.sum(), node), oracle.g) \
                    == columns["y"][rows]
                observed, expected = kept.mean(), np.array([oracle.p_star])
            else:
                assert not columns["seed"][rows].any()
                observed = np.bincount(columns["y"][rows], minlength=oracle.d) / rows.sum()
                expected = np.where(np.arange(oracle.d) == node, oracle.p_star, oracle.q_star)
            se = np.sqrt(expected * (1 - expected) / rows.sum())
            assert np.all(np.abs(observed - expected) <= K * se)


@pytest.mark.parametrize("epsilon", [0.5, 2.0])
def test_level_estimates_are_unbiased(epsilon):
    """Each node estimate lies within K standard errors ([Wang20] journal eq. 2 at n_ℓ)."""
    protocol = make_numeric_protocol("hh", epsilon, 16)
    rng = np.random.default_rng(7)
    truth = np.array([1, 2, 4, 8, 12, 14, 12, 10, 8, 7, 6, 5, 4, 3, 2, 2], dtype=float)
    truth /= truth.sum()
    n = 300_000
    buckets = rng.choice(16, size=n, p=truth)
    columns = protocol.perturb((buckets + rng.random(n)) / 16, rng)
    statistic = protocol.new_statistic()
    half = n // 2  # the statistic is mergeable by addition
    protocol.accumulate(statistic, {k: v[:half] for k, v in columns.items()})
    protocol.accumulate(statistic, {k: v[half:] for k, v in columns.items()})
    reports, estimates = protocol.level_estimates(statistic)
    assert reports.sum() == n
    levels = zip(protocol.oracles, estimates, strict=True)
    for depth, (oracle, estimate) in enumerate(levels, start=1):
        f = node_counts(truth, depth, protocol.h)
        se = np.sqrt(oracle.noise(int(reports[depth - 1])).variance(f))
        assert np.all(np.abs(estimate - f) <= K * se), (depth, estimate, f)


def test_tree_projection_is_the_weighted_least_squares_projection():
    rng = np.random.default_rng(3)
    h = 2
    targets = [np.ones(1)] + [rng.normal(0.1, 0.2, 4 ** d) for d in (1, 2)]
    weights = np.array([1.0, 2.5, 0.7])
    levels = tree_projection(targets, weights)
    # dense KKT: minimise Σ w (M l − y)² subject to Σ l = 1
    m = tree_matrix(h)
    w = np.repeat(weights, [1, 4, 16]) * np.r_[0.0, np.ones(20)]  # the root is not a target
    y = np.concatenate(targets)
    kkt = np.block([[m.T @ (w[:, None] * m), np.ones((16, 1))],
                    [np.ones((1, 16)), np.zeros((1, 1))]])
    leaves = np.linalg.solve(kkt, np.r_[m.T @ (w * y), 1.0])[:16]
    np.testing.assert_allclose(np.concatenate(levels), m @ leaves, atol=1e-12)


def test_admm_output_satisfies_the_constraints_and_solves_eq_2():
    """Non-negative, root 1, parent = sum of children; equal to a generic solver's optimum."""
    rng = np.random.default_rng(5)
    h = 2
    truth = rng.dirichlet(np.ones(16))
    m = tree_matrix(h)
    noisy = m @ truth + rng.normal(0, 0.08, len(m))
    estimates = [noisy[1:5], noisy[5:]]
    levels, iterations, residual = admm(estimates, np.ones(h), 1.0, 1e-10, 100_000)
    x = np.concatenate(levels)
    assert residual <= 1e-10 and iterations < 100_000
    assert x[0] == 1.0
    assert x.min() >= -1e-9
    np.testing.assert_allclose(levels[1], node_counts(levels[2], 1, h), atol=1e-12)
    assert levels[1].sum() == pytest.approx(1.0, abs=1e-12)
    # the same problem on the leaves, solved by SLSQP
    target = noisy[1:]

    def objective(leaves):
        return 0.5 * np.sum((m[1:] @ leaves - target) ** 2)

    def gradient(leaves):
        return m[1:].T @ (m[1:] @ leaves - target)

    reference = minimize(objective, np.full(16, 1 / 16), jac=gradient,
                         method="SLSQP", bounds=[(0, None)] * 16,
                         constraints=[{"type": "eq", "fun": lambda x: x.sum() - 1}],
                         options={"ftol": 1e-14, "maxiter": 1000})
    assert reference.success
    np.testing.assert_allclose(levels[2], reference.x, atol=1e-6)
    assert (levels[2] < 1e-9).any(), "the test should exercise the non-negativity constraint"


def test_hh_admm_is_close_to_a_smooth_truth():
    """ADMM projects x~ onto a convex set holding the true tree x*, so ‖x̂ − x*‖ ≤ ‖x~ − x*‖
    (up to the ADMM tolerance); E‖x~ − x*‖² = Σ Var (eq. 2 per node). With 84 roughly Gaussian
    node errors, ‖x~ − x*‖² > 2·Σ Var has probability below 1e-6 (χ² tail)."""
    protocol = make_numeric_protocol("hh", 2.0, 64)
    spec = EstimatorSpec("admm", (("bootstrap", 0),))
    edges = np.linspace(0, 1, 65)
    truth = np.diff(beta(2, 5).cdf(edges))
    rng = np.random.default_rng(11)
    n = 200_000
    buckets = rng.choice(64, size=n, p=truth)
    statistic = protocol.new_statistic()
    protocol.accumulate(statistic, protocol.perturb((buckets + rng.random(n)) / 64, rng))
    output = spec.run(statistic, n, protocol)
    estimate = output.estimate
    assert estimate.min() >= 0 and estimate.sum() == pytest.approx(1.0, abs=1e-12)
    reports, estimates = protocol.level_estimates(statistic)
    tree_truth = [node_counts(truth, d, protocol.h) for d in range(1, protocol.h + 1)]
    tree_estimate = [node_counts(estimate, d, protocol.h) for d in range(1, protocol.h + 1)]
    raw = sum(np.sum((e - t) ** 2) for e, t in zip(estimates, tree_truth, strict=True))
    fitted = sum(np.sum((e - t) ** 2) for e, t in zip(tree_estimate, tree_truth, strict=True))
    expected = sum(np.sum(o.noise(int(r)).variance(t))
                   for o, r, t in zip(protocol.oracles, reports, tree_truth, strict=True))
    assert fitted <= raw + 1e-6
    assert raw <= 2 * expected
    # and the distribution itself: Wasserstein-1 on [0, 1] well below the uniform's
    w1 = np.abs(np.cumsum(estimate - truth)).sum() / 64
    assert w1 < 0.1 * np.abs(np.cumsum(np.full(64, 1 / 64) - truth)).sum() / 64


def test_resample_draws_statistics_of_the_model():
    protocol = make_numeric_protocol("hh", 1.0, 16)
    estimate = np.full(16, 1 / 16)
    draws = protocol.resample(estimate, 4000, np.random.default_rng(2), 3)
    assert draws.shape == (3, len(protocol.new_statistic()))
    assert (draws[:, : protocol.h].sum(axis=1) == 4000).all()


def test_invalid_payloads_are_flagged():
    protocol = make_numeric_protocol("hh", 1.0, 16)
    payloads = [{"level": 0, "seed": 0, "y": 0}, {"level": 3, "seed": 0, "y": 0},
                {"level": 1, "seed": 0, "y": 4}, {"level": 1, "seed": 0, "y": 3},
                {"level": 2, "seed": 5, "y": -1}]
    columns, invalid = protocol.payloads_from_avro(payloads)
    assert invalid.tolist() == [True, True, True, False, True]
