"""ReportDecoder: valid reports become batches, everything else a dead letter with its reason."""
from __future__ import annotations

import io
import json

import fastavro
import fastavro.read
import numpy as np
import pytest

import ldp_telemetry.schemas.decompress

from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.ldp.engine.batches import REPORT_ID, DeadLetter, ReportBatch
from ldp_telemetry.ldp.engine.reasons import Reason
from ldp_telemetry.schemas import SCHEMA_DIR, report_schema_json
from ldp_telemetry.schemas.codec import ReportDecoder, write_reports
from tests.schemas.avro_blocks import encode_long, join_container, split_container, write_blocks

REGISTRY = parse_registry({"metrics": [
    {"name": "g", "protocol": "grr", "epsilon": 1.0, "domain": {"size": 8}},
    {"name": "o", "protocol": "oue", "epsilon": 1.0, "domain": {"size": 10}},  # 2 bytes, 6 pad bits
    {"name": "h", "protocol": "olh", "epsilon": 1.0, "domain": {"size": 8}},
]})
HOUR = 3_600_000
T0 = 1_700_000_000_000 // HOUR * HOUR  # a slice boundary
GRR, OUE, OLH = (f"ldp.telemetry.{n}" for n in ("GrrPayload", "OuePayload", "OlhPayload"))


def report(rid, metric, payload, t=T0):
    return {"report_id": rid, "metric": metric, "event_time": t, "payload": payload}


def good(rid, metric, t=T0):
    """A valid report of `metric` whose payload encodes rid where it can."""
    payload = {"g": (GRR, {"value": rid % 8}),
               "o": (OUE, {"bits": bytes([rid % 256, rid % 4])}),
               "h": (OLH, {"seed": rid, "y": rid % 3})}[metric]
    return report(rid, metric, payload, t)


def decode(path, chunk_records=65_536, slice_ms=HOUR):
    decoder = ReportDecoder(REGISTRY, slice_ms, chunk_records=chunk_records)
    items = list(decoder.decode_file(str(path)))
    batches = [i for i in items if isinstance(i, ReportBatch)]
    letters = [i for i in items if isinstance(i, DeadLetter)]
    assert len(batches) + len(letters) == len(items)
    return decoder, batches, letters


def accepted(batches):
    return sum(b.n for b in batches)


def dead_lettered(letters):
    return sum(letter.records for letter in letters)


def report_ids(letters):
    return sorted(json.loads(letter.report)["report_id"] for letter in letters)


def sync_positions(data: bytes):
    marker = data[-16:]
    return [i for i in range(len(data) - 15) if data[i:i + 16] == marker]


def test_valid_reports_of_every_protocol_decode_to_their_columns(tmp_path):
    rng = np.random.default_rng(1)
    for name in ("g", "o", "h"):
        protocol = REGISTRY[name].protocol
        columns = protocol.perturb(rng.integers(0, protocol.d, 500), rng)
        path = tmp_path / f"{name}.avro"
        written = write_reports(str(path), name, protocol, np.arange(500),
                                np.full(500, T0 + 5), columns, codec="deflate")
        decoder, batches, letters = decode(path)
        assert (written, decoder.records_read, letters) == (500, 500, [])
        [batch] = batches
        assert (batch.metric, batch.slice_start_ms, batch.n) == (name, T0, 500)
        assert batch.columns.keys() == columns.keys() | {REPORT_ID}
        for key in columns:
            np.testing.assert_array_equal(batch.columns[key], columns[key])
        np.testing.assert_array_equal(batch.columns[REPORT_ID], np.arange(500))


def test_truncated_file(tmp_path):
    path = tmp_path / "r.avro"
    blocks = [[good(i, "g") for i in range(k * 100, k * 100 + 100)] for k in range(3)]
    write_blocks(path, blocks)
    data = path.read_bytes()
    path.write_bytes(data[:sync_positions(data)[2] + 30])  # block 3 cut short
    decoder, batches, letters = decode(path)
    assert accepted(batches) == 200  # the two complete blocks
    [letter] = letters
    assert letter.reason == Reason.UNDECODABLE and "unreadable from this point on" in letter.detail
    assert (letter.records, letter.report, letter.source) == (1, None, str(path))
    assert decoder.records_read == accepted(batches) + dead_lettered(letters)


