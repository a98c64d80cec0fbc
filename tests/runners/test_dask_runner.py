"""The job on a real dask.distributed cluster (Beam's DaskRunner, `--runner=dask`) of two worker
processes, against FnApiRunner: the same estimates, dead letters, counters and summary; the
cluster listens on 127.0.0.1 only and is stopped when the job ends or fails."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

pytest.importorskip("distributed", reason="the Dask runner needs pip install '.[dask]'")

import apache_beam as beam  # noqa: E402
import fastavro  # noqa: E402
import psutil  # noqa: E402  (a dependency of distributed)
from apache_beam.options.pipeline_options import PipelineOptions  # noqa: E402

from ldp_telemetry.ldp.base.errors import ConfigError  # noqa: E402
from ldp_telemetry.ldp.config.windows import WindowSpec  # noqa: E402
from ldp_telemetry.pipelines.job import EstimateJob  # noqa: E402
from ldp_telemetry.runners import make_runner  # noqa: E402
from ldp_telemetry.runners.dask import (ClusterDaskRunner, dask_options,  # noqa: E402
                                        local_cluster)

from tests.runners.conftest import HOUR, ComparisonInput  # noqa: E402

pytestmark = pytest.mark.slow  # a scheduler and worker processes


@pytest.fixture(scope="module")
def with_duplicates(comparison_input, tmp_path_factory) -> tuple[ComparisonInput, Path]:
    """The comparison input plus a copy of one of its files (700 duplicate reports), and the
    folder of its FnApiRunner run: the duplicates' dead letter is the counting step's tagged
    output."""
    job = comparison_input.job
    folder = tmp_path_factory.mktemp("dask-input")
    copy = folder / "copy.avro"
    shutil.copyfile(next(f for f in job.files if f.endswith("r.oue-0.avro")), copy)
    bare = ComparisonInput(EstimateJob(job.registry, (*job.files, str(copy)), "", job.windows),
                           None)
    reference = bare.run(folder / "reference", ["--runner=FnApiRunner"])
    assert reference.counters["dead_letter.duplicate"] == 700
    return ComparisonInput(bare.job, reference), folder / "reference"


def test_two_workers_match_fn_api_runner_record_by_record(with_duplicates, tmp_path, capsys):
    comparison, reference = with_duplicates
    got = comparison.run(tmp_path / "dask", dask_options(workers=2))
    assert "started a local Dask cluster of 2 worker processes at tcp://127.0.0.1:" in \
        capsys.readouterr().err
    comparison.assert_matches_reference(got)  # summary, counters, every record
    assert got.counters["dead_letter.duplicate"] == 700
    assert_same_files(reference, tmp_path / "dask")


def assert_same_files(reference: Path, dask: Path) -> None:
    """The FnApiRunner run's output files equal the Dask run's, each kind joined over its shards
    (dead letters and estimates are written one shard per bundle, and the runners' bundles
    differ): the same Avro writer schema and codec, and the same records in a canonical order (a
    runner decides the order in which they arrive; an Avro file's sync marker is random)."""
    for kind in ("dead_letters", "estimates"):
        for suffix in (".jsonl", ".avro"):
            mine, theirs = (sorted(dask.glob(f"{kind}-*{suffix}")),
                            sorted(reference.glob(f"{kind}-*{suffix}")))
            assert mine and theirs, (kind, suffix)
            assert {contents(p)[0] for p in mine} == {contents(p)[0] for p in theirs}
            assert canonical([r for p in mine for r in contents(p)[1]]) == \
                canonical([r for p in theirs for r in contents(p)[1]]), (kind, suffix)


def contents(path: Path) -> tuple[str, list]:
    """(the Avro writer schema and codec, or "" for JSON lines; the records in a canonical
    order)."""
    if path.suffix == ".jsonl":
        lines = path.read_text(encoding="utf-8").splitlines()
        return "", canonical([json.loads(line) for line in lines])
    with open(path, "rb") as stream:
        reader = fastavro.reader(stream)
        header = json.dumps([reader.writer_schema, reader.codec], sort_keys=True)
        return header, canonical(list(reader))


def canonical(records: list) -> list:
    return sorted(records, key=lambda r: json.dumps(r, sort_keys=True, default=repr))


def test_the_cluster_listens_on_localhost_only_and_stops_when_the_body_fails():
    from distributed import Client
    with pytest.raises(RuntimeError, match="the job failed"), local_cluster(2) as cluster:
        with Client(cluster) as client:
            pids = set(client.run(os.getpid).values())
        processes = [psutil.Process(pid) for pid in pids]
        assert len(processes) == 2 and os.getpid() not in pids
        listening = [c.laddr for p in [psutil.Process(), *processes]
                     for c in p.net_connections(kind="inet") if c.status == psutil.CONN_LISTEN]
        scheduler_port = int(cluster.scheduler_address.rsplit(":", 1)[1])
        assert scheduler_port in {a.port for a in listening}
        ours = [a for a in listening if a.port in _ports(cluster, client_pids=pids)]
        assert ours and all(a.ip == "127.0.0.1" for a in ours), ours
        raise RuntimeError("the job failed")
    assert not [p for p in processes if _running(p)]


def _ports(cluster, client_pids) -> set[int]:
    """The ports the scheduler and the worker processes listen on."""
    ports = {int(cluster.scheduler_address.rsplit(":", 1)[1])}
    for pid in client_pids:
        ports.update(c.laddr.port for c in psutil.Process(pid).net_connections(kind="inet")
                     if c.status == psutil.CONN_LISTEN)
    return ports


def _running(process: psutil.Process) -> bool:
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_a_job_failing_on_a_worker_stops_the_cluster_it_started():
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    pipeline = beam.Pipeline(runner=ClusterDaskRunner(),
                             options=PipelineOptions(["--dask_workers=2"]))
    _ = pipeline | beam.Create([1, 2, 3]) | beam.Map(lambda x: x // 0)
    with pytest.raises(ZeroDivisionError):
        pipeline.run().wait_until_finish()
    started = [p for p in psutil.Process().children(recursive=True) if p.pid not in before]
    # Left: at most multiprocessing's resource tracker (one per interpreter), no worker.
    assert not [p for p in started if _running(p) and "resource_tracker" not in
                " ".join(p.cmdline())], [p.cmdline() for p in started]


def test_windows_and_streaming_are_refused_before_a_cluster_starts(comparison_input, tmp_path):
    from ldp_telemetry.pipelines.batch import run_job
    job = comparison_input.job
    late = EstimateJob(job.registry, job.files, str(tmp_path / "late"),
                       WindowSpec(2 * HOUR, HOUR, allowed_lateness_ms=HOUR))
    with pytest.raises(ConfigError, match="keeps no Beam windows") as error:
        run_job(late, dask_options(workers=1))
    assert error.value.field == "runner"
    streaming = beam.Pipeline(runner=ClusterDaskRunner(),
                              options=PipelineOptions(["--streaming", "--dask_workers=1"]))
    _ = streaming | beam.Create([1])
    with pytest.raises(ConfigError, match="batch jobs only"):
        streaming.run()


@pytest.mark.parametrize("name", ["dask", "DaskRunner", "daskrunner"])
def test_short_runner_names(name):
    assert isinstance(make_runner(PipelineOptions([f"--runner={name}"])), ClusterDaskRunner)


def test_dask_workers_is_spelt_with_an_underscore_or_a_dash():
    from ldp_telemetry.runners.dask import DaskClusterOptions
    for flag in ("--dask_workers", "--dask-workers"):
        assert PipelineOptions([flag, "3"]).view_as(DaskClusterOptions).dask_workers == 3


def test_dask_options():
    assert dask_options(workers=2) == ["--runner=dask", "--dask_workers=2"]
    assert dask_options(address="tcp://127.0.0.1:8786", partitions=8) == [
        "--runner=dask", "--dask_client_address=tcp://127.0.0.1:8786", "--dask_npartitions=8"]
    for bad in (0, -1, True, 2.0, 257):
        with pytest.raises(ConfigError, match="dask_workers"):
            dask_options(workers=bad)
    with pytest.raises(ConfigError, match="not both"):
        dask_options(workers=2, address="tcp://127.0.0.1:8786")


def run_one_element(args: list[str]):
    pipeline = beam.Pipeline(runner=ClusterDaskRunner(), options=PipelineOptions(args))
    _ = pipeline | beam.Create([1])
    return pipeline.run().wait_until_finish()


@pytest.mark.parametrize("args, field, message", [
    (["--dask_workers=0"], "dask_workers", r"--dask_workers must be an integer in \[1, 256\]"),
    (["--dask_workers=2", "--dask_client_address=tcp://127.0.0.1:1"], "dask_workers",
     "not both"),
    (["--dask_client_address=tcp://127.0.0.1:1", "--dask_connection_timeout=1"],
     "dask_client_address", "no Dask scheduler answered at tcp://127.0.0.1:1"),
])
def test_cluster_options_are_checked_before_anything_runs(args, field, message):
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    with pytest.raises(ConfigError, match=message) as error:
        run_one_element(args)
    assert error.value.field == field
    assert not [p for p in psutil.Process().children(recursive=True)
                if p.pid not in before and _running(p)
                and "resource_tracker" not in " ".join(p.cmdline())]
