"""The metric registry: valid files load into frozen objects; every error names metric and field."""
from __future__ import annotations

import copy
import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from ldp_telemetry.ldp.base.errors import RegistryError
from ldp_telemetry.ldp.config.registry import MetricConfig, Registry, load_registry, parse_registry
from ldp_telemetry.pipelines import cli

REPO = Path(__file__).resolve().parents[2]

VALID = {"metrics": [
    {"name": "app.color", "protocol": "grr", "epsilon": 1.5,
     "domain": {"labels": ["red", "green", "blue"]}, "postprocess": "norm-sub"},
    {"name": "app.hour", "protocol": "olh", "epsilon": 2, "domain": {"size": 24}},
    {"name": "app.page", "protocol": "oue", "epsilon": 0.5, "domain": {"size": 100},
     "postprocess": "none"},
]}


def write(tmp_path, document, name="registry.json") -> Path:
    path = tmp_path / name
    path.write_text(document if isinstance(document, str) else json.dumps(document))
    return path


def test_valid_registry_loads_into_frozen_objects(tmp_path):
    registry = load_registry(write(tmp_path, VALID))
    assert isinstance(registry, Registry) and isinstance(registry.metrics, tuple)
    assert [m.name for m in registry.metrics] == ["app.color", "app.hour", "app.page"]
    color, hour, page = registry.metrics
    assert (color.protocol_name, color.epsilon, color.d, color.labels) == \
        ("grr", 1.5, 3, ("red", "green", "blue"))
    assert (hour.d, hour.labels, hour.value_labels[:3]) == (24, None, ["0", "1", "2"])
    assert isinstance(hour.epsilon, float) and hour.epsilon == 2.0
    assert color.postprocess.method == "norm-sub"
    assert hour.postprocess.method == "norm-hyb"  # the default
    assert page.postprocess.method == "base"      # "none" is the identity
    assert hour.protocol.name == "olh" and hour.protocol.d == 24 and hour.protocol.epsilon == 2.0
    assert registry["app.page"] is page and "app.page" in registry and "nope" not in registry
    for frozen in (registry, color, color.postprocess, color.protocol):
        field = dataclasses.fields(frozen)[0].name
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(frozen, field, None)
    with pytest.raises(RegistryError, match="'nope'"):
        registry["nope"]


def test_demo_registry_loads():
    registry = load_registry(REPO / "demo" / "registry.json")
    assert {m.protocol_name for m in registry.metrics} == {"grr", "oue", "olh", "sw"}
    assert all(isinstance(m, MetricConfig) for m in registry.metrics)


def mutated(index, **changes):
    document = copy.deepcopy(VALID)
    for key, value in changes.items():
        if value is _DELETE:
            del document["metrics"][index][key]
        else:
            document["metrics"][index][key] = value
    return document


_DELETE = object()