def test_corrupted_block_in_the_middle_only_loses_that_block(tmp_path):
    path = tmp_path / "r.avro"
    blocks = [[good(i, m) for i in range(k * 100, k * 100 + 100) for m in ("g", "h")]
              for k in range(3)]
    written = write_blocks(path, blocks)
    data = bytearray(path.read_bytes())
    start = sync_positions(bytes(data))[1] + 16  # first byte of block 2
    data[start + 8:start + 200] = b"\xff" * 192   # its records; count, size and sync intact
    path.write_bytes(bytes(data))
    decoder, batches, letters = decode(path)
    [letter] = letters
    assert letter.reason == Reason.UNDECODABLE and letter.records == 200
    assert "block of 200 records failed to decode" in letter.detail
    # Blocks 1 and 3 decode: their GRR values are the report ids mod 8, in order.
    grr = np.concatenate([b.columns["value"] for b in batches if b.metric == "g"])
    expected = [i % 8 for i in list(range(100)) + list(range(200, 300))]
    assert grr.tolist() == expected
    assert accepted(batches) == 400
    assert accepted(batches) + dead_lettered(letters) == written == decoder.records_read


def corrupt_file(path, codec, damage):
    """Three blocks of 100 GRR reports (ids 0..299); `damage(data, block_starts)` edits the
    bytes."""
    written = write_blocks(path, [[good(i, "g") for i in range(k * 100, k * 100 + 100)]
                                  for k in range(3)], codec=codec)
    data = bytearray(path.read_bytes())
    syncs = sync_positions(bytes(data))  # the header's marker, then one after each block
    damage(data, [s + 16 for s in syncs[:3]])
    path.write_bytes(bytes(data))
    return written


def grr_values(batches):
    return np.concatenate([b.columns["value"] for b in batches]).tolist()


@pytest.mark.parametrize("codec", ["null", "deflate", "bzip2", "xz", "snappy"])
def test_a_block_that_fails_to_read_loses_only_that_block(tmp_path, codec):
    def damage(data, starts):  # block 2's data, past its count and size; its sync intact
        data[starts[1] + 6:starts[1] + 30] = b"\xff" * 24
    path = tmp_path / "r.avro"
    written = corrupt_file(path, codec, damage)
    decoder, batches, letters = decode(path)
    [letter] = letters
    assert letter.reason == Reason.UNDECODABLE and letter.records == 100, letter.detail
    assert "block of 100 records" in letter.detail
    assert grr_values(batches) == [i % 8 for i in list(range(100)) + list(range(200, 300))]
    assert accepted(batches) + dead_lettered(letters) == written == decoder.records_read


@pytest.mark.parametrize("codec", ["null", "deflate"])
def test_broken_framing_resumes_after_the_next_sync_marker(tmp_path, codec):
    def damage(data, starts):  # block 1's count and size, and block 2's sync marker
        data[starts[0]:starts[0] + 2] = b"\x81\x81"
        data[starts[2] - 10:starts[2] - 5] = b"\x00" * 5
    path = tmp_path / "r.avro"
    corrupt_file(path, codec, damage)
    decoder, batches, letters = decode(path)
    # Block 1 has no readable framing: one record up to its sync marker. Block 2 is framed but
    # its sync marker is damaged: the next marker found is block 3's, which goes with it.
    assert [letter.records for letter in letters] == [1, 1]
    assert all("record count unknown" in letter.detail for letter in letters)
    assert batches == [] and decoder.records_read == 2


def test_snappy_files_decode(tmp_path):
    path = tmp_path / "r.avro"
    protocol = REGISTRY["g"].protocol
    write_reports(str(path), "g", protocol, np.arange(300), np.full(300, T0),
                  {"value": np.arange(300) % 8}, codec="snappy")
    decoder, batches, letters = decode(path)
    assert letters == [] and grr_values(batches) == [i % 8 for i in range(300)]


