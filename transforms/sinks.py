"""Where a job's records go: one interface, one implementation per kind of output.

A `Sink` adds its writing steps behind the job's two outputs, the window-estimate records and
the dead-letter records, and passes the estimate records on as it wrote them (a pane sink
continues the pane numbering of a restarted run; the store must see the panes as written).
`write_to_sinks` applies a job's list of sinks in order; the list itself is made in one place
(`ldp_telemetry.pipelines.graph.job_sinks`) for batch, live and remote runs alike.

* `EstimateShards`, `DeadLetterShards`: a batch run's `estimates-*` and `dead_letters-*` files
  (JSON lines and Avro, `ldp_telemetry.transforms.write`);
* `PaneFiles`: a live run's pane files, `latest.json` and `panes.log`
  (`ldp_telemetry.transforms.panes`);
* `DeadLetterFiles`: a live run's dead letters, one small file each under `dead_letters/`;
* `StoreSink`: the estimate store (`ldp_telemetry.transforms.store`).
"""
from __future__ import annotations

import abc
import json
import uuid
from collections.abc import Iterable, Mapping

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from ldp_telemetry.ldp.config.windows import WindowSpec
from ldp_telemetry.output.atomic import write_atomically
from ldp_telemetry.output.layout import DEAD_LETTER_DIR, DEAD_LETTERS, ESTIMATES
from ldp_telemetry.transforms.panes import WritePanesFn
from ldp_telemetry.transforms.store import WriteToStore
from ldp_telemetry.transforms.write import WriteRecords


class Sink(abc.ABC):
    """One output of a job."""

    @abc.abstractmethod
    def write(self, estimates: beam.PCollection, dead_letters: beam.PCollection
              ) -> beam.PCollection:
        """Add the steps that write what this sink takes of the estimate records and the
        dead-letter records (dicts in the window_estimate and dead_letter schemas; a batch run
        gives the dead letters as a tuple of PCollections, `dead_letter_parts`, each to be
        consumed where it is made); return the estimate records as written, for the sinks
        after this one."""


def write_to_sinks(sinks: Iterable[Sink], estimates: beam.PCollection,
                   dead_letters: beam.PCollection) -> beam.PCollection:
    """Apply `sinks` in order; returns the estimate records as the last sink passed them on."""
    for sink in sinks:
        estimates = sink.write(estimates, dead_letters)
    return estimates


def dead_letter_parts(dead_letters) -> tuple[beam.PCollection, ...]:
    """The dead-letter PCollections a sink is given, as a tuple (one, or a batch run's parts)."""
    return tuple(dead_letters) if isinstance(dead_letters, (tuple, list)) else (dead_letters,)


class EstimateShards(Sink):
    """OUT/estimates-SSSSS-of-NNNNN.{jsonl,avro}: one shard per bundle, so each window's record
    is written as it is made (`transforms/write.py`)."""

    def __init__(self, output: str):
        self._output = output

    def write(self, estimates, dead_letters):
        estimates | "WriteEstimates" >> WriteRecords(self._output, ESTIMATES, "window_estimate",
                                                     num_shards=0)
        return estimates


class DeadLetterShards(Sink):
    """OUT/dead_letters-SSSSS-of-NNNNN.{jsonl,avro}: one shard per bundle that has dead
    letters, written as they are made (nothing held: a hostile input can make millions), one
    empty shard when there is none."""

    def __init__(self, output: str):
        self._output = output

    def write(self, estimates, dead_letters):
        dead_letter_parts(dead_letters) | "WriteDeadLetters" >> WriteRecords(
            self._output, DEAD_LETTERS, "dead_letter", num_shards=0)
        return estimates


class PaneFiles(Sink):
    """Each window-estimate pane as it fires: its pane file, the window's latest.json and a
    panes.log line (`WritePanesFn`; `index_offsets`, `suppressed` and `echo` as there)."""

    def __init__(self, output: str, index_offsets: Mapping | None = None,
                 suppressed: frozenset = frozenset(), echo: bool = False):
        self._fn = WritePanesFn(output, index_offsets, suppressed, echo)

    def write(self, estimates, dead_letters):
        return estimates | "WritePanes" >> beam.ParDo(self._fn)


class WriteDeadLetterFileFn(beam.DoFn):
    """Dead-letter record -> one small JSON-lines file OUT/dead_letters/<unique>.jsonl, written
    whole (`output.atomic`), locally or remotely; the folder's readers (`output.tail`) read the
    live run's dead letters from the same place."""

    def __init__(self, output: str):
        self._output = output

    def process(self, record: dict):
        path = FileSystems.join(self._output, DEAD_LETTER_DIR, f"{uuid.uuid4().hex}.jsonl")
        write_atomically(path, json.dumps(record, sort_keys=True) + "\n", fsync=False)


class DeadLetterFiles(Sink):
    """A live run's dead letters as they come, one file each (`WriteDeadLetterFileFn`)."""

    def __init__(self, output: str):
        self._output = output

    def write(self, estimates, dead_letters):
        for part, suffix in zip(*_labelled(dead_letters), strict=True):
            part | f"WriteDeadLetters{suffix}" >> beam.ParDo(WriteDeadLetterFileFn(self._output))
        return estimates


class StoreSink(Sink):
    """The estimate store at `url` (`WriteToStore`): every estimate record it is given, and the
    dead-letter counts per job slice of `windows`. `rejects` False: the dead letters are not counted
    here (a followed directory's follower keeps the reject totals,
    `transforms.store.RejectTotals`)."""

    def __init__(self, url: str, windows: WindowSpec, rejects: bool = True, run: int = 0):
        self._url = url
        self._run = run
        self._windows = windows
        self._rejects = rejects

    def write(self, estimates, dead_letters):
        (estimates, dead_letters) | "WriteToStore" >> WriteToStore(
            self._url, self._windows.slice_ms, self._windows.slice_offset_ms, self._rejects,
            self._run)
        return estimates


def _labelled(dead_letters) -> tuple[tuple, list[str]]:
    """(the parts, a label suffix each: none for the first, then "1", "2", ...)."""
    parts = dead_letter_parts(dead_letters)
    return parts, [""] + [str(i) for i in range(1, len(parts))]
