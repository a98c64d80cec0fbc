"""The combined estimate of several configuration versions (ldp.estimation.combine): exactly
unbiased, with the exact variance Σ w_k² Var_k / (Σ w_k)², checked by simulation; and which
versions combine."""
from __future__ import annotations

import numpy as np
import pytest

from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.ldp.engine.finalize import finalize_window
from ldp_telemetry.ldp.estimation.combine import combine_versions, shared_labels
from ldp_telemetry.ldp.estimation.postprocess import error_plug_in
from ldp_telemetry.ldp.protocols.noise import standard_error

LABELS = [f"app_{i:02d}" for i in range(12)]
TRUTH = np.array([0.3, 0.2, 0.12, 0.1, 0.08, 0.06, 0.05, 0.04, 0.03, 0.01, 0.01, 0.0])


def versions(*entries):
    """The configurations of one metric whose versions are `entries` (oldest first)."""
    *history, current = entries
    document = {"metrics": [{"name": "m", **current, "version": len(entries),
                             "history": [dict(e, version=i + 1) for i, e in enumerate(history)]}]}
    return parse_registry(document).versions("m")


def window(config, values, rng):
    protocol = config.protocol
    statistic = protocol.new_statistic()
    protocol.accumulate(statistic, protocol.perturb(values, rng))
    return finalize_window(config, statistic, len(values))


def exact_variance(config, n, f):
    p, q = config.protocol.p_star, config.protocol.q_star
    return (q * (1 - q) + f * (p - q) * (1 - p - q)) / (n * (p - q) ** 2)


def test_the_combination_is_unbiased_with_the_stated_variance():
    """2,000 windows of 3,000 reports under OUE ε = 1 and 1,000 under GRR ε = 3 (labels
    reversed). The mean of the combined estimates is within 5 standard errors of the mean
    (false failure about 6e-7 per value, 7e-6 for 12); the empirical variance within 20% of the
    exact one (the relative error of a variance of 2,000 draws is about sqrt(2/2000) = 3.2%, so
    20% is more than 6 of those: under 1e-9 per value)."""
    old, new = versions({"protocol": "oue", "epsilon": 1.0, "domain": {"labels": LABELS}},
                        {"protocol": "grr", "epsilon": 3.0, "domain": {"labels": LABELS[::-1]}})
    rng = np.random.default_rng(2026)
    n_old, n_new, windows = 3_000, 1_000, 2_000
    # every window has the same users (eq. 2 is the variance given their values)
    users_old = np.repeat(np.arange(len(LABELS)), np.round(TRUTH * n_old).astype(int))
    users_new = np.repeat(np.arange(len(LABELS)), np.round(TRUTH * n_new).astype(int))
    assert len(users_old) == n_old and len(users_new) == n_new
    estimates = []
    for _ in range(windows):
        a = window(old, users_old, rng)
        b = window(new, len(LABELS) - 1 - users_new, rng)
        combined = combine_versions([(old, a), (new, b)])
        order = [combined.labels.index(label) for label in LABELS]
        estimates.append(combined.estimate[order])
    estimates = np.array(estimates)
    w_old = 1 / old.protocol.noise(n_old).sigma ** 2
    w_new = 1 / new.protocol.noise(n_new).sigma ** 2
    variance = (w_old ** 2 * exact_variance(old, n_old, TRUTH)
                + w_new ** 2 * exact_variance(new, n_new, TRUTH)) / (w_old + w_new) ** 2
    mean_error = estimates.mean(axis=0) - TRUTH
    assert (np.abs(mean_error) <= 5 * np.sqrt(variance / windows)).all()
    np.testing.assert_allclose(estimates.var(axis=0, ddof=1), variance, rtol=0.2)
    # and the combination beats the better version alone
    assert (variance < exact_variance(old, n_old, TRUTH)).all()


def test_the_reported_standard_error_is_the_formula_at_each_versions_unbiased_error():
    """Each version's term is the variance of its *unbiased* estimate (eq. 2 at the plug-in),
    also when the version's estimator (here IIW) reports another error for its own output."""
    old, new = versions({"protocol": "oue", "epsilon": 2.0, "domain": {"size": 6}},
                        {"protocol": "olh", "epsilon": 2.0, "domain": {"size": 6},
                         "estimator": "iiw"})
    rng = np.random.default_rng(3)
    a = window(old, rng.integers(0, 6, 500), rng)
    b = window(new, rng.integers(0, 6, 800), rng)
    combined = combine_versions([(old, a), (new, b)])
    w = np.array([1 / a.noise.sigma ** 2, 1 / b.noise.sigma ** 2])
    errors = [standard_error(error_plug_in(r.unbiased), r.noise) for r in (a, b)]
    assert not np.allclose(errors[1], b.std_error)  # IIW's own error differs
    expected = np.sqrt(w[0] ** 2 * errors[0] ** 2 + w[1] ** 2 * errors[1] ** 2) / w.sum()
    np.testing.assert_allclose(combined.std_error, expected)
    np.testing.assert_allclose(combined.estimate, (w[0] * a.unbiased + w[1] * b.unbiased)
                               / w.sum())
    assert combined.n == 1_300 and combined.versions == (1, 2)
    assert combined.weights[1] + combined.weights[2] == pytest.approx(1.0)
    assert combined.smallest_resolvable == pytest.approx(2 / np.sqrt(w.sum()))


