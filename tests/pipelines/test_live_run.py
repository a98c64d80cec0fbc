"""A live run in this process: files appear one by one, panes are on disk before the next file
is written, late reports are counted per window, SIGTERM ends the run with a summary that adds up.

The feeder thread waits for each pane it expects (bounded waits) before writing the next file,
so the test is about order, never about speed. The idle advance of the watermark is off, so the
watermark moves only with the files' event times.
"""
from __future__ import annotations

import io
import json
import os
import signal
import threading
import time

import numpy as np

from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.ldp.config.windows import WindowSpec
from ldp_telemetry.ldp.protocols import make_protocol
from ldp_telemetry.ldp.protocols.noise import unbiased_estimate
from ldp_telemetry.output.layout import CHECKPOINT, LATEST, STATUS
from ldp_telemetry.output.reader import read_pane_log
from ldp_telemetry.pipelines.follower import WatermarkPolicy
from ldp_telemetry.pipelines.job import EstimateJob, LiveConfig
from ldp_telemetry.pipelines.live import run_live
from ldp_telemetry.schemas.codec import write_reports
from ldp_telemetry.store import open_store

T0 = 1_709_251_200_000  # 2024-03-01T00:00:00Z, ms
MINUTE = 60_000
METRIC = "live.grr"
PROTOCOL = make_protocol("grr", 2.0, 4)
REGISTRY = parse_registry({"metrics": [
    {"name": METRIC, "protocol": "grr", "epsilon": 2.0, "domain": {"labels": list("abcd")}}]})
WAIT_S = 90  # per expected pane; the first one includes Beam's start-up


class Files:
    """Writes report files by rename and remembers their payloads and event times."""

    def __init__(self, folder, seed):
        self.folder = folder
        self.rng = np.random.default_rng(seed)
        self.written: dict[str, tuple[np.ndarray, dict]] = {}
        self.next_id = 0  # distinct report ids across files: each report counts

    def write(self, name, n, start_ms, span_ms=MINUTE):
        times = (start_ms + self.rng.integers(0, span_ms, n)).astype(np.int64)
        columns = PROTOCOL.perturb(self.rng.integers(0, 4, n), self.rng)
        temporary = self.folder / f"{name}.tmp"
        ids = np.arange(self.next_id, self.next_id + n)
        self.next_id += n
        write_reports(str(temporary), METRIC, PROTOCOL, ids, times, columns)
        os.rename(temporary, self.folder / name)
        self.written[name] = (times, columns)

    def window(self, names, start_ms, size_ms=MINUTE):
        """n and the unbiased estimate of the reports of `names` in [start, start + size)."""
        statistic, n = PROTOCOL.new_statistic(), 0
        for name in names:
            times, columns = self.written[name]
            inside = (times >= start_ms) & (times < start_ms + size_ms)
            PROTOCOL.accumulate(statistic, {k: v[inside] for k, v in columns.items()})
            n += int(inside.sum())
        return n, unbiased_estimate(PROTOCOL.support_counts(statistic), PROTOCOL.noise(n))


def wait_for(condition, what):
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    raise TimeoutError(f"waited {WAIT_S} s for {what}")


def panes_of(output, window_start):
    return [e for e in read_pane_log(output) if e["window_start"] == window_start]


