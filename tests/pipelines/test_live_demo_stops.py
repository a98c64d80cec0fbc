"""`bash demo/live.sh` stops on the first Ctrl-C, the simulated collectors included, within 2 s.

The demo runs from a copy of `demo/` whose `.venv` is this interpreter's environment; Ctrl-C is
SIGINT sent to the script's whole process group, as a terminal sends it.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # a live run in subprocesses
DEMO = Path(__file__).resolve().parents[2] / "demo"


@pytest.mark.skipif(not (DEMO / "live.sh").exists() or shutil.which("bash") is None
                    or not (Path(sys.prefix) / "bin" / "ldp").exists(),
                    reason="needs the checkout's demo/, bash and the installed ldp command")
def test_one_ctrl_c_stops_the_live_demo_and_its_collectors(tmp_path):
    shutil.copytree(DEMO, tmp_path / "demo")
    (tmp_path / ".venv").symlink_to(sys.prefix)
    demo = subprocess.Popen(["bash", "demo/live.sh"], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        seen = []
        deadline = time.monotonic() + 240
        while sum("EARLY" in line for line in seen) < 2 and time.monotonic() < deadline:
            line = demo.stdout.readline()
            assert line, "the demo ended before its first panes: " + "".join(seen)
            seen.append(line)
        os.killpg(demo.pid, signal.SIGINT)
        interrupted = time.monotonic()
        rest = demo.stdout.read()
        demo.wait(timeout=30)
        took = time.monotonic() - interrupted
    finally:
        if demo.poll() is None:
            os.killpg(demo.pid, signal.SIGKILL)
    left = subprocess.run(["pgrep", "-g", str(demo.pid)], capture_output=True, text=True)
    assert left.stdout.strip() == ""  # no collector (nor anything else) left running
    assert took < 2.0, rest
    assert "stopping: collectors, then the run" in rest
    assert "records read: " in rest and ", panes: " in rest  # the run ended with its summary
