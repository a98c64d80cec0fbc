"""LOLOHA's own g for memoized local hashing (`memoize.g: "loloha"`, [Arcolezi23]).

The composed channel's privacy and support marginals under this g are checked by exact
enumeration in test_memoized_privacy.py (the "loloha" cases); here: the choice itself, the
figures it trades (n·MSE against lifetime ε), the registry field and its fingerprint rule, and
the planner's side-by-side rows.
"""
from __future__ import annotations

import math

import pytest

from ldp_telemetry.ldp.base.errors import RegistryError
from ldp_telemetry.ldp.config.fingerprint import canonical_text
from ldp_telemetry.ldp.config.planner import two_stage_plan
from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.ldp.protocols.memoized import (Stage, compose, loloha_g, loloha_irr_epsilon,
                                                  loloha_variance, make_memoized_protocol)

GRID = [(e1, einf) for e1 in (0.1, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0)
        for einf in (1.2 * e1, e1 + 0.5, e1 + 2.0, 4.0 * e1, 10.0) if einf > e1]


@pytest.mark.parametrize(("report", "lifetime"), GRID)
def test_loloha_g_is_the_exact_integer_minimiser(report, lifetime):
    """Bisection against every g up to 4x the one-report g: the same minimiser, at most one
    above the one-report g (the assumptions `loloha_g` states), and what the protocol uses."""
    report_g = make_memoized_protocol("olh", report, 64, lifetime).g
    scan = range(2, 4 * report_g + 8)
    best = min(scan, key=lambda g: (loloha_variance(lifetime, report, g), g))
    assert loloha_g(lifetime, report, 2 * report_g + 2) == best <= report_g + 1
    assert make_memoized_protocol("olh", report, 64, lifetime, "loloha").g == best


@pytest.mark.parametrize(("report", "lifetime"), [(0.5, 1.0), (1.0, 4.0), (2.0, 2.5)])
def test_loloha_irr_level_composes_binary_stages_to_exactly_eps1(report, lifetime):
    def grr2(epsilon):
        p = math.exp(epsilon) / (math.exp(epsilon) + 1)
        return Stage(p, 1 - p)
    p_star, q_star = compose(grr2(lifetime), grr2(loloha_irr_epsilon(lifetime, report)), 2)
    assert math.log(p_star / q_star) == pytest.approx(report, abs=1e-12)


def test_the_issue_setting_lifetime_12_against_16_for_2_percent():
    """ε∞ = 4, ε1 = 1, d = 1024: LOLOHA's g = 3 (lifetime 3·4 = 12) against g = 4 (16)."""
    report = make_memoized_protocol("olh", 1.0, 1024, 4.0)
    loloha = make_memoized_protocol("olh", 1.0, 1024, 4.0, "loloha")
    assert (report.g, loloha.g) == (4, 3)
    assert (report.prr_items * 4.0, loloha.prr_items * 4.0) == (16.0, 12.0)
    # both compose to local hashing at ε1 exactly: p* = e/(e + g - 1), q* = 1/g
    assert loloha.p_star == pytest.approx(math.e / (math.e + 2))
    assert loloha.q_star == pytest.approx(1 / 3)
    assert loloha.n_mse() / report.n_mse() == pytest.approx(1.021, abs=0.001)


def test_blh_has_no_g_to_choose_and_report_rule_is_the_default():
    with pytest.raises(RegistryError, match="with a chosen g"):
        make_memoized_protocol("blh", 1.0, 64, 4.0, "loloha")
    assert (make_memoized_protocol("olh", 1.0, 64, 4.0, "report")
            == make_memoized_protocol("olh", 1.0, 64, 4.0))


def metric(protocol="olh", **memoize):
    return {"name": "m", "protocol": protocol, "epsilon": 1.0, "domain": {"size": 1024},
            "memoize": {"lifetime_epsilon": 4.0, **memoize}}


def test_registry_field_and_fingerprint_only_when_present():
    default, explicit, loloha = (parse_registry({"metrics": [metric(**extra)]}).metrics[0]
                                 for extra in ({}, {"g": "report"}, {"g": "loloha"}))
    assert canonical_text(default) == canonical_text(explicit)
    assert '"g"' not in canonical_text(default).split('"memoize"')[1].split("}")[0]
    text = canonical_text(loloha)
    assert '"memoize":{"g":"loloha","lifetime_epsilon"' in text and '"parameters":{"g":3}' in text
    assert loloha.memoize.as_dict()["g"] == "loloha" and "g" not in default.memoize.as_dict()


@pytest.mark.parametrize(("entry", "message"), [
    (metric(g="best"), "must be one of"),
    (metric("oue", g="loloha"), "applies to local hashing"),
    (metric("blh", g="loloha"), "applies to local hashing"),
])
def test_registry_rejects_bad_g_naming_the_field(entry, message):
    with pytest.raises(RegistryError, match=message) as caught:
        parse_registry({"metrics": [entry]})
    assert caught.value.field.endswith("memoize.g")


def test_planner_shows_both_g_side_by_side():
    rows = [r for r in two_stage_plan(1.0, 4.0, 1024) if r.protocol == "olh"]
    assert [(r.g_rule, r.parameter, r.lifetime_epsilon) for r in rows] == [
        ("report", "g=4", 16.0), ("loloha", "g=3", 12.0)]
    assert rows[1].n_mse / rows[0].n_mse == pytest.approx(1.021, abs=0.001)
    assert not rows[1].recommended
    assert [r.g_rule for r in two_stage_plan(1.0, 4.0, 1024) if r.protocol == "blh"] == [None]
