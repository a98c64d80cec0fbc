"""The live run's event stream: what the directory follower announces, served to Beam.

No unbounded source runs on Beam's local runners; a `TestStream(endpoint=...)` does, on
BundleBasedDirectRunner with `--streaming`. `EventStream` is a TestStream service on 127.0.0.1
whose events (report batches, dead letters, watermark and processing-time advances) are put in
by `ldp_telemetry.pipelines.follower.DirectoryFollower` as files arrive.
"""
from __future__ import annotations

import queue
import socket
import threading
import time

from apache_beam.coders import FastPrimitivesCoder
from apache_beam.portability.api import beam_runner_api_pb2
from apache_beam.testing.test_stream_service import TestStreamServiceController

from ldp_telemetry.ldp.engine.batches import DeadLetter, ReportBatch
from ldp_telemetry.transforms.read import BATCHES, DEAD_LETTERS

# One stream element is at most this many bytes of payload columns: the TestStream service's
# client (inside Beam) accepts gRPC messages of at most 4 MiB.
MAX_ELEMENT_BYTES = 1 << 20
_Event = beam_runner_api_pb2.TestStreamPayload.Event
_Element = beam_runner_api_pb2.TestStreamPayload.TimestampedElement


class EventStream:
    """A TestStream service on 127.0.0.1 whose events are whatever the follower puts in.

    Processing time is the wall time elapsed since `start()`: `tick()` advances it to now.
    Beam's TestStream client gives up after 30 s without an event, so a heartbeat thread ticks
    whenever no event was put for HEARTBEAT_S (e.g. while a large file is decoded).
    """

    HEARTBEAT_S = 5.0

    def __init__(self, clock=time.monotonic):
        self._events: queue.Queue = queue.Queue()
        self._coder = FastPrimitivesCoder()
        self._clock = clock
        self._lock = threading.Lock()
        self._last_tick = self._last_put = clock()
        self._closed = threading.Event()
        self.endpoint = None
        self._controller = None

    def start(self, attempts: int = 5) -> str:
        """Serve on a free 127.0.0.1 port; returns the endpoint (HOST:PORT)."""
        for _ in range(attempts):
            probe = socket.socket()
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
            probe.close()
            endpoint = f"127.0.0.1:{port}"
            try:
                controller = TestStreamServiceController(self, endpoint=endpoint)
            except RuntimeError:  # the port was taken in between
                continue
            controller.start()
            self._controller, self.endpoint = controller, endpoint
            self._last_tick = self._last_put = self._clock()
            threading.Thread(target=self._heartbeat, name="ldp-stream-heartbeat",
                             daemon=True).start()
            return endpoint
        raise OSError("no free 127.0.0.1 port for the TestStream service")

    def stop(self) -> None:
        self._closed.set()
        if self._controller is not None:
            self._controller.stop()
            self._controller = None

    def read_multiple(self, _tags):
        """The service's event reader: blocks for the next event; ends at `close()`."""
        while True:
            event = self._events.get()
            if event is None:
                return
            yield event

    def _put(self, event) -> None:
        with self._lock:
            self._events.put(event)
            self._last_put = self._clock()

    def _heartbeat(self) -> None:
        while not self._closed.wait(self.HEARTBEAT_S / 5):
            if self._clock() - self._last_put >= self.HEARTBEAT_S:
                self.tick()

    def tick(self) -> None:
        """Advance processing time by the wall time elapsed since the last tick."""
        with self._lock:
            now = self._clock()
            advance = max(1, round((now - self._last_tick) * 1e6))
            self._last_tick = now
            self._events.put(_Event(processing_time_event=_Event.AdvanceProcessingTime(
                advance_duration=advance)))
            self._last_put = now

    def add_batches(self, batches: list[ReportBatch]) -> None:
        """The batches as elements, several per event while they fit in MAX_ELEMENT_BYTES."""
        elements, size = [], 0
        for batch in batches:
            for piece in split_batch(batch):
                encoded = self._coder.encode((piece.metric, piece))
                if elements and size + len(encoded) > MAX_ELEMENT_BYTES:
                    self._put(_Event(element_event=_Event.AddElements(tag=BATCHES,
                                                                      elements=elements)))
                    elements, size = [], 0
                elements.append(_Element(encoded_element=encoded,
                                         timestamp=piece.slice_start_ms * 1000))
                size += len(encoded)
        if elements:
            self._put(_Event(element_event=_Event.AddElements(tag=BATCHES, elements=elements)))

    def add_dead_letters(self, letters: list[DeadLetter], at_ms: int) -> None:
        if letters:
            self._put(_Event(element_event=_Event.AddElements(tag=DEAD_LETTERS, elements=[
                _Element(encoded_element=self._coder.encode(letter), timestamp=at_ms * 1000)
                for letter in letters])))

    def advance_watermark(self, watermark_ms: int) -> None:
        for tag in (BATCHES, DEAD_LETTERS):
            self._put(_Event(watermark_event=_Event.AdvanceWatermark(
                tag=tag, new_watermark=watermark_ms * 1000)))

    def close(self) -> None:
        """End the stream: Beam then moves the watermark to +infinity and finishes."""
        self._closed.set()
        self._events.put(None)


def split_batch(batch: ReportBatch) -> list[ReportBatch]:
    """The batch in row ranges of at most MAX_ELEMENT_BYTES of columns each."""
    size = sum(column.nbytes for column in batch.columns.values())
    pieces = -(-size // MAX_ELEMENT_BYTES)
    if pieces <= 1:
        return [batch]
    step = -(-batch.n // pieces)
    return [ReportBatch(batch.metric, batch.slice_start_ms,
                        {k: v[lo:lo + step] for k, v in batch.columns.items()})
            for lo in range(0, batch.n, step)]
