"""String metrics in the registry: the domain, the estimator, the fields that do not apply, the
fingerprint; every error names its field."""
from __future__ import annotations

import pytest

from ldp_telemetry.ldp.base.errors import RegistryError
from ldp_telemetry.ldp.config.fingerprint import canonical_text
from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.ldp.protocols.base import STRINGS
from ldp_telemetry.ldp.protocols.pem import DEFAULT_POOL


def entry(**changes):
    base = {"name": "app", "protocol": "pem", "epsilon": 2.0,
            "domain": {"strings": {"max_bytes": 12}}}
    return {"metrics": [{**base, **changes}]}


def test_a_string_metric_and_its_defaults():
    config = parse_registry(entry())["app"]
    assert config.kind == STRINGS and config.d == 12 and config.pool == DEFAULT_POOL
    assert config.estimator.method == "heavy-hitters"
    assert dict(config.estimator.params) == {"threshold": 0.0, "top": 10, "width": 0,
                                             "rank": "lower"}
    assert config.integrity is None and config.value_labels == []
    assert ('"domain":{"strings":{"max_bytes":12,"pool":1024}}' in canonical_text(config)
            and '"parameters":{"g":8}' in canonical_text(config))
    other = parse_registry(entry(domain={"strings": {"max_bytes": 12, "pool": 512}}))["app"]
    assert other.fingerprint != config.fingerprint
    server_only = parse_registry(entry(estimator={"method": "heavy-hitters", "top": 3}))["app"]
    assert server_only.fingerprint == config.fingerprint  # the estimator is the server's choice
    assert config.final_share == 0.0 and "final_share" not in canonical_text(config)


def test_a_final_share_is_a_new_configuration():
    """final_share changes what devices report: it is in the fingerprint (as a real's hex), a
    changed share is another fingerprint, and 0 written out is the default's text."""
    base = parse_registry(entry())["app"]
    half = parse_registry(entry(domain={"strings": {"max_bytes": 12, "final_share": 0.5}}))["app"]
    assert half.final_share == 0.5 and half.protocol.final_share == 0.5
    assert '"final_share":"3fe0000000000000"' in canonical_text(half)
    assert half.fingerprint != base.fingerprint
    other = parse_registry(entry(domain={"strings": {"max_bytes": 12, "final_share": 0.4}}))
    assert other["app"].fingerprint not in (half.fingerprint, base.fingerprint)
    zero = parse_registry(entry(domain={"strings": {"max_bytes": 12, "final_share": 0}}))["app"]
    assert canonical_text(zero) == canonical_text(base) and zero.fingerprint == base.fingerprint


@pytest.mark.parametrize("changes, field, message", [
    ({"domain": {"size": 10}}, "metrics[0].domain", "of a string protocol must be"),
    ({"domain": {"strings": {"max_bytes": 65}}}, "metrics[0].domain.strings.max_bytes",
     "MAX_STRING_BYTES"),
    ({"domain": {"strings": {"max_bytes": 8, "pool": 8}}}, "metrics[0].domain.strings.pool",
     "[16, 65536]"),
    ({"domain": {"strings": {"max_bytes": 8, "alphabet": "abc"}}},
     "metrics[0].domain.strings.alphabet", "is not a string domain field"),
    ({"epsilon": 6.0, "domain": {"strings": {"max_bytes": 64, "pool": 65536}}},
     "metrics[0].domain.strings.pool", "MAX_STATISTIC_BYTES"),
    ({"domain": {"strings": {"max_bytes": 8, "final_share": 0.95}}},
     "metrics[0].domain.strings.final_share", "[0, 0.9] (MAX_FINAL_SHARE)"),
    ({"domain": {"strings": {"max_bytes": 8, "final_share": "half"}}},
     "metrics[0].domain.strings.final_share", "must be a number"),
    ({"domain": {"strings": {"max_bytes": 8, "final_share": -0.1}}},
     "metrics[0].domain.strings.final_share", "got -0.1"),
    ({"postprocess": "norm-sub"}, "metrics[0].postprocess", "does not apply"),
    ({"integrity": {"alpha": 0.01}}, "metrics[0].integrity", "no support model"),
    ({"memoize": {"lifetime_epsilon": 4.0}}, "metrics[0].memoize", "not the string 'pem'"),
    ({"estimator": "unbiased"}, "metrics[0].estimator", "does not fit protocol 'pem'"),
    ({"estimator": {"method": "heavy-hitters", "top": 0}}, "metrics[0].estimator.top",
     "an integer in [1, 500]"),
    ({"estimator": {"method": "heavy-hitters", "threshold": 1.5}},
     "metrics[0].estimator.threshold", "a frequency in [0, 1)"),
])
def test_string_metric_errors_name_their_field(changes, field, message):
    with pytest.raises(RegistryError) as error:
        parse_registry(entry(**changes))
    assert error.value.field == field
    assert message in str(error.value)


def test_registry_diff_names_a_changed_final_share():
    """`ldp registry diff` (describe_changes) names the share when a new version changes it."""
    from ldp_telemetry.pipelines.registry_tools import describe_changes

    base = parse_registry(entry())["app"]
    half = parse_registry(entry(domain={"strings": {"max_bytes": 12, "final_share": 0.5}}))["app"]
    assert describe_changes(base, half) == [
        "domain strings of at most 12 bytes, pool 1024 -> strings of at most 12 bytes, "
        "pool 1024, final share 0.5"]


def test_the_published_schema_takes_final_share_up_to_its_limit():
    import json

    from ldp_telemetry.ldp.protocols.pem import MAX_FINAL_SHARE
    from ldp_telemetry.schemas import SCHEMA_DIR
    schema = json.loads((SCHEMA_DIR / "registry.schema.json").read_text(encoding="utf-8"))
    found = [d["properties"]["strings"]["properties"]["final_share"]
             for d in schema["$defs"]["domain"]["oneOf"]
             if "strings" in d.get("properties", {})]
    assert found == [{"type": "number", "minimum": 0, "maximum": MAX_FINAL_SHARE,
                      "description": found[0]["description"]}]


def test_the_published_schema_takes_a_dictionary_as_the_registry_does():
    import json

    from jsonschema import Draft202012Validator

    from ldp_telemetry.ldp.protocols.pem import MAX_CANDIDATES
    from ldp_telemetry.schemas import SCHEMA_DIR
    schema = json.loads((SCHEMA_DIR / "registry.schema.json").read_text(encoding="utf-8"))
    strings = [d["properties"]["strings"]["properties"]
               for d in schema["$defs"]["domain"]["oneOf"] if "strings" in d.get("properties", {})]
    assert strings[0]["dictionary"]["maxItems"] == MAX_CANDIDATES
    validator = Draft202012Validator(schema)
    for domain in ({"max_bytes": 8, "dictionary": ["mail", "maps"]},
                   {"max_bytes": 8, "dictionary_file": "apps.txt"}):
        document = {"metrics": [{"name": "app", "protocol": "pem", "epsilon": 2.0,
                                 "domain": {"strings": domain},
                                 "estimator": {"method": "heavy-hitters"}}]}
        assert [error.message for error in validator.iter_errors(document)] == []
