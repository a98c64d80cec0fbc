"""ReportBatchCoder: batches cross the runner unchanged, in the job's own graph."""
from __future__ import annotations

import numpy as np
import pytest
from apache_beam import coders

from ldp_telemetry.schemas.batches import ReportBatch
from ldp_telemetry.transforms.coders import ReportBatchCoder, decode_batch, encode_batch


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
    back = decode_batch(encode_batch(batch))
    assert (back.metric, back.slice_start_ms, list(back.columns)) == ("m.x", -1_000, list(columns))
    for name, column in columns.items():
        got = back.columns[name]
        assert got.dtype == column.dtype and got.shape == column.shape
        np.testing.assert_array_equal(got, column)
        assert got.flags.writeable


def test_the_registry_gives_the_coder_for_keyed_batches():
    from apache_beam.typehints import native_type_compatibility
    hint = native_type_compatibility.convert_to_beam_type(tuple[tuple[str, int], ReportBatch])
    coder = coders.registry.get_coder(hint)
    assert isinstance(coder.coders()[1], ReportBatchCoder)
    batch = ReportBatch("m", 5, {"value": np.array([1, 2], dtype=np.int16)})
    (key, back) = coder.decode(coder.encode((("m", 5), batch)))
    assert key == ("m", 5) and back.columns["value"].tolist() == [1, 2]


def test_the_batch_job_sends_batches_to_the_grouping_with_the_coder(tmp_path):
    import apache_beam as beam

    from ldp_telemetry.ldp.registry import parse_registry
    from ldp_telemetry.ldp.windows import WindowSpec
    from ldp_telemetry.pipelines.graph import build_pipeline
    from ldp_telemetry.pipelines.job import EstimateJob
    registry = parse_registry({"metrics": [
        {"name": "m", "protocol": "grr", "epsilon": 1.0, "domain": {"size": 4}}]})
    pipeline = beam.Pipeline()
    build_pipeline(pipeline, EstimateJob(registry, ("unused.avro",), str(tmp_path),
                                         WindowSpec.from_seconds(60)))
    proto = pipeline.to_runner_api().components
    [keyed] = [proto.pcollections[out] for t in proto.transforms.values()
               if t.unique_name.endswith("CountSupport/IntoSlices") for out in t.outputs.values()]
    kv = proto.coders[keyed.coder_id]
    assert "ReportBatchCoder" in kv.component_coder_ids[1]
