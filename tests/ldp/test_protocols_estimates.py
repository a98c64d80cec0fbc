"""Unbiasedness, eq. 2 variance and the eq. 4 full-domain MSE of every protocol, empirically.

Every check is a z-test on seeded draws; the seeds are fixed, so results are reproducible, and
the thresholds bound the chance that a correct implementation would fail on a fresh seed.
"""
from __future__ import annotations

import csv
import math
import zlib

import numpy as np
import pytest

from ldp_telemetry.ldp.protocols import PROTOCOLS, make_protocol
from ldp_telemetry.ldp.protocols.noise import unbiased_estimate

RUNS = 300
USERS = 1000
TRUTH = np.array([0.40, 0.25, 0.15, 0.10, 0.06, 0.04, 0.0])   # d = 7, not a power of two
EPSILON = 1.5


def repeated_estimates(protocol, values: np.ndarray, runs: int, seed: int) -> np.ndarray:
    """(runs, d) unbiased estimates, each from the same users perturbed afresh."""
    rng = np.random.default_rng(seed)
    n = len(values)
    out = np.empty((runs, protocol.d))
    if hasattr(protocol, "with_pool"):
        # A pool of public hashes: unbiasedness and variance hold over its draw
        # (ldp.protocols.hash_pool), so every run draws a fresh pool.
        for r in range(runs):
            pooled = protocol.with_pool(int(rng.integers(0, 2**63)))
            statistic = pooled.new_statistic()
            pooled.accumulate(statistic, pooled.perturb(values, rng))
            out[r] = unbiased_estimate(pooled.support_counts(statistic), protocol.noise(n))
        return out
    columns = protocol.perturb(np.tile(values, runs), rng)
    for r in range(runs):
        statistic = protocol.new_statistic()
        protocol.accumulate(statistic, {k: c[r * n:(r + 1) * n] for k, c in columns.items()})
        out[r] = unbiased_estimate(protocol.support_counts(statistic), protocol.noise(n))
    return out


@pytest.mark.parametrize("name", list(PROTOCOLS))
def test_unbiased_with_the_eq2_variance(name):
    protocol = make_protocol(name, EPSILON, len(TRUTH))
    values = np.repeat(np.arange(len(TRUTH)), np.round(TRUTH * USERS).astype(int))
    f = np.bincount(values, minlength=len(TRUTH)) / len(values)
    estimates = repeated_estimates(protocol, values, RUNS, seed=zlib.crc32(name.encode()))
    variance = protocol.noise(len(values)).variance(f)
    # Mean: z = (mean - f) / sqrt(Var/RUNS); |z| <= 4.5 for each of 7 values: false-failure
    # rate <= 7 * 6.8e-6 per protocol under the normal approximation (RUNS = 300).
    z_mean = (estimates.mean(axis=0) - f) / np.sqrt(variance / RUNS)
    assert np.abs(z_mean).max() < 4.5, z_mean
    # Variance: the sample variance of RUNS near-normal estimates has relative standard error
    # sqrt(2 / (RUNS - 1)) = 8.2%; allow 4.5 of them per value (same false-failure budget).
    ratio = estimates.var(axis=0, ddof=1) / variance
    assert np.abs(ratio - 1).max() < 4.5 * math.sqrt(2 / (RUNS - 1)), ratio


def emoji_frequencies(path) -> np.ndarray:
    with open(path, encoding="utf-8", newline="") as handle:
        counts = [int(row["Occurrences"]) for row in csv.DictReader(handle)]
    return np.asarray(counts, dtype=np.float64) / sum(counts)


MSE_RUNS = 4
MSE_USERS = 20_000


@pytest.mark.parametrize("name", list(PROTOCOLS))
def test_full_domain_mse_on_real_data_matches_eq4(name, dataset):
    """Emoji occurrences (d = 969, heavy-tailed), ε = 2: mean over MSE_RUNS runs of the
    full-domain MSE (1/d) Σ_v (f~_v - f_v)^2 against eq. 4 / n.

    f is the empirical distribution of the drawn users, so E[MSE] = (1/d) Σ_v Var_v = eq. 4 / n
    exactly (Σ f = 1). Budget: the per-value squared errors are near-independent scaled χ²₁, so
    the run-averaged MSE has relative standard error s = sqrt(2 Σ Var_v²) / Σ Var_v / sqrt(RUNS)
    (about 2.3% here); the test allows 4.5 s: false-failure rate ~7e-6 per protocol.
    """
    probabilities = emoji_frequencies(dataset("emoji_sentiment_occurrences.csv"))
    d = len(probabilities)
    protocol = make_protocol(name, 2.0, d)
    users = np.random.default_rng(17).choice(d, size=MSE_USERS, p=probabilities)
    f = np.bincount(users, minlength=d) / MSE_USERS
    estimates = repeated_estimates(protocol, users, MSE_RUNS, seed=23)
    empirical = ((estimates - f) ** 2).mean()
    variance = protocol.noise(MSE_USERS).variance(f)
    # A pool of hashes adds its collision term to eq. 4 (ldp.protocols.hash_pool).
    collision = getattr(protocol, "collision", 0.0) * (d - 1) / d * (f @ f - 1 / MSE_USERS)
    analytical = protocol.n_mse() / MSE_USERS + collision
    assert math.isclose(variance.mean(), analytical, rel_tol=1e-9)
    relative_se = math.sqrt(2 * (variance ** 2).sum()) / variance.sum() / math.sqrt(MSE_RUNS)
    assert abs(empirical / analytical - 1) < 4.5 * relative_se, (empirical, analytical)
