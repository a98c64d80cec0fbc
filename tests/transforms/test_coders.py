"""ReportBatchCoder: batches cross the runner unchanged and uncopied, in the job's own graph."""
from __future__ import annotations

import numpy as np
import pytest
from apache_beam import coders

from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.ldp.engine.batches import REPORT_ID, ReportBatch
from ldp_telemetry.ldp.engine.counting import SliceCounter
from ldp_telemetry.ldp.protocols import NUMERIC_PROTOCOLS, PROTOCOLS
from ldp_telemetry.transforms.coders import (COLUMN_ALIGNMENT, ReportBatchCoder, decode_batch,
                                             encode_batch, encoded_size)


@pytest.mark.parametrize("columns", [
    {"value": np.array([3], dtype=np.int32), "report_id": np.array([7], dtype=np.int64)},
    {"bits": np.arange(24, dtype=np.uint8).reshape(4, 6)[:, ::2],  # not contiguous
     "report_id": np.array([-1, 2 ** 62, 0, 5], dtype=np.int64)},
    {"y": np.array([0.25, -1e300, np.nan]), "up": np.array([True, False, True])},
    {"value": np.array([], dtype=np.int64)},
    {"names": np.array(["a", None], dtype=object)},
    {"pairs": np.array([(1, 2.5), (-3, 0.0)], dtype=[("a", ">i4"), ("b", "<f8")])},
    {},
])
def test_round_trip_keeps_values_dtypes_and_shapes(columns):
    batch = ReportBatch("m.x", -1_000, columns)
    encoded = encode_batch(batch)
    assert ReportBatchCoder().estimate_size(batch) == encoded_size(batch) == len(encoded)
    back = decode_batch(encoded)
    assert (back.metric, back.slice_start_ms, list(back.columns)) == ("m.x", -1_000, list(columns))
    for name, column in columns.items():
        got = back.columns[name]
        assert got.dtype == column.dtype and got.shape == column.shape
        np.testing.assert_array_equal(got, column)
        if column.dtype.hasobject:
            continue
        assert not got.flags.writeable and got.flags.aligned  # read-only views, aligned


def test_the_registry_gives_the_coder_for_keyed_batches():
    from apache_beam.typehints import native_type_compatibility
    hint = native_type_compatibility.convert_to_beam_type(tuple[tuple[str, int], ReportBatch])
    coder = coders.registry.get_coder(hint)
    assert isinstance(coder.coders()[1], ReportBatchCoder)
    batch = ReportBatch("m", 5, {"value": np.array([1, 2], dtype=np.int16)})
    (key, back) = coder.decode(coder.encode((("m", 5), batch)))
    assert key == ("m", 5) and back.columns["value"].tolist() == [1, 2]


def test_keyed_counting_sends_batches_to_the_grouping_with_the_coder(tmp_path):
    """Batches grouped by slice (a batch source other than the file reader) use the coder; the
    batch job over files counts before the grouping and sends no batch through it."""
    import apache_beam as beam

    from ldp_telemetry.ldp.config.registry import parse_registry
    from ldp_telemetry.ldp.config.windows import WindowSpec
    from ldp_telemetry.pipelines.graph import build_pipeline
    from ldp_telemetry.pipelines.job import EstimateJob
    from ldp_telemetry.transforms.count import CountKeyedWindows
    registry = parse_registry({"metrics": [
        {"name": "m", "protocol": "grr", "epsilon": 1.0, "domain": {"size": 4}}]})
    spec = WindowSpec.from_seconds(60)
    pipeline = beam.Pipeline()
    _ = (pipeline | beam.Create([("m", ReportBatch("m", 0, {"value": np.zeros(1, np.int32)}))])
         | "CountSupport" >> CountKeyedWindows(registry, spec))
    proto = pipeline.to_runner_api().components
    [keyed] = [proto.pcollections[out] for t in proto.transforms.values()
               if t.unique_name.endswith("CountSupport/IntoSlices") for out in t.outputs.values()]
    kv = proto.coders[keyed.coder_id]
    assert "ReportBatchCoder" in kv.component_coder_ids[1]

    pipeline = beam.Pipeline()
    build_pipeline(pipeline, EstimateJob(registry, ("unused.avro",), str(tmp_path), spec))
    proto = pipeline.to_runner_api().components
    [grouped] = [proto.pcollections[name] for t in proto.transforms.values()
                 if t.unique_name.endswith("CountSupport/GroupSlices")
                 for name in t.inputs.values()]
    assert not any(name.endswith("IntoSlices") for name in
                   (t.unique_name for t in proto.transforms.values()))
    assert "ReportBatchCoder" not in str(proto.coders[grouped.coder_id])


