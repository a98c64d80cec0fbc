"""Shared test fixtures (the real datasets, skipped when absent; the named local runner) and the
test tiers.

Tiers are pytest markers (registered in pyproject.toml): `browser` for every test that uses the
Chromium fixture, `postgres` for every test that uses a PostgreSQL server, both set here from
the fixtures a test requests, and `slow` for files whose tests take more than about ten seconds
(a `pytestmark` line in each). The fast lane is
`pytest -m "not browser and not postgres and not slow"`; plain `pytest` runs everything.
"""
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


#: Fixtures that drive Debian's Chromium.
BROWSER_FIXTURES = frozenset({"browser"})
#: Fixtures that start a PostgreSQL server, and the parameter value of a fixture parametrized
#: over stores that selects one.
POSTGRES_FIXTURES = frozenset({"postgres_url"})
POSTGRES_PARAMETER = "postgresql"


def pytest_collection_modifyitems(config, items):
    """Mark the tests that need a browser or a database server by the fixtures they use."""
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        params = getattr(getattr(item, "callspec", None), "params", {})
        if fixtures & BROWSER_FIXTURES:
            item.add_marker(pytest.mark.browser)
        chooses_postgres = any(isinstance(value, str) and value == POSTGRES_PARAMETER
                               for value in params.values())
        if fixtures & POSTGRES_FIXTURES or chooses_postgres:
            item.add_marker(pytest.mark.postgres)
