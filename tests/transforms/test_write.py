"""WriteRecords: records batched to the sinks give the same JSON lines and Avro records."""
from __future__ import annotations

import glob
import json

import apache_beam as beam
import fastavro
import pytest

from ldp_telemetry.transforms import write
from ldp_telemetry.transforms.write import BatchRecordsFn, WriteRecords, json_lines, record_weight


def letter(i: int, report: str | None = None) -> dict:
    return {"source": f"f{i}.avro", "reason": "undecodable", "detail": "é ✓ NaN", "records": i,
            "report": report, "report_bytes": None if report is None else len(report)}


def run_batching(records, monkeypatch, max_records, max_weight):
    monkeypatch.setattr(write, "MAX_BATCH_RECORDS", max_records)
    monkeypatch.setattr(write, "MAX_BATCH_WEIGHT", max_weight)
    fn = BatchRecordsFn()
    fn.start_bundle()
    batches = [b for r in records for b in fn.process(r)]
    batches += [wv.value for wv in fn.finish_bundle()]
    return batches


def test_batches_keep_order_and_respect_both_limits(monkeypatch):
    records = [letter(i, "x" * (i % 7) * 10) for i in range(50)]
    batches = run_batching(records, monkeypatch, max_records=8, max_weight=200)
    assert [r for b in batches for r in b] == records
    for batch in batches:
        assert 1 <= len(batch) <= 8
        assert len(batch) == 1 or sum(map(record_weight, batch)) <= 200


def test_a_record_heavier_than_the_limit_is_a_batch_of_its_own(monkeypatch):
    records = [letter(0), letter(1, "y" * 500), letter(2)]
    batches = run_batching(records, monkeypatch, max_records=10, max_weight=100)
    assert batches == [[records[0]], [records[1]], [records[2]]]


def test_json_lines_are_those_of_json_dumps():
    batch = [letter(1), {"b": float("nan"), "a": [1.5, None], "c": {"z": 1, "y": "ü"}}]
    assert json_lines(batch) == "\n".join(json.dumps(r, sort_keys=True) for r in batch)


@pytest.mark.parametrize("count", [0, 1, 2_500])
def test_files_hold_every_record_once_in_both_formats(tmp_path, count):
    records = [letter(i, None if i % 3 else "r" * i) for i in range(count)]
    with beam.Pipeline() as pipeline:
        (pipeline | beam.Create(records, reshuffle=False)
         | WriteRecords(str(tmp_path), "dead_letters", "dead_letter"))
    [jsonl] = glob.glob(str(tmp_path / "dead_letters-*.jsonl"))
    [avro] = glob.glob(str(tmp_path / "dead_letters-*.avro"))
    with open(jsonl, encoding="utf-8") as handle:
        lines = handle.read().splitlines()
    assert lines == [json.dumps(r, sort_keys=True) for r in records]
    with open(avro, "rb") as handle:
        assert list(fastavro.reader(handle)) == records