def test_only_shared_values_of_frequency_versions_combine():
    labelled = {"protocol": "grr", "epsilon": 1.0, "domain": {"labels": ["a", "b", "c"]}}
    grown = {"protocol": "grr", "epsilon": 1.0, "domain": {"labels": ["d", "c", "b", "a"]}}
    assert shared_labels(versions(labelled, grown)) == ["c", "b", "a"]  # the newest's order
    disjoint = {"protocol": "grr", "epsilon": 2.0, "domain": {"labels": ["x", "y"]}}
    assert shared_labels(versions(labelled, disjoint)) == []
    sized = {"protocol": "grr", "epsilon": 2.0, "domain": {"size": 3}}
    assert shared_labels(versions(labelled, sized)) is None  # labels and indices: no mapping
    bigger = {"protocol": "grr", "epsilon": 2.0, "domain": {"size": 4}}
    assert shared_labels(versions(sized, bigger)) is None
    numeric = {"protocol": "sw", "epsilon": 1.0, "domain": {"low": 0, "high": 1, "buckets": 8}}
    numeric_2 = dict(numeric, epsilon=2.0)
    assert shared_labels(versions(numeric, numeric_2)) is None


def test_fewer_than_two_versions_with_reports_give_no_combination():
    old, new = versions({"protocol": "oue", "epsilon": 2.0, "domain": {"size": 6}},
                        {"protocol": "grr", "epsilon": 2.0, "domain": {"size": 6}})
    rng = np.random.default_rng(4)
    a = window(old, rng.integers(0, 6, 100), rng)
    empty = finalize_window(new, new.protocol.new_statistic(), 0)
    assert combine_versions([(old, a), (new, empty)]) is None
    assert combine_versions([(old, a)]) is None


@pytest.mark.parametrize("protocol_name", ["cms", "hcms", "flh"])
def test_combined_pooled_versions_past_the_share_are_declared(protocol_name):
    """Two versions of a pooled-hash metric (ε = 2 and 1, 64 values): at 20,000 reports each
    both versions are past frequency_bands.POOL_BIAS_SHARE (the pool's collision term against
    the privacy noise), and their combination, which carries the same fixed collision errors,
    has no band; at 2,000 reports none of the three is declared. A single version's record
    past the share is declared too for FLH, but has `pool-corrected` bands for CMS and HCMS:
    no corrected band of a combination exists, so the combination stays declared where its
    versions have one. The combination was banded where both its versions were not."""
    from ldp_telemetry.ldp.estimation.frequency_bands import (POOL_BIAS_SHARE,
                                                              pool_bias_reason, pool_variances)
    from ldp_telemetry.output.records import combined_estimate_record, window_estimate_record
    configs = versions({"protocol": protocol_name, "epsilon": 1.0, "domain": {"size": 64}},
                       {"protocol": protocol_name, "epsilon": 2.0, "domain": {"size": 64}})
    rng = np.random.default_rng(3)
    single = "none" if protocol_name == "flh" else "pool-corrected"
    for n, declared in ((2_000, False), (20_000, True)):
        parts = [(config, window(config, rng.integers(0, 10, n), rng)) for config in configs]
        assert all((pool_bias_reason(result.noise) is not None) is declared
                   for _, result in parts)
        assert {window_estimate_record(config, result, 0, 1).band_method
                for config, result in parts} == {single if declared else "exact-variance"}
        combined = combine_versions(parts)
        record = combined_estimate_record(configs, combined, 0, 1)
        assert (record.band_method == "none") is declared, n
        if declared:
            assert "fixed hash pool" in record.band_reasons["estimate"]
        # the combination's share lies between its versions' (a weighted mean, plus the
        # shared part of two versions hashing one pool)
        shares = [np.divide(*pool_variances(result.noise)) for _, result in parts]
        assert bool(min(shares) > POOL_BIAS_SHARE) is declared
