"""Writing records: batches to the sinks give the same JSON lines and Avro records; large
records in JSON pieces; compact records (numpy arrays and lazy labels) written to JSON and Avro
exactly as their plain form; the store sink's bound; the shard writer's files, byte for byte,
its temporary files, retried bundles and finalize steps."""
from __future__ import annotations

import glob
import io
import json
import os
from pathlib import Path

import apache_beam as beam
import fastavro
import numpy as np
import pytest

from ldp_telemetry.ldp.base.times import ms_from_iso
from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.ldp.engine.finalize import finalize_window
from ldp_telemetry.output.compact import IndexLabels, avro_values, plain_record
from ldp_telemetry.output.estimate import EstimateRecord
from ldp_telemetry.output.reader import read_estimate_file, read_estimates
from ldp_telemetry.output.records import BATCH_PANE, window_estimate_record
from ldp_telemetry.schemas import load_schema
from ldp_telemetry.transforms import write
from ldp_telemetry.transforms.shard_files import finalize_shards, temp_dir
from ldp_telemetry.transforms.store import STORE_FLUSH_VALUES, WritePanesToStoreFn
from ldp_telemetry.transforms.write import (SUFFIXES, BatchRecordsFn, FinalizeShardsFn,
                                            WriteBundleShardFn, WriteRecords, json_line_pieces,
                                            record_weight)


def test_json_pieces_are_exactly_json_dumps_for_any_piece_size():
    rng = np.random.default_rng(3)
    record = {"b": [float(x) for x in rng.normal(size=37)], "a": {"z": 1, "y": [None, "é"]},
              "labels": [f"v{i}\n\"" for i in range(37)], "empty": [], "n": 5, "x": None,
              "nan": [float("nan"), float("inf"), -0.0, 1e-320]}
    expected = json.dumps(record, sort_keys=True) + "\n"
    for piece_items in (1, 2, 5, 36, 37, 1000):
        assert "".join(json_line_pieces(record, piece_items)) == expected


def big_record(d: int) -> EstimateRecord:
    config = parse_registry({"metrics": [{"name": "m", "protocol": "oue", "epsilon": 2.0,
                                          "domain": {"size": d}}]})["m"]
    statistic = config.protocol.new_statistic()
    rng = np.random.default_rng(5)
    config.protocol.accumulate(statistic, config.protocol.perturb(rng.integers(0, d, 50), rng))
    result = finalize_window(config, statistic, 50)
    return window_estimate_record(config, result, ms_from_iso("2024-03-01T00:00:00Z"),
                                  ms_from_iso("2024-03-02T00:00:00Z"), BATCH_PANE)


def test_a_compact_record_is_written_as_its_plain_form_to_json_and_avro():
    d = 40_000  # more than one piece (16,384 items) per array
    record = big_record(d)
    compact, plain = record.layout(), record.json_value()
    assert isinstance(compact["estimate"], np.ndarray) and compact["labels"] == IndexLabels(d)
    assert plain_record(compact) == plain and plain["labels"][:3] == ["0", "1", "2"]
    assert "".join(json_line_pieces(compact)) == json.dumps(plain, sort_keys=True) + "\n" \
        == record.to_json() + "\n"
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

    def write_panes(self, records, run=0):
        self.calls.append(len(records))


def test_the_store_sink_writes_before_a_bundle_of_large_windows_is_held_whole():
    sink = WritePanesToStoreFn("sqlite:///unused.db")
    sink._store = RecordingStore()
    sink.start_bundle()
    per_record = STORE_FLUSH_VALUES // 4
    for _ in range(10):
        sink.process(EstimateRecord(metric="m", start_ms=0, end_ms=1000, n=0, protocol="oue",
                                    epsilon=1.0, estimate=np.zeros(per_record)))
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


