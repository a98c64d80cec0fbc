"""Every frequency estimator and post-processing method runs unchanged on memoized reports: they
read the protocol only through its surface (p*, q*, the statistic, `report_variance`), so on
L-OSUE and L-SUE, whose composed channel is OUE and SUE at ε1 exactly, each gives the same window
result as the one-stage protocol at ε1 on the same statistic, and on L-RUE (a different p*, q*) a
finite one."""
from __future__ import annotations

import numpy as np
import pytest

from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.ldp.engine.finalize import finalize_window
from ldp_telemetry.ldp.estimation.estimators import METHODS as ESTIMATORS
from ldp_telemetry.ldp.estimation.postprocess import METHODS as POSTPROCESSORS
from ldp_telemetry.ldp.protocols.base import FREQUENCY

D, N = 12, 4_000
FREQUENCY_METHODS = sorted(name for name, method in ESTIMATORS.items()
                           if method.kind == FREQUENCY)


def configs(protocol: str, estimator: str, postprocess: str):
    entry = {"protocol": protocol, "epsilon": 1.0, "domain": {"size": D},
             "estimator": estimator, "postprocess": postprocess}
    registry = parse_registry({"metrics": [
        {"name": "one", **entry},
        {"name": "two", **entry, "memoize": {"lifetime_epsilon": 3.0}}]})
    return registry["one"], registry["two"]


def statistic_of(config, seed: int = 5):
    rng = np.random.default_rng(seed)
    values = rng.choice(D, size=N, p=np.arange(D, 0, -1) / (D * (D + 1) / 2))
    statistic = config.protocol.new_statistic()
    config.protocol.accumulate(statistic, config.protocol.perturb(values, rng))
    return statistic


@pytest.mark.parametrize("estimator", FREQUENCY_METHODS)
@pytest.mark.parametrize("protocol", ["oue", "sue"])
def test_each_estimator_gives_the_one_stage_result_on_an_equal_channel(protocol, estimator):
    one, two = configs(protocol, estimator, "norm-sub")
    statistic = statistic_of(two)
    a, b = finalize_window(one, statistic, N), finalize_window(two, statistic, N)
    for field in ("estimate", "unbiased", "std_error"):
        assert np.allclose(getattr(a, field), getattr(b, field), rtol=1e-9, atol=1e-12), field


@pytest.mark.parametrize("postprocess", sorted(POSTPROCESSORS))
def test_each_post_processing_method_runs_on_memoized_reports(postprocess):
    one, two = configs("oue", "unbiased", postprocess)
    statistic = statistic_of(two)
    a, b = finalize_window(one, statistic, N), finalize_window(two, statistic, N)
    assert np.allclose(a.estimate, b.estimate, rtol=1e-9, atol=1e-12)
    _, rue = configs("rue", "unbiased", postprocess)
    result = finalize_window(rue, statistic_of(rue), N)
    assert np.isfinite(result.estimate).all() and np.isfinite(result.std_error).all()
