"""The directory follower keeps the batch job's accounting (issue 28): each report id counted once
per (metric, slice) across files and restarts, every record read accounted for, reject totals
that a restart rewrites without doubling, and a folder whose files change or vanish handled
with a dead letter or a log line. No Beam: the follower's stream is recorded."""
from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest

from ldp_telemetry.ldp.base.errors import InputError
from ldp_telemetry.ldp.config.windows import WindowSpec
from ldp_telemetry.output.layout import CHECKPOINT
from ldp_telemetry.pipelines import follower as follower_module
from ldp_telemetry.pipelines.checkpoint import read_checkpoint
from ldp_telemetry.pipelines.counters import accepted, summary_line
from ldp_telemetry.pipelines.follower import DirectoryFollower, WatermarkPolicy
from ldp_telemetry.store.records import UNATTRIBUTED_MS
from tests.pipelines.test_follow import (METRIC, MINUTE, REGISTRY, T0, Clock, RecordingStream,
                                         write)

WINDOWS = WindowSpec(MINUTE, MINUTE, allowed_lateness_ms=30_000)
NO_IDLE = WatermarkPolicy(0, None)


class Rejects:
    """The store's `write_rejects(totals, add=False)`, kept in a dict: each call sets totals."""

    def __init__(self):
        self.totals, self.calls = {}, 0

    def __call__(self, totals):
        self.calls += 1
        self.totals.update(totals)


def make(tmp_path, rejects=None, policy=NO_IDLE, windows=WINDOWS, stream=None, clock=None):
    (tmp_path / "in").mkdir(exist_ok=True)
    return DirectoryFollower(REGISTRY, windows, str(tmp_path / "in"), str(tmp_path / "out"),
                             stream or RecordingStream(), policy, clock or Clock(),
                             rejects=rejects)


def dead_letter_records(tmp_path) -> dict[str, int]:
    """Records per reason in OUT/dead_letters/."""
    totals: dict[str, int] = {}
    folder = tmp_path / "out" / "dead_letters"
    for path in sorted(folder.glob("*.jsonl")) if folder.exists() else []:
        for line in path.read_text().splitlines():
            letter = json.loads(line)
            totals[letter["reason"]] = totals.get(letter["reason"], 0) + letter["records"]
    return totals


def assert_conserved(f: DirectoryFollower, tmp_path, rejects: Rejects | None = None):
    """read = accepted + dead-lettered; accepted = Σ window accepted + too late (fixed windows);
    the dead-letter files and the store's totals say the same per reason."""
    state, counters = f.state, f.state.counters()
    dead = {k.split(".", 1)[1]: v for k, v in counters.items() if k.startswith("dead_letter.")}
    assert counters["records_read"] == accepted(counters) + sum(dead.values())
    assert accepted(counters) == (sum(w.accepted for w in state.windows.values())
                                  + state.too_late)
    assert sum(b.n for b in f._stream.batches) >= 0
    assert dead_letter_records(tmp_path) == {k: v for k, v in dead.items() if v}
    if rejects is not None:
        per_reason: dict[str, int] = {}
        for (_, reason, _, _), n in rejects.totals.items():
            per_reason[reason] = per_reason.get(reason, 0) + n
        assert per_reason == {**{k: v for k, v in dead.items() if v},
                              **({"too_late": state.too_late} if state.too_late else {})}


def test_a_redelivered_file_adds_nothing_and_is_counted_as_duplicates(tmp_path):
    rejects = Rejects()
    f = make(tmp_path, rejects)
    write(tmp_path / "in", "a.avro", [T0 + 1000 + i for i in range(294)])
    f.poll()
    shutil.copy(tmp_path / "in" / "a.avro", tmp_path / "in" / ".retry.avro")
    os.rename(tmp_path / "in" / ".retry.avro", tmp_path / "in" / "retry.avro")
    f.poll()
    counters = f.state.counters()
    assert counters["records_read"] == 588 and accepted(counters) == 294
    assert counters["dead_letter.duplicate"] == 294
    assert sum(b.n for b in f._stream.batches) == 294
    assert "accepted: 294, dead-lettered: 294 (duplicate=294)" in summary_line(counters)
    letter = json.loads((tmp_path / "out" / "dead_letters" / "retry.avro.jsonl").read_text())
    assert letter["reason"] == "duplicate" and letter["records"] == 294
    # as the batch job's duplicate letters: no report, so no window
    assert rejects.totals[("", "duplicate", UNATTRIBUTED_MS, UNATTRIBUTED_MS)] == 294
    assert_conserved(f, tmp_path, rejects)


