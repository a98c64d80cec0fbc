"""Interoperability with Apache's reference `avro` library, in both directions."""
from __future__ import annotations

import datetime as dt
import glob
import io
import json
from pathlib import Path

import avro.datafile
import avro.io
import avro.schema
import numpy as np
import pytest

from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.ldp.config.windows import WindowSpec
from ldp_telemetry.ldp.engine.batches import ReportBatch
from ldp_telemetry.pipelines.batch import run_job
from ldp_telemetry.pipelines.job import EstimateJob
from ldp_telemetry.schemas import SCHEMA_DIR, report_schema_json
from ldp_telemetry.schemas.codec import ReportDecoder, write_reports
from tests.json_lines import json_lines

REGISTRY = parse_registry({"metrics": [
    {"name": "a.grr", "protocol": "grr", "epsilon": 1.0, "domain": {"labels": ["x", "y", "z"]}},
    {"name": "a.oue", "protocol": "oue", "epsilon": 2.0, "domain": {"size": 11}},
    {"name": "a.olh", "protocol": "olh", "epsilon": 1.5, "domain": {"size": 20}},
]})
HOUR = 3_600_000
T0 = 1_717_200_000_000  # 2024-06-01T00:00:00Z
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def reference_read(path):
    with avro.datafile.DataFileReader(open(path, "rb"), avro.io.DatumReader()) as reader:
        return list(reader)


def reference_schema(name):
    return avro.schema.parse((SCHEMA_DIR / f"{name}.avsc").read_text())


def simulated(seed, n=300):
    """Per metric: (report ids, event times ms, payload columns)."""
    rng = np.random.default_rng(seed)
    out = {}
    for k, config in enumerate(REGISTRY.metrics):
        protocol = config.protocol
        ids = np.arange(n) + 10_000 * k
        times = T0 + rng.integers(0, 3 * HOUR, n)
        out[config.name] = (ids, times, protocol.perturb(rng.integers(0, protocol.d, n), rng))
    return out


SCHEMA_NAMES = ("report", "envelope", "window_estimate", "dead_letter")


@pytest.mark.parametrize("name", SCHEMA_NAMES)
def test_every_schema_parses_with_the_reference_library(name):
    schema = reference_schema(name)
    assert schema.type == "record" and schema.namespace == "ldp.telemetry"
    assert schema.fullname in {"ldp.telemetry.Report", "ldp.telemetry.ReportEnvelope",
                               "ldp.telemetry.WindowEstimate", "ldp.telemetry.DeadLetter"}
    assert sorted(Path(SCHEMA_DIR).glob("*.avsc")) == sorted(
        SCHEMA_DIR / f"{n}.avsc" for n in SCHEMA_NAMES)


@pytest.mark.parametrize("codec", ["null", "deflate"])
def test_project_report_files_read_with_the_reference_library(tmp_path, codec):
    for name, (ids, times, columns) in simulated(1).items():
        protocol = REGISTRY[name].protocol
        path = tmp_path / f"{name}.avro"
        write_reports(str(path), name, protocol, ids, times, columns, codec=codec)
        records = reference_read(path)
        assert [r["report_id"] for r in records] == ids.tolist()
        assert {r["metric"] for r in records} == {name}
        assert [round((r["event_time"] - EPOCH).total_seconds() * 1000) for r in records] == \
            times.tolist()
        payloads = [r["payload"] for r in records]
        if protocol.name == "grr":
            assert [p["value"] for p in payloads] == columns["value"].tolist()
        elif protocol.name == "oue":
            assert [p["bits"] for p in payloads] == [row.tobytes() for row in columns["bits"]]
        else:
            assert [p["seed"] for p in payloads] == columns["seed"].tolist()
            assert [p["y"] for p in payloads] == columns["y"].tolist()


def reference_payload(protocol, columns, i):
    if protocol.name == "grr":
        return {"value": int(columns["value"][i])}
    if protocol.name == "oue":
        return {"bits": columns["bits"][i].tobytes()}
    return {"seed": int(columns["seed"][i]), "y": int(columns["y"][i])}


def batches_by_key(path, slice_ms=HOUR):
    decoder = ReportDecoder(REGISTRY, slice_ms)
    items = list(decoder.decode_file(str(path)))
    assert all(isinstance(i, ReportBatch) for i in items), items
    out = {}
    for batch in items:
        key = (batch.metric, batch.slice_start_ms)
        assert key not in out
        out[key] = batch.columns
    return decoder.records_read, out