def expected_files(records: list, schema: str, sync_marker: bytes) -> tuple[bytes, bytes]:
    """The contract of one shard, built here without the writer: JSON lines of the plain
    records (sorted keys, UTF-8), and fastavro's deflate container with the same sync marker
    (fastavro picks a random one per file). A window estimate as the fields it writes."""
    records = [r.layout() if isinstance(r, EstimateRecord) else r for r in records]
    text = "".join(json.dumps(plain_record(r), sort_keys=True) + "\n" for r in records)
    buffer = io.BytesIO()
    fastavro.writer(buffer, load_schema(schema), [avro_values(r) for r in records],
                    codec="deflate", sync_marker=sync_marker)
    return text.encode("utf-8"), buffer.getvalue()


@pytest.mark.parametrize("name, schema, num_shards", [("estimates", "window_estimate", 0),
                                                      ("dead_letters", "dead_letter", 1)])
@pytest.mark.parametrize("count", [0, 3])
def test_the_files_are_byte_for_byte_the_contract(tmp_path, name, schema, num_shards, count):
    """The same bytes as Beam's text and Avro sinks wrote before (checked once against them):
    a large compact estimate in pieces, small plain records, and the empty shard of no record
    (an empty file and a bare Avro header)."""
    records = ([big_record(40_000), big_record(7), big_record(50)]
               if name == "estimates" else [letter(i, "r" * i) for i in range(3)])[:count]
    with beam.Pipeline() as pipeline:
        (pipeline | beam.Create(records, reshuffle=False)
         | WriteRecords(str(tmp_path), name, schema, num_shards=num_shards))
    text = (tmp_path / f"{name}-00000-of-00001.jsonl").read_bytes()
    avro = (tmp_path / f"{name}-00000-of-00001.avro").read_bytes()
    assert (text, avro) == expected_files(records, schema, sync_marker=avro[-16:])
    if name == "estimates":  # and the output's reader reads them back
        assert len(read_estimates(str(tmp_path))) == count


def bundle(fn: WriteBundleShardFn, records: list[dict], finish: bool = True) -> list:
    """Run one bundle of `fn`; the (key, stem) it emits (none when the bundle fails first)."""
    fn.start_bundle()
    for record in records:
        fn.process(record)
    return [wv.value for wv in fn.finish_bundle()] if finish else []


def test_a_bundle_writes_its_shard_as_records_arrive(tmp_path):
    folder = temp_dir(str(tmp_path), "estimates")
    fn = WriteBundleShardFn(folder, load_schema("window_estimate"))
    fn.start_bundle()
    fn.process(big_record(40_000))  # ~2 MB of JSON: past any buffer
    (path,) = glob.glob(f"{folder}/*.jsonl")
    assert (tmp_path / path).stat().st_size > 1_000_000  # on disk before the bundle ends
    assert list(fn.finish_bundle())


def test_a_retried_bundle_leaves_only_the_successful_attempt(tmp_path):
    """A bundle that fails after writing, then succeeds on a retry: only the stems emitted by
    finished bundles are renamed, each record is in the shards once, the failed attempt's
    temporary files go with the temporary folder."""
    folder = temp_dir(str(tmp_path), "dead_letters")
    fn = WriteBundleShardFn(folder, load_schema("dead_letter"))
    first, second = [letter(i) for i in range(4)], [letter(i) for i in range(4, 6)]
    assert bundle(fn, first, finish=False) == []  # the attempt fails: its output is dropped
    emitted = bundle(fn, first) + bundle(fn, second)
    assert len(glob.glob(f"{folder}/*")) == 6  # 3 attempts x 2 formats
    finalize = FinalizeShardsFn(str(tmp_path / "dead_letters"), folder, load_schema("dead_letter"))
    shards = list(finalize.process((None, [None, *(stem for _, stem in emitted)])))
    assert sorted(path.name for path in tmp_path.iterdir()) == [
        f"dead_letters-0000{i}-of-00002{suffix}" for i in range(2) for suffix in sorted(SUFFIXES)]
    assert sorted(shards) == sorted(str(p) for p in tmp_path.iterdir())
    lines = [line for path in sorted(tmp_path.glob("*.jsonl"))
             for line in path.read_text().splitlines()]
    assert sorted(lines) == sorted(json.dumps(r, sort_keys=True) for r in first + second)
    # A retried finalize finds the shards in place and changes nothing.
    assert list(finalize.process((None, [None, *(stem for _, stem in emitted)]))) == shards
    assert sorted(lines) == sorted(line for path in sorted(tmp_path.glob("*.jsonl"))
                                   for line in path.read_text().splitlines())


