"""The directory follower without Beam: which files it reads, the watermark it announces, the
reports it finds too late (per window), its checkpoint and what a restart replays."""
from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from ldp_telemetry.ldp.base.errors import ConfigError
from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.ldp.config.windows import WindowSpec
from ldp_telemetry.ldp.engine.batches import ReportBatch
from ldp_telemetry.ldp.protocols import make_protocol
from ldp_telemetry.output.layout import CHECKPOINT, TOO_LATE_LOG, WindowKey
from ldp_telemetry.pipelines.checkpoint import FollowState
from ldp_telemetry.pipelines.event_stream import split_batch
from ldp_telemetry.pipelines.follower import (DirectoryFollower, WatermarkPolicy,
                                              is_complete_report_file)
from ldp_telemetry.schemas.codec import write_reports

T0 = 1_709_251_200_000  # 2024-03-01T00:00:00Z in ms
MINUTE = 60_000
METRIC = "f.grr"
PROTOCOL = make_protocol("grr", 1.0, 3)
REGISTRY = parse_registry({"metrics": [
    {"name": METRIC, "protocol": "grr", "epsilon": 1.0, "domain": {"size": 3}}]})


class RecordingStream:
    """Stands in for EventStream: records what the follower announces."""

    def __init__(self):
        self.batches, self.letters, self.watermarks, self.ticks = [], [], [], 0

    def add_batches(self, batches):
        self.batches.extend(batches)

    def add_dead_letters(self, letters, at_ms):
        self.letters.extend(letters)

    def advance_watermark(self, watermark_ms):
        self.watermarks.append(watermark_ms)

    def tick(self):
        self.ticks += 1


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


_FRESH_IDS = itertools.count(1_000_000)


def write(folder, name, times_ms, seed=0, ids=None):
    """A report file; its report ids are new ones unless `ids` are given."""
    rng = np.random.default_rng(seed)
    times = np.asarray(times_ms, dtype=np.int64)
    columns = PROTOCOL.perturb(rng.integers(0, 3, len(times)), rng)
    if ids is None:
        ids = [next(_FRESH_IDS) for _ in times]
    write_reports(str(folder / name), METRIC, PROTOCOL, np.asarray(ids, dtype=np.int64), times,
                  columns)


#: The follower's defaults in these tests: 1-minute windows with 30 s of lateness, a watermark
#: that trails by nothing and moves on after 5 s without a file.
WINDOWS = WindowSpec(MINUTE, MINUTE, allowed_lateness_ms=30_000)
POLICY = WatermarkPolicy(0, 5.0)


def follower(tmp_path, windows=WINDOWS, policy=POLICY, clock=None, stream=None):
    (tmp_path / "in").mkdir(exist_ok=True)
    return DirectoryFollower(REGISTRY, windows, str(tmp_path / "in"), str(tmp_path / "out"),
                             stream or RecordingStream(), policy, clock or Clock())


def test_only_renamed_report_files_are_complete():
    assert is_complete_report_file("batch-0001.avro")
    for name in ("batch-0001.avro.tmp", ".batch-0001.avro", ".batch.avro.tmp", "notes.txt"):
        assert not is_complete_report_file(name)


def test_each_file_is_read_once_and_temporary_files_never(tmp_path):
    f = follower(tmp_path)
    write(tmp_path / "in", "a.avro", [T0 + 1000] * 5)
    write(tmp_path / "in", "b.avro.tmp", [T0 + 1000] * 7)
    write(tmp_path / "in", ".c.avro", [T0 + 1000] * 9)
    assert f.poll() == 1 and f.poll() == 0
    assert f.state.records_read == f.state.records_accepted == 5
    assert sum(b.n for b in f._stream.batches) == 5


def test_watermark_trails_the_latest_slice_then_advances_on_idle(tmp_path):
    clock = Clock()
    f = follower(tmp_path, policy=WatermarkPolicy(max_out_of_order_ms=20_000,
                                                  idle_advance_s=5.0), clock=clock)
    stream = f._stream
    write(tmp_path / "in", "a.avro", [T0 + 5_000, T0 + 2 * MINUTE + 59_000])
    f.poll()
    # the latest slice starts at T0 + 2 min; minus the 20 s lag
    assert stream.watermarks == [T0 + 2 * MINUTE - 20_000]
    clock.now = 4.9
    f.poll()
    assert len(stream.watermarks) == 1 and stream.ticks == 3  # a file read, two polls
    clock.now = 5.0  # idle for 5 s: the end of the latest slice
    f.poll()
    assert stream.watermarks[-1] == T0 + 3 * MINUTE
    write(tmp_path / "in", "b.avro", [T0 + 1000])  # an old report never moves it back
    clock.now = 6.0
    f.poll()
    assert stream.watermarks[-1] == T0 + 3 * MINUTE


