"""benchmarks/evaluate_postprocess.py: a tiny run, and exact OUE/GRR sampling == full perturbation.

The sampler check draws R = 400 repeats of both paths on the same population and compares the
per-value mean and variance of the support counts with their exact values (n_v p* + (n - n_v) q*
and n_v p*(1-p*) + (n - n_v) q*(1-q*)): z-scores of the means within 4.5, variance ratios within
4.5 sqrt(2/(R-1)) of 1 (each check fails by chance with probability below 1e-5).
"""
from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

from ldp_telemetry.ldp.protocols import make_protocol

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "evaluate_postprocess.py"


@pytest.fixture(scope="module")
def evaluation():
    spec = importlib.util.spec_from_file_location("evaluate_postprocess", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    sys.path.insert(0, str(SCRIPT.parent))  # its sibling bench_json, as when run as a script
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(spec.name, None)
        sys.path.remove(str(SCRIPT.parent))


@pytest.mark.parametrize("name", ["oue", "grr"])
def test_exact_sampling_matches_full_perturbation(evaluation, name):
    protocol = make_protocol(name, 1.0, 8)
    counts = np.array([200, 120, 80, 50, 30, 15, 5, 0])
    n, p, q = counts.sum(), protocol.p_star, protocol.q_star
    mean = counts * p + (n - counts) * q
    variance = counts * p * (1 - p) + (n - counts) * q * (1 - q)
    repeats = 400
    for path in ("exact", "full"):
        rng = np.random.default_rng(3)
        draws = np.array([evaluation.SAMPLERS[path](protocol, counts, rng) for _ in range(repeats)])
        z = (draws.mean(axis=0) - mean) / np.sqrt(variance / repeats)
        assert np.all(np.abs(z) < 4.5), (path, z)
        ratio = draws.var(axis=0, ddof=1) / variance
        assert np.all(np.abs(ratio - 1) < 4.5 * math.sqrt(2 / (repeats - 1))), (path, ratio)


def test_exact_sampling_is_oue_and_grr_only(evaluation):
    with pytest.raises(ValueError, match="oue and grr only"):
        evaluation.support_counts_exact(make_protocol("olh", 1.0, 4), np.ones(4, int),
                                        np.random.default_rng(0))


def test_tiny_evaluation_runs_every_method(evaluation, capsys, tmp_path):
    rng = np.random.default_rng(1)
    counts = evaluation.zipf_counts(64, 1.5, 5000, rng)
    result = evaluation.evaluate(counts, "oue", 1.0, repeats=2, seed=4, sets=5, k=5,
                                 label="tiny")
    assert list(result.mse) == evaluation.METHOD_ORDER
    assert result.columns == ["full", "set 10%", "set 50%", "set 90%", "top 5"]
    for row in result.mse.values():
        assert all(np.isfinite(v) and v >= 0 for v in row.values())
    # Base-Pos never does worse than Base value by value; Norm-Sub sums to 1 (§4.2, §4.3)
    assert result.mse["base-pos"]["full"] <= result.mse["base"]["full"]
    full = evaluation.evaluate(counts, "oue", 1.0, repeats=1, seed=4, sets=5, k=5,
                               perturb="full", methods=["base", "norm-sub"])
    assert set(full.mse) == {"base", "norm-sub"}
    assert evaluation.main(["--dataset", "zipf", "--domain", "32", "--users", "3000",
                            "--epsilon", "2", "--repeats", "1", "--sets", "3",
                            "--methods", "base", "norm-hyb", "ibu", "power-ns",
                            "--protocol", "oue", "grr", "--json", str(tmp_path / "r.json")]) == 0
    text = capsys.readouterr().out
    assert "| norm-hyb |" in text and "| power-ns |" in text and "1 repeats" in text
    document = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    rows = document["results"]["rows"]
    assert document["benchmark"] == "evaluate_postprocess"
    # the data sets' folder (an absolute path of this machine) is not recorded, the rest is
    assert "datasets" not in document["parameters"] and document["parameters"]["users"] == 3000
    assert [r["protocol"] for r in rows] == ["oue", "grr"]
    assert set(rows[0]["mse"]) == {"base", "norm-hyb", "ibu", "power-ns"}


def test_power_ns_from_power_output_is_power_ns(evaluation):
    from ldp_telemetry.ldp.estimation import postprocess as pp
    protocol = make_protocol("oue", 1.0, 32)
    rng = np.random.default_rng(2)
    counts = evaluation.zipf_counts(32, 1.5, 4000, rng)
    noise = protocol.noise(int(counts.sum()))
    unbiased = counts / counts.sum() + rng.normal(0, noise.sigma, 32)
    assert np.allclose(pp.project_to_simplex(pp.power(unbiased, noise), 1.0),
                       pp.power_ns(unbiased, noise))
