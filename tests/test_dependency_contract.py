"""The internals of Apache Beam, fastavro and scipy that the code leans on, each checked to exist
and to behave as the code uses it.

setup.py pins apache-beam and fastavro to the minor versions these checks pass with. A failure
here names the pin to revisit and the code that leans on the internal; moving a pin means running
this file against the new version and adapting that code where a check fails.
"""
from __future__ import annotations

import importlib.metadata
import importlib.util
import inspect
import io
import re
import socket
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from packaging.requirements import Requirement

BEAM_PIN = "apache-beam>=2.77,<2.78"
FASTAVRO_PIN = "fastavro>=1.13,<1.14"
SCIPY_PIN = "scipy>=1.10"


def revisit(pin: str, use: str) -> str:
    return f"revisit the pin {pin} in setup.py: {use}"


# -- the pins -----------------------------------------------------------------------------------

@pytest.mark.parametrize("pin", [BEAM_PIN, FASTAVRO_PIN])
def test_the_installed_distribution_pins_beam_and_fastavro_to_a_minor_version(pin):
    wanted = Requirement(pin)
    declared = [Requirement(text) for text in importlib.metadata.requires("ldp-telemetry")]
    runtime = [r for r in declared if r.name == wanted.name and r.marker is None]
    assert [str(r.specifier) for r in runtime] == [str(wanted.specifier)], \
        f"setup.py pins {[str(r) for r in runtime]}, this test checks {pin}: keep them together"
    installed = importlib.metadata.version(wanted.name)
    assert wanted.specifier.contains(installed), f"{wanted.name} {installed} is installed, " \
        f"outside {pin}"
    extras = [r for r in declared if r.name == wanted.name and r.marker is not None]
    assert all(str(r.specifier) == str(wanted.specifier) for r in extras), \
        f"an extra names {wanted.name} without the pin {pin}: {[str(r) for r in extras]}"


# -- fastavro -----------------------------------------------------------------------------------

READS = "schemas/ reads each verified block through one fastavro block reader"
SCHEMA = {"type": "record", "name": "ns.Report", "fields": [
    {"name": "id", "type": "long"},
    {"name": "event_time", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "payload", "type": ["null", {"type": "record", "name": "ns.P",
                                          "fields": [{"name": "v", "type": "int"}]}]}]}
RECORDS = [{"id": 1000 * i, "event_time": 1000 * i, "payload": ("ns.P", {"v": i})}
           for i in range(5)]


class ReadOnly:
    """A stream with read() and tell() only, as the block reader's feed in schemas/ is."""

    def __init__(self, data: bytes):
        self._data, self._at = data, 0

    def read(self, size: int = -1) -> bytes:
        size = len(self._data) - self._at if size < 0 else size
        out = self._data[self._at:self._at + size]
        self._at += len(out)
        return out

    def tell(self) -> int:
        return self._at


def container(codec: str = "null") -> bytes:
    import fastavro
    out = io.BytesIO()
    fastavro.writer(out, SCHEMA, RECORDS, codec=codec, sync_interval=16_000)
    return out.getvalue()


def test_fastavro_block_reader_exposes_the_blocks_data_stream():
    """`block.bytes_` is the block's data, read record by record as the block is iterated, so
    its position after each record is where that record ends."""
    import fastavro
    reader = fastavro.block_reader(ReadOnly(container()), return_record_name=True)
    assert reader.writer_schema["name"] == "ns.Report", revisit(FASTAVRO_PIN, READS)
    block = next(reader)
    stream = getattr(block, "bytes_", None)
    assert stream is not None and stream.tell() == 0, revisit(
        FASTAVRO_PIN, f"{READS}: it reads `block.bytes_` and its tell()")
    ends, decoded = [], []
    for record in block:
        decoded.append(record)
        ends.append(stream.tell())
    sizes = []
    for record in RECORDS:
        one = io.BytesIO()
        fastavro.schemaless_writer(one, fastavro.parse_schema(SCHEMA), record)
        sizes.append(one.tell())
    assert ends == np.cumsum(sizes).tolist(), revisit(
        FASTAVRO_PIN, f"{READS}: records are decoded lazily from `block.bytes_`, which must "
                      "stand just after each record as it is yielded")
    assert decoded[2]["payload"] == ("ns.P", {"v": 2}) and block.num_records == 5


