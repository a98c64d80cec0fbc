"""Report envelopes: decoded to the same batches as per-report records, every malformed envelope
one counted dead letter, and reports conserved (read = accepted + dead-lettered, in reports)."""
from __future__ import annotations

import io

import fastavro
import numpy as np
import pytest

from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.ldp.engine.batches import REPORT_ID, DeadLetter, ReportBatch
from ldp_telemetry.ldp.engine.reasons import Reason
from ldp_telemetry.schemas.codec import ReportDecoder, write_reports
from ldp_telemetry.schemas.envelopes import (ENVELOPE_LAYOUT, envelope_record, envelope_schema,
                                             payload_columns, write_envelopes)
from ldp_telemetry.schemas.limits import DecodeLimits

REGISTRY = parse_registry({"metrics": [
    {"name": "grr", "protocol": "grr", "epsilon": 1.0, "domain": {"size": 1024}},
    {"name": "oue", "protocol": "oue", "epsilon": 1.0, "domain": {"size": 1021}},  # 3 pad bits
    {"name": "olh", "protocol": "olh", "epsilon": 1.0, "domain": {"size": 1024}},
    {"name": "ss", "protocol": "ss", "epsilon": 1.0, "domain": {"size": 64}},
    {"name": "hr", "protocol": "hr", "epsilon": 1.0, "domain": {"size": 64}},
    {"name": "sr", "protocol": "sr", "epsilon": 1.0, "domain": {"low": 0, "high": 1}},
    {"name": "sw", "protocol": "sw", "epsilon": 1.0, "domain": {"low": 0, "high": 1,
                                                                 "buckets": 16}},
    {"name": "hh", "protocol": "hh", "epsilon": 1.0, "domain": {"low": 0, "high": 1,
                                                                 "buckets": 64}},
]})
HOUR = 3_600_000
T0 = 1_700_000_000_000 // HOUR * HOUR
LIMITS = DecodeLimits(max_envelope_reports=5_000)


def simulated(name, n, seed=1):
    config = REGISTRY[name]
    rng = np.random.default_rng(seed)
    values = rng.random(n) if config.kind == "numeric" else rng.integers(0, config.d, n)
    times = T0 + rng.integers(0, 3 * HOUR, n)
    return np.arange(n) + 1000, times, config.protocol.perturb(values, rng)


def decode(data: bytes, limits=LIMITS):
    decoder = ReportDecoder(REGISTRY, HOUR, limits=limits)
    items = list(decoder.decode_file("x.avro", opener=lambda *_: io.BytesIO(data)))
    batches = [i for i in items if isinstance(i, ReportBatch)]
    letters = [i for i in items if isinstance(i, DeadLetter)]
    # Conservation, in reports: every report read is in a batch or a dead letter.
    assert decoder.records_read == sum(b.n for b in batches) + sum(x.records for x in letters)
    return batches, letters


def envelope_file(*records) -> bytes:
    out = io.BytesIO()
    fastavro.writer(out, envelope_schema(), list(records))
    return out.getvalue()


def by_slice(batches):
    """{(metric, slice, version): {column: values sorted by report id}}."""
    out = {}
    for batch in batches:
        order = np.argsort(batch.columns[REPORT_ID], kind="stable")
        key = (batch.metric, batch.slice_start_ms, batch.version)
        assert key not in out
        out[key] = {name: np.asarray(column)[order] for name, column in batch.columns.items()}
    return out


def merged(batches):
    """Batches of one key merged (a file's chunks may split a slice)."""
    groups = {}
    for batch in batches:
        groups.setdefault((batch.metric, batch.slice_start_ms, batch.version), []).append(batch)
    return [ReportBatch(*key[:2], {name: np.concatenate([b.columns[name] for b in group])
                                   for name in group[0].columns}, key[2])
            for key, group in groups.items()]


@pytest.mark.parametrize("name", ["grr", "oue", "olh", "ss", "hr", "sr", "sw", "hh"])
def test_an_envelope_file_decodes_to_the_batches_of_the_same_reports_as_records(name):
    ids, times, columns = simulated(name, 3000)
    config = REGISTRY[name]
    records, envelopes = io.BytesIO(), io.BytesIO()
    write_reports(records, name, config.protocol, ids, times, columns,
                  fingerprint=config.fingerprint)
    write_envelopes(envelopes, name, config.protocol, ids, times, columns,
                    envelope_reports=700, fingerprint=config.fingerprint)
    from_records, letters = decode(records.getvalue())
    from_envelopes, envelope_letters = decode(envelopes.getvalue())
    assert not letters and not envelope_letters
    expected, got = by_slice(merged(from_records)), by_slice(merged(from_envelopes))
    assert expected.keys() == got.keys()
    for key, columns in expected.items():
        assert columns.keys() == got[key].keys()
        for column, values in columns.items():
            assert got[key][column].dtype == values.dtype, column
            np.testing.assert_array_equal(got[key][column], values, err_msg=column)


