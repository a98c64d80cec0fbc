"""Queries on window estimates (ldp/queries.py): semantics, errors and exact set-sum variances.

The variance checks perturb a fixed population with the real protocols (perturb, accumulate,
support_counts, unbiased_estimate), R times with a fixed seed, and compare the sample variance
s^2 of a linear answer with the formula at the true distribution. For a near-normal answer
(R - 1) s^2 / sigma^2 is chi-square with R - 1 degrees of freedom, so s^2 / sigma^2 has standard
deviation sqrt(2 / (R - 1)); a check fails beyond 4.5 of those, a false-failure rate below
1e-5 per check (about 1e-4 over this file's checks).
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from ldp import queries
from ldp.estimation import standard_error, unbiased_estimate
from ldp.postprocess import METHODS, PostprocessSpec
from ldp.protocols import make_protocol
from ldp.queries import WindowEstimate, linear_variance

D = 16
POPULATION = np.array([120, 80, 60, 40, 30, 20, 15, 10, 8, 6, 5, 3, 2, 1, 0, 0])  # n = 400
REPEATS = 3000
Z = 4.5


def simulate_unbiased(protocol, values: np.ndarray, repeats: int, seed: int) -> np.ndarray:
    """(repeats, d) unbiased estimates, each from a fresh perturbation of the same users."""
    rng = np.random.default_rng(seed)
    columns = protocol.perturb(np.tile(values, repeats), rng)
    n = values.size
    noise = protocol.noise(n)
    out = np.empty((repeats, protocol.d))
    for r in range(repeats):
        statistic = protocol.new_statistic()
        protocol.accumulate(statistic, {k: v[r * n:(r + 1) * n] for k, v in columns.items()})
        out[r] = unbiased_estimate(protocol.support_counts(statistic), noise)
    return out


@pytest.fixture(scope="module")
def simulations():
    values = np.repeat(np.arange(D), POPULATION)
    rng = np.random.default_rng(7)
    random_set = np.sort(rng.choice(D, size=6, replace=False))
    out = {}
    for name, epsilon in (("grr", 1.0), ("oue", 1.0), ("olh", 2.0)):
        protocol = make_protocol(name, epsilon, D)
        out[name] = (protocol, simulate_unbiased(protocol, values, REPEATS, seed=len(name)))
    return out, POPULATION / POPULATION.sum(), random_set


def weight_cases(random_set):
    whole = np.ones(D)
    contiguous = queries.set_indicator(D, range(4, 12))
    scattered = queries.set_indicator(D, random_set)
    return {"range 4..11": contiguous, "random 6": scattered, "top 3": queries.set_indicator(D, [0, 1, 2]),
            "norm on range": contiguous - contiguous.sum() / D, "whole domain": whole}


@pytest.mark.parametrize("protocol_name", ["grr", "oue", "olh"])
def test_linear_variance_matches_simulation(simulations, protocol_name):
    sims, f, random_set = simulations
    protocol, estimates = sims[protocol_name]
    tolerance = Z * math.sqrt(2.0 / (REPEATS - 1))
    n = int(POPULATION.sum())
    for case, weights in weight_cases(random_set).items():
        answers = estimates @ weights
        expected = linear_variance(protocol, n, weights, f)
        observed = answers.var(ddof=1)
        if protocol_name == "grr" and case == "whole domain":
            assert expected == pytest.approx(0.0, abs=1e-15)
            assert observed == pytest.approx(0.0, abs=1e-20)
            continue
        assert abs(observed / expected - 1) < tolerance, (case, observed, expected)


def test_naive_sum_of_eq2_is_wrong_for_grr_only(simulations):
    """GRR's support indicators are negatively correlated (a report names one value), so a range
    sum varies less than the naive sum of eq. 2; OLH's keyed hash makes the buckets of distinct
    values independent, so there the naive sum holds."""
    sims, f, random_set = simulations
    n = int(POPULATION.sum())
    contiguous = queries.set_indicator(D, range(4, 12))
    protocol, estimates = sims["grr"]
    naive = float(protocol.noise(n).variance(f) @ contiguous)
    observed = (estimates @ contiguous).var(ddof=1)
    assert observed / naive - 1 < -0.15, (observed, naive)
    protocol, estimates = sims["olh"]
    naive = float(protocol.noise(n).variance(f) @ contiguous)
    observed = (estimates @ contiguous).var(ddof=1)
    # A sample variance of R runs has relative standard error sqrt(2/(R-1)); 4.5 of them
    # (false-failure rate ~7e-6).
    runs = len(estimates)
    assert abs(observed / naive - 1) < 4.5 * np.sqrt(2 / (runs - 1)), (observed, naive)
    protocol, estimates = sims["oue"]
    naive = float(protocol.noise(n).variance(f) @ contiguous)
    assert linear_variance(protocol, n, contiguous, f) == pytest.approx(naive, rel=1e-12)


def test_grr_set_variance_closed_form():
    protocol = make_protocol("grr", 1.5, 10)
    p, q, n = protocol.p_star, protocol.q_star, 1000
    f = np.linspace(1, 2, 10)
    f /= f.sum()
    indices = [1, 4, 5, 8]
    k, f_s = len(indices), f[indices].sum()
    p_in = p + (k - 1) * q
    closed = (f_s * p_in * (1 - p_in) + (1 - f_s) * k * q * (1 - k * q)) / (n * (p - q) ** 2)
    assert linear_variance(protocol, n, queries.set_indicator(10, indices), f) == \
        pytest.approx(closed, rel=1e-12)


# ---------------------------------------------------------------------------------------------
# Query semantics


def window(method="base", protocol_name="oue", n=5000, seed=3, **params) -> WindowEstimate:
    protocol = make_protocol(protocol_name, 1.0, 8)
    f = np.array([0.4, 0.2, 0.15, 0.1, 0.08, 0.04, 0.02, 0.01])
    rng = np.random.default_rng(seed)
    unbiased = f + rng.normal(0, np.sqrt(protocol.noise(n).variance(f)))
    spec = PostprocessSpec(method, tuple(params.items()))
    return WindowEstimate.from_unbiased(protocol, n, unbiased, spec,
                                        labels=list("abcdefgh"), metric="m")


def test_point_query_standard_error_is_the_records():
    w = window()
    record_se = standard_error(w.unbiased, w.noise)
    for i, label in enumerate(w.labels):
        answer = w.point(label)
        assert answer.value == pytest.approx(w.unbiased[i])
        assert answer.std_error == pytest.approx(record_se[i], rel=1e-12)
        assert answer.std_error_kind == "exact" and answer.indices == (i,)
        assert w.point(i) == answer


def test_set_range_and_top_k():
    w = window("norm-sub")
    s = w.set_sum(["b", "d", 6])
    assert s.indices == (1, 3, 6) and s.labels == ("b", "d", "g")
    assert s.value == pytest.approx(w.estimate[[1, 3, 6]].sum())
    assert s.unbiased_value == pytest.approx(w.unbiased[[1, 3, 6]].sum())
    r = w.range_sum("c", 5)
    assert r.indices == (2, 3, 4, 5) and r.value == pytest.approx(w.estimate[2:6].sum())
    assert w.range_sum("c", "c").value == pytest.approx(w.estimate[2])
    top = w.top_k(3)
    assert [a.labels[0] for a in top] == [w.labels[i] for i in np.argsort(-w.estimate)[:3]]
    assert all(a.query == "top-k" for a in top)
    assert [a.value for a in top] == sorted((a.value for a in top), reverse=True)
    assert len(w.top_k(100)) == 8


def test_norm_answers_and_exact_standard_error():
    w = window("norm")
    whole = w.set_sum(range(8))
    assert whole.value == pytest.approx(1.0) and whole.std_error == pytest.approx(0.0, abs=1e-12)
    s = w.set_sum([0, 2])
    delta = (1 - w.unbiased.sum()) / 8
    assert s.value == pytest.approx(w.unbiased[[0, 2]].sum() + 2 * delta)
    weights = queries.set_indicator(8, [0, 2]) - 2 / 8
    f_hat = queries.plug_in_distribution(w.unbiased + delta, [0, 2])
    assert s.std_error == pytest.approx(math.sqrt(linear_variance(w.protocol, w.n, weights, f_hat)))
    assert s.std_error_kind == "exact"
    # complement symmetry of a sum-to-one answer
    assert w.set_sum(range(2, 8)).std_error == pytest.approx(w.set_sum([0, 1]).std_error)


@pytest.mark.parametrize("method", sorted(METHODS))
def test_every_method_names_its_standard_error(method):
    w = window(method)
    point, pair = w.point("h"), w.set_sum(["g", "h"])
    base = window("base")
    expected_kind = {"base": "exact", "norm": "exact", "post-pos": "upper-bound"}.get(method)
    if expected_kind is None:
        expected_kind = "norm-reference" if method in queries._SUM_TO_ONE else "base-reference"
    assert pair.std_error_kind == expected_kind
    assert point.std_error_kind == ("upper-bound" if method == "base-pos" else expected_kind)
    if expected_kind in ("base-reference", "upper-bound"):
        assert pair.std_error == pytest.approx(base.set_sum(["g", "h"]).std_error)
    assert pair.method == method and dict(pair.params) == dict(w.spec.params)
    assert all(np.isfinite([point.value, point.std_error, pair.value, pair.std_error]))


def test_post_pos_clips_the_answer():
    w = window("post-pos")
    w = WindowEstimate.from_unbiased(w.protocol, w.n, np.where(np.arange(8) == 7, -0.01, w.unbiased),
                                     "post-pos", labels=w.labels)
    assert w.point(7).value == 0.0 and w.point(7).unbiased_value == pytest.approx(-0.01)
    assert w.set_sum([0, 7]).value == pytest.approx(w.unbiased[0] - 0.01)


def test_with_method_reprocesses_from_the_unbiased_estimate():
    w = window("base")
    hyb = w.with_method("norm-hyb", alpha=1.0)
    assert hyb.spec == PostprocessSpec("norm-hyb", (("alpha", 1.0),))
    assert np.allclose(hyb.estimate, hyb.spec.apply(w.unbiased, w.noise))
    assert w.with_method({"method": "norm-sub"}).estimate.sum() == pytest.approx(1.0)
    with pytest.raises(ValueError, match="unknown post-processing method"):
        w.with_method("norm-foo")


def test_from_record_round_trip():
    from ldp.finalize import finalize_window
    from ldp.registry import parse_registry
    from transforms.finalize import window_estimate_record
    registry = parse_registry({"metrics": [{"name": "m", "protocol": "olh", "epsilon": 1.0,
                                            "domain": {"labels": list("abcd")},
                                            "postprocess": {"method": "base-cut", "alpha": 1}}]})
    config = registry["m"]
    result = finalize_window(config, np.array([300, 250, 240, 210]), 1000)
    record = window_estimate_record(config, result, "2020-01-01T00:00:00Z",
                                    "2020-01-02T00:00:00Z", {"index": 0})
    w = WindowEstimate.from_record(record)
    assert w.spec == config.postprocess and w.protocol == config.protocol
    assert np.allclose(w.estimate, result.estimate)
    assert w.point("b").std_error == pytest.approx(result.std_error[1])


def test_query_errors():
    w = window()
    with pytest.raises(ValueError, match="not a label"):
        w.point("zz")
    with pytest.raises(ValueError, match="outside the domain"):
        w.point(8)
    with pytest.raises(ValueError, match="more than once"):
        w.set_sum(["a", 0])
    with pytest.raises(ValueError, match="at least one value"):
        w.set_sum([])
    with pytest.raises(ValueError, match="empty range"):
        w.range_sum("d", "b")
    with pytest.raises(ValueError, match="positive integer"):
        w.top_k(0)
    with pytest.raises(ValueError, match="no reports"):
        WindowEstimate.from_unbiased(w.protocol, 0, np.full(8, np.nan), "base")
    with pytest.raises(ValueError, match="no support-correlation model"):
        queries.report_variance(type("P", (), {"name": "xyz", "d": 2, "p_star": .6,
                                                "q_star": .4})(), np.ones(2))