@pytest.mark.parametrize("damaged, schema", [
    (bytes([2, 4]), SCHEMA),                                             # cut short
    (bytes([2, 2, 8, 0]), SCHEMA),                                       # union index out of range
    (bytes([3]), {"type": "record", "name": "S", "fields": [{"name": "s", "type": "string"}]}),
    (bytes([0x80, 0x80, 0x80, 0x80, 0x10]),                              # length past the end
     {"type": "record", "name": "S", "fields": [{"name": "s", "type": "string"}]}),
    (bytes([2, 0xFF]),                                                   # not UTF-8
     {"type": "record", "name": "S", "fields": [{"name": "s", "type": "string"}]}),
])
def test_fastavro_raises_only_the_expected_errors_on_damaged_data(damaged, schema):
    """schemas/ turns (EOFError, StopIteration, IndexError, ValueError) from fastavro's decoder
    into dead letters; anything else would end the job."""
    import fastavro
    with pytest.raises(Exception) as caught:
        fastavro.schemaless_reader(io.BytesIO(damaged), fastavro.parse_schema(schema))
    assert isinstance(caught.value, (EOFError, StopIteration, IndexError, ValueError)), revisit(
        FASTAVRO_PIN, f"schemas/ catches fastavro's data errors by type; got "
                      f"{type(caught.value).__name__}")


def test_fastavro_writer_class_writes_a_container_in_pieces():
    """transforms/ writes each output shard with fastavro.write.Writer(handle, schema, codec)."""
    import fastavro
    from fastavro.write import Writer
    out = io.BytesIO()
    writer = Writer(out, fastavro.parse_schema(SCHEMA), "deflate")
    for record in RECORDS:
        writer.write(record)
    writer.flush()
    assert len(list(fastavro.reader(io.BytesIO(out.getvalue())))) == len(RECORDS), revisit(
        FASTAVRO_PIN, "transforms/ writes Avro shards with fastavro.write.Writer")


# -- scipy --------------------------------------------------------------------------------------

def test_scipy_csr_matvec_adds_the_product_in_place():
    """ldp/ (numeric channels) calls scipy's compiled CSR kernel directly; without it EM falls
    back to `@`, a third slower."""
    from scipy import sparse
    use = "ldp/ calls scipy.sparse._sparsetools.csr_matvec(rows, cols, indptr, indices, data, " \
          "x, y), y += A x"
    try:
        from scipy.sparse._sparsetools import csr_matvec
    except ImportError:
        pytest.fail(revisit(SCIPY_PIN, use))
    matrix = sparse.random(5, 7, density=0.5, format="csr", random_state=1)
    x, y = np.arange(7.0), np.ones(5)
    csr_matvec(5, 7, matrix.indptr, matrix.indices, matrix.data, x, y)
    assert np.allclose(y, 1 + matrix @ x), revisit(SCIPY_PIN, use)


# -- Apache Beam --------------------------------------------------------------------------------

FOLLOWS = "pipelines/ serves a live run's events through Beam's TestStream service"


def free_port() -> int:
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    return port


@contextmanager
def controller(reader, endpoint):
    from apache_beam.testing.test_stream_service import TestStreamServiceController
    service = TestStreamServiceController(reader, endpoint=endpoint)
    service.start()
    try:
        yield service
    finally:
        service.stop()


