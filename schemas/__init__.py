"""Avro schemas of the project and the codec between Avro files and numpy batches."""
from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

import fastavro

if TYPE_CHECKING:
    from ldp_telemetry.ldp.protocols.base import FrequencyOracle
    from ldp_telemetry.ldp.protocols.numeric import NumericProtocol

SCHEMA_DIR = Path(__file__).resolve().parent
NAMESPACE = "ldp.telemetry"


def report_schema_json(payload_record: str | None = None) -> dict:
    """The report schema as JSON; with `payload_record`, its payload union cut to that branch.

    Several protocols share a payload shape (OUE/SUE/RUE bits; OLH/BLH/RLH/RWS seed and y).
    Libraries that pick a union branch by the record's name (fastavro's tuple notation, Java)
    write the full schema; libraries that pick the branch by shape alone (Python's reference
    `avro`) must write with the schema cut to their protocol's branch. Avro files carry their
    writer schema, so the pipeline reads both.
    """
    with open(SCHEMA_DIR / "report.avsc", encoding="utf-8") as handle:
        schema: dict = json.load(handle)
    if payload_record is not None:
        payload = next(f for f in schema["fields"] if f["name"] == "payload")
        branches = [b for b in payload["type"] if b["name"] == payload_record]
        if not branches:
            raise ValueError(f"no payload record named {payload_record!r}")
        payload["type"] = branches
    return schema


def payload_branch(protocol: FrequencyOracle | NumericProtocol | type[FrequencyOracle]
                   | type[NumericProtocol]) -> str:
    """Full Avro name of the protocol's payload record (its branch of the report's union)."""
    return f"{NAMESPACE}.{protocol.payload_record}"


@cache
def load_schema(name: str) -> dict:
    """The parsed fastavro schema of `<name>.avsc` (report, window_estimate, dead_letter)."""
    with open(SCHEMA_DIR / f"{name}.avsc", encoding="utf-8") as handle:
        parsed = fastavro.parse_schema(json.load(handle))
    assert isinstance(parsed, dict), f"{name}.avsc is not a record schema"
    return parsed