def test_ids_repeated_within_a_file_are_dead_letters_not_silence(tmp_path):
    f = make(tmp_path)
    ids = np.repeat(np.arange(50), 4)  # 200 reports, 50 distinct ids
    write(tmp_path / "in", "a.avro", [T0 + 1000] * 200, ids=ids)
    f.poll()
    counters = f.state.counters()
    assert accepted(counters) == 50 and counters["dead_letter.duplicate"] == 150
    assert counters["records_counted"] == 50
    (batch,) = f._stream.batches
    np.testing.assert_array_equal(batch.columns["report_id"], np.arange(50))  # first rows kept
    assert dead_letter_records(tmp_path) == {"duplicate": 150}
    assert_conserved(f, tmp_path)


def test_ids_are_counted_once_per_slice_not_across_slices(tmp_path):
    f = make(tmp_path)
    write(tmp_path / "in", "a.avro", [T0 + 1, T0 + 2], ids=[7, 8])
    write(tmp_path / "in", "b.avro", [T0 + MINUTE + 1, T0 + 3], ids=[7, 8])  # 7: another slice
    f.poll()
    counters = f.state.counters()
    assert accepted(counters) == 3 and counters["dead_letter.duplicate"] == 1


def test_a_duplicate_after_its_slice_closed_counts_as_too_late_and_ids_are_dropped(tmp_path):
    f = make(tmp_path)
    write(tmp_path / "in", "a.avro", [T0 + 1000] * 3, ids=[1, 2, 3])
    f.poll()
    assert f.ids_held == 3
    write(tmp_path / "in", "b.avro", [T0 + 3 * MINUTE])  # watermark: T0 + 3 min, window 0 closed
    f.poll()
    assert f.ids_held == 1  # window 0's ids are gone with it
    write(tmp_path / "in", "a-again.avro", [T0 + 1000] * 3, ids=[1, 2, 3])
    f.poll()
    assert f.state.too_late == 3 and "dead_letter.duplicate" not in f.state.counters()
    assert_conserved(f, tmp_path)


def test_one_checkpoint_per_poll_and_the_polls_batches_handed_together(tmp_path, monkeypatch):
    writes = []
    real = follower_module.write_checkpoint
    monkeypatch.setattr(follower_module, "write_checkpoint",
                        lambda *a: (writes.append(1), real(*a)))
    f = make(tmp_path)
    for i in range(5):
        write(tmp_path / "in", f"{i}.avro", [T0 + 1000 + i])
    assert f.poll() == 5
    assert len(writes) == 1 and len(read_checkpoint(str(tmp_path / "out")).files) == 5
    (merged,) = f._stream.batches  # one slice: one element for the five files, in their order
    assert merged.n == 5 and merged.columns["report_id"].tolist() == sorted(
        merged.columns["report_id"].tolist())


def test_a_polls_elements_share_stream_events_under_the_message_limit():
    from ldp_telemetry.ldp.engine.batches import ReportBatch
    from ldp_telemetry.pipelines.event_stream import MAX_ELEMENT_BYTES, EventStream
    stream = EventStream()
    small = [ReportBatch(METRIC, T0 + k * MINUTE, {"value": np.zeros(100, dtype=np.int64)})
             for k in range(10)]
    stream.add_batches(small)
    large = ReportBatch(METRIC, T0, {"value": np.zeros(300_000, dtype=np.int64)})  # 2.4 MB
    stream.add_batches([large])
    events = []
    while not stream._events.empty():
        events.append(stream._events.get())
    sizes = [len(e.element_event.elements) for e in events]
    assert sizes[0] == 10 and sum(sizes) == 10 + 3
    assert all(sum(len(x.encoded_element) for x in e.element_event.elements)
               <= MAX_ELEMENT_BYTES * 1.1 for e in events)


def test_a_restart_rebuilds_the_ids_so_a_later_copy_is_still_a_duplicate(tmp_path):
    rejects = Rejects()
    f = make(tmp_path, rejects)
    ids = np.repeat(np.arange(10), 2)
    write(tmp_path / "in", "a.avro", [T0 + 1000] * 20, ids=ids)
    f.poll()
    first = [b.columns["report_id"].tolist() for b in f._stream.batches]
    totals = dict(rejects.totals)

    again_rejects = Rejects()
    again = make(tmp_path, again_rejects)
    replay = again.replay_after_restart()
    assert [b.columns["report_id"].tolist() for b in replay.batches] == first
    assert again_rejects.totals == totals  # all totals written again: equal, not doubled
    shutil.copy(tmp_path / "in" / "a.avro", tmp_path / "in" / "copy.avro")
    again.poll()
    counters = again.state.counters()
    assert accepted(counters) == 10 and counters["dead_letter.duplicate"] == 30
    assert_conserved(again, tmp_path, again_rejects)


def test_too_late_reports_reach_the_store_per_slice(tmp_path):
    rejects = Rejects()
    f = make(tmp_path, rejects)
    write(tmp_path / "in", "a.avro", [T0 + 3 * MINUTE])
    f.poll()
    write(tmp_path / "in", "late.avro", [T0 + 5] * 4)
    f.poll()
    assert rejects.totals[(METRIC, "too_late", T0, T0 + MINUTE)] == 4
    assert_conserved(f, tmp_path, rejects)


