"""`bash demo/live.sh` stops on the first Ctrl-C: the simulated collectors end, and the run writes
every window's final pane and prints its summary.

The demo runs from a copy of `demo/` whose `.venv` is this interpreter's environment; Ctrl-C is
SIGINT sent to the script's whole process group, as a terminal sends it. The script's trap then
sends SIGTERM to the run as well, while it writes its last panes: the run must take both as one
stop. What is checked is the mechanism (the signal to the group, the summary, complete panes,
nothing left running), never how fast the machine is: the waits are bounds against a hang.
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ldp_telemetry.output.reader import latest_panes, read_pane_log

pytestmark = pytest.mark.slow  # a live run in subprocesses
DEMO = Path(__file__).resolve().parents[2] / "demo"
HANG = 300  # seconds: a bound against a hung demo, never a speed requirement


def _as_from_a_terminal() -> None:
    """In the demo's shell, before it starts: SIGINT handled by default, as a terminal's shell
    has it. A test runner started in the background (`cmd &` in a script, nohup) ignores
    SIGINT, every child inherits that, and a shell that starts with SIGINT ignored can set no
    trap for it: the demo then runs to its end and nothing is stopped."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.skipif(not (DEMO / "live.sh").exists() or shutil.which("bash") is None
                    or not (Path(sys.prefix) / "bin" / "ldp").exists(),
                    reason="needs the checkout's demo/, bash and the installed ldp command")
def test_one_ctrl_c_stops_the_live_demo_and_its_collectors(tmp_path):
    shutil.copytree(DEMO, tmp_path / "demo")
    (tmp_path / ".venv").symlink_to(sys.prefix)
    demo = subprocess.Popen(["bash", "demo/live.sh"], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True,
                            preexec_fn=_as_from_a_terminal)
    try:
        seen = []
        deadline = time.monotonic() + HANG
        while sum("EARLY" in line for line in seen) < 2 and time.monotonic() < deadline:
            line = demo.stdout.readline()
            assert line, "the demo ended before its first panes: " + "".join(seen)
            seen.append(line)
        os.killpg(demo.pid, signal.SIGINT)
        rest = demo.stdout.read()  # to the end: every process holding the pipe has ended
        demo.wait(timeout=HANG)
    finally:
        if demo.poll() is None:
            os.killpg(demo.pid, signal.SIGKILL)
    left = subprocess.run(["pgrep", "-g", str(demo.pid)], capture_output=True, text=True)
    assert left.stdout.strip() == ""  # no collector (nor anything else) left running
    assert demo.returncode == 0, rest  # the run's own status: it stopped as asked
    assert "stopping: collectors, then the run" in rest
    assert "Traceback" not in "".join(seen) + rest
    summary = re.search(r"records read: (\d+), .*, panes: (\d+)", rest)
    assert summary, rest  # the run ended with its summary
    output = str(tmp_path / "demo-output" / "live" / "estimates")
    assert int(summary.group(2)) == len(read_pane_log(output))  # every pane it counted is there
    latest = latest_panes(output)
    assert latest  # every window's last pane is final (the watermark passed its end), not EARLY
    assert {entry["pane"]["timing"] for entry in latest.values()} <= {"ON_TIME", "LATE"}
