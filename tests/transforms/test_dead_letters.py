"""Dead letters in bounded memory: the cap (first N of each file and reason verbatim, the rest
aggregated with exact counts), conservation through a real job, and a graph in which no step
holds every dead letter."""
from __future__ import annotations

import io
import json
from collections import Counter
from pathlib import Path

import apache_beam as beam
import fastavro
import numpy as np
import pytest

from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.ldp.config.windows import WindowSpec
from ldp_telemetry.ldp.engine.batches import DeadLetter
from ldp_telemetry.pipelines.batch import run_job
from ldp_telemetry.pipelines.graph import build_pipeline
from ldp_telemetry.pipelines.job import EstimateJob
from ldp_telemetry.schemas.codec import ReportDecoder, report_as_json, write_reports
from ldp_telemetry.store import open_store
from ldp_telemetry.store.records import UNATTRIBUTED_MS, reject_slice
from ldp_telemetry.transforms.dead_letters import MAX_VERBATIM_DEAD_LETTERS, DeadLetterCap
from tests.json_lines import job_json_lines

HOUR = 3_600_000
T0 = 1_709_251_200_000  # 2024-03-01T00:00:00Z
REGISTRY = parse_registry({"metrics": [
    {"name": "s.grr", "protocol": "grr", "epsilon": 2.0, "domain": {"labels": list("abcd")}}]})


def letter(reason: str, metric: str = "m", moment: int | None = T0, records: int = 1,
           source: str = "f.avro") -> DeadLetter:
    report = None if moment is None else report_as_json({"metric": metric, "event_time": moment})
    return DeadLetter(source, reason, f"{reason} of {metric} at {moment}", records, report, 40)


def admitted(cap: DeadLetterCap, letters) -> list[DeadLetter]:
    out = [kept for one in letters for kept in cap.admit(one)]
    return out + list(cap.finish_file())


def test_the_first_letters_of_each_reason_are_kept_verbatim_and_the_rest_counted_exactly():
    cap = DeadLetterCap(HOUR, verbatim=3)
    letters = ([letter("invalid_payload", moment=T0 + (i % 2) * HOUR, records=1 + i % 3)
                for i in range(10)]
               + [letter("undecodable", moment=None, records=7) for _ in range(5)])
    out = admitted(cap, letters)
    assert out[:3] == letters[:3] and letters[10:13] == [o for o in out if o.records == 7][:3]
    # Beyond 3 per reason: one letter per store key (two hours of invalid_payload, one key of
    # undecodable bytes), each standing for the sum of the records it replaces.
    assert len(out) == 3 + 2 + 3 + 1
    assert sum(o.records for o in out) == sum(one.records for one in letters)
    per_key = Counter()
    for one in letters:
        per_key[reject_slice(one.as_dict(), HOUR)] += one.records
    assert sum((Counter({reject_slice(o.as_dict(), HOUR): o.records}) for o in out),
               Counter()) == per_key
    aggregate = next(o for o in out if o.reason == "undecodable" and o.records == 14)
    assert aggregate.source == "f.avro" and aggregate.report is None
    assert aggregate.detail.startswith("2 dead letters (14 records) of this file and reason, "
                                       "beyond the first 3 written one by one")


def test_an_aggregate_carries_the_first_report_it_stands_for_so_the_store_counts_it_there():
    cap = DeadLetterCap(HOUR, verbatim=0)
    letters = [letter("before_not_before", metric="s.grr", moment=T0 + 5 + i) for i in range(4)]
    (out,) = admitted(cap, letters)
    assert out.records == 4 and out.report == letters[0].report
    assert out.report_bytes == letters[0].report_bytes
    assert reject_slice(out.as_dict(), HOUR) == ("s.grr", "before_not_before", T0, T0 + HOUR)


def test_a_single_letter_beyond_the_cap_is_written_as_it_is():
    cap = DeadLetterCap(HOUR, verbatim=1)
    letters = [letter("unknown_metric", metric=f"x{i}") for i in range(3)]
    assert admitted(cap, letters) == letters  # three metrics: three keys of one letter each


def test_the_waiting_aggregates_are_bounded_and_written_out_when_the_table_is_full():
    cap = DeadLetterCap(HOUR, verbatim=0, max_aggregates=5)
    emitted, most_waiting = [], 0
    for i in range(1_000):  # 100 metrics, 10 letters each, interleaved
        emitted += cap.admit(letter("unknown_metric", metric=f"m{i % 100}"))
        most_waiting = max(most_waiting, len(cap._aggregates))
    emitted += cap.finish_file()
    assert most_waiting <= 5 and len(cap._aggregates) == 0
    assert sum(o.records for o in emitted) == 1_000
    per_metric = Counter()
    for one in emitted:
        per_metric[json.loads(one.report)["metric"]] += one.records
    assert per_metric == {f"m{k}": 10 for k in range(100)}


