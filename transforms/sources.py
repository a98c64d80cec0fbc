"""Where a live run's reports come from: one interface, a registry of named sources.

Every source is a `ReportSource`: a PTransform applied to the pipeline's root that gives a dict
with `batches`: (metric, ReportBatch) stamped with the batch's slice start, and `dead_letters`:
DeadLetter — what `ldp_telemetry.pipelines.graph.build_streaming_pipeline` takes. Sources are
registered by name (`register_source`); `make_source(name, location, ...)` makes the one a job
names (`ldp run --source NAME --follow LOCATION`):

* `directory` (local runners): a followed directory. A `TestStream(endpoint=...)` served by
  `ldp_telemetry.pipelines.follower`, which picks up complete report files, decodes them with the
  batch job's decoder and announces the watermark (`FollowedDirectory`).
* `pubsub` (Dataflow): `ReadFromPubSub` of report messages (`PubSubReports`, message format below).
* `match-continuously` (Flink, or any portable runner with an unbounded splittable-DoFn source):
  `fileio.MatchContinuously` over `DIR/*.avro`, decoded by `ReadReportBatches`
  (`MatchedReportFiles`).

Pub/Sub message: `data` is ONE Avro object container file written with `schemas/report.avsc`
or with `schemas/envelope.avsc` (report envelopes, docs/envelopes.md; any codec the batch
decoder reads; one or many reports, of any metrics) — exactly what a collector would write to a
file; attributes:

* `event_time` (`EVENT_TIME_ATTRIBUTE`): the smallest event time among the message's reports, in
  epoch milliseconds as a decimal string (RFC 3339 is accepted too). Dataflow's watermark follows
  it, so a report is never behind the watermark of its own message.
* `message_id` (`MESSAGE_ID_ATTRIBUTE`): a unique id chosen by the collector; a message published
  twice with the same id (a retry) is delivered once (Dataflow deduplicates on it).

A message that is not a report container is an `undecodable` dead letter whose source is
`pubsub:<message_id>`.
"""
from __future__ import annotations

import io
import os
from collections.abc import Callable
from dataclasses import dataclass

import apache_beam as beam
from apache_beam.io import fileio
from apache_beam.testing.test_stream import TestStream

from ldp_telemetry.ldp.base.errors import ConfigError
from ldp_telemetry.ldp.base.registration import Catalog
from ldp_telemetry.ldp.config.registry import Registry
from ldp_telemetry.schemas.limits import DecodeLimits
from ldp_telemetry.transforms.read import (BATCHES, DEAD_LETTERS, DecodeReportFilesFn,
                                           ReadReportBatches)

EVENT_TIME_ATTRIBUTE = "event_time"
MESSAGE_ID_ATTRIBUTE = "message_id"
REPORT_FILE_PATTERN = "*.avro"
DEFAULT_MATCH_INTERVAL_S = 10.0


class ReportSource(beam.PTransform):
    """The interface of every source: PBegin -> {`batches`: (metric, ReportBatch) stamped with
    its slice start, `dead_letters`: DeadLetter}."""


@dataclass(frozen=True)
class SourceSettings:
    """What a source needs besides its location: how to decode reports as the batch job does,
    and, for the followed directory, the follower's TestStream endpoint."""

    registry: Registry
    slice_ms: int
    slice_offset_ms: int = 0
    limits: DecodeLimits = DecodeLimits()
    endpoint: str | None = None
    match_interval_s: float = DEFAULT_MATCH_INTERVAL_S


#: A source factory: (location, settings) -> the source.
SourceFactory = Callable[[str, SourceSettings], ReportSource]
#: Every source by name, in the order registered (the first is the default); an unknown name is
#: a ConfigError of the job setting `source`.
SOURCES: Catalog[SourceFactory] = Catalog("source", "source", error=ConfigError)


def register_source(name: str) -> Callable[[SourceFactory], SourceFactory]:
    """Decorator: register `factory(location, settings)` as the source called `name`."""
    def register(factory: SourceFactory) -> SourceFactory:
        return SOURCES.register(factory, name)
    return register


def source_names() -> tuple[str, ...]:
    """The registered source names, the default first."""
    return tuple(SOURCES)


def make_source(name: str, location: str, registry: Registry, slice_ms: int,
                slice_offset_ms: int = 0, endpoint: str | None = None,
                match_interval_s: float = DEFAULT_MATCH_INTERVAL_S,
                limits: DecodeLimits = DecodeLimits()) -> ReportSource:
    """The source registered as `name`, following `location`.

    ConfigError (field `source`) for an unknown name; each factory checks its location
    (field `follow`).
    """
    settings = SourceSettings(registry, slice_ms, slice_offset_ms, limits, endpoint,
                              match_interval_s)
    return SOURCES.lookup(name)(location, settings)


class FollowedDirectory(ReportSource):
    """Report batches announced by a directory follower over the TestStream service protocol.

    `endpoint` is the 127.0.0.1:PORT of a running `TestStreamServiceController` whose events are
    produced by `ldp_telemetry.pipelines.follower.DirectoryFollower`: the files are decoded there
    (with the batch decoder), so the elements are already batches and dead letters, and the
    follower's watermark is the stream's. Runs on `BundleBasedDirectRunner` with `--streaming`.
    """

    def __init__(self, endpoint: str):
        super().__init__()
        self._endpoint = endpoint

    def expand(self, pbegin):
        return pbegin | "Arrivals" >> TestStream(endpoint=self._endpoint,
                                                 output_tags=[BATCHES, DEAD_LETTERS])


