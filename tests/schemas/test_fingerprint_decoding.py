"""Each report is read under the configuration its fingerprint names; a fingerprint that names
none of its metric's versions is a counted `config_mismatch` dead letter, never an estimate."""
from __future__ import annotations

import io

import fastavro
import numpy as np
import pytest

from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.ldp.engine.batches import DeadLetter, ReportBatch
from ldp_telemetry.ldp.engine.reasons import Reason
from ldp_telemetry.schemas import load_schema, payload_branch, report_schema_json
from ldp_telemetry.schemas.codec import ReportDecoder

HOUR = 3_600_000
T0 = 1_700_000_000_000
LABELS = ["a", "b", "c", "d"]
REGISTRY = parse_registry({"metrics": [
    {"name": "app", "version": 2, "protocol": "grr", "epsilon": 2.0,
     "domain": {"labels": LABELS[::-1]},
     "history": [{"version": 1, "protocol": "oue", "epsilon": 1.0,
                  "domain": {"labels": LABELS}}]},
    {"name": "other", "protocol": "grr", "epsilon": 2.0, "domain": {"labels": LABELS[::-1]}}]})
V1, V2 = REGISTRY.versions("app")
OTHER = REGISTRY["other"]


def reports(config, count, fingerprint=..., first_id=0, metric=None):
    """`count` reports of `config` carrying `fingerprint` (its own by default)."""
    rng = np.random.default_rng(first_id)
    columns = config.protocol.perturb(rng.integers(0, config.d, count), rng)
    branch = payload_branch(config.protocol)
    own = config.fingerprint if fingerprint is ... else fingerprint
    return [{"report_id": first_id + i, "metric": metric or config.name, "event_time": T0,
             "payload": (branch, payload), "fingerprint": own}
            for i, payload in enumerate(config.protocol.payloads_to_avro(columns))]


def decode(records, schema=None, registry=REGISTRY):
    buffer = io.BytesIO()
    fastavro.writer(buffer, schema or load_schema("report"), records)
    decoder = ReportDecoder(registry, HOUR)
    items = list(decoder.decode_file("reports.avro", lambda path, mode: io.BytesIO(
        buffer.getvalue())))
    batches = [i for i in items if isinstance(i, ReportBatch)]
    letters = [i for i in items if isinstance(i, DeadLetter)]
    accepted = sum(b.n for b in batches)
    assert decoder.records_read == accepted + sum(letter.records for letter in letters)
    return batches, letters


def test_reports_of_each_version_are_batched_under_that_version():
    batches, letters = decode(reports(V1, 30) + reports(V2, 20, first_id=100)
                              + reports(V1, 5, first_id=200))
    assert letters == []
    assert {b.version: b.n for b in batches} == {1: 35, 2: 20}
    assert {b.metric for b in batches} == {"app"}


def test_a_report_without_a_fingerprint_is_read_under_the_current_configuration():
    batches, letters = decode(reports(V2, 7, fingerprint=None))
    assert letters == [] and [(b.version, b.n) for b in batches] == [(2, 7)]


def test_a_file_written_before_reports_had_fingerprints_is_read_under_the_current_one():
    schema = report_schema_json()
    schema["fields"] = [f for f in schema["fields"] if f["name"] != "fingerprint"]
    old = [{k: v for k, v in r.items() if k != "fingerprint"} for r in reports(V2, 9)]
    batches, letters = decode(old, fastavro.parse_schema(schema))
    assert letters == [] and [(b.version, b.n) for b in batches] == [(2, 9)]


@pytest.mark.parametrize("fingerprint, says", [
    (bytes(16), "none of the metric's versions"),
    (OTHER.fingerprint, "that of metric 'other' v1"),
    (b"", "0 bytes long"),
    (V1.fingerprint[:15], "15 bytes long"),
    (V1.fingerprint + b"\x00", "17 bytes long"),
    (b"\xff" * 5000, "5000 bytes long"),
])
def test_a_fingerprint_naming_no_version_of_the_metric_is_a_config_mismatch(fingerprint, says):
    batches, letters = decode(reports(V1, 3, first_id=7) + reports(V1, 4, fingerprint))
    assert [(b.version, b.n) for b in batches] == [(1, 3)]
    assert [letter.reason for letter in letters] == [Reason.CONFIG_MISMATCH] * 4
    assert all(says in letter.detail for letter in letters), letters[0].detail
    if len(fingerprint) < 100:  # a longer one fills the report text, which is cut
        assert all('"metric": "app"' in letter.report for letter in letters)


def test_a_report_claiming_another_metrics_configuration_never_counts_for_either():
    batches, letters = decode(reports(V2, 6, fingerprint=OTHER.fingerprint))
    assert batches == [] and len(letters) == 6
    assert {letter.reason for letter in letters} == {Reason.CONFIG_MISMATCH}


def test_a_payload_of_an_earlier_versions_protocol_is_checked_against_that_version():
    """v1 is OUE: a GRR payload claiming v1 is a protocol mismatch, not an estimate of v2."""
    grr_as_v1 = reports(V2, 3, fingerprint=V1.fingerprint)
    batches, letters = decode(grr_as_v1)
    assert batches == [] and {letter.reason for letter in letters} == {Reason.PROTOCOL_MISMATCH}


def test_a_writer_schema_with_a_fingerprint_of_another_type_is_an_incompatible_schema():
    schema = report_schema_json()
    for field in schema["fields"]:
        if field["name"] == "fingerprint":
            field["type"], field["default"] = ["null", "string"], None
    records = [dict(r, fingerprint=None) for r in reports(V2, 2)]
    batches, letters = decode(records, fastavro.parse_schema(schema))
    assert batches == [] and [letter.reason for letter in letters] == [
        Reason.INCOMPATIBLE_SCHEMA]
