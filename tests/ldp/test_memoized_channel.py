"""The composed channel benchmarks/pooled_top_k.py (--memoized-sampler channel) and
benchmarks/memoized_values.py draw a memoized oracle's windows of 10⁶ reports from
(frequency_bands.channel_support_counts) against the oracle's own client, one report per device
(a fresh permanent response per row, `perturb`): each value's support count has the channel's
mean and variance, and two values' counts the channel's correlation — exact for GRR and the
unary encodings, and for local hashing what the uniform-hash model assumes (supports of two
values pairwise uncorrelated given the device's one hash seed), checked here on the real hash.

Tolerances: R windows per oracle; a mean within Z_CHECK standard errors, a variance ratio
within Z_CHECK · √(2/(R − 1)) of 1, a correlation within Z_CHECK of the standard error of a
difference of two correlations (√(2/R)). Each check fails falsely with probability 6.8e-6
(two-sided normal at 4.5), so the 5 · (2 · 6 + 15) = 135 checks below with probability < 1e-3.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from ldp_telemetry.ldp.estimation.frequency_bands import channel_support_counts
from ldp_telemetry.ldp.protocols.memoized import make_memoized_protocol

Z_CHECK = 4.5
#: users holding each of the d = 6 values (n = 600 per window)
POPULATION = np.array([240, 150, 90, 60, 40, 20])
N = int(POPULATION.sum())
#: windows per oracle and sampler
R = 2_500


def client_counts(protocol, rng: np.random.Generator) -> np.ndarray:
    """R windows' support counts through the client: every row a distinct device, once."""
    values = np.repeat(np.arange(POPULATION.size), POPULATION)
    out = np.empty((R, POPULATION.size))
    for r in range(R):
        statistic = protocol.new_statistic()
        protocol.accumulate(statistic, protocol.perturb(values, rng))
        out[r] = protocol.support_counts(statistic)
    return out


@pytest.mark.parametrize("name, g_rule", [("grr", None), ("oue", None), ("olh", None),
                                          ("olh", "loloha"), ("blh", None)])
def test_the_composed_channel_is_the_memoized_clients_law(name, g_rule):
    protocol = make_memoized_protocol(name, 1.0, POPULATION.size, 2.0, g_rule)
    noise = protocol.noise(N)
    client = client_counts(protocol, np.random.default_rng([41, len(name)]))
    rng = np.random.default_rng([43, len(name)])
    channel = np.array([channel_support_counts(POPULATION, noise, rng) for _ in range(R)])
    p, q = noise.p_star, noise.q_star
    mean = POPULATION * p + (N - POPULATION) * q
    variance = POPULATION * p * (1 - p) + (N - POPULATION) * q * (1 - q)
    for counts in (client, channel):
        assert np.all(np.abs(counts.mean(axis=0) - mean) <= Z_CHECK * np.sqrt(variance / R))
        assert np.all(np.abs(counts.var(axis=0, ddof=1) / variance - 1)
                      <= Z_CHECK * math.sqrt(2 / (R - 1)))
    pairs = np.triu_indices(POPULATION.size, 1)
    apart = np.corrcoef(client, rowvar=False)[pairs] - np.corrcoef(channel, rowvar=False)[pairs]
    assert np.all(np.abs(apart) <= Z_CHECK * math.sqrt(2 / R)), apart.round(3)