# (document, metric named in the message, field named in the message)
BAD = {
    "unknown protocol": (mutated(0, protocol="rappor"), "app.color", "protocol"),
    "protocol not a string": (mutated(0, protocol=3), "app.color", "protocol"),
    "protocol a list": (mutated(0, protocol=["grr"]), "app.color", "protocol"),
    "epsilon zero": (mutated(1, epsilon=0), "app.hour", "epsilon"),
    "epsilon negative": (mutated(1, epsilon=-1.0), "app.hour", "epsilon"),
    "epsilon string": (mutated(1, epsilon="2.0"), "app.hour", "epsilon"),
    "epsilon boolean": (mutated(1, epsilon=True), "app.hour", "epsilon"),
    "epsilon infinite": (mutated(1, epsilon=float("inf")), "app.hour", "epsilon"),
    "epsilon missing": (mutated(1, epsilon=_DELETE), "app.hour", "epsilon"),
    "domain missing": (mutated(2, domain=_DELETE), "app.page", "domain"),
    "domain empty": (mutated(2, domain={}), "app.page", "domain"),
    "domain both kinds": (mutated(2, domain={"size": 3, "labels": ["a", "b", "c"]}),
                          "app.page", "domain"),
    "duplicate labels": (mutated(0, domain={"labels": ["red", "blue", "red"]}),
                         "app.color", "domain.labels"),
    "one label": (mutated(0, domain={"labels": ["red"]}), "app.color", "domain.labels"),
    "labels not strings": (mutated(0, domain={"labels": ["red", 2]}), "app.color",
                           "domain.labels"),
    "size 1": (mutated(2, domain={"size": 1}), "app.page", "domain.size"),
    "size float": (mutated(2, domain={"size": 10.0}), "app.page", "domain.size"),
    "unknown field": (mutated(1, colour="blue"), "app.hour", "colour"),
    "unknown postprocess": (mutated(0, postprocess="magic"), "app.color", "postprocess"),
    "duplicate metric name": ({"metrics": VALID["metrics"] + [VALID["metrics"][1]]},
                              "app.hour", "name"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_every_error_names_the_metric_and_the_field(tmp_path, case):
    document, metric, field = BAD[case]
    with pytest.raises(RegistryError) as caught:
        load_registry(write(tmp_path, document))
    message = str(caught.value)
    assert f"metric {metric!r}" in message, message
    assert f"'{field}'" in message, message
    position = [i for i, m in enumerate(document["metrics"]) if m.get("name") == metric][-1]
    assert caught.value.field == f"metrics[{position}].{field}"


def test_an_unknown_protocol_is_answered_with_the_nearest_name():
    with pytest.raises(RegistryError, match=r"got 'olhh' \(did you mean 'olh'\?\)"):
        parse_registry(mutated(0, protocol="olhh"))


def test_a_parameter_error_locates_the_parameter():
    with pytest.raises(RegistryError, match=r"metric 'app.page': field 'postprocess'") as caught:
        parse_registry(mutated(2, postprocess={"method": "norm-hyb", "alpha": -1}))
    assert caught.value.field == "metrics[2].postprocess.alpha"


def test_nan_epsilon_is_rejected(tmp_path):
    # JSON has no NaN, but Python's json module reads the bare token NaN.
    text = json.dumps(VALID).replace('"epsilon": 2', '"epsilon": NaN')
    assert "NaN" in text
    with pytest.raises(RegistryError, match=r"metric 'app.hour': field 'epsilon'"):
        load_registry(write(tmp_path, text))


def test_metric_without_a_name_is_located_by_position():
    document = mutated(1, name=_DELETE)
    with pytest.raises(RegistryError, match=r"metrics\[1\]: field 'name'") as caught:
        parse_registry(document)
    assert caught.value.field == "metrics[1].name"


@pytest.mark.parametrize("document", [[], {}, {"metrics": {}}, {"metrics": []}])
def test_malformed_top_level(document):
    with pytest.raises(RegistryError, match="metrics"):
        parse_registry(document)


def test_invalid_json_names_the_file(tmp_path):
    path = write(tmp_path, '{"metrics": [')
    with pytest.raises(RegistryError, match="not valid JSON") as caught:
        load_registry(path)
    assert str(path) in str(caught.value)


def test_missing_file_names_the_file(tmp_path):
    path = tmp_path / "absent.json"
    with pytest.raises(RegistryError, match="cannot read registry") as caught:
        load_registry(path)
    assert str(path) in str(caught.value)


def test_cli_run_fails_before_reading_any_data(tmp_path, monkeypatch, capsys):
    """`ldp run` with a bad registry: exit code 2, the message, no report decoded, no output."""
    import ldp_telemetry.schemas.codec

    def must_not_read(*args, **kwargs):
        raise AssertionError("a report file was opened")

    monkeypatch.setattr(ldp_telemetry.schemas.codec.ReportDecoder, "decode_file", must_not_read)
    registry = write(tmp_path, BAD["epsilon zero"][0])
    reports = tmp_path / "reports.avro"
    reports.write_bytes(b"not even avro")
    output = tmp_path / "out"
    code = cli.main(["run", "--registry", str(registry), "--input", str(reports),
                     "--output", str(output), "--window", "3600"])
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("ldp run: error: ")
    assert "metric 'app.hour': field 'epsilon'" in err
    assert not output.exists()


def test_cli_run_registry_error_comes_before_input_errors(tmp_path):
    # Also as a real process: the exit status and stderr a user sees.
    registry = write(tmp_path, BAD["duplicate labels"][0])
    output = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "ldp_telemetry.pipelines.cli", "run", "--registry", str(registry),
         "--input", str(tmp_path / "no-such-*.avro"), "--output", str(output), "--window", "60"],
        cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "metric 'app.color': field 'domain.labels' repeats the label 'red'" in proc.stderr
    assert "matches no file" not in proc.stderr
    assert not output.exists()


@pytest.mark.parametrize("epsilon", [25.0, 800.0, 1e-9, 1e-17])
def test_epsilon_outside_the_supported_range_names_the_field(epsilon):
    # Above 20, local hashing's range g ~ e^ε leaves 32 bits and exp() overflows by 710; below
    # 1e-6, p* - q* vanishes in floating point. Both stop the job at load, naming the field.
    for protocol in ("grr", "olh", "auto"):
        document = {"metrics": [{"name": "m", "protocol": protocol, "epsilon": epsilon,
                                 "domain": {"size": 10}}]}
        with pytest.raises(RegistryError, match=r"metric 'm': field 'epsilon' must lie in"):
            parse_registry(document)
