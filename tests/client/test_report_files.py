"""Report files of the client: written as NAME.avro.tmp, renamed whole, read by every reader."""
from __future__ import annotations

import avro.datafile
import avro.io
import numpy as np
import pytest

from ldp_telemetry.client import ReportFile, encode, encode_many, write_report_file
from ldp_telemetry.client.files import TEMPORARY_SUFFIX
from ldp_telemetry.ldp.base.errors import InputError
from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.schemas.codec import ReportDecoder

T0 = 1_717_200_000_000
HOUR = 3_600_000
REGISTRY = parse_registry({"metrics": [
    {"name": "g", "protocol": "grr", "epsilon": 1.0, "domain": {"labels": ["x", "y", "z"]}},
    {"name": "h", "protocol": "hr", "epsilon": 2.0, "domain": {"size": 12}},
    {"name": "s", "protocol": "sw", "epsilon": 1.0, "domain": {"low": 0, "high": 1,
                                                                "buckets": 4}},
]})


def reports(name, n=200, seed=0):
    rng = np.random.default_rng(seed)
    config = REGISTRY[name]
    values = rng.random(n) if config.kind == "numeric" else rng.integers(0, config.d, n)
    return encode_many(config, values, rng, event_times_ms=T0 + rng.integers(0, HOUR, n))


def test_the_file_is_written_under_a_temporary_name_and_renamed_when_closed(tmp_path):
    path = tmp_path / "batch-0001.avro"
    with ReportFile(path) as out:
        out.write(reports("g"))
        assert (tmp_path / f"batch-0001.avro{TEMPORARY_SUFFIX}").exists()
        assert not path.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["batch-0001.avro"]
    assert out.count == 200


def test_a_failed_write_leaves_neither_the_file_nor_its_temporary(tmp_path):
    path = tmp_path / "batch.avro"
    with pytest.raises(RuntimeError, match="collector stopped"), ReportFile(path) as out:
        out.write(reports("g"))
        raise RuntimeError("collector stopped")
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ValueError), ReportFile(path, codec="no-such-codec"):
        pass
    assert list(tmp_path.iterdir()) == []


def test_a_report_file_name_ends_with_avro(tmp_path):
    with pytest.raises(InputError, match="must end with .avro"):
        ReportFile(tmp_path / "batch.tmp")


@pytest.mark.parametrize("codec", ["null", "deflate"])
def test_the_reference_avro_library_reads_client_files_with_their_fingerprints(tmp_path, codec):
    for name in ("g", "h", "s"):
        encoded = reports(name)
        path = write_report_file(tmp_path / f"{name}.avro", encoded, codec=codec)
        with avro.datafile.DataFileReader(open(path, "rb"), avro.io.DatumReader()) as reader:
            records = list(reader)
        assert [r["report_id"] for r in records] == encoded.report_ids.tolist()
        assert {r["fingerprint"] for r in records} == {REGISTRY[name].fingerprint}
        assert {r["metric"] for r in records} == {name}


def test_the_job_decodes_client_files_into_the_encoded_columns(tmp_path):
    encoded = reports("h", n=500)
    path = tmp_path / "h.avro"
    with ReportFile(path, block_bytes=1_000) as out:  # many blocks
        out.write(encoded.rows(slice(0, 100)))
        out.write(encoded.rows(slice(100, 500)).records())
        out.write([encode(REGISTRY["h"], 3, np.random.default_rng(1), event_time_ms=T0)])
    decoder = ReportDecoder(REGISTRY, 4 * HOUR)
    batches = list(decoder.decode_file(str(path)))
    assert decoder.records_read == 501
    rows = sum(len(next(iter(b.columns.values()))) for b in batches)
    assert rows == 501
    decoded = {k: np.concatenate([b.columns[k] for b in batches]) for k in batches[0].columns}
    for column, values in encoded.columns.items():
        np.testing.assert_array_equal(decoded[column][:500], values)


def test_simulate_writes_client_files_that_carry_the_fingerprint(tmp_path):
    from ldp_telemetry.pipelines.csv_input import TrueValues
    from ldp_telemetry.pipelines.simulate import simulate_reports
    config = REGISTRY["g"]
    rng = np.random.default_rng(5)
    truth = TrueValues(rng.integers(0, 3, 250), T0 + rng.integers(0, HOUR, 250))
    paths = simulate_reports(config, truth, str(tmp_path), seed=5, reports_per_file=100,
                             progress=None)
    assert [p.rsplit("/", 1)[1] for p in paths] == [f"g-0000{k}.avro" for k in range(3)]
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"g-0000{k}.avro" for k in range(3)]
    records = []
    for path in paths:
        with avro.datafile.DataFileReader(open(path, "rb"), avro.io.DatumReader()) as reader:
            records += list(reader)
    assert len(records) == 250
    assert {r["fingerprint"] for r in records} == {config.fingerprint}
