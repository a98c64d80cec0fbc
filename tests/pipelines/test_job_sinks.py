"""One list of sinks for every kind of run (`pipelines.graph.job_sinks`), and the sink that
writes a live run's dead letters one file each."""
from __future__ import annotations

import json

import apache_beam as beam
from apache_beam.runners.portability.fn_api_runner import FnApiRunner
from apache_beam.testing.util import assert_that, equal_to

from ldp_telemetry.dashboard.source import FolderSource
from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.ldp.config.windows import WindowSpec
from ldp_telemetry.pipelines.graph import job_sinks
from ldp_telemetry.pipelines.job import EstimateJob
from ldp_telemetry.transforms.sinks import (DeadLetterFiles, DeadLetterShards, EstimateShards,
                                            PaneFiles, Sink, StoreSink, WriteDeadLetterFileFn,
                                            write_to_sinks)

REGISTRY = parse_registry({"metrics": [
    {"name": "m", "protocol": "grr", "epsilon": 1.0, "domain": {"size": 3}}]})


def job(store=None) -> EstimateJob:
    return EstimateJob(REGISTRY, (), "out", WindowSpec(60_000, 60_000), store)


def kinds(sinks) -> list[type]:
    return [type(sink) for sink in sinks]


def test_batch_live_and_remote_runs_share_one_list_of_sinks():
    store = "sqlite:///estimates.db"
    assert kinds(job_sinks(job())) == [EstimateShards, DeadLetterShards]
    assert kinds(job_sinks(job(store))) == [EstimateShards, DeadLetterShards, StoreSink]
    panes = PaneFiles("out")
    remote = job_sinks(job(store), panes=panes)
    assert remote[0] is panes and kinds(remote) == [PaneFiles, DeadLetterFiles, StoreSink]
    # A followed directory's follower writes the dead letters of each file itself.
    assert kinds(job_sinks(job(store), panes=panes, dead_letters=False)) == [PaneFiles, StoreSink]
    assert kinds(job_sinks(job(), panes=panes, dead_letters=False)) == [PaneFiles]


class Tagging(Sink):
    """A sink that checks the dead letters it is given and passes on the estimates it got,
    tagged with its name."""

    def __init__(self, name):
        self._name = name

    def write(self, estimates, dead_letters):
        assert_that(dead_letters, equal_to(["d"]), label=f"Letters{self._name}")
        return estimates | f"Tag{self._name}" >> beam.Map(lambda r, n=self._name: r + (n,))


def test_each_sink_gets_the_estimates_as_the_one_before_wrote_them():
    with beam.Pipeline(runner=FnApiRunner()) as pipeline:
        estimates = pipeline | "Estimates" >> beam.Create([("e",)])
        letters = pipeline | "Letters" >> beam.Create(["d"])
        last = write_to_sinks([Tagging("A"), Tagging("B")], estimates, letters)
        assert_that(last, equal_to([("e", "A", "B")]))


def test_a_live_dead_letter_is_one_whole_file_the_folder_source_reads(tmp_path):
    fn = WriteDeadLetterFileFn(str(tmp_path))
    letters = [{"source": f"f{i}.avro", "reason": "undecodable", "detail": "x", "records": 1}
               for i in range(3)]
    for letter in letters:
        assert list(fn.process(letter) or []) == []
    files = sorted((tmp_path / "dead_letters").iterdir())
    assert len(files) == 3 and all(f.suffix == ".jsonl" for f in files)
    assert sorted(json.loads(f.read_text())["source"] for f in files) == [
        "f0.avro", "f1.avro", "f2.avro"]
    # A dashboard on the output folder counts them (undecodable: in no window).
    (tmp_path / "panes.log").write_text("")
    source = FolderSource(str(tmp_path))
    assert source.unattributed_rejects() == {("", "undecodable"): 3}
