"""Kill a live run (SIGKILL, in a subprocess) in the middle and restart it over the same folder:
every pane written afterwards counts each report of its window exactly once, pane indices go on
from those on disk, and the latest pane of every window is the estimate of all of its reports.

The test waits for observable steps (panes in the log, files in the checkpoint) with bounded
timeouts, and kills every process it started.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np

from ldp_telemetry.ldp.protocols import make_protocol
from ldp_telemetry.ldp.protocols.noise import unbiased_estimate
from ldp_telemetry.output.layout import CHECKPOINT
from ldp_telemetry.output.reader import read_pane_log
from ldp_telemetry.schemas.codec import write_reports

T0 = 1_709_251_200_000  # 2024-03-01T00:00:00Z, ms
MINUTE = 60_000
METRIC = "k.oue"
PROTOCOL = make_protocol("oue", 1.0, 6)
WAIT_S = 120


def wait_for(condition, what, process):
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        if condition():
            return
        if process.poll() is not None:
            raise AssertionError(f"the live run exited ({process.returncode}) before {what}:\n"
                                 + process.stdout.read())
        time.sleep(0.1)
    raise TimeoutError(f"waited {WAIT_S} s for {what}")


def start(registry, inbox, output, *extra):
    return subprocess.Popen(
        [sys.executable, "-m", "ldp_telemetry.pipelines.cli", "run", "--registry", str(registry),
         "--follow", str(inbox), "--output", str(output), "--window", "60",
         "--allowed-lateness", "120", "--early-every", "1", "--idle-advance", "0",
         "--poll", "0.2", *extra],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_kill_and_restart_neither_loses_nor_double_counts(tmp_path, processes):
    registry = tmp_path / "registry.json"
    registry.write_text(json.dumps({"metrics": [
        {"name": METRIC, "protocol": "oue", "epsilon": 1.0, "domain": {"size": 6}}]}))
    inbox, output = tmp_path / "in", tmp_path / "out"
    inbox.mkdir()
    rng = np.random.default_rng(5)
    written = {}
    next_id = [0]

    def write(name, n, start_ms):
        times = (start_ms + rng.integers(0, MINUTE, n)).astype(np.int64)
        columns = PROTOCOL.perturb(rng.integers(0, 6, n), rng)
        ids = np.arange(next_id[0], next_id[0] + n)  # distinct ids: each report counts
        next_id[0] += n
        write_reports(str(inbox / f".{name}"), METRIC, PROTOCOL, ids, times, columns)
        os.rename(inbox / f".{name}", inbox / name)
        written[name] = (times, columns)

    def consumed():
        path = output / CHECKPOINT
        return set(json.loads(path.read_text())["files"]) if path.exists() else set()

    def has_pane(window_start, timing):
        return any(e["window_start"] == window_start and e["pane"]["timing"] == timing
                   for e in read_pane_log(output))

    first = start(registry, inbox, output, "--until", "300")
    processes.append(first)
    write("w0-a.avro", 600, T0)
    wait_for(lambda: has_pane("2024-03-01T00:00:00Z", "EARLY"), "an early pane", first)
    write("w1-a.avro", 500, T0 + MINUTE)  # watermark to the end of window 0: on time
    wait_for(lambda: has_pane("2024-03-01T00:00:00Z", "ON_TIME"), "an on-time pane", first)
    write("w1-b.avro", 300, T0 + MINUTE)
    write("w0-b.avro", 200, T0)  # late, within the allowed lateness
    wait_for(lambda: {"w1-b.avro", "w0-b.avro"} <= consumed(), "the files to be consumed", first)
    first.send_signal(signal.SIGKILL)  # whatever Beam had not written yet is lost with it
    first.wait(timeout=30)

    write("w0-c.avro", 100, T0)  # while the job is down
    write("w2.avro", 400, T0 + 2 * MINUTE)
    second = start(registry, inbox, output, "--stop-when-idle", "3", "--until", "300")
    processes.append(second)
    out, _ = second.communicate(timeout=WAIT_S * 2)
    assert second.returncode == 0, out
    assert "restart: 4 file(s) consumed before" in out
    assert "records read: 2100, accepted: 2100, dead-lettered: 0 (none)" in out

    truth = {}
    for times, columns in written.values():
        for start_ms in (T0, T0 + MINUTE, T0 + 2 * MINUTE):
            inside = (times >= start_ms) & (times < start_ms + MINUTE)
            if inside.any():
                statistic, n = truth.get(start_ms, (PROTOCOL.new_statistic(), 0))
                PROTOCOL.accumulate(statistic, {k: v[inside] for k, v in columns.items()})
                truth[start_ms] = (statistic, n + int(inside.sum()))
    log = read_pane_log(output)
    for start_ms, (statistic, n) in truth.items():
        start_iso = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(start_ms / 1000))
        panes = [e for e in log if e["window_start"] == start_iso]
        indices = [e["pane"]["index"] for e in panes]
        assert len(set(indices)) == len(indices), (start_iso, indices)  # numbering goes on
        assert all(e["n"] <= n for e in panes), (start_iso, [e["n"] for e in panes])
        last = max(panes, key=lambda e: e["pane"]["index"])
        assert last["n"] == n, (start_iso, [(e["pane"], e["n"]) for e in panes])
        record = json.loads((output / last["path"]).read_text())
        np.testing.assert_allclose(
            record["unbiased_estimate"],
            unbiased_estimate(PROTOCOL.support_counts(statistic), PROTOCOL.noise(n)), rtol=1e-12)
    assert sorted(truth) == [T0, T0 + MINUTE, T0 + 2 * MINUTE]
