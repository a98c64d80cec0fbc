"""The example records of docs/output-format.md are records the package writes: each example
has the fields of the record of its kind that the job writes today, and every field a written
record has is in the page's field tables.

The written records are `tests/output/golden/`, which `test_estimate_golden.py` checks against
what the installed package's job writes (field for field), so a field added to (or dropped from) the
record fails here until the page's example and table follow. The examples' values are cut with
"…" and are not compared; the page is located relative to this file (the checkout's docs).
"""
from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
OUTPUT_FORMAT = REPO_ROOT / "docs" / "output-format.md"
GOLDEN = Path(__file__).parent / "output" / "golden" / "estimates.jsonl.gz"
SECTION = "## The window-estimate record"
JSON_BLOCK = re.compile(r"^```json\n(.*?)^```", re.S | re.M)
TABLE_ROW = re.compile(r"^\| (`[^|]*`) \|", re.M)

#: doc example's protocol -> a golden metric whose record is of the same kind (a configuration
#: version's frequency estimate with integrity on; a Square Wave record with EMS).
SAME_KIND = {"rws": "g.labels", "sw": "s.num"}


def section() -> str:
    text = OUTPUT_FORMAT.read_text(encoding="utf-8")
    start = text.index(SECTION)
    end = text.index("\n## ", start + len(SECTION))
    return text[start:end]


def examples() -> list[dict]:
    return [json.loads(block) for block in JSON_BLOCK.findall(section())]


def golden_records() -> list[dict]:
    with gzip.open(GOLDEN, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def documented_fields() -> set[str]:
    """Every field named in the first column of the section's tables."""
    return {name for cell in TABLE_ROW.findall(section()) for name in re.findall(r"`(\w+)`", cell)}


def test_the_examples_are_found():
    assert sorted(example["protocol"] for example in examples()) == sorted(SAME_KIND)


@pytest.mark.parametrize("example", examples(), ids=lambda example: example["protocol"])
def test_an_example_record_has_the_fields_a_written_record_of_its_kind_has(example):
    metric = SAME_KIND[example["protocol"]]
    written = next(record for record in golden_records() if record["metric"] == metric)
    assert sorted(example) == sorted(written)
    assert example["band_method"] == written["band_method"]


def test_every_field_of_a_written_record_is_in_the_tables():
    fields = {key for record in golden_records() for key in record}
    assert fields - documented_fields() == set()
