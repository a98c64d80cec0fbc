"""SR and PM ([Li20] §2.2): ε-LDP by their output probabilities, unbiased means with honest
standard errors, and the mean-only record."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.ldp.engine.finalize import finalize_window
from ldp_telemetry.output.estimate import EstimateRecord
from ldp_telemetry.output.records import window_estimate_record


def config(protocol, epsilon=1.0):
    return parse_registry({"metrics": [{"name": "m", "protocol": protocol, "epsilon": epsilon,
                                        "domain": {"low": 10, "high": 30}}]})["m"]


def test_sr_output_probabilities_are_epsilon_ldp():
    sr = config("sr").protocol
    p = sr.p
    up = lambda t: (1 - p) + (2 * p - 1) * (1 + t) / 2  # noqa: E731
    ratios = [up(1) / up(-1), (1 - up(-1)) / (1 - up(1))]
    assert max(ratios) == pytest.approx(math.exp(1.0))


def test_pm_density_ratio_is_e_to_the_epsilon():
    pm = config("pm").protocol
    z = math.exp(0.5)
    high = z / 2 * (z - 1) / (z + 1)
    low = 1 / (2 * z) * (z - 1) / (z + 1)
    assert high / low == pytest.approx(math.exp(1.0))
    # the densities integrate to 1: plateau width 2/(z − 1), rest 2s − that
    width = 2 / (z - 1)
    assert high * width + low * (2 * pm.s - width) == pytest.approx(1.0)
    # the sampler puts mass z/(z + 1) on the plateau and is unbiased (seeded, 200,000 draws)
    t = 0.4
    y = pm.perturb(np.full(200_000, (t + 1) / 2), np.random.default_rng(2))["y"]
    left = (z * t - 1) / (z - 1)
    on = np.mean((y >= left) & (y <= left + width))
    assert on == pytest.approx(z / (z + 1), abs=4.5 * math.sqrt(0.25 / 200_000))
    assert abs(y.mean() - t) < 4.5 * y.std() / math.sqrt(len(y))


@pytest.mark.parametrize("protocol", ["sr", "pm"])
def test_mean_estimates_are_unbiased_with_honest_errors(protocol):
    """Over 40 seeded windows of 5,000 values: the standardised errors have mean ~0 and RMS ~1
    (tolerances 4.5/√40 for the mean, and [0.6, 1.4] for the RMS: false-failure rate < 1e-4)."""
    metric = config(protocol)
    rng = np.random.default_rng(8)
    z = []
    for _ in range(40):
        values = rng.uniform(12, 20, 5000)
        statistic = metric.protocol.new_statistic()
        metric.protocol.accumulate(statistic, metric.protocol.perturb(metric.to_unit(values), rng))
        result = finalize_window(metric, statistic, len(values))
        z.append((result.mean - values.mean()) / result.errors.mean_std_error)
    z = np.asarray(z)
    assert abs(z.mean()) < 4.5 / math.sqrt(40)
    assert 0.6 < math.sqrt(np.mean(z ** 2)) < 1.4
    record = window_estimate_record(metric, result, 0, 1000).json_value()
    assert record["estimate"] == [] and record["labels"] == [] and record["quantiles"] == {}
    assert record["bucket_edges"] == [10, 30] and record["mean_std_error"] > 0
    assert EstimateRecord.from_json(record).to_json() == json.dumps(record, sort_keys=True)


@pytest.mark.parametrize("epsilon", [0.5, 2.0])
def test_pm_second_moment_formula_and_variance_estimate(epsilon):
    """E[ṽ² | t] in closed form equals the integral of y² over PM's density; the estimated
    variance of the values is within K = 4.5 standard errors of the truth over 30 windows
    (mean of the standardised errors, false-failure rate < 1e-5)."""
    protocol = config("pm", epsilon=epsilon).protocol
    z, s = math.exp(epsilon / 2), protocol.s
    for t in (-1.0, -0.3, 0.0, 0.8, 1.0):
        left = (z * t - 1) / (z - 1)
        right = left + 2 / (z - 1)
        high_density = z / 2 * (z - 1) / (z + 1)
        low_density = high_density / z ** 2  # density ratio e^ε
        integral = (low_density * (left ** 3 + s ** 3) / 3
                    + high_density * (right ** 3 - left ** 3) / 3
                    + low_density * (s ** 3 - right ** 3) / 3)
        assert protocol.report_second_moment(np.array(t)) == pytest.approx(integral, rel=1e-12)
    metric = config("pm", epsilon=epsilon)
    rng = np.random.default_rng(12)
    errors = []
    for _ in range(30):
        values = rng.uniform(12, 20, 20_000)
        statistic = metric.protocol.new_statistic()
        metric.protocol.accumulate(statistic, metric.protocol.perturb(metric.to_unit(values), rng))
        errors.append(finalize_window(metric, statistic, len(values)).variance - values.var())
    errors = np.array(errors)
    assert abs(errors.mean()) < 4.5 * errors.std(ddof=1) / math.sqrt(len(errors))


def test_sr_variance_is_not_estimated():
    metric = config("sr")
    statistic = metric.protocol.new_statistic()
    rng = np.random.default_rng(1)
    metric.protocol.accumulate(statistic, metric.protocol.perturb(np.full(100, 0.5), rng))
    assert finalize_window(metric, statistic, 100).variance is None