def test_too_late_is_beams_rule_and_is_counted_per_window(tmp_path):
    """Window [T0, T0+1min), lateness 1 min: a batch is dropped iff watermark > end + 1 min."""
    f = follower(tmp_path, windows=WindowSpec(MINUTE, MINUTE, allowed_lateness_ms=MINUTE),
                 policy=WatermarkPolicy(0, None))
    stream = f._stream
    write(tmp_path / "in", "1.avro", [T0 + 10] * 4 + [T0 + MINUTE + 30_000])  # wm: T0 + 1 min
    f.poll()
    write(tmp_path / "in", "2.avro", [T0 + 20] * 3)  # watermark at the end: late, accepted
    f.poll()
    write(tmp_path / "in", "3.avro", [T0 + 2 * MINUTE - 1])  # same slice: the watermark stays
    f.poll()
    assert stream.watermarks == [T0 + MINUTE]
    write(tmp_path / "in", "3b.avro", [T0 + 2 * MINUTE + 15])  # wm T0 + 2 min: end + lateness
    f.poll()
    write(tmp_path / "in", "3c.avro", [T0 + 25] * 2)  # watermark = end + lateness: accepted
    f.poll()
    write(tmp_path / "in", "4.avro", [T0 + 3 * MINUTE])  # wm T0 + 3 min > T0 + 2 min
    f.poll()
    write(tmp_path / "in", "5.avro", [T0 + 30] * 6)  # too late for window 0
    f.poll()
    assert sum(b.n for b in stream.batches) == 5 + 3 + 1 + 1 + 2 + 1
    windows = {w.window_start: (w.accepted, w.too_late) for w in f.state.windows.values()}
    assert windows["2024-03-01T00:00:00Z"] == (9, 6)
    assert f.state.too_late == 6 and f.state.records_accepted == 19
    lines = [json.loads(x) for x in (tmp_path / "out" / TOO_LATE_LOG).read_text().splitlines()]
    assert lines == [{"metric": METRIC, "window_start": "2024-03-01T00:00:00Z",
                      "window_end": "2024-03-01T00:01:00Z", "too_late": 6, "accepted": 9,
                      "watermark": "2024-03-01T00:03:00Z"}]
    counters = f.state.counters()
    assert counters["records_read"] == counters["records_accepted"] == 19
    assert counters["records_counted"] == 13


def test_sliding_windows_count_a_too_late_slice_in_each_of_its_windows(tmp_path):
    windows = WindowSpec(2 * MINUTE, MINUTE)
    f = follower(tmp_path, windows=windows, policy=WatermarkPolicy(0, None))
    write(tmp_path / "in", "1.avro", [T0 + 5 * MINUTE])
    f.poll()
    write(tmp_path / "in", "2.avro", [T0 + 10] * 2)
    f.poll()
    late = {(w.window_start, w.too_late) for w in f.too_late_by_window()}
    assert late == {("2024-02-29T23:59:00Z", 2), ("2024-03-01T00:00:00Z", 2)}
    assert f.state.too_late == 2  # each report once in the total


def test_dead_letters_are_written_per_file_and_counted(tmp_path):
    f = follower(tmp_path)
    (tmp_path / "in" / "junk.avro").write_text("not avro")
    f.poll()
    assert f.state.dead_letters == {"undecodable": 1} and f.state.records_read == 1
    letters = (tmp_path / "out" / "dead_letters" / "junk.avro.jsonl").read_text().splitlines()
    assert json.loads(letters[0])["reason"] == "undecodable"


def test_checkpoint_round_trips(tmp_path):
    f = follower(tmp_path)
    write(tmp_path / "in", "a.avro", [T0 + 1, T0 + MINUTE + 1])
    f.poll()
    text = (tmp_path / "out" / CHECKPOINT).read_text()
    again = FollowState.from_json(text)
    assert again.to_json() == f.state.to_json()
    assert list(again.files) == ["a.avro"] and again.files["a.avro"].decided_at is None
    assert list(again.windows) == [WindowKey(METRIC, T0, T0 + MINUTE),
                                   WindowKey(METRIC, T0 + MINUTE, T0 + 2 * MINUTE)]