def test_a_file_of_envelopes_reads_its_columns_as_views_without_per_report_python():
    ids, times, columns = simulated("oue", 2000)
    record = envelope_record("oue", REGISTRY["oue"].protocol, ids, times, columns)
    assert record["count"] == 2000 and record["layout"] == ENVELOPE_LAYOUT
    assert [c.name for c in payload_columns(REGISTRY["oue"].protocol)] == ["bits"]
    assert len(record["columns"][0]) == 2000 * 128 and len(record["report_ids"]) == 16_000
    batches, letters = decode(envelope_file(record))
    assert not letters and sum(b.n for b in batches) == 2000


def envelope(name="grr", n=10, **changes):
    ids, times, columns = simulated(name, n)
    record = envelope_record(name, REGISTRY[name].protocol, ids, times, columns,
                             REGISTRY[name].fingerprint)
    record.update(changes)
    return record


def only_letter(record, reason, says, stands_for):
    batches, letters = decode(envelope_file(record))
    assert not batches
    assert [(x.reason, x.records) for x in letters] == [(reason, stands_for)], letters
    assert says in letters[0].detail
    return letters[0]


GOOD = envelope()


@pytest.mark.parametrize("changes, reason, says, stands_for", [
    ({"layout": 2}, Reason.UNDECODABLE, "layout version 2", 10),
    ({"count": 11}, Reason.UNDECODABLE, "report_ids is 80 bytes, expected 88", 1),
    ({"count": 9}, Reason.UNDECODABLE, "expected 72 for 9 reports", 1),
    ({"count": 10 ** 12}, Reason.UNDECODABLE, "outside [0, --max-envelope-reports 5000]", 1),
    ({"count": -3}, Reason.UNDECODABLE, "count -3 is outside", 1),
    ({"event_times": GOOD["event_times"][:-1]}, Reason.UNDECODABLE, "event_times is 79", 1),
    ({"columns": [GOOD["columns"][0][:-2]]}, Reason.UNDECODABLE, "column 'value' is 38 bytes",
     1),
    ({"columns": []}, Reason.UNDECODABLE, "0 payload columns, expected 1", 1),
    # whatever else is wrong, a count its ids and times do not hold stands for 1
    ({"metric": "nope", "count": 1000}, Reason.UNKNOWN_METRIC, "claiming 1000 reports", 1),
    ({"layout": 2, "count": 5}, Reason.UNDECODABLE, "claiming 5 reports, standing for 1", 1),
    ({"fingerprint": b"\x01" * 15}, Reason.CONFIG_MISMATCH, "15 bytes long, not 16", 10),
    ({"fingerprint": REGISTRY["oue"].fingerprint}, Reason.CONFIG_MISMATCH, "that of metric 'oue'",
     10),
    ({"metric": "nope"}, Reason.UNKNOWN_METRIC, "'nope' is not in the registry", 10),
    ({"metric": "m" * 300}, Reason.METRIC_NAME_TOO_LONG, "300 characters", 10),
    ({"payload": "OlhPayload"}, Reason.PROTOCOL_MISMATCH, "payload is 'OlhPayload'", 10),
])
def test_every_malformed_envelope_is_one_dead_letter_standing_for_its_reports(
        changes, reason, says, stands_for):
    """It stands for its count when its columns hold that count (a malformed layout, metric,
    configuration or payload kind), else for 1, the count it claims kept in the detail."""
    record = {**GOOD, **changes}
    letter = only_letter(record, reason, says, stands_for)
    claimed = record["count"]
    assert (f"report envelope of {claimed} report(s)" if stands_for == claimed else
            f"report envelope claiming {claimed} reports, standing for 1") in letter.detail
    assert letter.report is not None and len(letter.report) <= LIMITS.max_dead_letter_report_chars
    encoded = io.BytesIO()
    fastavro.schemaless_writer(encoded, fastavro.parse_schema(envelope_schema()), record)
    assert letter.report_bytes == len(encoded.getvalue())


def test_envelopes_claiming_a_million_reports_each_that_their_columns_do_not_hold():
    """The issue's file: 100,000 envelopes of one report's columns, each claiming 1,000,000
    reports (the default --max-envelope-reports), stand for 100,000 reports, not 10^11."""
    n = 100_000
    one = envelope("grr", 1, count=1_000_000)
    batches, letters = decode(envelope_file(*[one] * n), DecodeLimits())
    assert not batches and len(letters) == n
    assert sum(x.records for x in letters) == n
    assert {x.reason for x in letters} == {Reason.UNDECODABLE}
    assert "claiming 1000000 reports, standing for 1" in letters[0].detail
    # one too large for --max-envelope-bytes, claiming more than it holds: also 1
    batches, letters = decode(envelope_file(envelope("oue", 100, count=200)),
                              DecodeLimits(max_envelope_bytes=10_000))
    assert [(x.reason, x.records) for x in letters] == [(Reason.RECORD_TOO_LARGE, 1)]
    assert "claiming 200 reports, standing for 1" in letters[0].detail


