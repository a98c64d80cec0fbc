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
