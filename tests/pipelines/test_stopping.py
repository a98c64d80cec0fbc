"""Ctrl-C: SIGINT to the process group of `ldp run`, as a terminal sends it.

A live run (`ldp run --follow`) ends with every window's final pane and its summary, whatever
SIGTERMs follow while it writes them (a wrapper script's stop). A batch run prints one line —
what it had read and written — and exits 130, with no traceback. Real processes and signals;
nothing here depends on how fast the machine is (the waits are bounds against a hang).
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from ldp_telemetry.ldp.base.errors import StoreError
from ldp_telemetry.ldp.config.registry import load_registry
from ldp_telemetry.output.layout import STATUS
from ldp_telemetry.output.reader import latest_panes, read_pane_log
from ldp_telemetry.schemas.codec import write_reports
from ldp_telemetry.store import open_store

pytestmark = pytest.mark.slow  # real `ldp run` processes
LDP = Path(sys.prefix) / "bin" / "ldp"
HOUR = 3_600_000
T0 = 1_709_251_200_000  # 2024-03-01T00:00:00Z
REGISTRY = {"metrics": [{"name": "k.grr", "protocol": "grr", "epsilon": 2.0,
                         "domain": {"labels": list("abcd")}}]}
HANG = 300  # seconds: a bound against a hung process, never a speed requirement


def registry(folder: Path):
    (folder / "registry.json").write_text(json.dumps(REGISTRY))
    return load_registry(folder / "registry.json")["k.grr"].protocol


def write_files(folder: Path, protocol, files: int, per_file: int, hours: int, seed: int = 3):
    folder.mkdir(exist_ok=True)
    rng = np.random.default_rng(seed)
    for k in range(files):
        ids = np.arange(k * per_file, (k + 1) * per_file)
        write_reports(str(folder / f"part-{k:04d}.avro"), "k.grr", protocol, ids,
                      T0 + rng.integers(0, hours * HOUR, per_file),
                      protocol.perturb(rng.integers(0, 4, per_file), rng))


def wait_for(condition, process, what: str):
    deadline = time.monotonic() + HANG
    while not condition():
        assert process.poll() is None, f"ldp run ended before {what}"
        assert time.monotonic() < deadline, f"no {what} after {HANG} s"
        time.sleep(0.05)


def test_ctrl_c_ends_a_live_run_with_its_final_panes_and_summary(tmp_path):
    protocol = registry(tmp_path)
    write_files(tmp_path / "in", protocol, files=3, per_file=400, hours=3)
    out = tmp_path / "out"
    url = f"sqlite:///{tmp_path}/store.db"
    run = subprocess.Popen(
        [str(LDP), "run", "--registry", str(tmp_path / "registry.json"), "--follow",
         str(tmp_path / "in"), "--output", str(out), "--window", "3600", "--poll", "0.2",
         "--store", url, "--create-store"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        def consumed():  # the run is in its loop, its handlers installed
            try:
                return json.loads((out / STATUS).read_text())["files_consumed"] == 3
            except (FileNotFoundError, ValueError):
                return False
        wait_for(consumed, run, "status.json with 3 files consumed")
        os.killpg(run.pid, signal.SIGINT)  # Ctrl-C
        # SIGTERM after SIGINT while the run writes its last panes, as demo/live.sh sends
        while run.poll() is None:
            os.killpg(run.pid, signal.SIGTERM)
            time.sleep(0.05)
        stdout, stderr = run.communicate(timeout=HANG)
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
    assert run.returncode == 0, stderr
    assert "Traceback" not in stderr
    assert "records read: 1200, accepted: 1200" in stdout and ", panes: 3" in stdout
    latest = latest_panes(str(out))
    assert len(latest) == 3  # every window got its final pane
    assert {entry["pane"]["timing"] for entry in latest.values()} == {"ON_TIME"}
    assert sum(entry["n"] for entry in latest.values()) == 1200
    assert len(read_pane_log(str(out))) == 3
    assert json.loads((out / STATUS).read_text())["finished"] is True
    with open_store(url) as store:  # the live run is a run of the store, ended as asked
        assert [(r["kind"], r["inputs"], r["status"]) for r in store.runs()] == [
            ("live", [str(tmp_path / "in")], "finished")]
        assert sum(window["n"] for window in store.windows("k.grr")) == 1200
        assert store.run_panes(1) == 3
    assert "store: run 1 wrote 3 pane(s)" in stdout


def test_ctrl_c_on_a_batch_run_prints_one_line_and_exits_130(tmp_path):
    protocol = registry(tmp_path)
    # enough reports that the run is still reading when Ctrl-C comes
    write_files(tmp_path / "in", protocol, files=60, per_file=20_000, hours=48)
    url = f"sqlite:///{tmp_path}/store.db"
    run = subprocess.Popen(
        [str(LDP), "run", "--registry", str(tmp_path / "registry.json"), "--input",
         str(tmp_path / "in" / "*.avro"), "--output", str(tmp_path / "out"), "--window", "3600",
         "--store", url, "--create-store"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        def registered():  # the run's row exists once its Ctrl-C handling is in place
            try:
                with open_store(url, create=False) as store:
                    return any(r["status"] == "running" for r in store.runs())
            except StoreError:  # not made yet, or its tables not yet
                return False
        wait_for(registered, run, "the run's row in the store")
        os.killpg(run.pid, signal.SIGINT)
        stdout, stderr = run.communicate(timeout=HANG)
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
    assert run.returncode == 130, stderr
    lines = [line for line in stderr.splitlines() if not line.startswith("INFO ")]
    assert len(lines) == 1, stderr
    assert lines[0].startswith("ldp run: interrupted: read ")
    assert " report(s) from " in lines[0] and " of 60 input file(s); nothing written to " \
        f"{tmp_path / 'out'} (a batch run writes its files when it ends); store: run 1 wrote " \
        in lines[0] and lines[0].endswith(" pane(s), marked interrupted")
    assert "records read" not in stdout  # it did not reach its end
    assert not list((tmp_path / "out").glob("estimates-*"))
    with open_store(url) as store:
        assert [r["status"] for r in store.runs()] == ["interrupted"]


HELD_CTRL_C = """
import os, signal, sys
from ldp_telemetry.ldp.config.registry import load_registry
from ldp_telemetry.ldp.config.windows import WindowSpec
from ldp_telemetry.pipelines.job import EstimateJob
from ldp_telemetry.pipelines.stopping import interrupt_batch_on_sigint
from ldp_telemetry.pipelines.store_runs import start_store_run