def test_live_run_streams_panes_and_counts_late_reports_per_window(tmp_path, hard_deadline):
    hard_deadline(900)
    inbox, output = tmp_path / "in", tmp_path / "out"
    inbox.mkdir()
    files = Files(inbox, seed=31)
    w0 = "2024-03-01T00:00:00Z"
    failures = []

    def feed():
        try:
            files.write("w0-a.avro", 500, T0)
            wait_for(lambda: any(e["pane"]["timing"] == "EARLY" for e in panes_of(output, w0)),
                     "the early pane of window 0")
            files.write("w0-b.avro", 300, T0)
            files.write("w1.avro", 400, T0 + MINUTE)  # watermark to T0 + 1 min: w0 on time
            wait_for(lambda: any(e["pane"]["timing"] == "ON_TIME" for e in panes_of(output, w0)),
                     "the on-time pane of window 0")
            files.write("w3.avro", 100, T0 + 3 * MINUTE)  # watermark T0 + 3 min: w0 expired
            checkpoint = output / CHECKPOINT
            wait_for(lambda: json.loads(checkpoint.read_text())["watermark_ms"] == T0 + 3 * MINUTE,
                     "the watermark to pass window 0's lateness")
            files.write("w0-late.avro", 200, T0)  # too late
            (inbox / "junk.avro").write_text("not avro")
            wait_for(lambda: len(json.loads(checkpoint.read_text())["files"]) == 6,
                     "the last files to be read")
        except TimeoutError as error:
            failures.append(error)
        finally:
            os.kill(os.getpid(), signal.SIGTERM)

    feeder = threading.Thread(target=feed, daemon=True)
    store = f"sqlite:///{tmp_path / 'estimates.db'}"
    job = EstimateJob(REGISTRY, (), str(output),
                      WindowSpec(MINUTE, MINUTE, allowed_lateness_ms=MINUTE, early_every_ms=1000),
                      store)
    printed = io.StringIO()
    feeder.start()
    counters = run_live(job, LiveConfig("directory", str(inbox), WatermarkPolicy(0, None),
                                        poll_s=0.2, until_s=600), [], out=printed)
    feeder.join(timeout=5)
    assert not failures, failures

    summary = printed.getvalue()
    assert ("records read: 1501, accepted: 1500, dead-lettered: 1 (undecodable=1), "
            in summary), summary
    assert "too late (dropped): 200" in summary
    assert f"too late: {METRIC} [{w0} .. 2024-03-01T00:01:00Z): 200" in summary
    assert counters["records_counted"] == 1300

    status = json.loads((output / STATUS).read_text())
    assert status["finished"] and status["too_late"] == [
        {"metric": METRIC, "window_start": w0, "window_end": "2024-03-01T00:01:00Z",
         "too_late": 200, "accepted": 800}]

    # Window 0: EARLY with the first file, ON_TIME with both on-time files; the late file is
    # in no pane. Every pane's estimate is the one recomputed from its files.
    log = read_pane_log(output)
    by_window: dict[str, list] = {}
    for entry in log:
        record = json.loads((output / entry["path"]).read_text())
        assert record["pane"] == entry["pane"] and record["n"] == entry["n"]
        by_window.setdefault(entry["window_start"], []).append(record)
    panes0 = sorted(by_window[w0], key=lambda r: r["pane"]["index"])
    assert [p["pane"]["index"] for p in panes0] == list(range(len(panes0)))
    assert panes0[0]["pane"]["timing"] == "EARLY" and panes0[0]["n"] == 500
    assert [p["n"] for p in panes0 if p["pane"]["timing"] == "ON_TIME"] == [800]
    assert max(p["n"] for p in panes0) == 800
    n, estimate = files.window(["w0-a.avro", "w0-b.avro"], T0)
    np.testing.assert_allclose(panes0[-1]["unbiased_estimate"], estimate, rtol=1e-12)
    for start, names in ((T0 + MINUTE, ["w1.avro"]), (T0 + 3 * MINUTE, ["w3.avro"])):
        records = by_window[f"2024-03-01T00:0{(start - T0) // MINUTE}:00Z"]
        last = max(records, key=lambda r: r["pane"]["index"])
        n, estimate = files.window(names, start)
        assert last["n"] == n
        np.testing.assert_allclose(last["unbiased_estimate"], estimate, rtol=1e-12)
        latest = json.loads((output / os.path.dirname(
            next(e["path"] for e in log if e["window_start"] == last["window_start"]))
            / LATEST).read_text())
        assert latest == last
    assert counters["panes_written"] == len(log)
    assert counters["windows_finalized"] == len(by_window) < len(log)  # windows, not panes

    # the estimate store holds the latest pane of each window, as on disk
    stored = open_store(store).windows(METRIC)
    assert {(w["window_start"], w["pane"]["index"], w["n"]) for w in stored} == {
        (r["window_start"], r["pane"]["index"], r["n"])
        for r in (max(rs, key=lambda r: r["pane"]["index"]) for rs in by_window.values())}