def test_the_test_stream_service_streams_what_the_reader_yields():
    import grpc
    from apache_beam.portability.api import (beam_interactive_api_pb2,
                                             beam_interactive_api_pb2_grpc, beam_runner_api_pb2)
    event = beam_runner_api_pb2.TestStreamPayload.Event

    class Reader:
        tags = None

        def read_multiple(self, tags):
            Reader.tags = tags
            yield event(processing_time_event=event.AdvanceProcessingTime(advance_duration=7))
            yield event(watermark_event=event.AdvanceWatermark(new_watermark=1000, tag="b"))

    endpoint = f"127.0.0.1:{free_port()}"
    with controller(Reader(), endpoint), grpc.insecure_channel(endpoint) as channel:
        stub = beam_interactive_api_pb2_grpc.TestStreamServiceStub(channel)
        events = list(stub.Events(beam_interactive_api_pb2.EventsRequest(output_ids=["b", "d"]),
                                  timeout=30))
    assert [e.WhichOneof("event") for e in events] == ["processing_time_event",
                                                        "watermark_event"], revisit(
        BEAM_PIN, f"{FOLLOWS}: TestStreamServiceController(reader, endpoint=...) streams the "
                  "events of reader.read_multiple(tags)")
    assert Reader.tags == [("full", "b"), ("full", "d")], revisit(BEAM_PIN, FOLLOWS)


def test_the_test_stream_service_refuses_a_port_in_use_with_runtime_error():
    listening = socket.socket()
    listening.bind(("127.0.0.1", 0))
    listening.listen()
    try:
        with controller(object(), f"127.0.0.1:{listening.getsockname()[1]}"):
            refused = False
    except RuntimeError:
        refused = True
    finally:
        listening.close()
    assert refused, revisit(BEAM_PIN, f"{FOLLOWS}: a port taken between probing and binding is "
                                      "retried on RuntimeError")


def test_the_test_stream_client_limits_the_follower_relies_on():
    """A TestStream reads from an endpoint with `output_tags`; its client waits 30 s for an event
    (the follower's heartbeat ticks every 5 s) over a gRPC channel with the default 4 MiB
    message limit (the follower's elements stay at 1 MiB)."""
    from apache_beam.runners.direct import test_stream_impl
    from apache_beam.testing.test_stream import TestStream
    parameters = inspect.signature(TestStream.__init__).parameters
    assert {"endpoint", "output_tags"} <= set(parameters), revisit(
        BEAM_PIN, "transforms/ builds TestStream(endpoint=..., output_tags=[...])")
    source = inspect.getsource(test_stream_impl)
    timeouts = [int(t) for t in re.findall(r"channel\.get\(timeout=(\d+)\)", source)]
    assert timeouts == [30], revisit(
        BEAM_PIN, f"{FOLLOWS}: the heartbeat must tick well within the client's wait for an "
                  f"event (found {timeouts} s)")
    assert "grpc.insecure_channel(endpoint)" in source, revisit(
        BEAM_PIN, f"{FOLLOWS}: its elements are sized for gRPC's default 4 MiB message limit")


def test_pane_timing_names_written_into_pane_records():
    from apache_beam.utils.windowed_value import PaneInfoTiming
    names = [PaneInfoTiming.to_string(t) for t in (PaneInfoTiming.EARLY, PaneInfoTiming.ON_TIME,
                                                   PaneInfoTiming.LATE, PaneInfoTiming.UNKNOWN)]
    assert names == ["EARLY", "ON_TIME", "LATE", "UNKNOWN"], revisit(
        BEAM_PIN, "transforms/ writes PaneInfoTiming.to_string(...) into live records")


def test_the_trigger_driver_drops_expired_windows_silently():
    """transforms/ counts the reports that enter windows because Beam drops reports later than
    the allowed lateness without a counter (GeneralTriggerDriver.process_elements)."""
    from apache_beam.transforms import trigger, window
    from apache_beam.transforms.core import Windowing
    from apache_beam.utils.timestamp import Duration, Timestamp
    from apache_beam.utils.windowed_value import WindowedValue
    windowing = Windowing(window.FixedWindows(10),
                          triggerfn=trigger.AfterWatermark(late=trigger.AfterCount(1)),
                          accumulation_mode=trigger.AccumulationMode.ACCUMULATING,
                          allowed_lateness=Duration(5))
    driver = trigger.create_trigger_driver(windowing)
    assert isinstance(driver, trigger.GeneralTriggerDriver), revisit(
        BEAM_PIN, "transforms/: windows with a late trigger run GeneralTriggerDriver")
    value = WindowedValue("report", Timestamp(3), [window.IntervalWindow(0, 10)])
    expired = trigger.InMemoryUnmergedState()
    assert list(driver.process_elements(expired, [value], Timestamp(0), Timestamp(16))) == []
    kept = trigger.InMemoryUnmergedState()
    fired = list(driver.process_elements(kept, [value], Timestamp(0), Timestamp(14)))
    assert not expired.state and fired and fired[0].value == ["report"], revisit(
        BEAM_PIN, "transforms/ documents that reports past the allowed lateness are dropped "
                  "silently, and counts what enters windows instead")