folder, url = sys.argv[1], sys.argv[2]
job = EstimateJob(load_registry(folder + "/registry.json"), (folder + "/in.avro",),
                  folder + "/out", WindowSpec.from_seconds(3600), store=url)
with interrupt_batch_on_sigint(lambda: job, "FnApiRunner") as held:
    with held():
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C before the run's row exists
        job, run = start_store_run(job, "batch", job.files)
    print("not interrupted")
"""


def test_a_ctrl_c_while_the_store_run_registers_marks_that_run_interrupted(tmp_path):
    """A Ctrl-C that comes while `ldp run` registers its run in the store (between the row's
    commit and the job that names it) takes effect once both are done: the line names the run
    and the row is marked interrupted. Unheld, the line left the run out and the row stayed
    "running" (seen on a loaded machine by the Ctrl-C test above)."""
    registry(tmp_path)
    url = f"sqlite:///{tmp_path}/store.db"
    with open_store(url, create=True):
        pass
    done = subprocess.run([sys.executable, "-c", HELD_CTRL_C, str(tmp_path), url],
                          capture_output=True, text=True, timeout=HANG)
    assert done.returncode == 130, done.stderr
    assert "not interrupted" not in done.stdout
    lines = [line for line in done.stderr.splitlines() if not line.startswith("INFO ")]
    assert len(lines) == 1 and lines[0].startswith("ldp run: interrupted: read 0 report(s)")
    assert lines[0].endswith("; store: run 1 wrote 0 pane(s), marked interrupted"), lines[0]
    with open_store(url) as store:
        assert [r["status"] for r in store.runs()] == ["interrupted"]
