"""Versioned registries and the configuration fingerprint: what changes a fingerprint, what does
not, and every malformed history fails at load with a message naming the field."""
from __future__ import annotations

import copy
import hashlib

import pytest

from ldp_telemetry.ldp.base.errors import RegistryError
from ldp_telemetry.ldp.config.fingerprint import FINGERPRINT_BYTES, canonical_text, fingerprint
from ldp_telemetry.ldp.config.registry import MAX_HISTORY, parse_registry

BASE = {"name": "app", "protocol": "oue", "epsilon": 2.0, "domain": {"labels": ["x", "y", "z"]}}


def config(**changes):
    entry = {**BASE, **changes}
    return parse_registry({"metrics": [entry]})[entry["name"]]


def test_the_canonical_text_is_the_documented_one():
    """The fingerprint of a fixed configuration never changes unless the format does (a change
    here breaks every deployed client: bump WIRE_FORMAT and say so in the changelog)."""
    text = canonical_text(config())
    assert text == ('{"domain":{"labels":["x","y","z"]},"epsilon":"4000000000000000","format":1,'
                    '"metric":"app","parameters":{},"protocol":"oue"}')
    assert fingerprint(config()) == hashlib.sha256(text.encode()).digest()[:FINGERPRINT_BYTES]
    assert config().fingerprint.hex() == fingerprint(config()).hex()
    olh = config(protocol="olh", domain={"size": 24})
    assert canonical_text(olh) == ('{"domain":{"size":24},"epsilon":"4000000000000000",'
                                   '"format":1,"metric":"app","parameters":{"g":8},'
                                   '"protocol":"olh"}')
    sw = config(protocol="sw", domain={"low": 0, "high": 720, "buckets": 144})
    assert canonical_text(sw).startswith(
        '{"domain":{"buckets":144,"high":"4086800000000000","low":"0000000000000000"},')
    assert '"parameters":{"b":"' in canonical_text(sw)
    assert '"output_buckets":144' in canonical_text(sw)
    accented = config(domain={"labels": ["café", "naïve"]})
    assert '"labels":["caf\\u00e9","na\\u00efve"]' in canonical_text(accented)


@pytest.mark.parametrize("change", [
    {"epsilon": 2.5}, {"protocol": "grr"}, {"name": "app2"},
    {"domain": {"labels": ["z", "y", "x"]}}, {"domain": {"labels": ["x", "y"]}},
    {"domain": {"labels": ["x", "y", "z", "w"]}}, {"domain": {"size": 3}},
])
def test_everything_that_changes_what_a_report_means_changes_the_fingerprint(change):
    assert config(**change).fingerprint != config().fingerprint


@pytest.mark.parametrize("change", [
    {"postprocess": "norm-sub"}, {"estimator": "iiw"}, {"not_before": "2020-01-01"},
    {"version": 7},
])
def test_server_side_choices_leave_the_fingerprint_alone(change):
    assert config(**change).fingerprint == config().fingerprint


def test_numeric_domains_fingerprint_their_range_and_buckets():
    base = {"protocol": "sw", "domain": {"low": 0, "high": 10, "buckets": 16}}
    sw = config(**base)
    for domain in ({"low": 0, "high": 11, "buckets": 16}, {"low": 1, "high": 10, "buckets": 16},
                   {"low": 0, "high": 10, "buckets": 32},
                   {"low": 0, "high": 10, "buckets": 16, "output_buckets": 32}):
        assert config(protocol="sw", domain=domain).fingerprint != sw.fingerprint


def test_a_metric_lists_its_earlier_versions_oldest_first():
    registry = parse_registry({"metrics": [{
        **BASE, "version": 3, "postprocess": "norm-sub",
        "history": [{"version": 1, "protocol": "grr", "epsilon": 1.0,
                     "domain": {"labels": ["x", "y"]}},
                    {"version": 2, "protocol": "oue", "epsilon": 4.0,
                     "domain": {"labels": ["x", "y", "z"]}, "postprocess": "none"}]}]})
    v1, v2, v3 = registry.versions("app")
    assert [c.version for c in (v1, v2, v3)] == [1, 2, 3] and registry["app"] is v3
    assert (v1.protocol_name, v1.epsilon, v1.labels) == ("grr", 1.0, ("x", "y"))
    assert v1.postprocess.method == "norm-sub"  # inherited from the current entry
    assert v2.postprocess.method == "base"  # its own ("none" is "base")
    assert registry.version("app", 2) is v2 and registry.version("app", None) is v3
    assert registry.by_fingerprint[v1.fingerprint] is v1
    assert len(registry.by_fingerprint) == 3 and registry.metrics == (v3,)
    with pytest.raises(RegistryError, match=r"has no version 4 \(known: \[1, 2, 3\]\)"):
        registry.version("app", 4)


def history(*entries, current_version=5):
    return {"metrics": [{**BASE, "version": current_version, "history": list(entries)}]}


def old(version, epsilon=1.0, **extra):
    return {"version": version, "protocol": "grr", "epsilon": epsilon,
            "domain": {"labels": ["x", "y"]}, **extra}


@pytest.mark.parametrize("document, message, field", [
    (history(old(2), old(1, 3.0)), "out of order: version 1 follows version 2",
     "metrics[0].history[1].version"),
    (history(old(1), old(1, 3.0)), "out of order: version 1 follows version 1",
     "metrics[0].history[1].version"),
    (history(old(5)), "history version 5 is not below the current version 5",
     "metrics[0].history[0].version"),
    (history(old(1), old(2)), "versions 1 and 2 have the same configuration",
     "metrics[0].history"),
    (history({**old(1), **{k: v for k, v in BASE.items() if k != "name"}}),
     "versions 1 and 5 have the same configuration", "metrics[0].history"),
    (history(old(1, name="app")), "field 'name' of history[0] is not a history field",
     "metrics[0].history[0].name"),
    (history({"protocol": "grr", "epsilon": 1.0, "domain": {"size": 2}}),
     "history[0] needs a 'version'", "metrics[0].history[0].version"),
    (history(old(0)), "field 'version' must be an integer in [1,",
     "metrics[0].history[0].version"),
    (history(old(True)), "field 'version' must be an integer", "metrics[0].history[0].version"),
    (history(old(1, epsilon=-1)), "version 1: field 'epsilon'",
     "metrics[0].history[0].epsilon"),
    (history("v1"), "history[0] must be an object", "metrics[0].history[0]"),
    ({"metrics": [{**BASE, "history": {"version": 1}}]}, "field 'history' must be a list",
     "metrics[0].history"),
    ({"metrics": [{**BASE, "version": "2"}]}, "field 'version' must be an integer",
     "metrics[0].version"),
    (history(*[old(i, epsilon=1.0 + i / 10) for i in range(1, MAX_HISTORY + 2)],
             current_version=MAX_HISTORY + 5), "more than MAX_HISTORY", "metrics[0].history"),
])
def test_a_malformed_history_fails_at_load_naming_its_field(document, message, field):
    with pytest.raises(RegistryError) as raised:
        parse_registry(copy.deepcopy(document))
    assert message in str(raised.value)
    assert raised.value.field == field


def test_not_before_holds_for_every_version():
    registry = parse_registry({"metrics": [{**BASE, "version": 2, "not_before": "2021-06-01",
                                            "history": [old(1)]}]})
    assert {c.not_before for c in registry.versions("app")} == {"2021-06-01"}