def test_decoded_columns_are_views_of_the_encoded_bytes_at_aligned_offsets():
    columns = {"flag": np.array([True, False, True]), "x": np.arange(5, dtype=np.int64),
               "bits": np.arange(6, dtype=np.uint8).reshape(3, 2), "y": np.arange(3.0)}
    encoded = encode_batch(ReportBatch("m", 0, columns))
    back = decode_batch(encoded)
    for name, column in back.columns.items():
        assert np.shares_memory(column, np.frombuffer(encoded, np.uint8)), name
        address = column.__array_interface__["data"][0]
        start = np.frombuffer(encoded, np.uint8).__array_interface__["data"][0]
        assert (address - start) % COLUMN_ALIGNMENT == 0, name
    with pytest.raises(ValueError, match="read-only"):
        back.columns["x"][0] = 1


def test_a_batch_decoded_from_unaligned_bytes_gets_aligned_read_only_copies():
    batch = ReportBatch("m", 0, {"x": np.arange(4, dtype=np.int64), "f": np.arange(3.0)})
    shifted = memoryview(b"?" + encode_batch(batch))[1:]  # starts one byte past the bytes' start
    back = decode_batch(shifted)
    for name, column in back.columns.items():
        np.testing.assert_array_equal(column, batch.columns[name])
        assert column.flags.aligned and not column.flags.writeable


def frequency_and_numeric_registry():
    """One metric per protocol, frequency and numeric, each with its default parameters."""
    metrics = [{"name": name, "protocol": name, "epsilon": 1.5, "domain": {"size": 13}}
               for name in PROTOCOLS]
    metrics += [{"name": name, "protocol": name, "epsilon": 1.5,
                 "domain": {"low": 0.0, "high": 1.0, "buckets": 16}} for name in NUMERIC_PROTOCOLS]
    return parse_registry({"metrics": metrics})


REGISTRY = frequency_and_numeric_registry()


@pytest.mark.parametrize("metric", sorted(REGISTRY.by_name))
def test_every_protocol_counts_a_decoded_read_only_batch_as_the_original(metric):
    # Every dtype and shape the protocols' payload columns have, with the report ids, crosses
    # the coder unchanged, and counting the read-only decoded batch (duplicate ids, the
    # integrity sample, the protocol's accumulate) gives the original batch's statistic.
    config = REGISTRY[metric]
    rng = np.random.default_rng(len(metric))
    values = (rng.random(600) if config.kind == "numeric" else rng.integers(0, config.d, 600))
    columns = dict(config.protocol.perturb(values, rng))
    columns[REPORT_ID] = np.concatenate([np.arange(550), np.arange(50)]).astype(np.int64)
    batch = ReportBatch(metric, 0, columns)
    back = decode_batch(encode_batch(batch))
    for name, column in columns.items():
        got = back.columns[name]
        assert got.dtype == column.dtype and got.shape == column.shape and not got.flags.writeable
        np.testing.assert_array_equal(got, column)
    want, got = SliceCounter(REGISTRY), SliceCounter(REGISTRY)
    want.add(batch)
    got.add(back)
    want, got = want.result(), got.result()
    assert got.n == want.n == 550 and got.duplicates == want.duplicates == 50
    np.testing.assert_array_equal(got.parts[1].table, want.parts[1].table)
