"""Real data end to end: are the job's standard errors honest?

US flights, Jan–Jun 2001 (flights3m_2001H1.npz): each day is a window (20 days, a seeded random
5,000 of each day's flights to keep the run short). Two metrics — departure hour (24 values,
smooth) and destination airport (229 values, spiky) — each collected with GRR, OUE and OLH at
ε = 2, simulated by the project's own simulator and estimated by the pipeline. Truth per window
comes from the same rows.

Calibration: z = (unbiased_estimate − truth) / std_error should have mean 0 and mean square 1.
With m = W·d z's of one series, the mean has standard error 1/√m and the mean square sqrt(2/m)
*if* the z's were independent. They are not within a window (GRR counts are multinomial, so a
window's errors sum to exactly 0; OLH reports share hashes), but different windows are (disjoint
reports, independent randomness). So the standard error used is the larger of the independent
value and the one measured across windows, s/√W for the per-window means a_w = mean_v z_wv and
b_w = mean_v z_wv² − 1: that covers positive within-window correlation without a model of it.
Tolerance: K = 5 standard errors — 6e-7 per check if normal, ~1e-4 with the t₁₉ tail of the
measured s.

Two kinds of z per series. z_exact divides by eq. 2 at the true frequencies: it checks the
pipeline's unbiased estimate and eq. 2 with no approximation. z divides by the job's std_error,
eq. 2 at the Norm-Sub projection of the estimate; that plug-in is correlated with the error and
pulls z slightly negative and z² slightly below 1 (about −0.02 and −0.01 to −0.05 for GRR
over 229 airports, the noisiest plug-in here), inside the tolerances.
12 series × 2 checks = 24 checks ≈ 2e-3 family-wise.
"""
from __future__ import annotations

import io

import numpy as np

from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.ldp.config.windows import WindowSpec
from ldp_telemetry.pipelines.batch import run_job
from ldp_telemetry.pipelines.csv_input import TrueValues
from ldp_telemetry.pipelines.job import EstimateJob
from ldp_telemetry.pipelines.simulate import simulate_reports
from tests.json_lines import job_json_lines

DAYS = range(40, 60)  # 20 windows
PER_DAY = 5000
DAY_MS = 86_400_000
START_2001 = 978_307_200_000  # 2001-01-01T00:00:00Z
K = 5.0


def standard_error(per_window: np.ndarray, m: int, independent_variance: float) -> float:
    """max(sqrt(independent_variance / m), s / sqrt(W)) for a mean over W windows of m values."""
    measured = per_window.std(ddof=1) / np.sqrt(len(per_window))
    return max(float(np.sqrt(independent_variance / m)), float(measured))


def sample_days(day: np.ndarray, rng) -> np.ndarray:
    """Row indices: PER_DAY random flights of each day in DAYS, in row order."""
    picked = [rng.choice(np.flatnonzero(day == k), PER_DAY, replace=False) for k in DAYS]
    return np.sort(np.concatenate(picked))


def test_standardized_errors_are_calibrated_on_real_flights(dataset, tmp_path):
    data = np.load(dataset("flights3m_2001H1.npz"))
    rows = sample_days(data["day"], np.random.default_rng(2001))
    day = data["day"][rows].astype(np.int64)
    times = START_2001 + day * DAY_MS + data["minute"][rows].astype(np.int64) * 60_000
    columns = {"hour": data["minute"][rows] // 60, "dest": data["dest"][rows].astype(np.int64)}
    airports = [str(a) for a in data["airports"]]
    domains = {"hour": {"size": 24}, "dest": {"labels": airports}}

    registry = parse_registry({"metrics": [
        {"name": f"{column}.{protocol}", "protocol": protocol, "epsilon": 2.0,
         "domain": domains[column], "postprocess": "norm-sub"}
        for column in columns for protocol in ("grr", "oue", "olh")]})
    files = []
    for k, config in enumerate(registry.metrics):
        truth = TrueValues(columns[config.name.split(".")[0]], times)
        files += simulate_reports(config, truth, str(tmp_path / "reports"), seed=100 + k,
                                  progress=None)
    job = EstimateJob(registry, tuple(files), str(tmp_path / "out"), WindowSpec(DAY_MS, DAY_MS))
    counters = run_job(job, [], out=io.StringIO())
    assert counters["records_accepted"] == 6 * len(rows) == 6 * PER_DAY * len(DAYS)

    estimates = job_json_lines(tmp_path / "out", "estimates")
    assert len(estimates) == 6 * len(DAYS)
    failures = []
    for config in registry.metrics:
        values = columns[config.name.split(".")[0]]
        exact, plug_in = ([], []), ([], [])
        for record in (r for r in estimates if r["metric"] == config.name):
            k = (int(np.datetime64(record["window_start"].rstrip("Z"), "ms").astype(np.int64))
                 - START_2001) // DAY_MS
            in_day = day == k
            assert record["n"] == in_day.sum()
            truth = np.bincount(values[in_day], minlength=config.d) / in_day.sum()
            error = np.array(record["unbiased_estimate"]) - truth
            true_se = np.sqrt(config.protocol.noise(record["n"]).variance(truth))
            for (a, b), z in ((exact, error / true_se),
                              (plug_in, error / np.array(record["std_error"]))):
                a.append(z.mean())
                b.append((z ** 2).mean() - 1)
        series = [("eq. 2 at the truth", exact), ("job's std_error", plug_in)]
        for label, (a, b) in series:
            a, b = np.array(a), np.array(b)
            assert len(a) == len(DAYS)
            m = len(a) * config.d
            se_mean, se_square = standard_error(a, m, 1.0), standard_error(b, m, 2.0)
            summary = (f"{config.name}, {label}: mean z {a.mean():+.3f} (tol {K * se_mean:.3f}), "
                       f"mean z² − 1 {b.mean():+.3f} (tol {K * se_square:.3f})")
            print(summary)
            if abs(a.mean()) > K * se_mean or abs(b.mean()) > K * se_square:
                failures.append(summary)
    assert not failures, failures