def test_each_file_starts_with_its_own_verbatim_letters():
    cap = DeadLetterCap(HOUR, verbatim=2)
    first = admitted(cap, [letter("undecodable", source="a", moment=None) for _ in range(5)])
    second = admitted(cap, [letter("undecodable", source="b", moment=None) for _ in range(5)])
    assert [o.records for o in first] == [1, 1, 3] == [o.records for o in second]
    assert {o.source for o in second} == {"b"}


def test_a_negative_cap_is_refused():
    with pytest.raises(ValueError, match="verbatim must be >= 0"):
        DeadLetterCap(HOUR, verbatim=-1)


def test_the_decoders_letters_for_a_file_of_many_unknown_reports_stay_few(tmp_path):
    n = 3 * MAX_VERBATIM_DEAD_LETTERS + 17
    path = tmp_path / "unknown.avro"
    protocol = REGISTRY["s.grr"].protocol
    write_reports(str(path), "not.registered", protocol, np.arange(n), T0 + np.arange(n),
                  {"value": np.zeros(n, dtype=np.int64)})
    cap = DeadLetterCap(HOUR)
    decoder = ReportDecoder(REGISTRY, HOUR)
    out = admitted(cap, decoder.decode_file(str(path)))
    assert decoder.records_read == n
    assert len(out) == MAX_VERBATIM_DEAD_LETTERS + 1
    assert sum(o.records for o in out) == n


def write_many(folder: Path) -> tuple[list[str], np.ndarray]:
    """Files whose dead letters pass the cap: 2,500 invalid payloads over three hours, 2,200
    reports of an unknown metric, 30 valid reports, and a file that is not Avro; returns the
    files and the hour (since T0) of each invalid payload, in file order."""
    protocol = REGISTRY["s.grr"].protocol
    rng = np.random.default_rng(5)
    bad_times = T0 + np.sort(rng.integers(0, 3 * HOUR, 2_500))
    write_reports(str(folder / "bad.avro"), "s.grr", protocol, np.arange(2_500), bad_times,
                  {"value": np.full(2_500, 99, dtype=np.int64)})
    write_reports(str(folder / "unknown.avro"), "not.registered", protocol, np.arange(2_200),
                  T0 + np.arange(2_200), {"value": np.zeros(2_200, dtype=np.int64)})
    write_reports(str(folder / "good.avro"), "s.grr", protocol, np.arange(30),
                  T0 + np.arange(30), {"value": np.zeros(30, dtype=np.int64)})
    (folder / "junk.avro").write_text("not avro\n")
    files = sorted(str(folder / name) for name in
                   ("bad.avro", "unknown.avro", "good.avro", "junk.avro"))
    return files, (bad_times - T0) // HOUR


def test_a_job_of_many_dead_letters_adds_up_in_the_summary_the_files_and_the_store(tmp_path):
    files, bad_hours = write_many(tmp_path)
    url = f"sqlite:///{tmp_path}/store.db"
    job = EstimateJob(REGISTRY, tuple(files), str(tmp_path / "out"), WindowSpec(HOUR, HOUR),
                      store=url)
    out = io.StringIO()
    counters = run_job(job, ["--runner=FnApiRunner"], out=out)
    dead = {"invalid_payload": 2_500, "unknown_metric": 2_200, "undecodable": 1}
    assert counters["records_read"] == 30 + sum(dead.values())
    assert {k: v for k, v in counters.items() if k.startswith("dead_letter.")} == {
        f"dead_letter.{reason}": count for reason, count in dead.items()}
    assert out.getvalue().startswith("records read: 4731, accepted: 30, dead-lettered: 4701")

    letters = job_json_lines(tmp_path / "out", "dead_letters")
    records = Counter()
    for one in letters:
        records[one["reason"]] += one["records"]
    assert records == dead
    # The first 1,000 of each reason of a file one by one, then one per store key: the hours of
    # the invalid payloads after the first 1,000, one key for the unknown metric.
    later_hours = len(set(bad_hours[MAX_VERBATIM_DEAD_LETTERS:].tolist()))
    assert later_hours >= 2
    assert Counter(one["reason"] for one in letters) == {
        "invalid_payload": MAX_VERBATIM_DEAD_LETTERS + later_hours,
        "unknown_metric": MAX_VERBATIM_DEAD_LETTERS + 1, "undecodable": 1}
    avro = []
    for path in sorted((tmp_path / "out").glob("dead_letters-*.avro")):
        with open(path, "rb") as handle:
            avro += list(fastavro.reader(handle))
    key = lambda r: json.dumps(r, sort_keys=True)  # noqa: E731
    assert sorted(avro, key=key) == sorted(letters, key=key)

    with open_store(url) as store:
        rows = store._query("SELECT slice_start_ms, records FROM ldp_rejects WHERE metric = ? "
                            "AND reason = ?", ("s.grr", "invalid_payload"))
        assert dict(rows) == {T0 + h * HOUR: count
                              for h, count in Counter(bad_hours.tolist()).items()}
        assert store.unattributed_rejects() == {("not.registered", "unknown_metric"): 2_200,
                                                ("", "undecodable"): 1}
        rows = store._query("SELECT SUM(records) FROM ldp_rejects WHERE slice_start_ms = ?",
                            (UNATTRIBUTED_MS,))
        assert rows == [(2_201,)]