def relabel_codec(path, codec):
    """Rename the codec in a null-codec file's header, leaving its blocks as they are."""
    data = path.read_bytes()
    name = codec.encode()
    path.write_bytes(data.replace(b"\x08null", bytes([2 * len(name)]) + name, 1))


@pytest.mark.parametrize("cut", [False, True])
def test_a_file_of_a_codec_that_cannot_be_read_is_accounted_block_by_block(
        tmp_path, monkeypatch, cut):
    monkeypatch.setitem(ldp_telemetry.schemas.decompress._LIBRARIES, "snappy", ("cramjam", None))
    path = tmp_path / "r.avro"
    write_blocks(path, [[good(i, "g") for i in range(k * 100, k * 100 + 100)] for k in range(3)],
                 codec="snappy")
    if cut:  # and its last block cut short
        path.write_bytes(path.read_bytes()[:-20])
    decoder, batches, letters = decode(path)
    assert batches == []
    *unreadable, letter = letters
    assert letter.reason == Reason.UNDECODABLE
    assert "'snappy'" in letter.detail and "cramjam" in letter.detail, letter.detail
    assert letter.records == (200 if cut else 300)
    assert [u.records for u in unreadable] == ([1] if cut else [])
    assert decoder.records_read == dead_lettered(letters)


def test_a_file_of_an_unknown_codec_is_accounted(tmp_path):
    path = tmp_path / "r.avro"
    write_blocks(path, [[good(i, "g") for i in range(k * 100, k * 100 + 100)] for k in range(3)])
    relabel_codec(path, "brotli")
    decoder, batches, letters = decode(path)
    [letter] = letters
    assert "unknown codec 'brotli'" in letter.detail and letter.records == 300
    assert decoder.records_read == 300


def foreign_schemas():
    """(name, writer schema, a record of it, words the detail must contain)."""
    def report_schema(edit):
        schema = report_schema_json()
        fields = {field["name"]: field for field in schema["fields"]}
        edit(schema, fields)
        return schema
    micros = report_schema(lambda s, f: f["event_time"]["type"].update(
        logicalType="timestamp-micros"))
    nullable = report_schema(lambda s, f: f["event_time"].update(
        type=["null", f["event_time"]["type"]]))
    bare = report_schema(lambda s, f: f["payload"].update(type=f["payload"]["type"][0]))
    extra = report_schema(lambda s, f: s["fields"].append({"name": "device", "type": "string"}))
    other_payload = report_schema(lambda s, f: f["payload"]["type"].append(
        {"type": "record", "name": "MyPayload", "fields": [{"name": "v", "type": "int"}]}))
    grr_fields = report_schema(lambda s, f: f["payload"]["type"][0]["fields"].__setitem__(
        0, {"name": "value", "type": "long"}))
    dead_letter = json.loads((SCHEMA_DIR / "dead_letter.avsc").read_text())
    return [
        ("dead letters", dead_letter, DeadLetter("x", "r", "d").as_dict(), "fields"),
        ("micros", micros, good(1, "g", T0 * 1000), "timestamp-micros"),
        ("nullable time", nullable, report(1, "g", (GRR, {"value": 1}), None), "event_time"),
        ("bare payload", bare, report(1, "g", {"value": 1}), "not a union"),
        ("extra field", extra, {**good(1, "g"), "device": "d"}, "device"),
        ("unknown branch", other_payload,
         report(1, "g", ("ldp.telemetry.MyPayload", {"v": 1})), "MyPayload"),
        ("other field type", grr_fields, good(1, "g"), "GrrPayload"),
    ]


@pytest.mark.parametrize("name, schema, record, words", foreign_schemas(),
                         ids=[case[0] for case in foreign_schemas()])
