"""The registry's `memoize` and `reports_per_day` fields, their place in the fingerprint, and the
privacy budget every surface shows."""
from __future__ import annotations

import json

import pytest

from ldp_telemetry.ldp.base.errors import RegistryError
from ldp_telemetry.ldp.config.budget import privacy_budget, reports_per_window
from ldp_telemetry.ldp.config.fingerprint import canonical_text
from ldp_telemetry.ldp.config.registry import parse_registry


def entry(**fields):
    return {"name": "m", "protocol": "oue", "epsilon": 1.0, "domain": {"size": 10}, **fields}


def load(**fields):
    return parse_registry({"metrics": [entry(**fields)]})["m"]


@pytest.mark.parametrize(("fields", "field", "message"), [
    ({"memoize": 3.0}, "metrics[0].memoize", "lifetime_epsilon"),
    ({"memoize": {}}, "metrics[0].memoize", "lifetime_epsilon"),
    ({"memoize": {"lifetime_epsilon": "4"}}, "metrics[0].memoize.lifetime_epsilon", "number"),
    ({"memoize": {"lifetime_epsilon": 0.5}}, "metrics[0].memoize.lifetime_epsilon",
     "must exceed the per-report epsilon"),
    ({"memoize": {"lifetime_epsilon": 1.0}}, "metrics[0].memoize.lifetime_epsilon",
     "must exceed"),
    ({"memoize": {"lifetime_epsilon": 25.0}}, "metrics[0].memoize.lifetime_epsilon",
     "must lie in"),
    ({"memoize": {"lifetime_epsilon": 4.0, "max_values": 0}}, "metrics[0].memoize.max_values",
     "integer in"),
    ({"memoize": {"lifetime_epsilon": 4.0, "on_limit": "drop"}},
     "metrics[0].memoize.on_limit", "one of"),
    ({"memoize": {"lifetime_epsilon": 4.0, "forever": True}}, "metrics[0].memoize.forever",
     "not a memoize field"),
    ({"memoize": {"lifetime_epsilon": 4.0}, "protocol": "hr"}, "metrics[0].memoize",
     "defined for protocols"),
    ({"memoize": {"lifetime_epsilon": 4.0}, "protocol": "sw",
      "domain": {"low": 0, "high": 1, "buckets": 4}}, "metrics[0].memoize", "numeric"),
    ({"memoize": {"lifetime_epsilon": 0.5}, "protocol": "auto"},
     "metrics[0].memoize.lifetime_epsilon", "must exceed"),
    ({"reports_per_day": 0}, "metrics[0].reports_per_day", "number in"),
    ({"reports_per_day": 100_000}, "metrics[0].reports_per_day", "MAX_REPORTS_PER_DAY"),
    ({"reports_per_day": True}, "metrics[0].reports_per_day", "number in"),
])
def test_bad_memoization_fields_are_named(fields, field, message):
    with pytest.raises(RegistryError, match=message) as caught:
        load(**fields)
    assert caught.value.field == field
    assert "metric 'm'" in str(caught.value)


def test_memoization_enters_the_canonical_text_only_when_present():
    plain = load()
    assert "memoize" not in canonical_text(plain)
    assert load(reports_per_day=24).fingerprint == plain.fingerprint
    memo = load(memoize={"lifetime_epsilon": 4.0})
    document = json.loads(canonical_text(memo))
    assert set(document["memoize"]) == {"lifetime_epsilon"}
    assert memo.fingerprint != plain.fingerprint
    # the device-side limits and the rate do not re-key the permanent responses
    for fields in ({"max_values": 3}, {"on_limit": "stop"}):
        other = load(memoize={"lifetime_epsilon": 4.0, **fields}, reports_per_day=96)
        assert other.fingerprint == memo.fingerprint
    assert load(memoize={"lifetime_epsilon": 4.5}).fingerprint != memo.fingerprint


def test_history_versions_may_differ_in_memoization():
    registry = parse_registry({"metrics": [entry(
        version=2, memoize={"lifetime_epsilon": 4.0}, reports_per_day=12,
        history=[{"version": 1, "protocol": "oue", "epsilon": 1.0, "domain": {"size": 10}}])]})
    old, new = registry.versions("m")
    assert old.memoize is None and new.memoize.lifetime_epsilon == 4.0
    assert old.reports_per_day == new.reports_per_day == 12
    assert registry.by_fingerprint[new.fingerprint] is new


def test_the_budget_of_a_one_stage_metric_grows_without_bound():
    budget = privacy_budget(load(reports_per_day=24))
    assert (budget.per_report, budget.per_day, budget.lifetime) == (1.0, 24.0, None)
    assert "no lifetime bound" in budget.text() and "grows by 24 every day" in budget.text()
    assert privacy_budget(load()).per_day is None