# The folder changing under the follower ----------------------------------------------------

def test_a_file_removed_between_the_listing_and_its_stat_is_skipped(tmp_path, monkeypatch,
                                                                     caplog):
    f = make(tmp_path)
    write(tmp_path / "in", "a.avro", [T0 + 1])
    write(tmp_path / "in", "gone.avro", [T0 + 2])
    real_scandir = os.scandir

    class RemovingScandir:
        """The real listing; a retention job removes gone.avro right after it is listed."""

        def __init__(self, path):
            self._entries = real_scandir(path)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self._entries.close()

        def __iter__(self):
            for entry in self._entries:
                if entry.name == "gone.avro":
                    os.unlink(entry.path)
                yield entry

    monkeypatch.setattr(follower_module.os, "scandir", RemovingScandir)
    with caplog.at_level("INFO", logger="ldp.follow"):
        assert f.poll() == 1
    assert "gone.avro was removed before it was read: skipped" in caplog.text
    assert list(f.state.files) == ["a.avro"]


def test_a_file_removed_after_the_listing_is_not_read(tmp_path, caplog):
    f = make(tmp_path)
    with caplog.at_level("INFO", logger="ldp.follow"):
        assert f._read_file("never-there.avro", [], {}) is None
    assert "removed before it was read" in caplog.text and not f.state.files


def test_a_consumed_file_that_grows_or_is_replaced_is_a_counted_file_changed_letter(tmp_path):
    rejects = Rejects()
    f = make(tmp_path, rejects)
    write(tmp_path / "in", "a.avro", [T0 + 1000] * 5)
    f.poll()
    write(tmp_path / "in", "a.avro", [T0 + 1000] * 9)  # the name reused for other content
    f.poll()
    counters = f.state.counters()
    assert counters["dead_letter.file_changed"] == 9 and counters["records_read"] == 14
    assert accepted(counters) == 5 and sum(b.n for b in f._stream.batches) == 5
    f.poll()  # reported once per change
    assert f.state.counters()["dead_letter.file_changed"] == 9
    with open(tmp_path / "in" / "a.avro", "ab") as grown:  # it grows
        grown.write(b"x" * 10)
    f.poll()
    assert f.state.counters()["dead_letter.file_changed"] > 9
    (letter,) = [json.loads(p.read_text()) for p in
                 (tmp_path / "out" / "dead_letters").glob("a.avro.changed-*.jsonl")
                 if json.loads(p.read_text())["records"] == 9]
    assert "changed after it was read" in letter["detail"]
    assert_conserved(f, tmp_path, rejects)


def test_a_file_changed_while_stopped_is_taken_out_not_recounted(tmp_path):
    f = make(tmp_path)
    write(tmp_path / "in", "a.avro", [T0 + 1000] * 5)
    write(tmp_path / "in", "b.avro", [T0 + 2000] * 3)
    f.poll()
    write(tmp_path / "in", "a.avro", [T0 + 1000] * 40)  # while the run is down

    again = make(tmp_path)
    replay = again.replay_after_restart()
    assert sum(b.n for b in replay.batches) == 3  # b only: a's content is not the one counted
    window = again.state.windows[next(iter(again.state.windows))]
    assert window.accepted == 3
    again.poll()  # and the new content is one more file_changed letter
    counters = again.state.counters()
    assert counters["dead_letter.file_changed"] == 5 + 40
    assert accepted(counters) == 3
    assert_conserved(again, tmp_path)
    # a second restart does not take the same reports out again
    third = make(tmp_path)
    third.replay_after_restart()
    assert third.state.counters() == counters


