"""Registry contract of numeric metrics: domain, d̃, default and fitting estimators, errors."""
from __future__ import annotations

import numpy as np
import pytest

from ldp_telemetry.ldp.base.errors import RegistryError
from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.ldp.engine.finalize import NumericWindowResult, finalize_window
from ldp_telemetry.ldp.estimation.histograms import QUANTILE_LEVELS

CONTRACT = {"name": "rtt_ms", "protocol": "sw", "epsilon": 1.0,
            "domain": {"low": 0, "high": 800, "buckets": 256}, "estimator": "ems"}


def one(**changes):
    entry = {**CONTRACT, **changes}
    return parse_registry({"metrics": [entry]})[entry["name"]]


def test_the_contract_example_loads():
    config = one()
    assert config.kind == "numeric" and config.protocol_name == "sw"
    assert (config.low, config.high, config.d) == (0.0, 800.0, 256)
    assert config.protocol.output_buckets == 256  # d̃ = B by default ([Li20] §5.4)
    assert config.estimator.method == "ems"
    assert config.bucket_edges[0] == 0 and config.bucket_edges[-1] == 800
    assert len(config.bucket_edges) == 257
    assert config.value_labels[0] == "[0, 3.125)" and config.value_labels[-1] == "[796.875, 800]"


def test_ems_is_the_default_estimator_of_sw_and_output_buckets_is_a_parameter():
    entry = dict(CONTRACT, domain={"low": 0, "high": 800, "buckets": 256, "output_buckets": 512})
    del entry["estimator"]
    config = parse_registry({"metrics": [entry]})["rtt_ms"]
    assert config.estimator.method == "ems"
    assert config.protocol.output_buckets == 512
    assert one(estimator={"method": "em", "tolerance": 0.01}).estimator.method == "em"


def test_frequency_metrics_keep_unbiased_as_default():
    config = parse_registry({"metrics": [
        {"name": "f", "protocol": "grr", "epsilon": 1.0, "domain": {"size": 4}}]})["f"]
    assert config.kind == "frequency" and config.estimator.method == "unbiased"


@pytest.mark.parametrize("changes,field,words", [
    ({"estimator": "unbiased"}, "estimator", "does not fit protocol 'sw'"),
    ({"estimator": "bogus"}, "estimator", "unknown estimator"),
    ({"domain": {"low": 0, "high": 800}}, "domain", "buckets"),
    ({"domain": {"low": 5, "high": 5, "buckets": 4}}, "domain.high", "greater than low"),
    ({"domain": {"low": 0, "high": float("inf"), "buckets": 4}}, "domain.high", "finite"),
    ({"domain": {"low": 0, "high": 1, "buckets": 1}}, "domain.buckets", "integer in"),
    ({"domain": {"low": 0, "high": 1, "buckets": 4, "output_buckets": 0}},
     "domain.output_buckets", "integer in"),
    ({"domain": {"low": 0, "high": 1, "buckets": 4, "bins": 3}}, "domain.bins", "not a numeric"),
    ({"domain": {"size": 4}}, "domain", "numeric protocol"),
    ({"postprocess": "norm-sub"}, "postprocess", "does not apply"),
    ({"estimator": {"method": "ems", "bootstrap": -1}}, "estimator", "bootstrap"),
])
def test_errors_name_metric_and_field(changes, field, words):
    with pytest.raises(RegistryError) as error:
        one(**changes)
    assert f"metric 'rtt_ms': field '{field}'" in str(error.value)
    assert words in str(error.value)


def test_numeric_estimator_on_a_frequency_oracle_is_an_error():
    with pytest.raises(RegistryError, match="metric 'f': field 'estimator'.*does not fit"):
        parse_registry({"metrics": [{"name": "f", "protocol": "grr", "epsilon": 1.0,
                                     "domain": {"size": 4}, "estimator": "ems"}]})


def test_finalize_numeric_window():
    config = one(domain={"low": 100, "high": 500, "buckets": 64},
                 estimator={"method": "ems", "bootstrap": 4})
    rng = np.random.default_rng(1)
    values = rng.normal(300, 40, 30_000).clip(100, 500)
    statistic = config.protocol.new_statistic()
    config.protocol.accumulate(statistic, config.protocol.perturb(config.to_unit(values), rng))
    result = finalize_window(config, statistic, 30_000)
    assert isinstance(result, NumericWindowResult)
    assert result.estimate.shape == (64,) and result.estimate.sum() == pytest.approx(1.0)
    assert result.estimate.min() >= 0
    assert list(result.quantiles) == list(QUANTILE_LEVELS)
    # EMS over 30,000 reports at ε = 1: mean within a few metric units, median likewise
    assert abs(result.mean - values.mean()) < 10
    assert abs(result.quantiles["0.5"] - np.median(values)) < 15
    q = [result.quantiles[key] for key in QUANTILE_LEVELS]
    assert q == sorted(q) and q[0] >= 100 and q[-1] <= 500
    assert result.errors.replicates == 4 and result.errors.mean_std_error > 0
    assert result.estimator.iterations >= 1
    empty = finalize_window(config, config.protocol.new_statistic(), 0)
    assert empty.n == 0 and np.isnan(empty.estimate).all() and np.isnan(empty.mean)