def test_a_file_of_another_schema_is_one_dead_letter_for_all_its_records(
        tmp_path, name, schema, record, words):
    path = tmp_path / "r.avro"
    write_blocks(path, [[record] * 3, [record] * 4], codec="deflate", schema=schema)
    decoder, batches, letters = decode(path)
    [letter] = letters
    assert letter.reason == Reason.INCOMPATIBLE_SCHEMA and letter.records == 7
    assert words in letter.detail, letter.detail
    assert batches == [] and decoder.records_read == 7


def test_a_union_of_some_payload_records_in_another_order_is_read(tmp_path):
    schema = report_schema_json()
    payload = next(field for field in schema["fields"] if field["name"] == "payload")
    payload["type"] = [b for b in reversed(payload["type"]) if b["name"] in ("OlhPayload",
                                                                            "GrrPayload")]
    path = tmp_path / "r.avro"
    write_blocks(path, [[good(i, m) for i in range(50) for m in ("g", "h")]], schema=schema)
    decoder, batches, letters = decode(path)
    assert letters == [] and accepted(batches) == 100 == decoder.records_read


@pytest.mark.parametrize("content", [b"", b"PAR1 this is not an avro container\n" * 20,
                                     b"Obj\x01garbage"])
def test_non_avro_file(tmp_path, content):
    path = tmp_path / "r.avro"
    path.write_bytes(content)
    decoder, batches, letters = decode(path)
    assert batches == []
    [letter] = letters
    assert letter.reason == Reason.UNDECODABLE and "not a readable Avro file" in letter.detail
    assert letter.records == 1 and decoder.records_read == 1


def test_a_file_that_cannot_be_opened_is_one_dead_letter(tmp_path):
    for path, reason, words in ((tmp_path / "missing.avro", Reason.UNDECODABLE, "cannot open"),
                                (tmp_path, Reason.NOT_A_REGULAR_FILE, "a directory")):
        decoder, batches, letters = decode(path)
        [letter] = letters
        assert letter.reason == reason and words in letter.detail
        assert (batches, letter.records, decoder.records_read) == ([], 1, 1)


class FailingFile(io.FileIO):
    """A file whose reads fail once they reach byte `limit`."""

    def __init__(self, path, limit):
        super().__init__(path, "rb")
        self.limit = limit

    def read(self, size=-1):
        if self.tell() + (size if size >= 0 else 1) > self.limit:
            raise OSError(5, "Input/output error")
        return super().read(size)


def test_a_file_that_fails_to_read_part_way_keeps_what_was_read(tmp_path):
    path = tmp_path / "r.avro"
    write_blocks(path, [[good(i, "g") for i in range(k * 100, k * 100 + 100)] for k in range(3)])
    limit = sync_positions(path.read_bytes())[2] + 40  # inside block 3
    decoder = ReportDecoder(REGISTRY, HOUR)
    items = list(decoder.decode_file(str(path), opener=lambda p, mode: FailingFile(p, limit)))
    [letter] = [item for item in items if isinstance(item, DeadLetter)]
    assert grr_values([item for item in items if item is not letter]) == [
        i % 8 for i in range(200)]
    assert letter.reason == Reason.UNDECODABLE and letter.records == 1
    assert "unreadable from this point on" in letter.detail and "OSError" in letter.detail
    assert decoder.records_read == 201