def test_a_boolean_column_with_bits_set_after_its_reports_is_malformed():
    record = envelope("sr", 10)
    record["columns"] = [record["columns"][0][:1] + bytes([0xFF])]
    only_letter(record, Reason.UNDECODABLE, "bits after the 10 reports are set", 10)


def test_an_envelope_larger_than_its_limit_is_a_dead_letter_of_its_reports():
    record = envelope("oue", 100)
    limits = DecodeLimits(max_envelope_bytes=10_000)
    batches, letters = decode(envelope_file(record), limits)
    assert not batches
    assert [(x.reason, x.records) for x in letters] == [(Reason.RECORD_TOO_LARGE, 100)]
    assert "--max-envelope-bytes 10000" in letters[0].detail


def test_invalid_reports_inside_an_envelope_are_grouped_dead_letters_by_reason():
    record = envelope("grr", 50)
    values = np.frombuffer(record["columns"][0], "<i4").copy()
    values[[3, 7]] = [1024, -1]
    times = np.frombuffer(record["event_times"], "<i8").copy()
    times[[5, 7, 9]] = -1
    record["columns"] = [values.tobytes()]
    record["event_times"] = times.tobytes()
    batches, letters = decode(envelope_file(record))
    assert sum(b.n for b in batches) == 46
    got = {(x.reason, x.records) for x in letters}
    # Row 7 has both faults: it is dead-lettered once, as an invalid payload.
    assert got == {(Reason.INVALID_PAYLOAD, 2), (Reason.INVALID_EVENT_TIME, 2)}
    payload = next(x for x in letters if x.reason == Reason.INVALID_PAYLOAD)
    assert "2 of the 50 reports" in payload.detail and "rows [3, 7]" in payload.detail


def test_padding_bits_of_a_bit_vector_make_that_report_invalid():
    record = envelope("oue", 20)
    bits = np.frombuffer(record["columns"][0], np.uint8).reshape(20, 128).copy()
    bits[4, -1] |= 0x80  # d = 1021: the top 3 bits of the last byte are padding
    record["columns"] = [bits.tobytes()]
    batches, letters = decode(envelope_file(record))
    assert sum(b.n for b in batches) == 19
    assert [(x.reason, x.records) for x in letters] == [(Reason.INVALID_PAYLOAD, 1)]


def test_an_empty_envelope_stands_for_nothing():
    batches, letters = decode(envelope_file(envelope("grr", 0)))
    assert not batches and not letters


def test_one_file_of_envelopes_of_several_metrics_and_versions():
    records = [envelope("grr", 30), envelope("olh", 20), envelope("grr", 5),
               envelope("oue", 7)]
    batches, letters = decode(envelope_file(*records))
    assert not letters
    counts = {}
    for batch in batches:
        counts[batch.metric] = counts.get(batch.metric, 0) + batch.n
    assert counts == {"grr": 35, "olh": 20, "oue": 7}


def test_a_writer_schema_naming_the_envelope_with_other_fields_is_an_incompatible_schema():
    schema = {**envelope_schema(), "fields": [f for f in envelope_schema()["fields"]
                                              if f["name"] != "count"]}
    out = io.BytesIO()
    record = {k: v for k, v in GOOD.items() if k != "count"}
    fastavro.writer(out, fastavro.parse_schema(schema), [record, record])
    batches, letters = decode(out.getvalue())
    assert not batches
    assert [(x.reason, x.records) for x in letters] == [(Reason.INCOMPATIBLE_SCHEMA, 2)]
    assert "not a report envelope schema" in letters[0].detail


def test_envelope_files_are_read_by_the_reference_avro_library(tmp_path):
    datafile = pytest.importorskip("avro.datafile")
    avro_io = pytest.importorskip("avro.io")
    path = tmp_path / "e.avro"
    ids, times, columns = simulated("olh", 40)
    write_envelopes(str(path), "olh", REGISTRY["olh"].protocol, ids, times, columns,
                    envelope_reports=16, fingerprint=REGISTRY["olh"].fingerprint)
    with open(path, "rb") as handle:
        records = list(datafile.DataFileReader(handle, avro_io.DatumReader()))
    assert [r["count"] for r in records] == [16, 16, 8]
    assert np.frombuffer(b"".join(r["report_ids"] for r in records), "<i8").tolist() == \
        ids.tolist()
    assert np.frombuffer(b"".join(r["columns"][1] for r in records), "<i4").tolist() == \
        columns["y"].tolist()


def test_small_envelopes_make_one_batch_per_slice_not_one_per_envelope():
    ids, times, columns = simulated("grr", 600)
    out = io.BytesIO()
    write_envelopes(out, "grr", REGISTRY["grr"].protocol, ids, np.full(600, T0 + 5), columns,
                    envelope_reports=3, fingerprint=REGISTRY["grr"].fingerprint)
    batches, letters = decode(out.getvalue())
    assert not letters
    assert [(b.metric, b.slice_start_ms, b.n) for b in batches] == [("grr", T0, 600)]
    np.testing.assert_array_equal(batches[0].columns[REPORT_ID], ids)
