"""`ldp simulate` for memoized metrics: a fleet of devices reporting repeatedly."""
from __future__ import annotations

import json

import numpy as np
import pytest

from ldp_telemetry.ldp.base.errors import ConfigError
from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.pipelines.cli import main
from ldp_telemetry.pipelines.csv_input import TrueValues
from ldp_telemetry.pipelines.simulate import device_memos, fleet_assignment

T0 = 1_357_000_000_000


def truth(n=1_000, d=5, seed=0):
    rng = np.random.default_rng(seed)
    return TrueValues(rng.integers(0, d, size=n), T0 + np.sort(rng.integers(0, 10**9, size=n)))


def test_a_fleet_gives_every_device_one_value_spread_over_time_and_keeps_every_row():
    values = truth()
    assignment = fleet_assignment(values, 37)
    assert len(assignment) == 1_000 and set(assignment.tolist()) == set(range(37))
    for device in range(37):
        rows = np.flatnonzero(assignment == device)
        assert len(set(values.values[rows].tolist())) == 1
    for value in range(5):  # a value's devices report equally often, in turn over time
        rows = np.flatnonzero(values.values == value)
        rows = rows[np.argsort(values.event_times_ms[rows], kind="stable")]
        counts = np.bincount(assignment[rows])[np.unique(assignment[rows])]
        assert counts.max() - counts.min() <= 1
        cycle = len(np.unique(assignment[rows]))
        assert np.array_equal(assignment[rows][cycle:], assignment[rows][:-cycle])
    with pytest.raises(ConfigError, match="devices must be in"):
        fleet_assignment(values, 4)  # fewer than the 5 distinct values
    with pytest.raises(ConfigError, match="devices must be in"):
        fleet_assignment(values, 1_001)


def test_devices_share_their_memo_and_one_stage_metrics_need_none():
    registry = parse_registry({"metrics": [
        {"name": "m", "protocol": "grr", "epsilon": 1.0, "domain": {"size": 5},
         "memoize": {"lifetime_epsilon": 3.0}},
        {"name": "p", "protocol": "grr", "epsilon": 1.0, "domain": {"size": 5}}]})
    memos = device_memos(registry["m"], np.array([0, 1, 0, 2]), 4, seed=5)
    assert memos[0] is memos[2] and len({id(m) for m in memos}) == 3
    again = device_memos(registry["m"], np.array([0, 1, 0, 2]), 4, seed=5)
    assert again[0].permanent_response(registry["m"], 3)["value"].tolist() == \
        memos[0].permanent_response(registry["m"], 3)["value"].tolist()
    assert device_memos(registry["p"], None, 4, seed=5) is None


def test_the_cli_simulates_a_fleet_and_a_device_column(tmp_path, capsys):
    registry = tmp_path / "registry.json"
    registry.write_text(json.dumps({"metrics": [{
        "name": "m", "protocol": "oue", "epsilon": 1.0, "domain": {"labels": list("abcde")},
        "memoize": {"lifetime_epsilon": 3.0, "max_values": 1, "on_limit": "stop"}}]}))
    rows = ["t,v,device"] + [f"{1_357_000_000 + i},{'abcde'[i % 5]},{'xyz'[i % 3]}"
                             for i in range(30)]
    data = tmp_path / "data.csv"
    data.write_text("\n".join(rows) + "\n")
    base = ["simulate", "--registry", str(registry), "--metric", "m", "--input", str(data),
            "--value-column", "v", "--time-column", "t", "--seed", "1"]
    assert main([*base, "--out", str(tmp_path / "fleet"), "--devices", "5"]) == 0
    assert "30 reports of m" in capsys.readouterr().out  # one value per device: none withheld
    assert main([*base, "--out", str(tmp_path / "column"), "--device-column", "device"]) == 0
    captured = capsys.readouterr()
    # 3 devices, each meeting 5 values with max_values 1 and on_limit stop: 4 of every 5 withheld
    assert "24 of 30 values withheld by their devices" in captured.err
    with pytest.raises(SystemExit):
        main([*base, "--out", str(tmp_path / "x"), "--devices", "5", "--device-column", "d"])
    assert main([*base, "--out", str(tmp_path / "live"), "--devices", "5", "--live"]) != 0
