"""The registry's `estimator` field: parsing, defaults, errors naming metric and field."""
from __future__ import annotations

import numpy as np
import pytest

from ldp_telemetry.ldp.base.errors import RegistryError
from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.ldp.engine.finalize import finalize_window
from ldp_telemetry.ldp.estimation.estimators import EstimatorSpec


def registry(**fields):
    metric = {"name": "m", "protocol": "grr", "epsilon": 1.0, "domain": {"size": 4}, **fields}
    return parse_registry({"metrics": [metric]})


def test_default_is_the_unbiased_estimate_and_finalize_reports_it():
    config = registry()["m"]
    assert config.estimator == EstimatorSpec("unbiased")
    assert config.estimator.record() == {"method": "unbiased", "params": {},
                                         "iterations": None, "last_change": None}
    no_post = registry(postprocess="none")["m"]
    result = finalize_window(no_post, np.array([10, 20, 30, 40]), 100)
    np.testing.assert_array_equal(result.estimate, result.unbiased)


@pytest.mark.parametrize("value, message", [
    ("nope", "unknown estimator 'nope'"),
    ({"method": "unbiased", "iterations": 3}, "unknown parameter"),
    ({"iterations": 3}, "needs a 'method' field"),
    (3, "must be a method name"),
])
def test_bad_estimators_name_the_metric_and_field(value, message):
    with pytest.raises(RegistryError, match=f"metric 'm': field 'estimator' .*{message}"):
        registry(estimator=value)
