"""Chaos: a live run over a folder fed by an at-least-once collector, SIGKILLed at random moments
(once inside a checkpoint write), restarted, and stopped idle, ends exactly where the batch job
over the same files ends: the same final estimates, and the same counts in its summary,
status.json, dead letters and store rejects.

The collector re-delivers some files under new names (`cp f.avro retry.avro`, then rename),
writes one file whose report ids repeat, and a file that cannot be decoded in each phase. Kill
moments come from a fixed seed; the test waits for observable progress (files in the
checkpoint) with bounded timeouts, never on the speed of the machine, and kills every process it
started.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time

import numpy as np

from ldp_telemetry.ldp.protocols import make_protocol
from ldp_telemetry.output.layout import CHECKPOINT, STATUS
from ldp_telemetry.output.reader import latest_panes
from ldp_telemetry.pipelines.checkpoint import FAULT_ENV
from ldp_telemetry.schemas.codec import write_reports

T0 = 1_709_251_200_000  # 2024-03-01T00:00:00Z, ms
MINUTE = 60_000
METRIC = "chaos.grr"
PROTOCOL = make_protocol("grr", 1.0, 5)
WAIT_S = 120
#: Files per delivery phase; one phase before each kill and one before the final run.
PHASES = 5
FILES_PER_PHASE = 6
REPORTS_PER_FILE = 300


class Collector:
    """Writes report files under a temporary name and renames them (the collectors' contract)."""

    def __init__(self, folder, seed):
        self.folder = folder
        self.rng = np.random.default_rng(seed)
        self.files: list[str] = []
        self.next_id = 0

    def _publish(self, name, writer):
        temporary = self.folder / f".{name}.tmp"
        writer(temporary)
        os.rename(temporary, self.folder / name)
        self.files.append(name)

    def reports(self, name, minute, n=REPORTS_PER_FILE, ids=None):
        times = (T0 + minute * MINUTE + self.rng.integers(0, MINUTE, n)).astype(np.int64)
        columns = PROTOCOL.perturb(self.rng.integers(0, 5, n), self.rng)
        if ids is None:
            ids = np.arange(self.next_id, self.next_id + n)
            self.next_id += n
        self._publish(name, lambda path: write_reports(str(path), METRIC, PROTOCOL, ids, times,
                                                       columns))

    def redeliver(self, name, new_name):
        self._publish(new_name, lambda path: shutil.copy(self.folder / name, path))

    def junk(self, name):
        self._publish(name, lambda path: path.write_bytes(b"not an avro file"))


def start(registry, inbox, output, store, *extra, env=None):
    return subprocess.Popen(
        [sys.executable, "-m", "ldp_telemetry.pipelines.cli", "run", "--registry", str(registry),
         "--follow", str(inbox), "--output", str(output), "--window", "60",
         "--allowed-lateness", "3600", "--idle-advance", "0", "--poll", "0.05",
         "--store", store, "--create-store", *extra],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, **(env or {})})


def consumed(output) -> int:
    try:
        return len(json.loads((output / CHECKPOINT).read_text())["files"])
    except (FileNotFoundError, json.JSONDecodeError):
        return 0


def wait_for(condition, what, process):
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        if condition():
            return
        if process.poll() is not None:
            return  # it ended (a fault point, or it was faster than the test)
        time.sleep(0.02)
    raise TimeoutError(f"waited {WAIT_S} s for {what}")


def summary_counts(text: str) -> str:
    """'records read: …, accepted: …, dead-lettered: … (…)' of a summary line."""
    match = re.search(r"records read: \d+, accepted: \d+, dead-lettered: \d+ \([^)]*\)", text)
    assert match, text
    return match.group(0)


def store_rejects(path) -> dict[str, int]:
    with sqlite3.connect(path) as connection:
        rows = connection.execute(
            "SELECT reason, SUM(records) FROM ldp_rejects GROUP BY reason").fetchall()
    return {reason: int(n) for reason, n in rows}


def dead_letter_records(folder) -> dict[str, int]:
    totals: dict[str, int] = {}
    for path in folder.glob("*.jsonl"):
        for line in path.read_text().splitlines():
            letter = json.loads(line)
            totals[letter["reason"]] = totals.get(letter["reason"], 0) + letter["records"]
    return totals


