"""Whether a file's writer schema holds reports: checked once per schema, on the header's JSON.

The check runs on the JSON of the header before fastavro sees it: any JSON value is accepted
as input (a hostile header can hold anything). A schema that holds reports is then handed to
fastavro only in its canonical form (`WriterSchema.canonical`): the types, names, logical types
and the writer's field and branch order, nothing else, so that no other key of a header (a
namespace, alias, default or doc of an unexpected type) ever reaches fastavro's parser.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from typing import Any

from ldp_telemetry.schemas import NAMESPACE, SCHEMA_DIR

_PRIMITIVES = ("null", "boolean", "int", "long", "float", "double", "bytes", "string")
_MAX_DEPTH = 8  # the report schema nests 4 deep (record, union, record, array)
_TOP_LEVEL_NAME = f"{NAMESPACE}.Report"
#: The report's configuration fingerprint: optional in a writer schema.
FINGERPRINT = "fingerprint"
_FINGERPRINT_SHAPES = (("null", "bytes"), ("bytes", "null"), "bytes")


@dataclass(frozen=True)
class WriterSchema:
    """The verdict on a writer schema: why it does not hold reports (`problem`), or, when it
    does, the canonical schema to decode its records with."""

    problem: str | None
    canonical: dict | None = None


def check_writer_schema(schema: Any) -> WriterSchema:
    """Check a writer schema (parsed JSON, any value) against the report schema.

    It must be a record with exactly the fields of the report schema, in any order:
    report_id (long), metric (string), event_time (long, timestamp-millis), payload, a union
    of payload records of the report schema (all of them or some, each once, in any order),
    each by its full name and with the same fields, and fingerprint (a union of null and bytes,
    in either order, or bytes), which files written before it existed do not have. Decoding
    each record against a reader schema instead would halve the decode rate.
    """
    expected = _report_shapes()
    if not isinstance(schema, dict) or schema.get("type") != "record":
        return WriterSchema("not a record")
    canonical = _canonical(schema, "", 0)
    if canonical is None:
        return WriterSchema("it is not a well-formed Avro schema of records, unions, arrays and "
                            "primitive types")
    types = {field["name"]: field["type"] for field in canonical["fields"]}
    if types.keys() - {FINGERPRINT} != expected.keys() - {FINGERPRINT}:
        return WriterSchema(f"fields {_clip(sorted(types))}, expected {sorted(expected)} "
                            f"({FINGERPRINT!r} may be absent)")
    if FINGERPRINT in types and _shape(types[FINGERPRINT]) not in _FINGERPRINT_SHAPES:
        return WriterSchema(f"field {FINGERPRINT!r} is {_clip(types[FINGERPRINT])}, expected "
                            '["null", "bytes"]')
    for name in ("report_id", "metric", "event_time"):
        if _shape(types[name]) != expected[name]:
            return WriterSchema(f"field {name!r} is {_clip(types[name])}, expected "
                                f"{expected[name]}")
    if not isinstance(types["payload"], list):
        return WriterSchema("field 'payload' is not a union of payload records")
    seen = set()
    for branch in types["payload"]:
        branch_name = branch.get("name") if isinstance(branch, dict) else branch
        if _shape(branch) not in expected["payload"]:
            return WriterSchema(f"payload branch {_clip(branch_name)} is not a payload record of "
                                f"the report schema")
        if branch_name in seen:
            return WriterSchema(f"payload branch {_clip(branch_name)} appears twice")
        seen.add(branch_name)
    return WriterSchema(None, {**canonical, "name": _TOP_LEVEL_NAME})


@cache
def _report_shapes() -> dict:
    with open(SCHEMA_DIR / "report.avsc", encoding="utf-8") as handle:
        canonical = _canonical(json.load(handle), "", 0)
    shapes = {field["name"]: _shape(field["type"]) for field in canonical["fields"]}
    shapes["payload"] = frozenset(shapes["payload"])
    return shapes


def _canonical(schema: Any, namespace: str, depth: int) -> Any:
    """The schema with only what decoding depends on, names made full; None for anything the
    report schema cannot contain (named references, maps, enums, fixed, deeper nesting)."""
    if depth > _MAX_DEPTH:
        return None
    if isinstance(schema, str):
        return schema if schema in _PRIMITIVES else None
    if isinstance(schema, list):
        branches = [_canonical(branch, namespace, depth + 1) for branch in schema]
        return None if any(branch is None for branch in branches) else branches
    if not isinstance(schema, dict):
        return None
    kind = schema.get("type")
    if kind == "record":
        name, inner = _full_name(schema, namespace)
        fields = schema.get("fields")
        if name is None or not isinstance(fields, list):
            return None
        canonical_fields = []
        for field in fields:
            if not isinstance(field, dict) or not isinstance(field.get("name"), str):
                return None
            field_type = _canonical(field.get("type"), inner, depth + 1)
            if field_type is None:
                return None
            canonical_fields.append({"name": field["name"], "type": field_type})
        if len({field["name"] for field in canonical_fields}) != len(canonical_fields):
            return None
        return {"type": "record", "name": name, "fields": canonical_fields}
    if kind == "array":
        items = _canonical(schema.get("items"), namespace, depth + 1)
        return None if items is None else {"type": "array", "items": items}
    if kind in _PRIMITIVES:
        logical = schema.get("logicalType")
        if logical is None:
            return kind
        return {"type": kind, "logicalType": logical} if isinstance(logical, str) else None
    return None


def _full_name(named: dict, enclosing: str) -> tuple[str | None, str]:
    """(full name, namespace for what it encloses) of a named type (Avro spec: Names)."""
    name, namespace = named.get("name"), named.get("namespace", enclosing)
    if not isinstance(name, str) or not name or not isinstance(namespace, str):
        return None, enclosing
    if "." in name:
        return name, name.rsplit(".", 1)[0]
    return (f"{namespace}.{name}" if namespace else name), namespace


def _shape(canonical: Any) -> Any:
    """A canonical schema as a hashable value, record fields in name order."""
    if isinstance(canonical, str):
        return canonical
    if isinstance(canonical, list):
        return tuple(_shape(branch) for branch in canonical)
    if canonical["type"] == "record":
        return ("record", canonical["name"], tuple(sorted(
            (field["name"], _shape(field["type"])) for field in canonical["fields"])))
    if canonical["type"] == "array":
        return ("array", _shape(canonical["items"]))
    return f"{canonical['type']} ({canonical['logicalType']})"


def _clip(value: Any, limit: int = 200) -> str:
    text = json.dumps(value)
    return text if len(text) <= limit else text[:limit] + "…"


#: Full Avro name of the report envelope record (schemas/envelope.avsc).
ENVELOPE_RECORD = f"{NAMESPACE}.ReportEnvelope"


def names_envelope(schema: Any) -> bool:
    """Whether a writer schema (parsed JSON, any value) names the envelope record: its file is
    then checked with `check_envelope_schema`, never as a file of single reports."""
    return (isinstance(schema, dict) and schema.get("type") == "record"
            and _full_name(schema, "")[0] == ENVELOPE_RECORD)


def check_envelope_schema(schema: Any) -> WriterSchema:
    """Check a writer schema against the envelope schema: the same fields (in any order), each
    of the same type; `fingerprint` a union of null and bytes in either order, or bytes."""
    canonical = _canonical(schema, "", 0) if isinstance(schema, dict) else None
    if canonical is None or canonical.get("type") != "record":
        return WriterSchema("it is not a well-formed Avro record schema")
    expected = _envelope_shapes()
    types = {field["name"]: field["type"] for field in canonical["fields"]}
    if types.keys() != expected.keys():
        return WriterSchema(f"fields {_clip(sorted(types))}, expected {sorted(expected)}")
    for name, shape in expected.items():
        allowed = _FINGERPRINT_SHAPES if name == FINGERPRINT else (shape,)
        if _shape(types[name]) not in allowed:
            return WriterSchema(f"field {name!r} is {_clip(types[name])}, expected "
                                f"{_clip(shape)}")
    return WriterSchema(None, {**canonical, "name": ENVELOPE_RECORD})


@cache
def _envelope_shapes() -> dict:
    with open(SCHEMA_DIR / "envelope.avsc", encoding="utf-8") as handle:
        canonical = _canonical(json.load(handle), "", 0)
    return {field["name"]: _shape(field["type"]) for field in canonical["fields"]}


def without_logical_types(canonical: Any) -> Any:
    """A canonical schema with each logical type replaced by its underlying type.

    The decoder wants event times as the epoch milliseconds they are encoded as: decoding
    `timestamp-millis` as a plain long spares fastavro a Python call per report (measured:
    decoding ~18% faster than through an identity logical reader).
    """
    if isinstance(canonical, list):
        return [without_logical_types(branch) for branch in canonical]
    if not isinstance(canonical, dict):
        return canonical
    if "logicalType" in canonical:
        return canonical["type"]
    if canonical["type"] == "record":
        return {**canonical, "fields": [{"name": field["name"],
                                         "type": without_logical_types(field["type"])}
                                        for field in canonical["fields"]]}
    if canonical["type"] == "array":
        return {**canonical, "items": without_logical_types(canonical["items"])}
    return canonical
