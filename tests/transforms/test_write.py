"""Writing records: batches to the sinks give the same JSON lines and Avro records; large
records in JSON pieces; compact records (numpy arrays and lazy labels) written to JSON and Avro
exactly as their plain form; the store sink's bound."""
from __future__ import annotations

import glob
import io
import json

import apache_beam as beam
import fastavro
import numpy as np
import pytest

from ldp_telemetry.ldp.finalize import finalize_window
from ldp_telemetry.ldp.registry import parse_registry
from ldp_telemetry.schemas import load_schema
from ldp_telemetry.output.compact import IndexLabels, avro_values, plain_record
from ldp_telemetry.output.records import BATCH_PANE, window_estimate_record
from ldp_telemetry.transforms.store import STORE_FLUSH_VALUES, WritePanesToStoreFn
from ldp_telemetry.transforms import write
from ldp_telemetry.transforms.write import (BatchRecordsFn, WriteRecords, json_line_pieces,
                                           record_weight)


def test_json_pieces_are_exactly_json_dumps_for_any_piece_size():
    rng = np.random.default_rng(3)
    record = {"b": [float(x) for x in rng.normal(size=37)], "a": {"z": 1, "y": [None, "é"]},
              "labels": [f"v{i}\n\"" for i in range(37)], "empty": [], "n": 5, "x": None,
              "nan": [float("nan"), float("inf"), -0.0, 1e-320]}
    expected = json.dumps(record, sort_keys=True) + "\n"
    for piece_items in (1, 2, 5, 36, 37, 1000):
        assert "".join(json_line_pieces(record, piece_items)) == expected


def big_record(d: int, compact: bool) -> dict:
    config = parse_registry({"metrics": [{"name": "m", "protocol": "oue", "epsilon": 2.0,
                                          "domain": {"size": d}}]})["m"]
    statistic = config.protocol.new_statistic()
    rng = np.random.default_rng(5)
    config.protocol.accumulate(statistic, config.protocol.perturb(rng.integers(0, d, 50), rng))
    result = finalize_window(config, statistic, 50)
    return window_estimate_record(config, result, "a", "b", dict(BATCH_PANE), compact)


def test_a_compact_record_is_written_as_its_plain_form_to_json_and_avro():
    d = 40_000  # more than one piece (16,384 items) per array
    compact, plain = big_record(d, True), big_record(d, False)
    assert isinstance(compact["estimate"], np.ndarray) and compact["labels"] == IndexLabels(d)
    assert plain_record(compact) == plain and plain["labels"][:3] == ["0", "1", "2"]
    assert "".join(json_line_pieces(compact)) == json.dumps(plain, sort_keys=True) + "\n"
    schema = fastavro.parse_schema(load_schema("window_estimate"))
    written = {}
    for name, record in (("compact", avro_values(compact)), ("plain", plain)):
        buffer = io.BytesIO()
        fastavro.writer(buffer, schema, [record], codec="null", sync_marker=b"0" * 16)
        written[name] = buffer.getvalue()
    assert written["compact"] == written["plain"]


def test_index_labels_behave_as_the_list_of_indices():
    labels = IndexLabels(12)
    assert list(labels) == [str(v) for v in range(12)] == labels[:]
    assert labels[3] == "3" and labels[-1] == "11" and labels[2:5] == ["2", "3", "4"]
    assert len(labels) == 12 and labels != IndexLabels(11)


class RecordingStore:
    def __init__(self):
        self.calls = []

    def write_panes(self, records):
        self.calls.append(len(records))


def test_the_store_sink_writes_before_a_bundle_of_large_windows_is_held_whole():
    sink = WritePanesToStoreFn("sqlite:///unused.db")
    sink._store = RecordingStore()
    sink.start_bundle()
    per_record = STORE_FLUSH_VALUES // 4
    for _ in range(10):
        sink.process({"estimate": [0.0] * per_record})
    sink.finish_bundle()
    # Written every 4 records (the bound), then the bundle's last 2.
    assert sink._store.calls == [4, 4, 2]


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


def test_a_small_record_is_one_piece_of_json_dumps_text():
    for record in (letter(1), {"b": float("nan"), "a": [1.5, None], "c": {"z": 1, "y": "ü"}}):
        assert list(json_line_pieces(record)) == [json.dumps(record, sort_keys=True) + "\n"]


@pytest.mark.parametrize("num_shards", [0, 1])
@pytest.mark.parametrize("count", [0, 1, 2_500])
def test_files_hold_every_record_once_in_both_formats(tmp_path, count, num_shards):
    records = [letter(i, None if i % 3 else "r" * i) for i in range(count)]
    with beam.Pipeline() as pipeline:
        (pipeline | beam.Create(records, reshuffle=False)
         | WriteRecords(str(tmp_path), "dead_letters", "dead_letter", num_shards=num_shards))
    lines, avro_records = [], []
    for path in sorted(glob.glob(str(tmp_path / "dead_letters-*.jsonl"))):
        with open(path, encoding="utf-8") as handle:
            lines += handle.read().splitlines()
    for path in sorted(glob.glob(str(tmp_path / "dead_letters-*.avro"))):
        with open(path, "rb") as handle:
            avro_records += list(fastavro.reader(handle))
    if num_shards == 1:  # one file each, in the order of the records
        assert len(glob.glob(str(tmp_path / "dead_letters-*"))) == 2
    else:  # a file per bundle: the order across files is the runner's
        lines.sort(key=lambda line: json.loads(line)["records"])
        avro_records.sort(key=lambda record: record["records"])
    assert lines == [json.dumps(r, sort_keys=True) for r in records]
    assert avro_records == records


@pytest.mark.parametrize("num_shards", [0, 1])
@pytest.mark.parametrize("count", [0, 5])
def test_a_run_replaces_an_earlier_run_with_another_shard_count(tmp_path, count, num_shards):
    """A shard per bundle: the count is the runner's, so an earlier run's shards of another count
    must go, or readers of `<prefix>-*` would mix its records into this run's."""
    for suffix in (".jsonl", ".avro"):
        for index in range(3):
            (tmp_path / f"dead_letters-{index:05d}-of-00003{suffix}").write_bytes(b"earlier")
    (tmp_path / "dead_letters-notes.txt").write_bytes(b"kept")
    (tmp_path / "other-00000-of-00003.jsonl").write_bytes(b"kept")
    records = [letter(i) for i in range(count)]
    for _ in range(2):  # the second run replaces the first run's shards of its own count
        with beam.Pipeline() as pipeline:  # one bundle here: one shard (an empty one if none)
            (pipeline | beam.Create(records, reshuffle=False)
             | WriteRecords(str(tmp_path), "dead_letters", "dead_letter", num_shards=num_shards))
    assert sorted(path.name for path in tmp_path.iterdir()) == [
        "dead_letters-00000-of-00001.avro", "dead_letters-00000-of-00001.jsonl",
        "dead_letters-notes.txt", "other-00000-of-00003.jsonl"]
    lines = (tmp_path / "dead_letters-00000-of-00001.jsonl").read_text().splitlines()
    assert lines == [json.dumps(r, sort_keys=True) for r in records]
