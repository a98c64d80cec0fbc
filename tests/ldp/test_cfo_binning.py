"""CFO-binning ([Li20] §4.1) as a numeric protocol/estimator pair: registry, payloads shared
with the frequency oracle, the Norm-Sub estimate, and its bootstrap model."""
from __future__ import annotations

import numpy as np
import pytest

from ldp_telemetry.ldp.base.errors import RegistryError
from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.ldp.engine.finalize import finalize_window
from ldp_telemetry.ldp.estimation.postprocess import project_to_simplex
from ldp_telemetry.ldp.protocols.noise import unbiased_estimate


def config(protocol, **estimator):
    return parse_registry({"metrics": [{
        "name": "m", "protocol": protocol, "epsilon": 2.0,
        "domain": {"low": 0, "high": 64, "buckets": 16},
        **({"estimator": {"method": "norm-sub", **estimator}} if estimator else {})}]})["m"]


@pytest.mark.parametrize("protocol,payload", [("cfo-grr", "GrrPayload"),
                                              ("cfo-olh", "OlhPayload")])
def test_cfo_binning_estimates_the_bucket_distribution(protocol, payload):
    metric = config(protocol, bootstrap=30)
    assert metric.estimator.method == "norm-sub"  # the default of cfo-*
    assert metric.protocol.payload_record == payload
    rng = np.random.default_rng(3)
    values = rng.triangular(0, 20, 64, 40_000)
    statistic = metric.protocol.new_statistic()
    metric.protocol.accumulate(statistic, metric.protocol.perturb(metric.to_unit(values), rng))
    result = finalize_window(metric, statistic, len(values))
    truth = np.histogram(values, metric.bucket_edges)[0] / len(values)
    noise = metric.protocol.noise(len(values))
    expected = project_to_simplex(unbiased_estimate(metric.protocol.support_counts(statistic),
                                                    noise))
    np.testing.assert_allclose(result.estimate, expected)
    # each bucket within 4.5 of eq. 2's standard deviations of the truth (plus the projection's
    # shift, at most the largest deficit); false-failure rate < 1e-4 over 16 buckets
    sigma = np.sqrt(noise.variance(truth))
    assert np.all(np.abs(result.estimate - truth) <= 4.5 * sigma + 0.01)
    # bootstrap errors of the buckets are close to eq. 2 (30 replicates: ±26% at 2 sd)
    ratio = result.errors.buckets[truth > 0.02] / sigma[truth > 0.02]
    assert 0.6 < np.median(ratio) < 1.4
    assert abs(result.mean - values.mean()) < 4 * result.errors.mean_std_error + 0.5


def test_estimators_must_fit_the_protocol():
    with pytest.raises(RegistryError, match="metric 'm': field 'estimator'.*does not fit"):
        parse_registry({"metrics": [{"name": "m", "protocol": "cfo-grr", "epsilon": 1.0,
                                     "domain": {"low": 0, "high": 1, "buckets": 8},
                                     "estimator": "ems"}]})
    with pytest.raises(RegistryError, match="metric 'm': field 'estimator'.*does not fit"):
        parse_registry({"metrics": [{"name": "m", "protocol": "sw", "epsilon": 1.0,
                                     "domain": {"low": 0, "high": 1, "buckets": 8},
                                     "estimator": "norm-sub"}]})
