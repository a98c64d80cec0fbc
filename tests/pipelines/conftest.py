"""Fixtures of the pipeline tests."""
from __future__ import annotations

import pytest


@pytest.fixture
def processes():
    """A list to put started `subprocess.Popen`s in: each still running at the test's end is
    killed, and every one is waited for."""
    started = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=30)