@pytest.mark.parametrize("codec", ["null", "deflate"])
def test_reference_library_report_files_read_by_the_project(tmp_path, codec):
    # The reference library picks a union branch by shape, and several protocols share a
    # shape, so each metric's file is written with the report schema cut to its branch.
    data = simulated(2)
    total, records_read, decoded = 0, 0, {}
    for name, (ids, times, columns) in data.items():
        protocol = REGISTRY[name].protocol
        path = tmp_path / f"reference-{name}.avro"
        schema = avro.schema.parse(json.dumps(report_schema_json(protocol.payload_record)))
        writer = avro.datafile.DataFileWriter(open(path, "wb"), avro.io.DatumWriter(), schema,  # noqa: SIM115 - closed by writer.close()
                                              codec=codec)
        for i in range(len(ids)):
            writer.append({"report_id": int(ids[i]), "metric": name,
                           "event_time": EPOCH + dt.timedelta(milliseconds=int(times[i])),
                           "payload": reference_payload(protocol, columns, i)})
            total += 1
        writer.close()
        read, batches = batches_by_key(path)
        records_read += read
        decoded.update(batches)
    assert records_read == total
    # Expected batches: each metric's columns split by hour, in file order.
    expected = {}
    for name, (_ids, times, columns) in data.items():
        for start in np.unique(times // HOUR * HOUR).tolist():
            rows = times // HOUR * HOUR == start
            expected[(name, start)] = {k: v[rows] for k, v in columns.items()}
    assert decoded.keys() == expected.keys()
    for key, columns in expected.items():
        for column, values in columns.items():
            np.testing.assert_array_equal(decoded[key][column], values)

    # The same reports written by the project decode to the same batches.
    for name, (ids, times, columns) in data.items():
        own = tmp_path / f"own-{name}.avro"
        write_reports(str(own), name, REGISTRY[name].protocol, ids, times, columns, codec=codec)
        _, own_batches = batches_by_key(own)
        for key, cols in own_batches.items():
            for column, values in cols.items():
                np.testing.assert_array_equal(decoded[key][column], values)


@pytest.fixture(scope="module")
def pipeline_output(tmp_path_factory):
    """A small job: three metrics over three hours, plus an unknown metric and a non-Avro file."""
    root = tmp_path_factory.mktemp("interop")
    files = []
    for name, (ids, times, columns) in simulated(3).items():
        path = root / f"{name}.avro"
        write_reports(str(path), name, REGISTRY[name].protocol, ids, times, columns)
        files.append(str(path))
    stray = root / "stray.avro"
    write_reports(str(stray), "not.registered", REGISTRY["a.grr"].protocol, np.arange(4),
                  np.full(4, T0), {"value": np.array([0, 1, 2, 0])})
    junk = root / "junk.avro"
    junk.write_bytes(b"definitely not avro")
    files += [str(stray), str(junk)]
    job = EstimateJob(REGISTRY, tuple(files), str(root / "out"), WindowSpec(HOUR, HOUR))
    run_job(job, [], out=io.StringIO())
    return root / "out"


def only(pattern):
    [path] = glob.glob(pattern)
    return path


def test_estimate_avro_files_read_with_the_reference_library(pipeline_output):
    records = reference_read(only(str(pipeline_output / "estimates-*.avro")))
    expected = json_lines(str(pipeline_output / "estimates-*.jsonl"))
    assert len(records) == len(expected) == 9  # 3 metrics × 3 hours
    def key(r):
        return (r["metric"], r["window_start"])
    # frequency records leave the numeric fields out of the JSON; Avro fills in their null default
    for record, line in zip(sorted(records, key=key), sorted(expected, key=key), strict=True):
        assert all(record[name] is None for name in set(record) - set(line))
        post = record["postprocess"]  # likewise the replay's choice, for a fixed method
        assert all(post.pop(name) is None for name in set(post) - set(line["postprocess"]))
        assert {name: record[name] for name in line} == line


def test_dead_letter_avro_files_read_with_the_reference_library(pipeline_output):
    records = reference_read(only(str(pipeline_output / "dead_letters-*.avro")))
    expected = json_lines(str(pipeline_output / "dead_letters-*.jsonl"))
    def key(r):
        return (r["source"], r["report"] or "")
    assert sorted(records, key=key) == sorted(expected, key=key)
    assert sorted(r["reason"] for r in records) == ["undecodable"] + ["unknown_metric"] * 4
