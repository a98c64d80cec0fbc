"""Windows that start at an offset from the epoch (e.g. weeks starting on Monday)."""
from __future__ import annotations

import datetime as dt
import io

import numpy as np
import pytest

from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.ldp.config.windows import WindowSpec
from ldp_telemetry.pipelines.batch import run_job
from ldp_telemetry.pipelines.job import EstimateJob
from ldp_telemetry.schemas.codec import split_by_slice, write_reports
from tests.json_lines import job_json_lines

HOUR = 3_600_000
T0 = 1_709_251_200_000  # 2024-03-01T00:00:00Z
REGISTRY = parse_registry({"metrics": [
    {"name": "m", "protocol": "grr", "epsilon": 1.0, "domain": {"size": 4}}]})


def iso(ms: int) -> str:
    """As the job writes it: RFC 3339 UTC, with milliseconds only when there are some."""
    moment = dt.datetime.fromtimestamp(ms // 1000, dt.timezone.utc)
    millis = ms % 1000
    return moment.strftime("%Y-%m-%dT%H:%M:%S") + (f".{millis:03d}Z" if millis else "Z")


def test_slices_start_at_the_offset():
    times = np.array([T0, T0 + 29 * 60_000, T0 + 30 * 60_000, T0 + 89 * 60_000])
    batches = list(split_by_slice("m", times, {"value": np.arange(4)}, HOUR, 30 * 60_000))
    assert [(b.slice_start_ms - T0, b.columns["value"].tolist()) for b in batches] == [
        (-30 * 60_000, [0, 1]), (30 * 60_000, [2, 3])]


@pytest.mark.parametrize("window_ms, period_ms, offset_ms, span_ms", [
    (6 * HOUR, 6 * HOUR, 2 * HOUR, 48 * HOUR),
    (6 * HOUR, 2 * HOUR, HOUR, 48 * HOUR),
    (24 * HOUR, 24 * HOUR, 5 * HOUR, 48 * HOUR),
    # Not whole microseconds as float seconds: Beam would truncate 1.001 s to 1000999 µs.
    (1001, 1001, 0, 20_000),
    (3003, 1001, 500, 20_000),
])
def test_window_bounds_and_counts_follow_the_offset(tmp_path, window_ms, period_ms, offset_ms,
                                                     span_ms):
    rng = np.random.default_rng(11)
    times = T0 + rng.integers(0, span_ms, 3000)
    protocol = REGISTRY["m"].protocol
    path = tmp_path / "reports.avro"
    write_reports(str(path), "m", protocol, np.arange(times.size), times,
                  protocol.perturb(rng.integers(0, 4, times.size), rng))
    spec = WindowSpec(window_ms, period_ms, offset_ms=offset_ms)
    job = EstimateJob(REGISTRY, (str(path),), str(tmp_path / "out"), spec)
    run_job(job, [], out=io.StringIO())
    records = job_json_lines(tmp_path / "out", "estimates")

    # Brute force: every window [offset + k·period, + window) holding at least one report.
    first = (times.min() - offset_ms - window_ms) // period_ms + 1
    last = (times.max() - offset_ms) // period_ms
    expected = {}
    for k in range(int(first), int(last) + 1):
        start = offset_ms + k * period_ms
        inside = int(((times >= start) & (times < start + window_ms)).sum())
        if inside:
            expected[(iso(start), iso(start + window_ms))] = inside
    assert {(r["window_start"], r["window_end"]): r["n"] for r in records} == expected
