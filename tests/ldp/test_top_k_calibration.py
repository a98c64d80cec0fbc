"""The parts of the top-k answers' bands and their scaling (ldp/estimation/frequency_bands.py
`top_k_parts`, `scaled_bands`, `needed_scales`), the calibration study of
benchmarks/calibrate_top_k.py, and the exact CMS sampler of benchmarks/coverage_frequency.py.
Statistical checks state their false-failure rate beside them.
"""
from __future__ import annotations

import pickle

import numpy as np
import pytest

from tests.benchmark_scripts import loaded_scripts

from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.ldp.engine.finalize import finalize_window
from ldp_telemetry.ldp.estimation.frequency_bands import (needed_scales, scaled_bands,
                                                          top_k_bands, top_k_parts,
                                                          top_k_rank_conditional_bands)
from ldp_telemetry.ldp.estimation.postprocess import METHODS
from ldp_telemetry.ldp.estimation.queries import WindowEstimate
from ldp_telemetry.ldp.protocols import make_protocol
from ldp_telemetry.output.records import window_estimate_record

Z_CHECK = 4.5  # two-sided false failure 6.8e-6 per check


@pytest.fixture(scope="module")
def scripts():
    with loaded_scripts("coverage_frequency", "calibrate_top_k") as loaded:
        yield loaded


def test_a_band_holds_its_truth_from_the_needed_scale_on():
    rng = np.random.default_rng(1)
    centre = 0.2 + 0.6 * rng.random(500)
    lower = centre - rng.random(500) * 0.1
    upper = centre + rng.random(500) * 0.1
    truth = np.clip(centre + rng.normal(0, 0.08, 500), 0.0, 1.0)
    needed = needed_scales(centre, lower, upper, truth)
    low, high = scaled_bands(centre, lower, upper, 1.0)
    assert np.array_equal((low <= truth) & (truth <= high), needed <= 1.0)
    for i in range(500):
        at_low, at_high = scaled_bands(centre[i:i + 1], lower[i:i + 1], upper[i:i + 1],
                                       float(needed[i]) * (1 + 1e-9) + 1e-12)
        held = at_low[0] <= truth[i] + 1e-12 and truth[i] <= at_high[0] + 1e-12
        assert held
        if needed[i] > 1e-6:
            below_low, below_high = scaled_bands(centre[i:i + 1], lower[i:i + 1],
                                                 upper[i:i + 1], float(needed[i]) * 0.999)
            assert not below_low[0] <= truth[i] <= below_high[0]
    flat = needed_scales(np.array([0.2]), np.array([0.2]), np.array([0.3]), np.array([0.1]))
    assert flat[0] == np.inf  # a side of zero width facing the truth: no scale holds it


def test_a_top_k_query_answers_with_the_union_of_its_parts():
    """`ldp query`'s top-k answers carry `top_k_parts`' union (the bootstrap band widened to the
    selected value's score band) clipped to [0, 1] — scale 1 of `scaled_bands` — joined with
    the rank-conditional band (`top_k_rank_conditional_bands`, an OUE window)."""
    labels = [f"v{i}" for i in range(30)]
    config = parse_registry({"metrics": [{"name": "m", "protocol": "oue", "epsilon": 1.0,
                                          "domain": {"labels": labels},
                                          "postprocess": "norm-sub"}]})["m"]
    protocol = config.protocol
    rng = np.random.default_rng(3)
    n = 10_000
    statistic = protocol.new_statistic()
    weights = np.arange(30, 0, -1) / np.arange(30, 0, -1).sum()
    protocol.accumulate(statistic, protocol.perturb(rng.choice(30, n, p=weights), rng))
    record = window_estimate_record(config, finalize_window(config, statistic, n), 0, 1)
    answers = WindowEstimate.from_record(record).top_k(5)
    unbiased = np.asarray(record.unbiased_estimate)
    noise = protocol.noise(n).given(unbiased)
    run = lambda u: METHODS["norm-sub"].run(u, noise)  # noqa: E731
    centre, lower, upper = top_k_parts(unbiased, noise, run, 5)
    assert np.all((lower <= centre) & (centre <= upper))
    assert np.all(np.array([a.conservative_lower for a in answers]) <= np.clip(lower, 0, 1))
    assert np.all(np.array([a.conservative_upper for a in answers]) >= np.clip(upper, 0, 1))
    joined = top_k_rank_conditional_bands(unbiased, noise, protocol, run, 5)
    assert np.allclose([a.conservative_lower for a in answers], joined[0])
    assert np.allclose([a.conservative_upper for a in answers], joined[1])
    assert np.array_equal(top_k_bands(unbiased, noise, run, 5)[1],
                          scaled_bands(centre, lower, upper, 1.0)[1])