def test_restart_replays_accepted_batches_of_windows_not_complete_on_disk(tmp_path):
    windows = WindowSpec(MINUTE, MINUTE)
    f = follower(tmp_path, windows=windows, policy=WatermarkPolicy(0, None))
    write(tmp_path / "in", "w0.avro", [T0 + 1] * 3)
    write(tmp_path / "in", "w1.avro", [T0 + MINUTE + 1] * 4)
    f.poll()
    write(tmp_path / "in", "w3.avro", [T0 + 3 * MINUTE])  # watermark to T0 + 3 min
    f.poll()
    write(tmp_path / "in", "w0-late.avro", [T0 + 2] * 5)  # too late
    f.poll()
    # Panes on disk: window 0 complete (n = 3); window 1's last pane missed a report.
    log = tmp_path / "out" / "panes.log"
    entries = [("2024-03-01T00:00:00Z", "2024-03-01T00:01:00Z", 3),
               ("2024-03-01T00:01:00Z", "2024-03-01T00:02:00Z", 2)]
    log.write_text("".join(json.dumps({"metric": METRIC, "window_start": s, "window_end": e,
                                       "n": n, "pane": {"index": 0}}) + "\n"
                           for s, e, n in entries))
    again = follower(tmp_path, windows=windows, policy=WatermarkPolicy(0, None))
    assert again.restarted
    replay = again.replay_after_restart()
    # window 1 (incomplete) and window 3 (open) are replayed; window 0 is complete; the late
    # file stays too late.
    assert sorted((b.slice_start_ms - T0) // MINUTE for b in replay.batches) == [1, 3]
    assert sum(b.n for b in replay.batches) == 5
    assert replay.complete_windows == frozenset()
    assert again.new_files() == []


def test_large_batches_are_split_under_the_message_limit():
    rows = 300_000
    batch = ReportBatch(METRIC, T0, {"bits": np.zeros((rows, 8), dtype=np.uint8)})
    pieces = split_batch(batch)
    assert len(pieces) == 3 and sum(p.n for p in pieces) == rows
    assert all(p.columns["bits"].nbytes <= 1 << 20 for p in pieces)


def test_a_follow_location_that_is_no_listable_directory_names_the_setting(tmp_path):
    (tmp_path / "a-file").write_text("")
    for location, words in ((tmp_path / "missing", "is not a directory"),
                            (tmp_path / "a-file", "is not a directory")):
        with pytest.raises(ConfigError, match=f"^follow '{location}' {words}") as error:
            DirectoryFollower(REGISTRY, WindowSpec(MINUTE, MINUTE), str(location),
                              str(tmp_path / "out"), RecordingStream())
        assert error.value.field == "follow"


def test_a_followed_folder_mixing_envelope_and_per_report_files_counts_reports(tmp_path):
    from ldp_telemetry.client import EnvelopeFile, encode_many
    f = follower(tmp_path)
    write(tmp_path / "in", "a.avro", [T0 + 1000] * 5)
    reports = encode_many(REGISTRY[METRIC], [0, 1, 2, 1, 0, 2, 2], np.random.default_rng(1),
                          event_times_ms=[T0 + 2000] * 7, report_ids=np.arange(100, 107))
    with EnvelopeFile(tmp_path / "in" / "b.avro", envelope_reports=3) as out:
        out.write(reports)
    assert f.poll() == 2
    assert f.state.records_read == f.state.records_accepted == 12
    assert sum(b.n for b in f._stream.batches) == 12


def test_the_inputs_event_range_and_watermark_are_kept_across_a_restart(tmp_path):
    """What decides a live run's partial windows (output/coverage.py): the valid reports' first
    and last event time, kept in the checkpoint, and the watermark."""
    f = follower(tmp_path, policy=WatermarkPolicy(0, None))
    write(tmp_path / "in", "a.avro", [T0 + 7, T0 + MINUTE + 30_000])
    f.poll()
    assert f.inputs().ranges == {METRIC: (T0 + 7, T0 + MINUTE + 30_000)}
    assert f.inputs().watermark_ms == f.state.watermark_ms == T0 + MINUTE
    again = follower(tmp_path, policy=WatermarkPolicy(0, None))  # a restart: from the checkpoint
    write(tmp_path / "in", "b.avro", [T0 + 2 * MINUTE + 5])
    again.poll()
    assert again.inputs().ranges == {METRIC: (T0 + 7, T0 + 2 * MINUTE + 5)}


def test_a_restart_sweeps_the_inputs_file_a_killed_run_was_writing(tmp_path):
    (tmp_path / "out").mkdir()
    torn = tmp_path / "out" / ".inputs.json.123-456-abcdef01.tmp"
    torn.write_text("{")
    follower(tmp_path)
    assert not torn.exists()