class MatchedReportFiles(ReportSource):
    """Report files matched continuously (`fileio.MatchContinuously`) and decoded in batch style.

    `pattern` is a glob such as `DIR/*.avro`: a collector's temporary `*.avro.tmp` or `.name`
    files never match, so only complete, renamed files are read. Each file is read once
    (deduplicated by path). The watermark is the one MatchContinuously gives (its polling
    impulse, i.e. processing time): reports whose slice ended more than the allowed lateness
    before the wall clock are late data for the runner.
    """

    def __init__(self, registry: Registry, slice_ms: int, pattern: str,
                 interval_s: float = DEFAULT_MATCH_INTERVAL_S, slice_offset_ms: int = 0,
                 limits: DecodeLimits = DecodeLimits()):
        super().__init__()
        self._limits = limits
        if interval_s <= 0:
            raise ConfigError(f"match_interval_s must be positive, got {interval_s} s",
                              field="match_interval_s")
        self._registry = registry
        self._slice_ms = slice_ms
        self._slice_offset_ms = slice_offset_ms
        self._pattern = pattern
        self._interval_s = interval_s

    def expand(self, pbegin):
        return (pbegin
                | "MatchFiles" >> fileio.MatchContinuously(self._pattern,
                                                           interval=self._interval_s,
                                                           has_deduplication=True)
                | "FilePaths" >> beam.Map(lambda metadata: metadata.path)
                | "DecodeFiles" >> ReadReportBatches(self._registry, self._slice_ms,
                                                     slice_offset_ms=self._slice_offset_ms,
                                                     limits=self._limits))


class PubSubReports(ReportSource):
    """Report messages from Pub/Sub (see the module docstring for the message), decoded.

    Exactly one of `subscription` (projects/P/subscriptions/S, the production choice: it
    keeps messages while the job is down) or `topic` (projects/P/topics/T) is given.
    """

    def __init__(self, registry: Registry, slice_ms: int, subscription: str | None = None,
                 topic: str | None = None, slice_offset_ms: int = 0,
                 limits: DecodeLimits = DecodeLimits()):
        super().__init__()
        self._limits = limits
        if (subscription is None) == (topic is None):
            raise ConfigError("follow must name exactly one Pub/Sub subscription "
                              "(projects/P/subscriptions/S) or topic (projects/P/topics/T)",
                              field="follow")
        self._registry = registry
        self._slice_ms = slice_ms
        self._slice_offset_ms = slice_offset_ms
        self._subscription = subscription
        self._topic = topic

    def expand(self, pbegin):
        return (pbegin
                | "ReadMessages" >> beam.io.ReadFromPubSub(
                    subscription=self._subscription, topic=self._topic, with_attributes=True,
                    timestamp_attribute=EVENT_TIME_ATTRIBUTE, id_label=MESSAGE_ID_ATTRIBUTE)
                | "DecodeMessages" >> beam.ParDo(DecodeReportMessagesFn(
                    self._registry, self._slice_ms, self._slice_offset_ms, self._limits))
                .with_outputs(DEAD_LETTERS, main=BATCHES))


class DecodeReportMessagesFn(DecodeReportFilesFn):
    """Pub/Sub message (`.data`: one Avro report container, `.attributes`) -> batches, dead letters.

    The batch job's decoder reads the message body as it reads a file, so batches, dead letters
    and counters (namespace "ldp": records_read, records_accepted, batches,
    dead_letter.<reason>) are those a file of the same bytes would give.
    """

    def process(self, message):
        attributes = message.attributes or {}
        source = f"pubsub:{attributes.get(MESSAGE_ID_ATTRIBUTE, '?')}"
        body = bytes(message.data or b"")
        return self.decode(source, lambda _source, _mode: io.BytesIO(body))


# -- the registered sources (the first is the default) ------------------------------------------

@register_source("directory")
def followed_directory(location: str, settings: SourceSettings) -> ReportSource:
    """`location` is the followed directory; its follower serves `settings.endpoint`."""
    if settings.endpoint is None:
        raise ValueError("the directory source needs its follower's TestStream endpoint")
    return FollowedDirectory(settings.endpoint)


@register_source("pubsub")
def pubsub_reports(location: str, settings: SourceSettings) -> ReportSource:
    """`location` is a subscription (projects/P/subscriptions/S) or a topic
    (projects/P/topics/T)."""
    kind = ("subscription" if "/subscriptions/" in location
            else "topic" if "/topics/" in location else None)
    if kind is None:
        raise ConfigError(f"follow must be projects/P/subscriptions/S or projects/P/topics/T "
                          f"for the source pubsub, got {location!r}", field="follow")
    return PubSubReports(settings.registry, settings.slice_ms, **{kind: location},
                         slice_offset_ms=settings.slice_offset_ms, limits=settings.limits)


@register_source("match-continuously")
def matched_report_files(location: str, settings: SourceSettings) -> ReportSource:
    """`location` is a directory (its `*.avro` files are matched) or a glob."""
    pattern = (location if any(c in location for c in "*?[")
               else os.path.join(location, REPORT_FILE_PATTERN))
    return MatchedReportFiles(settings.registry, settings.slice_ms, pattern,
                              settings.match_interval_s, settings.slice_offset_ms,
                              settings.limits)