def test_no_step_of_a_batch_job_groups_or_flattens_the_readers_dead_letters(tmp_path):
    """Structural: FnApiRunner materialises every input of a GroupByKey, and of a Flatten it
    cannot fuse; the reader's dead letters must reach their writers and the store's per-bundle
    counting through element-wise steps only."""
    (tmp_path / "r.avro").write_bytes(b"")
    job = EstimateJob(REGISTRY, (str(tmp_path / "r.avro"),), str(tmp_path / "out"),
                      WindowSpec(HOUR, HOUR), store=f"sqlite:///{tmp_path}/s.db")
    pipeline = beam.Pipeline(runner="FnApiRunner")
    build_pipeline(pipeline, job)
    consumers: dict = {}
    decode = None

    class Visitor(beam.pipeline.PipelineVisitor):
        def visit_transform(self, node):
            nonlocal decode
            for pcoll in node.inputs:
                consumers.setdefault(pcoll, []).append(node)
            if node.full_label.endswith("DecodeReports/ParDo(DecodeReportFilesFn)"):
                decode = node

    pipeline.visit(Visitor())
    start = decode.outputs["dead_letters"]
    seen, frontier, reached = set(), [start], []
    while frontier:
        pcoll = frontier.pop()
        for node in consumers.get(pcoll, []):
            if node.full_label in seen:
                continue
            seen.add(node.full_label)
            reached.append(node.full_label)
            # Stop where dead letters become shard names, or counts per key: the runner lifts
            # CombinePerKey into a per-bundle combine in the step that makes the letters.
            if "WriteBundles" in node.full_label or "CountRejects" in node.full_label:
                continue
            assert not isinstance(node.transform, (beam.Flatten, beam.GroupByKey)), node
            frontier.extend(node.outputs.values())
    assert any("WriteDeadLetters/WriteBundles" in label for label in reached)
    assert any("RejectSlices" in label for label in reached)


class Stream:
    """What a live run's event stream is told by the follower, recorded."""

    def __init__(self):
        self.letters = []

    def add_batches(self, batches):
        pass

    def add_dead_letters(self, letters, at_ms):
        self.letters.extend(letters)

    def advance_watermark(self, watermark_ms):
        pass

    def tick(self):
        pass


def test_the_directory_follower_caps_a_files_dead_letters_with_exact_counts(tmp_path):
    from ldp_telemetry.pipelines.follower import DirectoryFollower, WatermarkPolicy
    (tmp_path / "in").mkdir()
    n = MAX_VERBATIM_DEAD_LETTERS + 500
    write_reports(str(tmp_path / "in" / "unknown.avro"), "not.registered",
                  REGISTRY["s.grr"].protocol, np.arange(n), T0 + np.arange(n),
                  {"value": np.zeros(n, dtype=np.int64)})
    stream = Stream()
    follower = DirectoryFollower(REGISTRY, WindowSpec(HOUR, HOUR), str(tmp_path / "in"),
                                 str(tmp_path / "out"), stream, WatermarkPolicy(0, 5.0),
                                 lambda: 0.0)
    follower.poll()
    assert follower.state.dead_letters == {"unknown_metric": n}
    assert follower.state.records_read == n
    written = [json.loads(line) for line in
               (tmp_path / "out" / "dead_letters" / "unknown.avro.jsonl").read_text().splitlines()]
    assert len(written) == len(stream.letters) == MAX_VERBATIM_DEAD_LETTERS + 1
    assert sum(one["records"] for one in written) == n
    assert written[-1]["records"] == 500 and written[-1]["detail"].startswith("500 dead letters")
