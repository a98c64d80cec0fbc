"""Avro schemas of the project and the codec between Avro files and numpy batches."""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import fastavro

SCHEMA_DIR = Path(__file__).resolve().parent
NAMESPACE = "ldp.telemetry"


@lru_cache(maxsize=None)
def load_schema(name: str) -> dict:
    """The parsed fastavro schema of `<name>.avsc` (report, window_estimate, dead_letter)."""
    with open(SCHEMA_DIR / f"{name}.avsc", encoding="utf-8") as handle:
        return fastavro.parse_schema(json.load(handle))
