"""The published JSON Schema of the registry file (schemas/registry.schema.json, draft 2020-12).

It accepts every registry in the repository (the demo's, the docs' examples, the tests' and the
client vectors') and rejects the malformed registries of the registry tests, except those whose
fault a JSON Schema cannot express (the loader stays the authority and rejects them too).
"""
from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from ldp_telemetry.client.vectors import registry_document
from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.ldp.estimation.estimators import METHODS as ESTIMATORS
from ldp_telemetry.ldp.estimation.postprocess import METHODS as POSTPROCESSORS
from ldp_telemetry.ldp.protocols import NUMERIC_PROTOCOLS, PROTOCOLS, STRING_PROTOCOLS
from ldp_telemetry.schemas import SCHEMA_DIR
from tests.ldp.test_numeric_registry import CONTRACT
from tests.ldp.test_registry import BAD, VALID

REPO = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((SCHEMA_DIR / "registry.schema.json").read_text(encoding="utf-8"))
VALIDATOR = Draft202012Validator(SCHEMA)
#: Malformed registries the schema cannot reject, and why: JSON does not tell 10.0 from 10 (the
#: loader does, as Python's json reads them), and a JSON Schema cannot ask one field to be unique
#: across the items of an array.
BEYOND_A_SCHEMA = {"size float", "duplicate metric name"}
FENCE = re.compile(r"```json\n(.*?)```", re.DOTALL)


def documentation_registries() -> list[tuple[str, dict]]:
    found = []
    for page in sorted([REPO / "README.md", *(REPO / "docs").glob("*.md")]):
        for number, block in enumerate(FENCE.findall(page.read_text(encoding="utf-8"))):
            try:
                document = json.loads(block)
            except json.JSONDecodeError:
                continue
            if isinstance(document, dict) and "metrics" in document:
                found.append((f"{page.name}#{number}", document))
    return found


def repository_registries() -> list[tuple[str, dict]]:
    return [("demo/registry.json", json.loads((REPO / "demo" / "registry.json").read_text())),
            *documentation_registries(),
            ("tests/ldp/test_registry.py VALID", VALID),
            ("tests/ldp/test_numeric_registry.py CONTRACT", {"metrics": [CONTRACT]}),
            ("client vectors", registry_document())]


def test_the_schema_is_a_valid_draft_2020_12_schema():
    Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"


def test_every_registry_in_the_repository_is_accepted():
    registries = repository_registries()
    assert sum(".md#" in name for name, _ in registries) >= 3
    for name, document in registries:
        errors = [error.message for error in VALIDATOR.iter_errors(document)]
        assert errors == [], name
        if "…" not in json.dumps(document, ensure_ascii=False):  # docs abbreviate label lists
            parse_registry(document)


@pytest.mark.parametrize("case", sorted(set(BAD) - BEYOND_A_SCHEMA))
def test_the_malformed_registries_of_the_registry_tests_are_rejected(case):
    document = json.loads(json.dumps(BAD[case][0], allow_nan=True))
    assert not VALIDATOR.is_valid(document)


@pytest.mark.parametrize("case", sorted(BEYOND_A_SCHEMA))
def test_what_the_schema_cannot_say_the_loader_rejects(case):
    document = BAD[case][0]
    assert VALIDATOR.is_valid(document)
    with pytest.raises(ValueError):
        parse_registry(document)


@pytest.mark.parametrize("document", [[], {}, {"metrics": {}}, {"metrics": []}])
def test_malformed_top_levels_are_rejected(document):
    assert not VALIDATOR.is_valid(document)


HISTORY = {"metrics": [{
    "name": "m", "version": 3, "protocol": "oue", "epsilon": 2.0,
    "domain": {"labels": ["a", "b", "c"]},
    "history": [{"version": 1, "protocol": "grr", "epsilon": 1.0,
                 "domain": {"labels": ["a", "b"]}},
                {"version": 2, "protocol": "oue", "epsilon": 1.0,
                 "domain": {"labels": ["a", "b", "c"]}}]}]}


def history_with(**changes) -> dict:
    document = copy.deepcopy(HISTORY)
    document["metrics"][0]["history"][0].update(changes)
    return document


def test_versions_and_history_are_part_of_the_shape():
    assert VALIDATOR.is_valid(HISTORY)
    parse_registry(HISTORY)
    for bad in (history_with(version=0), history_with(name="other"), history_with(colour=1)):
        assert not VALIDATOR.is_valid(bad)
        with pytest.raises(ValueError):
            parse_registry(bad)
    without_version = copy.deepcopy(HISTORY)
    del without_version["metrics"][0]["history"][0]["version"]
    assert not VALIDATOR.is_valid(without_version)


def test_the_schema_names_every_protocol_estimator_and_post_processing():
    definitions = SCHEMA["$defs"]
    assert definitions["protocol"]["enum"] == [*PROTOCOLS, *NUMERIC_PROTOCOLS, *STRING_PROTOCOLS,
                                               "auto"]
    assert definitions["estimator"]["oneOf"][0]["enum"] == list(ESTIMATORS)
    assert definitions["postprocess"]["oneOf"][0]["enum"] == [*POSTPROCESSORS,
                                                             *POSTPROCESSORS.aliases]


def test_the_schema_takes_memoize_g_and_ibu_as_the_registry_does():
    def entry(**memoize):
        return {"metrics": [{"name": "m", "protocol": "olh", "epsilon": 1.0,
                             "domain": {"size": 16}, "postprocess": "ibu",
                             "memoize": {"lifetime_epsilon": 4.0, **memoize}}]}
    for g in ("report", "loloha"):
        assert VALIDATOR.is_valid(entry(g=g))
        parse_registry(entry(g=g))
    assert not VALIDATOR.is_valid(entry(g="best"))
