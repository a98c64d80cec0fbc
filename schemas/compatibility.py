"""Whether a file's writer schema holds reports: checked once per file, on the schema's JSON.

The check runs on the JSON text of the header, before fastavro parses it: any JSON value is
accepted as input (a hostile header can hold anything), and only a schema shaped like the report
schema is ever handed to fastavro.
"""
from __future__ import annotations

import json
from functools import lru_cache

from ldp_telemetry.schemas import SCHEMA_DIR

_PRIMITIVES = ("null", "boolean", "int", "long", "float", "double", "bytes", "string")
_MAX_DEPTH = 8  # the report schema nests 4 deep (record, union, record, array)


def schema_problem(schema) -> str | None:
    """Why a writer schema (parsed JSON) does not hold reports; None if it does.

    It must be a record with exactly the fields of the report schema: report_id (long), metric
    (string), event_time (long, timestamp-millis) and payload, a union of payload records of the
    report schema (all of them or some, in any order), each by its full name and with the same
    fields. Decoding each record against a reader schema instead would halve the decode rate.
    """
    expected = _report_shapes()
    if not isinstance(schema, dict) or schema.get("type") != "record":
        return "not a record"
    fields = _fields(schema)
    if fields is None:
        return "its fields are not a list of named fields"
    namespace = _namespace(schema, "")
    types = {name: field.get("type") for name, field in fields.items()}
    if types.keys() != expected.keys():
        return f"fields {sorted(types)}, expected {sorted(expected)}"
    for name in ("report_id", "metric", "event_time"):
        if _shape(types[name], namespace) != expected[name]:
            return f"field {name!r} is {_clip(json.dumps(types[name]))}, expected {expected[name]}"
    if not isinstance(types["payload"], list):
        return "field 'payload' is not a union of payload records"
    for branch in types["payload"]:
        if _shape(branch, namespace) not in expected["payload"]:
            name = branch.get("name") if isinstance(branch, dict) else branch
            return (f"payload branch {_clip(json.dumps(name))} is not a payload record of the "
                    f"report schema")
    return None


@lru_cache(maxsize=None)
def _report_shapes() -> dict:
    with open(SCHEMA_DIR / "report.avsc", encoding="utf-8") as handle:
        schema = json.load(handle)
    namespace = _namespace(schema, "")
    shapes = {name: _shape(field["type"], namespace) for name, field in _fields(schema).items()}
    shapes["payload"] = frozenset(shapes["payload"])
    return shapes


def _fields(record: dict) -> dict | None:
    fields = record.get("fields")
    if not isinstance(fields, list) or not all(
            isinstance(f, dict) and isinstance(f.get("name"), str) for f in fields):
        return None
    named = {field["name"]: field for field in fields}
    return named if len(named) == len(fields) else None


def _namespace(named: dict, enclosing: str) -> str:
    """The namespace a named type defines for what it encloses (Avro spec: Names)."""
    name = named.get("name")
    if isinstance(name, str) and "." in name:
        return name.rsplit(".", 1)[0]
    namespace = named.get("namespace", enclosing)
    return namespace if isinstance(namespace, str) else enclosing


def _full_name(named: dict, enclosing: str) -> str | None:
    name = named.get("name")
    if not isinstance(name, str):
        return None
    if "." in name:
        return name
    namespace = _namespace(named, enclosing)
    return f"{namespace}.{name}" if namespace else name


def _shape(schema, namespace: str, depth: int = 0):
    """What decoding depends on in a schema's JSON: types, logical types, record names, fields.

    None for anything the report schema cannot contain (including nesting deeper than it).
    """
    if depth > _MAX_DEPTH:
        return None
    if isinstance(schema, str):
        return schema
    if isinstance(schema, list):
        return tuple(_shape(branch, namespace, depth + 1) for branch in schema)
    if not isinstance(schema, dict):
        return None
    kind = schema.get("type")
    if kind == "record":
        fields, name = _fields(schema), _full_name(schema, namespace)
        if fields is None or name is None:
            return None
        inner = _namespace(schema, namespace)
        return ("record", name, tuple(sorted(
            ((field_name, _shape(field.get("type"), inner, depth + 1))
             for field_name, field in fields.items()), key=lambda pair: pair[0])))
    if kind == "array":
        return ("array", _shape(schema.get("items"), namespace, depth + 1))
    if kind in _PRIMITIVES:
        logical = schema.get("logicalType")
        if logical is None:
            return kind
        return f"{kind} ({logical})" if isinstance(logical, str) else None
    return None


def _clip(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[:limit] + "…"