def test_finalize_replaces_shards_of_every_other_count_and_keeps_other_files(tmp_path):
    prefix = str(tmp_path / "estimates")
    for count in (1, 2, 3, 100_000):
        for suffix in SUFFIXES:
            for index in range(min(count, 3)):
                (tmp_path / f"estimates-{index:05d}-of-{count:05d}{suffix}").write_bytes(b"old")
    kept = ["estimates-notes-of-00001.jsonl", "estimates-00000-of-00001.jsonl.bak",
            "estimated-00000-of-00001.jsonl"]
    for name in kept:
        (tmp_path / name).write_bytes(b"kept")
    folder = temp_dir(str(tmp_path), "estimates")
    fn = WriteBundleShardFn(folder, load_schema("window_estimate"))
    stems = [stem for _, stem in bundle(fn, [big_record(5)]) + bundle(fn, [])
             + bundle(fn, [big_record(6)])]
    assert len(stems) == 2  # a bundle without records writes no shard
    finalize_shards(prefix, SUFFIXES, stems, folder)
    names = sorted(path.name for path in tmp_path.iterdir())
    assert names == sorted(kept + [f"estimates-0000{i}-of-00002{suffix}"
                                   for i in range(2) for suffix in SUFFIXES])
    assert sorted(len(r.estimate) for i in range(2) for r in read_estimate_file(
        str(tmp_path / f"estimates-0000{i}-of-00002.jsonl"))) == [5, 6]


def test_a_lost_temporary_file_is_an_error_naming_it(tmp_path):
    folder = temp_dir(str(tmp_path), "dead_letters")
    with pytest.raises(OSError, match="lost") as error:
        finalize_shards(str(tmp_path / "dead_letters"), SUFFIXES,
                        [f"{folder}/missing"], folder)
    assert f"{folder}/missing.jsonl" in str(error.value)


@pytest.mark.parametrize("folder_name", ["o[1]", "a*b?c"])
def test_an_output_folder_with_glob_characters_is_refused_before_anything_runs(tmp_path,
                                                                            folder_name):
    with pytest.raises(ValueError, match="choose a folder name without"):
        WriteRecords(str(tmp_path / folder_name), "dead_letters", "dead_letter")


def test_a_doubled_slash_in_the_output_path_still_replaces_earlier_shards(tmp_path):
    """Files are found by listing the folder and comparing names, not by matching paths that
    Beam normalises: `OUT//` still gets an earlier run's shards of another count deleted."""
    output = str(tmp_path / "plain") + "//"
    os.makedirs(output, exist_ok=True)
    for suffix in SUFFIXES:
        for index in range(3):
            (Path(output) / f"dead_letters-{index:05d}-of-00003{suffix}").write_bytes(b"earlier")
    records = [letter(i, None) for i in range(4)]
    with beam.Pipeline() as pipeline:
        (pipeline | beam.Create(records, reshuffle=False)
         | WriteRecords(output, "dead_letters", "dead_letter", num_shards=1))
    assert sorted(os.listdir(output)) == [f"dead_letters-00000-of-00001{suffix}"
                                          for suffix in sorted(SUFFIXES)]
    with open(os.path.join(output, "dead_letters-00000-of-00001.jsonl"), encoding="utf-8") as f:
        assert f.read().splitlines() == [json.dumps(r, sort_keys=True) for r in records]