def test_the_cms_table_sampler_draws_the_clients_statistic(scripts):
    """coverage_frequency's exact CMS sampler against the client (perturb + accumulate) over
    one pool: each support count's mean agrees within 4.5 standard errors of the difference
    (per value false failure 6.8e-6; 12 values)."""
    sample = scripts["coverage_frequency"]
    protocol = make_protocol("cms", 1.0, 12, hashes=4, buckets=8)
    counts = np.array([300, 200, 100, 80, 60, 40, 20, 10, 5, 0, 0, 0])
    rng = np.random.default_rng(11)
    repeats = 300
    table = np.array([protocol.support_counts(sample.cms_table(protocol, counts, rng))
                      for _ in range(repeats)], dtype=float)
    client = np.array([sample.support_counts(protocol, counts, rng, "client")
                       for _ in range(repeats)], dtype=float)
    se = np.sqrt((table.var(axis=0, ddof=1) + client.var(axis=0, ddof=1)) / repeats)
    assert np.all(np.abs(table.mean(axis=0) - client.mean(axis=0)) <= Z_CHECK * se)
    # and their spread: each variance ratio of 300 draws against 300 lies in [0.55, 1.8] (an
    # F(299, 299) ratio, log standard deviation 0.116: outside in fewer than 1e-5 of runs
    # over the 12 values)
    ratio = table.var(axis=0, ddof=1) / client.var(axis=0, ddof=1)
    assert np.all((ratio >= 0.55) & (ratio <= 1.8))


def test_the_calibration_refuses_held_out_windows_of_its_own_seed(scripts, tmp_path):
    calibrate = scripts["calibrate_top_k"]
    parts = {"truth": np.full((2, 1), 0.1), "centre": np.full((2, 1), 0.1),
             "half": np.full((2, 1), 0.01), "union_lo": np.full((2, 1), 0.08),
             "union_hi": np.full((2, 1), 0.12), "score_lo": np.full((2, 1), 0.09),
             "score_hi": np.full((2, 1), 0.11)}
    dump = {"seed": 131, "windows": 2, "top": 1, "replicates": 40,
            "cells": {("airports", "oue", 1.0, 10_000, "norm-sub"): parts}}
    (tmp_path / "cal.pkl").write_bytes(pickle.dumps(dump))
    with pytest.raises(SystemExit):
        calibrate.main(["--calibration", "cal.pkl", "--held-out", "cal.pkl",
                        "--cache-dir", str(tmp_path)])
    (tmp_path / "held.pkl").write_bytes(pickle.dumps({**dump, "seed": 31}))
    assert calibrate.main(["--calibration", "cal.pkl", "--held-out", "held.pkl",
                           "--cache-dir", str(tmp_path)]) == 0


def test_a_fitted_scale_holds_95_percent_of_its_calibration_checks(scripts):
    calibrate = scripts["calibrate_top_k"]
    needed = np.random.default_rng(2).exponential(1.0, 1_000)
    scale = calibrate.fit_scale(needed)
    assert np.mean(needed <= scale) >= 0.95
    assert np.mean(needed <= scale - 0.01) < 0.95  # the smallest such, to 0.01
    assert calibrate.fit_scale(np.full(100, np.inf)) is None
    assert calibrate.fit_scale(np.full(100, calibrate.MAX_SCALE + 1)) is None
