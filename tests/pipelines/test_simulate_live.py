"""`ldp simulate --live`: reports written over time, by rename, in event-time order; and the
`ldp run --follow` flags checked before anything runs."""
from __future__ import annotations

import json

import fastavro
import numpy as np
import pytest

from ldp_telemetry.ldp.base.errors import InputError
from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.pipelines import cli
from ldp_telemetry.pipelines.csv_input import TrueValues
from ldp_telemetry.pipelines.simulate import live_schedule, simulate_live

REGISTRY = parse_registry({"metrics": [
    {"name": "sim.grr", "protocol": "grr", "epsilon": 1.0, "domain": {"size": 5}}]})


class FakeTime:
    """A clock that only moves when slept on."""

    def __init__(self):
        self.now = 100.0
        self.sleeps = []

    def clock(self):
        return self.now

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds


def test_the_schedule_replays_event_times_faster_or_at_a_rate():
    times = np.array([5_000, 1_000, 3_000], dtype=np.int64)
    np.testing.assert_allclose(live_schedule(np.sort(times), speedup=2.0), [0.0, 1.0, 2.0])
    np.testing.assert_allclose(live_schedule(times, rate=4.0), [0.0, 0.25, 0.5])
    for kwargs in ({}, {"speedup": 1.0, "rate": 1.0}, {"speedup": 0.0}, {"rate": -1.0}):
        with pytest.raises(ValueError):
            live_schedule(times, **kwargs)


def test_live_simulation_writes_due_reports_per_tick_by_rename(tmp_path):
    rng = np.random.default_rng(3)
    n = 1000
    times = (1_709_251_200_000 + rng.integers(0, 10_000, n)).astype(np.int64)  # 10 s of events
    truth = TrueValues(rng.integers(0, 5, n), times)
    fake = FakeTime()
    paths = simulate_live(REGISTRY["sim.grr"], truth, str(tmp_path), seed=1, speedup=2.0,
                          file_every_s=1.0, sleep=fake.sleep, clock=fake.clock, progress=None)
    # 10 s of event time at 2x: due over 5 s, one file per 1 s tick (the first holds t = 0)
    assert 5 <= len(paths) <= 6
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        p.rsplit("/", 1)[1] for p in paths)  # no temporary file is left
    seen = []
    for path in paths:
        with open(path, "rb") as handle:
            seen.append([r["event_time"] for r in fastavro.reader(handle)])
    flat = np.concatenate([np.array([t.timestamp() * 1000 if hasattr(t, "timestamp") else t
                                     for t in chunk]) for chunk in seen])
    assert len(flat) == n
    assert np.all(np.diff(flat) >= 0)  # event-time order across files
    with pytest.raises(InputError, match="overwrite them or choose another output folder") \
            as caught:
        simulate_live(REGISTRY["sim.grr"], truth, str(tmp_path), seed=1, speedup=2.0,
                      sleep=fake.sleep, clock=fake.clock, progress=None)
    assert caught.value.field == "overwrite"


def test_run_follow_and_input_are_exclusive_and_flags_are_checked(tmp_path, capsys):
    registry = tmp_path / "r.json"
    registry.write_text(json.dumps({"metrics": [
        {"name": "m", "protocol": "grr", "epsilon": 1.0, "domain": {"size": 3}}]}))
    base = ["run", "--registry", str(registry), "--output", str(tmp_path / "o"),
            "--window", "60"]
    assert cli.main(base) == 2
    assert "--input or --follow is required" in capsys.readouterr().err
    assert cli.main(base + ["--follow", str(tmp_path), "--input", "x"]) == 2
    assert "--input and --follow exclude each other" in capsys.readouterr().err
    assert cli.main(base + ["--follow", str(tmp_path / "missing")]) == 2
    assert f"--follow '{tmp_path / 'missing'}' is not a directory" in capsys.readouterr().err
    assert cli.main(base + ["--follow", str(tmp_path), "--max-out-of-order", "-1"]) == 2
    assert "--max-out-of-order must be in [0, " in capsys.readouterr().err
    assert cli.main(base + ["--follow", str(tmp_path), "--poll", "0"]) == 2
    assert "--poll must be in (0, 10] seconds" in capsys.readouterr().err
    assert cli.main(base + ["--follow", str(tmp_path), "--runner=FnApiRunner"]) == 2
    assert ("--source directory runs here, on BundleBasedDirectRunner, not on FnApiRunner: on "
            "other runners use the source match-continuously (Flink) or pubsub (Dataflow)"
            in capsys.readouterr().err)
    assert cli.main(base + ["--follow", str(tmp_path), "--source", "match-continuously"]) == 2
    assert "needs a streaming runner named explicitly" in capsys.readouterr().err
    assert cli.main(base + ["--follow", str(tmp_path), "--stop-when-idel", "3"]) == 2
    assert "did you mean --stop-when-idle" in capsys.readouterr().err
    assert cli.main(["simulate", "--registry", str(registry), "--metric", "m", "--input", "x",
                     "--value-column", "v", "--time-column", "t", "--out", "o",
                     "--speedup", "3"]) == 2
    assert "--speedup and --rate need --live" in capsys.readouterr().err