def bad_records():
    """(record, reason, words the detail must contain) for every per-report problem."""
    return [
        (report(1001, "nope", (GRR, {"value": 1})), Reason.UNKNOWN_METRIC, "'nope'"),
        (report(1002, "g", (OUE, {"bits": b"\x01"})), Reason.PROTOCOL_MISMATCH, "grr"),
        (report(1003, "h", (GRR, {"value": 1})), Reason.PROTOCOL_MISMATCH, "olh"),
        (report(1004, "o", (OLH, {"seed": 1, "y": 0})), Reason.PROTOCOL_MISMATCH, "oue"),
        (report(1005, "g", (GRR, {"value": 8})), Reason.INVALID_PAYLOAD, "[0, d)"),
        (report(1006, "g", (GRR, {"value": -1})), Reason.INVALID_PAYLOAD, "[0, d)"),
        (report(1007, "o", (OUE, {"bits": b"\x01"})), Reason.INVALID_PAYLOAD, "ceil(d/8)"),
        (report(1008, "o", (OUE, {"bits": b"\x01\x00\x00"})), Reason.INVALID_PAYLOAD, "ceil(d/8)"),
        (report(1009, "o", (OUE, {"bits": b"\x00\x04"})), Reason.INVALID_PAYLOAD, "padding"),
        (report(1010, "o", (OUE, {"bits": b"\x00\x80"})), Reason.INVALID_PAYLOAD, "padding"),
        (report(1011, "h", (OLH, {"seed": -5, "y": 4})), Reason.INVALID_PAYLOAD, "[0, g)"),
        (report(1012, "h", (OLH, {"seed": 7, "y": -1})), Reason.INVALID_PAYLOAD, "[0, g)"),
    ]


@pytest.mark.parametrize("chunk_records", [65_536, 5])
def test_each_bad_report_is_one_dead_letter_with_its_reason(tmp_path, chunk_records):
    assert REGISTRY["h"].protocol.g == 4  # e^1 + 1 = 3.72 rounded
    bad = bad_records()
    valid = [good(i, m) for i in range(60) for m in ("g", "o", "h")]
    records = valid[:]
    for k, (record, *_) in enumerate(bad):  # interleave the bad reports with the good ones
        records.insert(7 * k + 3, record)
    path = tmp_path / "mixed.avro"
    written = write_blocks(path, [records[:90], records[90:]])
    decoder, batches, letters = decode(path, chunk_records=chunk_records)

    assert len(letters) == len(bad)
    by_id = {json.loads(letter.report)["report_id"]: letter for letter in letters}
    for record, reason, words in bad:
        letter = by_id[record["report_id"]]
        assert letter.reason == reason and letter.records == 1 and letter.source == str(path)
        assert words in letter.detail, letter.detail
        decoded = json.loads(letter.report)
        assert decoded["metric"] == record["metric"]
        assert decoded["event_time"] == record["event_time"]
    assert accepted(batches) == len(valid)
    assert accepted(batches) + dead_lettered(letters) == written == decoder.records_read
    assert {b.metric for b in batches} == {"g", "o", "h"}