def test_the_runner_entry_points_the_code_names():
    from apache_beam.options.pipeline_options import PipelineOptions
    from apache_beam.runners.direct.direct_runner import BundleBasedDirectRunner
    from apache_beam.runners.portability.fn_api_runner import FnApiRunner
    from apache_beam.runners.worker.worker_pool_main import BeamFnExternalWorkerPoolServicer
    assert callable(BundleBasedDirectRunner) and callable(FnApiRunner)
    known = set(PipelineOptions([]).get_all_options())
    given = PipelineOptions(["--window_ofset=3", "--streaming"]).get_all_options(
        retain_unknown_options=True)
    assert "streaming" in known and set(given) - known == {"window_ofset"}, revisit(
        BEAM_PIN, "runners/ finds misspelt flags with get_all_options(retain_unknown_options)")
    pool = BeamFnExternalWorkerPoolServicer(use_process=False)
    assert isinstance(getattr(pool, "_worker_processes", None), dict) and hasattr(
        pool, "StopWorker"), revisit(BEAM_PIN, "runners/ stops the worker pool's process workers "
                                               "through its _worker_processes")
    job_service = importlib.util.find_spec("apache_beam.runners.portability.local_job_service_main")
    source = job_service.loader.get_source(job_service.name) if job_service else ""
    assert "'--port'" in source and "'--port_file'" in source, revisit(
        BEAM_PIN, "runners/ starts `python -m ...local_job_service_main --port 0 --port_file F`")
    beam = Path(importlib.util.find_spec("apache_beam").origin).parent
    assert (beam / "runners" / "dataflow" / "internal" / "apiclient.py").is_file(), revisit(
        BEAM_PIN, "runners/ tells whether DataflowRunner can run by importing "
                  "apache_beam.runners.dataflow.internal.apiclient")


def test_the_dask_runner_internals_runners_dask_overrides():
    pytest.importorskip("distributed", reason="the Dask runner's extra is not installed")
    from apache_beam.runners.common import _OutputHandler
    from apache_beam.runners.dask import transform_evaluator
    from apache_beam.runners.dask.dask_runner import DaskOptions, DaskRunner
    from apache_beam.runners.dask.overrides import _Create
    use = "runners/dask.py keeps Beam's DaskRunner translation and overrides parts of it"
    assert DaskOptions._extract_bag_kwargs({"npartitions": 4, "address": "a"}) == {
        "npartitions": 4}, revisit(BEAM_PIN, use)
    visitor = DaskRunner.to_dask_bag_visitor({})
    assert isinstance(visitor.bags, dict) and transform_evaluator.TRANSLATIONS[_Create], \
        revisit(BEAM_PIN, use)
    assert issubclass(transform_evaluator.ParDo, transform_evaluator.DaskBagOp) and callable(
        transform_evaluator.get_windowed_value), revisit(BEAM_PIN, use)
    receivers = transform_evaluator.OneReceiver()
    _OutputHandler(window_fn=None, main_receivers=receivers[None], tagged_receivers=receivers,
                   per_element_output_counter=None, output_batch_converter=None,
                   process_yields_batches=False, process_batch_yields_elements=False)
    receivers[None].receive("x")
    assert receivers.values == ["x"], revisit(BEAM_PIN, use)