def test_a_checkpoint_of_the_wrong_shape_names_the_file(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    for text in ('{"version": 2}', '[1, 2]', '{"version": 1, "files": {}}', "{"):
        (out / CHECKPOINT).write_text(text)
        with pytest.raises(InputError, match=f"its checkpoint {out / CHECKPOINT}") as error:
            make(tmp_path)
        assert error.value.field == "output"


def test_temporary_files_left_by_a_kill_are_swept_at_start(tmp_path):
    out = tmp_path / "out"
    (out / "dead_letters").mkdir(parents=True)
    left = [out / f".{CHECKPOINT}.123-456-abcdef01.tmp", out / ".status.json.1-2-3.tmp",
            out / "dead_letters" / ".a.avro.jsonl.1-2-3.tmp"]
    for path in left:
        path.write_text("{")
    keep = out / "dead_letters" / "a.avro.jsonl"
    keep.write_text("{}\n")
    make(tmp_path)
    assert not any(path.exists() for path in left) and keep.exists()


def test_a_restart_rereads_only_the_files_of_windows_not_complete_on_disk(tmp_path):
    f = make(tmp_path, windows=WindowSpec(MINUTE, MINUTE))
    for k in range(4):
        write(tmp_path / "in", f"w0-{k}.avro", [T0 + 1 + k] * 10)
    write(tmp_path / "in", "w1.avro", [T0 + MINUTE + 1] * 6)
    f.poll()
    write(tmp_path / "in", "w3.avro", [T0 + 3 * MINUTE])  # window 0 and 1 expire
    f.poll()
    (tmp_path / "out" / "panes.log").write_text("".join(  # window 0 complete on disk, 1 not
        json.dumps({"metric": METRIC, "window_start": s, "window_end": e, "n": n,
                    "pane": {"index": 0}}) + "\n"
        for s, e, n in [("2024-03-01T00:00:00Z", "2024-03-01T00:01:00Z", 40),
                        ("2024-03-01T00:01:00Z", "2024-03-01T00:02:00Z", 5)]))
    again = make(tmp_path, windows=WindowSpec(MINUTE, MINUTE))
    replay = again.replay_after_restart()
    assert sum(b.n for b in replay.batches) == 6 + 1
    assert again._decoder.records_read == 6 + 1  # the four files of window 0 are not read


def test_ldp_run_follow_refuses_a_checkpoint_of_the_wrong_shape_with_exit_2(tmp_path):
    import subprocess
    import sys
    (tmp_path / "in").mkdir()
    out = tmp_path / "out"
    out.mkdir()
    (out / CHECKPOINT).write_text('{"version": 2, "files": {}}')  # valid JSON, no "windows"
    registry = tmp_path / "registry.json"
    registry.write_text(json.dumps({"metrics": [
        {"name": METRIC, "protocol": "grr", "epsilon": 1.0, "domain": {"size": 3}}]}))
    done = subprocess.run(
        [sys.executable, "-m", "ldp_telemetry.pipelines.cli", "run", "--registry", str(registry),
         "--follow", str(tmp_path / "in"), "--output", str(out), "--window", "60",
         "--until", "5"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"its checkpoint {out / CHECKPOINT} cannot be used" in done.stderr
    assert "Traceback" not in done.stderr


def test_dead_letter_files_are_durable_before_the_checkpoint_that_counts_them(tmp_path,
                                                                              monkeypatch):
    """A checkpoint that survives a power cut never counts a dead letter whose file's rename did
    not: the letters' file, then their folder, are fsynced before the checkpoint is."""
    if not os.path.isdir("/proc/self/fd"):
        pytest.skip("needs /proc to name the synced descriptors")
    f = make(tmp_path)
    write(tmp_path / "in", "a.avro", [T0 + 1000] * 4, ids=[7, 7, 8, 8])
    synced, real_fsync = [], os.fsync
    monkeypatch.setattr(os, "fsync", lambda d: (synced.append(os.readlink(f"/proc/self/fd/{d}")),
                                                real_fsync(d)))
    f.poll()
    out = str(tmp_path / "out")
    letters = os.path.join(out, "dead_letters")
    where = [next(i for i, p in enumerate(synced) if test(p)) for test in (
        lambda p: os.path.dirname(p) == letters and p.endswith(".tmp"),  # the letters' file
        lambda p: p == letters,                                           # their folder
        lambda p: os.path.basename(p).startswith(f".{CHECKPOINT}."))]     # then the checkpoint
    assert where == sorted(where), synced
    assert dead_letter_records(tmp_path) == {"duplicate": 2}


def test_letters_of_a_killed_poll_that_a_rereading_no_longer_gives_are_removed(tmp_path,
                                                                               monkeypatch):
    """A run killed after writing a file's dead letters but before its checkpoint; the file its
    duplicates repeated is removed before the restart, so the re-reading counts every row: the
    letters written before must not stay in OUT/dead_letters uncounted."""
    (tmp_path / "in").mkdir()
    write(tmp_path / "in", "a.avro", [T0 + 1000] * 3, ids=[1, 2, 3])
    os.utime(tmp_path / "in" / "a.avro", ns=(1, 1))  # read first
    write(tmp_path / "in", "b.avro", [T0 + 1000] * 3, ids=[1, 2, 3])

    def killed(*_):
        raise KeyboardInterrupt  # stands for the SIGKILL before the checkpoint's rename
    with monkeypatch.context() as patch:
        patch.setattr(follower_module, "write_checkpoint", killed)
        with pytest.raises(KeyboardInterrupt):
            make(tmp_path).poll()
    assert dead_letter_records(tmp_path) == {"duplicate": 3}
    os.unlink(tmp_path / "in" / "a.avro")
    f = make(tmp_path)
    f.poll()
    assert f.state.counters()["records_counted"] == 3
    assert_conserved(f, tmp_path)
