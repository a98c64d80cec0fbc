"""Windows that start at an offset from the epoch (e.g. weeks starting on Monday)."""
from __future__ import annotations

import datetime as dt
import io
import json

import numpy as np
import pytest

from ldp.registry import parse_registry
from pipelines.estimate import EstimateJob, run_job
from schemas.codec import split_by_slice, write_reports
from transforms.windows import WindowSpec

HOUR = 3_600_000
T0 = 1_709_251_200_000  # 2024-03-01T00:00:00Z
REGISTRY = parse_registry({"metrics": [
    {"name": "m", "protocol": "grr", "epsilon": 1.0, "domain": {"size": 4}}]})


def iso(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_slices_start_at_the_offset():
    times = np.array([T0, T0 + 29 * 60_000, T0 + 30 * 60_000, T0 + 89 * 60_000])
    batches = list(split_by_slice("m", times, {"value": np.arange(4)}, HOUR, 30 * 60_000))
    assert [(b.slice_start_ms - T0, b.columns["value"].tolist()) for b in batches] == [
        (-30 * 60_000, [0, 1]), (30 * 60_000, [2, 3])]


@pytest.mark.parametrize("window_h, period_h, offset_h", [(6, 6, 2), (6, 2, 1), (24, 24, 5)])
def test_window_bounds_and_counts_follow_the_offset(tmp_path, window_h, period_h, offset_h):
    rng = np.random.default_rng(11)
    times = T0 + rng.integers(0, 48 * HOUR, 3000)
    protocol = REGISTRY["m"].protocol
    path = tmp_path / "reports.avro"
    write_reports(str(path), "m", protocol, np.arange(times.size), times,
                  protocol.perturb(rng.integers(0, 4, times.size), rng))
    spec = WindowSpec(window_h * HOUR, period_h * HOUR, offset_ms=offset_h * HOUR)
    job = EstimateJob(REGISTRY, (str(path),), str(tmp_path / "out"), spec)
    run_job(job, [], out=io.StringIO())
    records = [json.loads(line) for p in sorted((tmp_path / "out").glob("estimates-*.jsonl"))
               for line in open(p, encoding="utf-8")]

    # Brute force: every window [offset + k·period, + window) holding at least one report.
    first = (times.min() - offset_h * HOUR - window_h * HOUR) // (period_h * HOUR) + 1
    last = (times.max() - offset_h * HOUR) // (period_h * HOUR)
    expected = {}
    for k in range(int(first), int(last) + 1):
        start = offset_h * HOUR + k * period_h * HOUR
        inside = int(((times >= start) & (times < start + window_h * HOUR)).sum())
        if inside:
            expected[(iso(start), iso(start + window_h * HOUR))] = inside
    assert {(r["window_start"], r["window_end"]): r["n"] for r in records} == expected
