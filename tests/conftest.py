"""Shared test fixtures: the real datasets (skipped when absent) and the named local runner."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


def datasets_dir() -> Path:
    """The real-data folder: $LDP_DATASETS, else ../shared/datasets beside the repository."""
    return Path(os.environ.get("LDP_DATASETS", REPO_ROOT.parent / "shared" / "datasets"))


@pytest.fixture
def dataset():
    """dataset("name.csv.gz") -> its Path, or skip the test when the file is not here."""
    def find(name: str) -> Path:
        path = datasets_dir() / name
        if not path.exists():
            pytest.skip(f"real dataset {name} is not available at {path.parent}")
        return path
    return find


@pytest.fixture
def beam_runner():
    """The runner every pipeline test names: FnApiRunner, which never downloads anything."""
    from apache_beam.runners.portability.fn_api_runner import FnApiRunner
    return FnApiRunner()


@pytest.fixture
def hard_deadline():
    """A live run inside the test process cannot be interrupted from outside: if the test is
    not done after this many seconds, dump every thread's stack and end the process."""
    import faulthandler

    def arm(seconds: float):
        faulthandler.dump_traceback_later(seconds, exit=True)

    yield arm
    faulthandler.cancel_dump_traceback_later()
