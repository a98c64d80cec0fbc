"""The source interface: the Pub/Sub message decoder (without Pub/Sub), the Flink graph's
structure (MatchContinuously, built and inspected, not run), and the one flag that picks."""
from __future__ import annotations

from dataclasses import dataclass

import apache_beam as beam
import numpy as np
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.portability.api import beam_runner_api_pb2

from ldp_telemetry.ldp.base.errors import ConfigError
from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.ldp.config.windows import WindowSpec
from ldp_telemetry.ldp.engine.batches import DeadLetter, ReportBatch
from ldp_telemetry.ldp.protocols import make_protocol
from ldp_telemetry.pipelines.job import EstimateJob, LiveConfig
from ldp_telemetry.pipelines.remote import build_remote_pipeline
from ldp_telemetry.schemas.codec import write_reports
from ldp_telemetry.transforms import sources
from ldp_telemetry.transforms.sources import (DecodeReportMessagesFn, FollowedDirectory,
                                              MatchedReportFiles, PubSubReports, ReportSource,
                                              make_source)

T0 = 1_709_251_200_000
MINUTE = 60_000
PROTOCOL = make_protocol("grr", 1.0, 3)
REGISTRY = parse_registry({"metrics": [
    {"name": "s.grr", "protocol": "grr", "epsilon": 1.0, "domain": {"size": 3}}]})


@dataclass
class Message:
    """What ReadFromPubSub(with_attributes=True) gives: bytes and attributes."""

    data: bytes
    attributes: dict


def container(tmp_path, times_ms) -> bytes:
    rng = np.random.default_rng(1)
    times = np.asarray(times_ms, dtype=np.int64)
    path = tmp_path / "m.avro"
    write_reports(str(path), "s.grr", PROTOCOL, np.arange(len(times)), times,
                  PROTOCOL.perturb(rng.integers(0, 3, len(times)), rng))
    return path.read_bytes()


def test_a_pubsub_message_decodes_like_a_file_of_the_same_bytes(tmp_path):
    body = container(tmp_path, [T0 + 5, T0 + 6, T0 + MINUTE + 1])
    fn = DecodeReportMessagesFn(REGISTRY, MINUTE)
    fn.setup()
    out = [getattr(x, "value", x) for x in fn.process(
        Message(body, {"event_time": str(T0 + 5), "message_id": "m-1"}))]
    batches = [v for _, v in (x for x in out if isinstance(x, tuple))]
    assert [(b.slice_start_ms, b.n) for b in batches] == [(T0, 2), (T0 + MINUTE, 1)]
    assert all(isinstance(b, ReportBatch) for b in batches)
    junk = list(fn.process(Message(b"not avro", {"message_id": "m-2"})))
    letter = junk[0].value
    assert isinstance(letter, DeadLetter) and letter.reason == "undecodable"
    assert letter.source == "pubsub:m-2"


def graph(tmp_path, live):
    options = PipelineOptions(["--streaming"])
    pipeline = beam.Pipeline(options=options)
    job = EstimateJob(REGISTRY, (), str(tmp_path / "out"),
                      WindowSpec(MINUTE, MINUTE, allowed_lateness_ms=MINUTE,
                                 early_every_ms=5000))
    build_remote_pipeline(pipeline, job, live)
    return pipeline.to_runner_api()


def test_the_flink_graph_matches_files_continuously_and_writes_panes(tmp_path):
    proto = graph(tmp_path, LiveConfig("match-continuously", str(tmp_path / "in")))
    names = {t.unique_name for t in proto.components.transforms.values()}
    assert {"ReadReports/MatchFiles", "ReadReports/FilePaths", "ReadReports/DecodeFiles",
            "FinalizeEstimates", "WritePanes", "WriteDeadLetters"} <= names
    # the splittable DoFn that polls the pattern (Beam's Watch transform)
    assert any(name.startswith("ReadReports/MatchFiles/") and "WatchGrowth" in name
               for name in names)
    # what MatchContinuously matches is the folder's complete report files
    source = next(t for t in proto.components.transforms.values()
                  if t.unique_name == "ReadReports/FilePaths")
    matched = proto.components.pcollections[next(iter(source.inputs.values()))]
    assert matched.is_bounded == beam_runner_api_pb2.IsBounded.UNBOUNDED
    assert make_source("match-continuously", str(tmp_path / "in"), REGISTRY, MINUTE
                       )._pattern == str(tmp_path / "in" / "*.avro")


def test_one_flag_picks_the_source():
    assert isinstance(make_source("directory", "d", REGISTRY, MINUTE, endpoint="127.0.0.1:1"),
                      FollowedDirectory)
    assert isinstance(make_source("pubsub", "projects/p/subscriptions/s", REGISTRY, MINUTE),
                      PubSubReports)
    assert isinstance(make_source("pubsub", "projects/p/topics/t", REGISTRY, MINUTE),
                      PubSubReports)
    assert isinstance(make_source("match-continuously", "d/*.avro", REGISTRY, MINUTE),
                      MatchedReportFiles)
    with pytest.raises(ConfigError, match="^follow must be projects") as error:
        make_source("pubsub", "my-topic", REGISTRY, MINUTE)
    assert error.value.field == "follow"
    with pytest.raises(ConfigError, match="^unknown source 'kafka'; known: directory, "
                                          "match-continuously, pubsub$") as error:
        make_source("kafka", "x", REGISTRY, MINUTE)
    assert error.value.field == "source"
    with pytest.raises(ConfigError, match="^unknown source 'kafka'") as error:
        LiveConfig("kafka", "x")
    assert error.value.field == "source"


def test_a_registered_source_is_made_by_name(request):
    """Adding a source is one registered factory: `make_source`, `--source`'s choices and
    LiveConfig's check all read the registry."""
    request.addfinalizer(lambda: sources.SOURCES.pop("replayed", None))
    made = []

    @sources.register_source("replayed")
    def replayed(location, settings):
        made.append((location, settings))
        return sources.ReportSource()

    assert sources.source_names() == ("directory", "pubsub", "match-continuously", "replayed")
    assert isinstance(make_source("replayed", "somewhere", REGISTRY, MINUTE, 5), ReportSource)
    [(location, settings)] = made
    assert location == "somewhere" and settings.registry is REGISTRY
    assert (settings.slice_ms, settings.slice_offset_ms) == (MINUTE, 5)
    assert LiveConfig("replayed", "x").source == "replayed"
    with pytest.raises(ValueError, match="source 'replayed' is registered twice"):
        sources.register_source("replayed")(lambda location, settings: None)