def test_event_times_outside_1970_to_2200_are_dead_letters(tmp_path):
    end = 7_258_118_400_000  # 2200-01-01T00:00:00Z
    valid = [0, 1, T0, end - 1]  # a device clock reset to the epoch gives times >= 0
    invalid = [-1, end, T0 * 1000, 2 ** 62, -2 ** 63, 2 ** 63 - 1]
    records = [good(i, "g", t) for i, t in enumerate(valid + invalid)]
    records.append(report(99, "g", (GRR, {"value": 8}), -5))  # both wrong: one dead letter
    path = tmp_path / "r.avro"
    written = write_blocks(path, [records])
    decoder, batches, letters = decode(path)
    assert sorted(b.slice_start_ms for b in batches) == [0, T0, (end - 1) // HOUR * HOUR]
    assert grr_values(sorted(batches, key=lambda b: b.slice_start_ms)) == [0, 1, 2, 3]
    by_reason = {}
    for letter in letters:
        by_reason.setdefault(letter.reason, []).append(json.loads(letter.report))
    assert [r["event_time"] for r in by_reason[Reason.INVALID_EVENT_TIME]] == invalid
    assert [r["report_id"] for r in by_reason[Reason.INVALID_PAYLOAD]] == [99]
    assert all("2200-01-01" in letter.detail for letter in letters
               if letter.reason == Reason.INVALID_EVENT_TIME)
    assert accepted(batches) + dead_lettered(letters) == written == decoder.records_read


def test_slicing_by_time_puts_every_report_in_its_slice(tmp_path):
    # A sized GRR domain large enough that each report's value is its own index.
    registry = parse_registry({"metrics": [
        {"name": "id", "protocol": "grr", "epsilon": 1.0, "domain": {"size": 100_000}}]})
    slice_ms = 15 * 60_000
    rng = np.random.default_rng(8)
    n = 5000
    times = T0 + rng.integers(-3 * slice_ms, 7 * slice_ms, n)
    times[:4] = [T0, T0 - 1, T0 + slice_ms - 1, T0 + slice_ms]  # both sides of the boundaries
    path = tmp_path / "t.avro"
    protocol = registry["id"].protocol
    write_reports(str(path), "id", protocol, np.arange(n), times, {"value": np.arange(n)})
    decoder = ReportDecoder(registry, slice_ms, chunk_records=1000)
    batches = list(decoder.decode_file(str(path)))
    assert all(isinstance(b, ReportBatch) for b in batches)
    seen = np.concatenate([b.columns["value"] for b in batches])
    assert sorted(seen.tolist()) == list(range(n))  # every report exactly once
    for batch in batches:
        assert batch.slice_start_ms % slice_ms == 0
        t = times[batch.columns["value"]]
        assert np.all((batch.slice_start_ms <= t) & (t < batch.slice_start_ms + slice_ms))
    # Slices are per chunk: 5 chunks × at most 10 slices, each slice of a chunk in one batch.
    assert len({b.slice_start_ms for b in batches}) == 10


def test_decoding_leaves_fastavro_timestamps_as_it_found_them(tmp_path):
    path = tmp_path / "r.avro"
    write_blocks(path, [[good(1, "g")]])
    decode(path)
    with open(path, "rb") as handle:
        [record] = list(fastavro.reader(handle))
    assert record["event_time"].timestamp() * 1000 == T0  # a datetime again, not raw millis


def hostile_schemas():
    """Writer schemas that are JSON but that fastavro's parser chokes on (KeyError, TypeError)."""
    def report_schema(edit):
        schema = report_schema_json()
        edit(schema, {field["name"]: field for field in schema["fields"]})
        return schema
    grr_branch = report_schema_json()["fields"][3]["type"][0]
    return [  # (schema, whether it holds reports: keys that decoding ignores are ignored)
        (report_schema(lambda s, f: s.pop("name")), False),
        (report_schema(lambda s, f: s.update(namespace=5)), False),
        (report_schema(lambda s, f: f["payload"]["type"].append(grr_branch)), False),  # twice
        (report_schema(lambda s, f: f["payload"]["type"].append("GrrPayload")), False),  # a name
        (report_schema(lambda s, f: f["payload"]["type"][0].update(name=7)), False),
        (report_schema(lambda s, f: f["event_time"].update(type={"type": {"type": "long"}})),
         False),
        ([], False), (5, False), (None, False), ("string", False),
        ({"type": "record", "name": "x", "fields": 5}, False),
        (report_schema(lambda s, f: s.update(aliases=5, doc=[1])), True),
        (report_schema(lambda s, f: f["metric"].update(aliases=5, default=[1], order=2)), True),
    ]


@pytest.mark.parametrize("schema, holds_reports", hostile_schemas())
def test_a_hostile_writer_schema_never_reaches_fastavro(tmp_path, schema, holds_reports):
    path = tmp_path / "r.avro"
    write_blocks(path, [[good(i, "g") for i in range(3)]] * 2)
    header, blocks, sync = split_container(path.read_bytes())
    text = json.dumps(schema).encode()
    meta = (encode_long(2) + encode_long(11) + b"avro.schema" + encode_long(len(text)) + text +
            encode_long(10) + b"avro.codec" + encode_long(4) + b"null" + encode_long(0))
    path.write_bytes(join_container(b"Obj\x01" + meta + sync, blocks, sync))
    decoder, batches, letters = decode(path)
    if holds_reports:
        assert letters == [] and grr_values(batches) == [0, 1, 2] * 2
        return
    [letter] = letters
    assert letter.reason == Reason.INCOMPATIBLE_SCHEMA and letter.records == 6, letter.detail
    assert batches == [] and decoder.records_read == 6
