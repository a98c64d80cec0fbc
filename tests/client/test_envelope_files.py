"""Envelope files of the client: written then renamed as report files, read by every reader, and
counted as the same reports as a per-report file of them."""
from __future__ import annotations

import avro.datafile
import avro.io
import numpy as np
import pytest

from ldp_telemetry.client import EnvelopeFile, write_envelope_file, write_report_file
from ldp_telemetry.client.files import TEMPORARY_SUFFIX
from ldp_telemetry.ldp.base.errors import ConfigError, InputError
from ldp_telemetry.ldp.engine.batches import REPORT_ID, ReportBatch
from ldp_telemetry.schemas.codec import ReportDecoder
from tests.client.test_report_files import HOUR, REGISTRY, reports


def test_the_envelope_file_is_written_under_a_temporary_name_and_renamed(tmp_path):
    path = tmp_path / "batch-0001.avro"
    with EnvelopeFile(path, envelope_reports=64) as out:
        out.write(reports("g"))
        assert (tmp_path / f"batch-0001.avro{TEMPORARY_SUFFIX}").exists()
        assert not path.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["batch-0001.avro"]
    assert out.count == 200
    with open(path, "rb") as handle:
        records = list(avro.datafile.DataFileReader(handle, avro.io.DatumReader()))
    assert [r["count"] for r in records] == [64, 64, 64, 8]
    assert {r["fingerprint"] for r in records} == {REGISTRY["g"].fingerprint}


def test_an_error_leaves_no_file(tmp_path):
    path = tmp_path / "batch.avro"
    with pytest.raises(RuntimeError, match="boom"), EnvelopeFile(path) as out:
        out.write(reports("h"))
        raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []


def test_an_envelope_file_takes_encoded_reports_and_a_positive_envelope_size(tmp_path):
    with pytest.raises(InputError, match="takes EncodedReports"), \
            EnvelopeFile(tmp_path / "a.avro") as out:
        out.write(list(reports("g").records()))
    with pytest.raises(ConfigError, match=r"envelope_reports must be an integer in \[1, "):
        EnvelopeFile(tmp_path / "b.avro", envelope_reports=0).open()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", ["g", "h", "s"])
def test_envelope_and_per_report_files_of_the_same_reports_decode_alike(tmp_path, name):
    encoded = reports(name, 500, seed=4)
    decoded = {}
    for layout, write in (("records", write_report_file), ("envelope", write_envelope_file)):
        path = write(tmp_path / f"{layout}.avro", encoded)
        items = list(ReportDecoder(REGISTRY, HOUR).decode_file(str(path)))
        assert all(isinstance(i, ReportBatch) for i in items)
        columns = {k: np.concatenate([b.columns[k] for b in items]) for k in items[0].columns}
        order = np.argsort(columns[REPORT_ID], kind="stable")
        decoded[layout] = {k: v[order] for k, v in columns.items()}
    assert decoded["records"].keys() == decoded["envelope"].keys()
    for key, values in decoded["records"].items():
        np.testing.assert_array_equal(decoded["envelope"][key], values, err_msg=key)


def test_simulate_writes_envelope_files_of_the_same_reports_as_per_report_files(tmp_path):
    from ldp_telemetry.pipelines.csv_input import TrueValues
    from ldp_telemetry.pipelines.simulate import simulate_reports
    config = REGISTRY["g"]
    rng = np.random.default_rng(5)
    truth = TrueValues(rng.integers(0, 3, 250), 1_717_200_000_000 + rng.integers(0, HOUR, 250))
    layouts = {}
    for layout, size in (("records", None), ("envelope", 40)):
        paths = simulate_reports(config, truth, str(tmp_path / layout), seed=5,
                                 reports_per_file=100, progress=None, envelope_reports=size)
        assert [p.rsplit("/", 1)[1] for p in paths] == [f"g-0000{k}.avro" for k in range(3)]
        batches = [b for path in paths
                   for b in ReportDecoder(REGISTRY, HOUR).decode_file(path)]
        columns = {k: np.concatenate([b.columns[k] for b in batches]) for k in batches[0].columns}
        order = np.argsort(columns[REPORT_ID], kind="stable")
        layouts[layout] = {k: v[order] for k, v in columns.items()}
    with open(tmp_path / "envelope" / "g-00000.avro", "rb") as handle:
        counts = [r["count"] for r in avro.datafile.DataFileReader(handle, avro.io.DatumReader())]
    assert counts == [40, 40, 20]
    for key, values in layouts["records"].items():
        np.testing.assert_array_equal(layouts["envelope"][key], values, err_msg=key)
