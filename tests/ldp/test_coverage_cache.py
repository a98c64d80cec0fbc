"""benchmarks/coverage.py and benchmarks/calibrate_bands.py keep simulated windows in a cache;
a cache made from the other script's windows (the calibration's seed, or the held-out one) is
refused, so the held-out coverage never reuses calibration windows and the fit never sees
held-out ones."""
from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from tests.benchmark_scripts import loaded_scripts



@pytest.fixture(scope="module")
def scripts():
    with loaded_scripts("coverage", "calibrate_bands") as loaded:
        yield loaded


def cache_of(coverage, tmp_path, seed: int) -> Path:
    """A cache of one lognormal cell (ε 4, n 1,000, 128 buckets, 2 windows, R 20) simulated
    with `seed`."""
    sim = coverage.simulate("lognormal latency", 4.0, 1_000, 128, 2, 20, seed)
    path = tmp_path / f"seed{seed}.pkl"
    path.write_bytes(pickle.dumps([sim]))
    return path


def only_lognormal(monkeypatch, *modules):
    """The scripts see the lognormal latency only (drawn here, no data file): one cell."""
    for module in modules:
        monkeypatch.setattr(module, "available",
                            lambda names: [name for name in names if name == "lognormal latency"])
        if hasattr(module, "CALIBRATION_SETS"):
            monkeypatch.setattr(module, "CALIBRATION_SETS", ("lognormal latency",))


def test_the_held_out_evaluation_refuses_calibration_windows(scripts, tmp_path, capsys,
                                                            monkeypatch):
    coverage = scripts["coverage"]
    only_lognormal(monkeypatch, coverage)
    args = ["--epsilons", "4", "--sizes", "1000", "--calibration-set-sizes", "1000",
            "--windows", "2", "--wide-buckets", "0", "--simulate-only"]
    calibration = cache_of(coverage, tmp_path, coverage.CALIBRATION_SEED)
    with pytest.raises(SystemExit):
        coverage.main([*args, "--cache", str(calibration)])
    assert "holds other cells" in capsys.readouterr().err
    held_out = cache_of(coverage, tmp_path, coverage.EVALUATION_SEED)
    coverage.main([*args, "--cache", str(held_out)])  # its own windows: accepted


def test_the_calibration_refuses_held_out_windows(scripts, tmp_path, capsys, monkeypatch):
    coverage, calibrate = scripts["coverage"], scripts["calibrate_bands"]
    only_lognormal(monkeypatch, calibrate)
    held_out = cache_of(coverage, tmp_path, coverage.EVALUATION_SEED)
    with pytest.raises(SystemExit):
        calibrate.main(["--epsilons", "4", "--sizes", "1000", "--windows", "2",
                        "--cache", str(held_out)])
    assert "holds other cells" in capsys.readouterr().err