@pytest.mark.parametrize(("protocol", "max_values", "distinct"),
                         [("oue", None, 10), ("oue", 3, 3), ("grr", 50, 10), ("olh", None, 4),
                          ("olh", 2, 2)])
def test_the_budget_of_a_memoized_metric(protocol, max_values, distinct):
    memo = {"lifetime_epsilon": 2.0, **({} if max_values is None else {"max_values": max_values})}
    config = load(protocol=protocol, epsilon=0.5, memoize=memo, reports_per_day=24)
    if protocol == "olh":
        assert config.protocol.g == 3  # OLH's g at ε1 = 0.5: round(e^0.5 + 1)
        distinct = min(distinct, 3)
    budget = privacy_budget(config)
    assert budget.per_report == 0.5
    assert budget.per_day == 2.0  # min(24 x 0.5, ε∞)
    assert budget.lifetime == pytest.approx(distinct * 2.0)
    assert budget.distinct_values == distinct
    assert "ε∞=2 per distinct value" in budget.text()
    assert privacy_budget(load(protocol=protocol, epsilon=0.5, memoize=memo,
                               reports_per_day=2)).per_day == 1.0
    assert reports_per_window(config, 3_600_000) == 1.0


def test_on_limit_repeat_is_the_default_and_stop_carries_its_caveat():
    """'stop' makes sending depend on the value, so its budget says the bound does not cover it."""
    memo = {"lifetime_epsilon": 2.0, "max_values": 2}
    repeat = privacy_budget(load(protocol="oue", epsilon=0.5, memoize=memo))
    assert load(protocol="oue", epsilon=0.5, memoize=memo).memoize.on_limit == "repeat"
    assert "outside this bound" not in repeat.rule
    stop = privacy_budget(load(protocol="oue", epsilon=0.5, memoize={**memo, "on_limit": "stop"}))
    assert "on_limit 'stop' is outside this bound" in stop.rule


def test_more_than_one_memoized_report_per_window_is_warned_about():
    from ldp_telemetry.ldp.config.budget import repeated_reports_warning
    memo = load(memoize={"lifetime_epsilon": 4.0}, reports_per_day=24)
    assert repeated_reports_warning(memo, 3_600_000) is None  # one an hour, hourly windows
    warning = repeated_reports_warning(memo, 86_400_000)
    assert "about 24 reports per window" in warning and "at most 3600 s" in warning
    assert repeated_reports_warning(load(reports_per_day=24), 86_400_000) is None
    assert repeated_reports_warning(load(memoize={"lifetime_epsilon": 4.0}), 86_400_000) is None


def test_auto_resolves_a_memoized_metric_by_the_two_stage_comparison():
    from ldp_telemetry.ldp.config.planner import two_stage_plan
    config = load(protocol="auto", epsilon=1.07, domain={"size": 105},
                  memoize={"lifetime_epsilon": 4.39, "max_values": 4})
    [best] = [row for row in two_stage_plan(1.07, 4.39, 105, max_values=4) if row.recommended]
    assert config.protocol_name == best.protocol and config.protocol.memoized


def test_registry_diff_names_a_change_of_memoization():
    from ldp_telemetry.pipelines.registry_tools import describe_changes
    plain, memo = load(), load(memoize={"lifetime_epsilon": 4.0})
    assert describe_changes(plain, memo) == ["memoization none -> ε∞=4"]
    assert describe_changes(memo, load(memoize={"lifetime_epsilon": 5.0})) == \
        ["memoization ε∞=4 -> ε∞=5"]
    assert describe_changes(memo, load(memoize={"lifetime_epsilon": 4.0, "max_values": 2})) == []


def test_the_cost_of_a_window():
    from ldp_telemetry.ldp.config.budget import window_cost
    plain = privacy_budget(load(reports_per_day=24)).as_record()
    assert window_cost(plain, 86_400_000) == "ε = 24 (24 reports at most)"
    assert window_cost(plain, 1_800_000) == "ε = 1 (1 report at most)"  # half an hour
    memo = privacy_budget(load(memoize={"lifetime_epsilon": 4.0}, reports_per_day=24))
    assert window_cost(memo.as_record(), 86_400_000) == "ε = 4 (24 reports at most)"  # ε∞ cap
    assert "no reporting rate" in window_cost(privacy_budget(load()).as_record(), 86_400_000)
    unknown = privacy_budget(load(memoize={"lifetime_epsilon": 4.0})).as_record()
    assert window_cost(unknown, 86_400_000).startswith("at most ε∞ = 4")