def test_sigkills_and_an_at_least_once_collector_end_where_the_batch_job_ends(
        tmp_path, processes):
    registry = tmp_path / "registry.json"
    registry.write_text(json.dumps({"metrics": [
        {"name": METRIC, "protocol": "grr", "epsilon": 1.0, "domain": {"size": 5}}]}))
    inbox, output = tmp_path / "in", tmp_path / "live"
    inbox.mkdir()
    store = f"sqlite:///{tmp_path / 'live.db'}"
    collector = Collector(inbox, seed=28)
    rng = np.random.default_rng(2028)

    def deliver(phase):
        for i in range(FILES_PER_PHASE):
            name = f"p{phase}-{i:02d}.avro"
            collector.reports(name, minute=phase + int(rng.integers(0, 2)))
            if rng.random() < 0.3:  # an at-least-once collector retries
                collector.redeliver(name, f"p{phase}-{i:02d}-retry.avro")
        if phase == 1:
            ids = np.repeat(np.arange(collector.next_id, collector.next_id + 50), 4)
            collector.next_id += 50
            collector.reports("repeated-ids.avro", minute=1, n=len(ids), ids=ids)
            collector.redeliver("p0-00.avro", "p0-00-late-retry.avro")
        collector.junk(f"junk-{phase}.avro")  # dead letters written while runs are killed

    for phase in range(PHASES - 1):
        before = consumed(output)
        if phase == 2:  # this run kills itself inside its first checkpoint write
            run = start(registry, inbox, output, store, "--until", "300", env={FAULT_ENV: "1"})
            processes.append(run)
            deliver(phase)
            assert run.wait(timeout=WAIT_S) == -signal.SIGKILL, run.stdout.read()
            assert consumed(output) == before  # the checkpoint was not replaced...
            assert list(output.glob(f".{CHECKPOINT}.*.tmp"))  # ...and its write was torn
            continue
        run = start(registry, inbox, output, store, "--until", "300")
        processes.append(run)
        deliver(phase)
        wait_for(lambda: consumed(output) > before, "a file to be consumed", run)  # noqa: B023
        time.sleep(float(rng.uniform(0.0, 0.3)))
        run.send_signal(signal.SIGKILL)
        run.wait(timeout=30)
    deliver(PHASES - 1)
    last = start(registry, inbox, output, store, "--stop-when-idle", "2", "--until", "300")
    processes.append(last)
    out, _ = last.communicate(timeout=WAIT_S * 2)
    assert last.returncode == 0, out
    assert consumed(output) == len(collector.files)

    batch_output = tmp_path / "batch"
    batch_store = f"sqlite:///{tmp_path / 'batch.db'}"
    batch = subprocess.run(
        [sys.executable, "-m", "ldp_telemetry.pipelines.cli", "run", "--registry", str(registry),
         "--input", str(inbox / "*.avro"), "--output", str(batch_output), "--window", "60",
         "--store", batch_store, "--create-store", "--runner=FnApiRunner"],
        capture_output=True, text=True, timeout=WAIT_S * 2)
    assert batch.returncode == 0, batch.stdout + batch.stderr

    # The counts: summary, status.json, dead letters and store rejects, as the batch run's.
    expected = summary_counts(batch.stdout)
    assert "duplicate=" in expected and f"undecodable={PHASES}" in expected
    assert summary_counts(out) == expected
    status = json.loads((output / STATUS).read_text())
    assert status["finished"]
    counters = status["counters"]
    read, accepted = (int(x) for x in re.findall(r"\d+", expected)[:2])
    assert counters["records_read"] == read
    assert counters["records_accepted"] - counters["dead_letter.duplicate"] == accepted
    assert counters["records_counted"] == accepted  # nothing was too late
    batch_letters = {}
    for path in batch_output.glob("dead_letters-*.jsonl"):
        for line in path.read_text().splitlines():
            letter = json.loads(line)
            batch_letters[letter["reason"]] = (batch_letters.get(letter["reason"], 0)
                                               + letter["records"])
    assert dead_letter_records(output / "dead_letters") == batch_letters
    assert {k.split(".", 1)[1]: v for k, v in counters.items()
            if k.startswith("dead_letter.")} == batch_letters
    assert store_rejects(tmp_path / "live.db") == store_rejects(tmp_path / "batch.db") \
        == batch_letters

    # The estimates: every window's latest pane is the batch estimate, bit for bit.
    finals = sorted((json.loads((output / entry["path"]).read_text())
                     for entry in latest_panes(str(output)).values()),
                    key=lambda r: r["window_start"])
    reference = []
    for path in batch_output.glob("estimates-*.jsonl"):
        reference += [json.loads(line) for line in path.read_text().splitlines()]
    reference.sort(key=lambda r: r["window_start"])
    assert [r["window_start"] for r in finals] == [r["window_start"] for r in reference]
    for mine, theirs in zip(finals, reference, strict=True):
        assert {k: v for k, v in mine.items() if k != "pane"} == \
            {k: v for k, v in theirs.items() if k != "pane"}, mine["window_start"]
    assert sum(r["n"] for r in finals) == accepted
    assert not list(output.glob(".*.tmp"))  # the torn checkpoint write was swept
