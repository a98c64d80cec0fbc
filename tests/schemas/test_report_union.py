"""The report schema's payload union is exactly the branches the protocol classes declare."""
from __future__ import annotations

import fastavro
import pytest

from ldp_telemetry.ldp.protocols import NUMERIC_PROTOCOLS, PROTOCOLS, STRING_PROTOCOLS
from ldp_telemetry.schemas import report_schema_json

#: The branch order of the first files ever written. A union branch is encoded by its index,
#: so branches are only ever appended: reordering would misread every existing file.
FIRST_BRANCHES = ["GrrPayload", "OuePayload", "OlhPayload", "SuePayload", "RuePayload",
                  "BlhPayload", "RlhPayload", "HrPayload", "SsPayload", "RwsPayload"]


def union_branches() -> list[dict]:
    payload = next(f for f in report_schema_json()["fields"] if f["name"] == "payload")
    return payload["type"]


def test_the_union_equals_the_protocols_payload_schemas():
    branches = union_branches()
    by_name = {branch["name"]: branch for branch in branches}
    assert len(by_name) == len(branches), "a record name appears twice in the union"
    # numeric protocols that report through a frequency oracle (cfo-*) reuse its payload
    owners = [cls for cls in [*PROTOCOLS.values(), *NUMERIC_PROTOCOLS.values(),
                              *STRING_PROTOCOLS.values()]
              if "payload_schema" in vars(cls)]
    declared = {cls.payload_record: cls.payload_schema for cls in owners}
    assert len(declared) == len(owners), "two protocols declare the same payload record"
    assert sorted(by_name) == sorted(declared)
    for name, schema in declared.items():
        assert by_name[name] == schema, f"schemas/report.avsc differs from {name} of its class"


def test_union_branches_are_only_appended():
    assert [b["name"] for b in union_branches()][:len(FIRST_BRANCHES)] == FIRST_BRANCHES


@pytest.mark.parametrize("name", list(PROTOCOLS))
def test_each_payload_schema_is_a_valid_avro_record(name):
    cls = PROTOCOLS[name]
    assert cls.payload_schema["type"] == "record"
    assert cls.payload_record == cls.payload_schema["name"]
    fastavro.parse_schema(cls.payload_schema)
