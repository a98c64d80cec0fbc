"""String metrics end to end: `ldp simulate` from a CSV of words, `ldp run` with sliding windows,
the heavy-hitter record (schema, fields, values equal to the window's finalize without Beam),
`ldp show`, dead letters for bad PEM payloads, streaming panes through a TestStream, and a live
run that follows a directory and writes the store."""
from __future__ import annotations

import csv
import glob
import io
import itertools
import json
import os
import re
import signal
import subprocess
import sys
import threading

import fastavro
import numpy as np
import pytest

from ldp_telemetry.client.values import domain_points
from ldp_telemetry.ldp.base.errors import InputError
from ldp_telemetry.ldp.base.times import ms_from_iso
from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.ldp.config.windows import WindowSpec
from ldp_telemetry.ldp.engine.finalize import finalize_window
from ldp_telemetry.ldp.estimation.heavy_hitters import HEAVY_HITTER_BAND_REASON
from ldp_telemetry.output.estimate import Pane
from ldp_telemetry.output.reader import read_pane_log
from ldp_telemetry.output.records import window_estimate_record
from ldp_telemetry.pipelines import cli
from ldp_telemetry.pipelines.batch import run_job
from ldp_telemetry.pipelines.csv_input import map_to_domain
from ldp_telemetry.pipelines.follower import WatermarkPolicy
from ldp_telemetry.pipelines.job import EstimateJob, LiveConfig
from ldp_telemetry.pipelines.live import run_live
from ldp_telemetry.schemas import load_schema
from ldp_telemetry.schemas.codec import write_reports
from ldp_telemetry.store import open_store
from ldp_telemetry.transforms.replay import FilesArrive, WatermarkTo
from tests.json_lines import job_json_lines
from tests.pipelines.test_live_run import wait_for
from tests.pipelines.test_streaming_panes import run_stream

T0 = 1_709_251_200  # 2024-03-01T00:00:00Z, seconds
HOUR = 3600
METRIC = "app.name"
REGISTRY_DOC = {"metrics": [
    {"name": METRIC, "protocol": "pem", "epsilon": 4.0,
     "domain": {"strings": {"max_bytes": 10, "pool": 128}},
     "estimator": {"method": "heavy-hitters", "top": 4}}]}
REGISTRY = parse_registry(REGISTRY_DOC)
CONFIG = REGISTRY[METRIC]
WORDS = ["mail", "maps", "café", "browser", "chat"]
SHARES = [0.35, 0.25, 0.2, 0.12, 0.08]
_FIRST_IDS = itertools.count(0, 1_000_000)


def simulate(tmp_path, rng, n, start_s, span_s, name):
    values = rng.choice(WORDS, size=n, p=SHARES)
    times = (start_s * 1000 + rng.integers(0, span_s * 1000, n)).astype(np.int64)
    columns = CONFIG.protocol.perturb(domain_points(CONFIG, values), rng)
    path = str(tmp_path / f"{name}.avro")
    first = next(_FIRST_IDS)  # distinct ids across files: a repeated id counts once
    write_reports(path, METRIC, CONFIG.protocol, first + np.arange(n), times, columns)
    return path, times, columns


def direct(parts, start_ms, end_ms):
    """The window's finalize result computed without Beam from the same payloads."""
    statistic, n = CONFIG.protocol.new_statistic(), 0
    for times, columns in parts:
        inside = (times >= start_ms) & (times < end_ms)
        CONFIG.protocol.accumulate(statistic, {k: v[inside] for k, v in columns.items()})
        n += int(inside.sum())
    return finalize_window(CONFIG, statistic, n)


def check_record(record, expected):
    """The record holds the in-process result's heavy hitters, and validates as Avro."""
    want = window_estimate_record(CONFIG, expected, ms_from_iso(record["window_start"]),
                                  ms_from_iso(record["window_end"]),
                                  Pane.from_json(record["pane"])).json_value()
    assert record["n"] == expected.n
    assert record["labels"] == want["labels"]
    np.testing.assert_allclose(record["estimate"], want["estimate"], rtol=1e-12)
    np.testing.assert_allclose(record["std_error"], want["std_error"], rtol=1e-12)
    assert record["heavy_hitters"] == want["heavy_hitters"]
    assert record["heavy_hitters"]["top"] == 4 and record["heavy_hitters"]["width"] == 8
    assert sum(record["heavy_hitters"]["level_reports"]) == record["n"]
    # the heavy hitters have no 95% band (chosen by the search for their high estimates)
    assert record["protocol"] == "pem" and record["band_method"] == "none"
    assert record["band_reasons"] == {"estimate": HEAVY_HITTER_BAND_REASON}
    fastavro.validation.validate(record, load_schema("window_estimate"), raise_errors=True)


def test_map_to_domain_pads_strings_and_refuses_long_ones():
    rows = map_to_domain(["mail", "café"], CONFIG)
    assert rows.shape == (2, 10) and bytes(rows[1][:5]) == "café".encode()
    with pytest.raises(InputError, match=r"1 value\(s\) cannot be reported by string metric "
                                         r"'app.name' \(first at line 3: 'a-very-long-name'; it "
                                         r"is 16 bytes long in UTF-8, more than max_bytes"):
        map_to_domain(["ok", "a-very-long-name"], CONFIG)


def test_simulate_run_show_with_sliding_windows(tmp_path):
    """`ldp simulate` from a CSV, `ldp run` with 2-hour windows every hour, `ldp show`."""
    rng = np.random.default_rng(41)
    n = 30_000
    values = rng.choice(WORDS, size=n, p=SHARES)
    times = T0 + rng.integers(0, 3 * HOUR, n)
    with open(tmp_path / "apps.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["t", "app"])
        writer.writerows(zip(times.tolist(), values.tolist(), strict=True))
    registry = tmp_path / "registry.json"
    registry.write_text(json.dumps(REGISTRY_DOC))
    cli = [sys.executable, "-m", "ldp_telemetry.pipelines.cli"]
    subprocess.run([*cli, "simulate", "--registry", str(registry), "--metric", METRIC,
                    "--input", str(tmp_path / "apps.csv"), "--value-column", "app",
                    "--time-column", "t", "--out", str(tmp_path / "reports"), "--seed", "3"],
                   check=True, capture_output=True)
    files = tuple(sorted(glob.glob(str(tmp_path / "reports" / "*.avro"))))
    job = EstimateJob(REGISTRY, files, str(tmp_path / "out"),
                      WindowSpec(2 * HOUR * 1000, HOUR * 1000))
    counters = run_job(job, [], out=io.StringIO())
    assert counters["records_accepted"] == n
    records = job_json_lines(tmp_path / "out", "estimates")
    assert len(records) == 4  # windows starting at -1 h, 0, 1 h, 2 h
    parts = []
    for path in files:
        with open(path, "rb") as handle:
            rows = list(fastavro.reader(handle))
        parts.append((np.array([round(r["event_time"].timestamp() * 1000) for r in rows],
                               dtype=np.int64),
                      {key: np.array([r["payload"][key] for r in rows])
                       for key in ("level", "hash", "y")}))
    for record in records:
        start = int(np.datetime64(record["window_start"].rstrip("Z"), "ms").astype(np.int64))
        expected = direct(parts, start, start + 2 * HOUR * 1000)
        check_record(record, expected)
        if record["n"] > 15_000:  # the two full windows find the four most frequent apps
            assert set(record["labels"]) == set(WORDS[:4])
    shown = subprocess.run([*cli, "show", "--output", str(tmp_path / "out")], check=True,
                           capture_output=True, text=True).stdout
    assert "heavy-hitters" in shown and "café" in shown and "mail" in shown
    # no ± for a heavy hitter, its standard error printed; the reason said once
    lines = shown.splitlines()
    assert "±" not in shown and "95% band: none" in shown
    assert lines.count(f"(no band: {HEAVY_HITTER_BAND_REASON})") == 1
    mail = [line for line in lines if line.strip().startswith("mail ")]
    assert mail and all(re.search(r"\(s\.e\. 0\.\d{4}, no band\)$", line) for line in mail)
    assert "adjusted for the value being among" not in shown  # no band to adjust
    # the dashboard's exported page of the metric lists the heavy hitters of its windows
    subprocess.run([*cli, "dashboard", "--output", str(tmp_path / "out"), "--export",
                    str(tmp_path / "pages")], check=True, capture_output=True)
    page = (tmp_path / "pages" / f"metric-{METRIC}.html").read_text(encoding="utf-8")
    assert all(f'"{word}"' in page for word in ("mail", "maps", "browser"))


def run_cli(capsys, *argv: str) -> str:
    """What `ldp *argv` prints (exit status 0)."""
    capsys.readouterr()
    assert cli.main(list(argv)) == 0
    return capsys.readouterr().out


def test_a_batch_run_decodes_against_the_registrys_dictionary(tmp_path, capsys):
    """A registry naming a candidate dictionary (the same fingerprint: the same reports count):
    the record's heavy hitters say which the search found and which the dictionary, and equal
    the window's finalize without Beam. ε = 4, 20,000 reports: the four most frequent apps
    (12% and more) are ≥ 20 standard errors above every other candidate, so they are the top 4;
    "browser" is in the dictionary and found by the search too, "zoom" holds no report."""
    document = json.loads(json.dumps(REGISTRY_DOC))
    document["metrics"][0]["domain"]["strings"]["dictionary"] = ["browser", "zoom"]
    registry = parse_registry(document)
    config = registry[METRIC]
    assert config.fingerprint == CONFIG.fingerprint and config.dictionary == (b"browser", b"zoom")
    rng = np.random.default_rng(43)
    path, times, columns = simulate(tmp_path, rng, 20_000, T0, HOUR, "apps")
    job = EstimateJob(registry, (path,), str(tmp_path / "out"), WindowSpec(HOUR * 1000,
                                                                          HOUR * 1000))
    counters = run_job(job, [], out=io.StringIO())
    assert counters["records_accepted"] == 20_000
    (record,) = job_json_lines(tmp_path / "out", "estimates")
    statistic = config.protocol.new_statistic()
    config.protocol.accumulate(statistic, columns)
    want = window_estimate_record(config, finalize_window(config, statistic, 20_000),
                                  T0 * 1000, (T0 + HOUR) * 1000).json_value()
    assert record["labels"] == want["labels"] and record["heavy_hitters"] == want["heavy_hitters"]
    np.testing.assert_allclose(record["estimate"], want["estimate"], rtol=1e-12)
    assert set(record["labels"]) == set(WORDS[:4])
    found_by = dict(zip(record["labels"], record["heavy_hitters"]["found_by"], strict=True))
    assert found_by == {"mail": "search", "maps": "search", "café": "search", "browser": "both"}
    assert record["heavy_hitters"]["dictionary"] == 2
    fastavro.validation.validate(record, load_schema("window_estimate"), raise_errors=True)
    # `ldp show` and `ldp query` (text and JSON) say how each heavy hitter was found
    out = str(tmp_path / "out")
    shown = run_cli(capsys, "show", "--output", out)
    assert "dictionary: 2 strings" in shown
    assert re.search(r"browser .* found by both", shown)
    assert re.search(r"mail .* found by search", shown)
    query = ("query", "--output", out, "--metric", METRIC, "--window", "0")
    answered = json.loads(run_cli(capsys, *query, "--top", "4", "--json"))
    assert [(a["labels"][0], a["found_by"]) for a in answered["answers"]] == \
        list(zip(record["labels"], record["heavy_hitters"]["found_by"], strict=True))
    text = run_cli(capsys, *query, "--labels", "browser")
    assert "dictionary: 2 strings" in text and re.search(r"browser .* found by both", text)
    assert run_cli(capsys, *query, "--label", "browser") == text


def test_a_batch_run_with_a_final_share(tmp_path):
    """`ldp simulate` and `ldp run` of a metric with final_share 0.5 (m = 10: level 10 holds
    55% of the reports, each other level 5%): the simulated reports carry its fingerprint and
    its level split (level 10's count within K = 4.5 binomial standard errors of 55%, false
    failure 6.8e-6), and the record equals the window's finalize without Beam. ε = 4, 20,000
    reports: the four most frequent apps (12% and more) are ≥ 10 standard errors above every
    other candidate at every level (1,000 reports a level), so they are the top 4."""
    document = json.loads(json.dumps(REGISTRY_DOC))
    document["metrics"][0]["domain"]["strings"]["final_share"] = 0.5
    registry = parse_registry(document)
    config = registry[METRIC]
    assert config.fingerprint != CONFIG.fingerprint
    rng = np.random.default_rng(47)
    n = 20_000
    values = rng.choice(WORDS, size=n, p=SHARES)
    with open(tmp_path / "apps.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["t", "app"])
        writer.writerows(zip((T0 + rng.integers(0, HOUR, n)).tolist(), values.tolist(),
                             strict=True))
    path = tmp_path / "registry.json"
    path.write_text(json.dumps(document))
    cli = [sys.executable, "-m", "ldp_telemetry.pipelines.cli"]
    subprocess.run([*cli, "simulate", "--registry", str(path), "--metric", METRIC,
                    "--input", str(tmp_path / "apps.csv"), "--value-column", "app",
                    "--time-column", "t", "--out", str(tmp_path / "reports"), "--seed", "5"],
                   check=True, capture_output=True)
    files = tuple(sorted(glob.glob(str(tmp_path / "reports" / "*.avro"))))
    rows = []
    for file in files:
        with open(file, "rb") as handle:
            rows += list(fastavro.reader(handle))
    assert {r["fingerprint"] for r in rows} == {config.fingerprint}
    level = np.array([r["payload"]["level"] for r in rows])
    assert abs((level == 10).mean() - 0.55) <= 4.5 * np.sqrt(0.55 * 0.45 / n)
    job = EstimateJob(registry, files, str(tmp_path / "out"), WindowSpec(HOUR * 1000,
                                                                         HOUR * 1000))
    counters = run_job(job, [], out=io.StringIO())
    assert counters["records_accepted"] == n
    (record,) = job_json_lines(tmp_path / "out", "estimates")
    statistic = config.protocol.new_statistic()
    config.protocol.accumulate(statistic, {key: np.array([r["payload"][key] for r in rows])
                                           for key in ("level", "hash", "y")})
    want = window_estimate_record(config, finalize_window(config, statistic, n),
                                  T0 * 1000, (T0 + HOUR) * 1000).json_value()
    assert record["labels"] == want["labels"] and record["heavy_hitters"] == want["heavy_hitters"]
    np.testing.assert_allclose(record["std_error"], want["std_error"], rtol=1e-12)
    assert record["heavy_hitters"]["level_reports"][-1] == int((level == 10).sum())
    assert set(record["labels"]) == set(WORDS[:4])


def test_bad_pem_payloads_become_dead_letters(tmp_path):
    path = str(tmp_path / "bad.avro")
    g = CONFIG.protocol.g
    write_reports(path, METRIC, CONFIG.protocol, np.arange(4), np.full(4, T0 * 1000),
                  {"level": np.array([1, 11, 2, 3]), "hash": np.array([0, 0, 128, 5]),
                   "y": np.array([0, 0, 0, g])})
    job = EstimateJob(REGISTRY, (path,), str(tmp_path / "out"), WindowSpec(HOUR * 1000,
                                                                          HOUR * 1000))
    counters = run_job(job, [], out=io.StringIO())
    assert counters["records_accepted"] == 1
    assert counters["dead_letter.invalid_payload"] == 3
    letters = job_json_lines(tmp_path / "out", "dead_letters")
    assert all("prefix-extension" in letter["detail"] for letter in letters)
    (record,) = job_json_lines(tmp_path / "out", "estimates")
    assert record["labels"] == [] and "has no reports" in record["heavy_hitters"]["reason"]


def test_streaming_panes_of_a_string_metric(tmp_path):
    """One window of 60 s: an ON_TIME pane with the on-time file, then a LATE pane with both."""
    rng = np.random.default_rng(42)
    on_time, t1, c1 = simulate(tmp_path, rng, 6_000, T0, 60, "on-time")
    late, t2, c2 = simulate(tmp_path, rng, 3_000, T0, 60, "late")
    steps = [WatermarkTo(T0), FilesArrive((on_time,)), WatermarkTo(T0 + 60),
             FilesArrive((late,)), WatermarkTo(T0 + 500)]
    windows = WindowSpec.from_seconds(60, allowed_lateness=120)
    expected = [direct([(t1, c1)], T0 * 1000, (T0 + 60) * 1000),
                direct([(t1, c1), (t2, c2)], T0 * 1000, (T0 + 60) * 1000)]

    def check(records):
        records = sorted(records, key=lambda r: r.pane.index)
        assert [r.pane.timing for r in records] == ["ON_TIME", "LATE"]
        for record, result in zip(records, expected, strict=True):
            check_record(record.json_value(), result)

    run_stream(windows, steps, check, registry=REGISTRY)




@pytest.mark.slow
def test_live_run_of_a_string_metric_writes_panes_and_the_store(tmp_path, hard_deadline):
    """A live run follows a directory: window 0's two files, then a file of window 1 moves the
    watermark past window 0; its on-time pane holds the heavy hitters of both files, and the
    store holds them too."""
    hard_deadline(600)
    inbox, output = tmp_path / "in", tmp_path / "out"
    inbox.mkdir()
    rng = np.random.default_rng(43)
    written = {}
    failures = []
    w0 = "2024-03-01T00:00:00Z"

    def write(name, n, start_s):
        path, times, columns = simulate(tmp_path, rng, n, start_s, 60, name)
        os.rename(path, inbox / f"{name}.avro")
        written[name] = (times, columns)

    def on_time_panes():
        return [e for e in read_pane_log(output)
                if e["window_start"] == w0 and e["pane"]["timing"] == "ON_TIME"]

    def feed():
        try:
            write("w0-a", 5_000, T0)
            write("w0-b", 4_000, T0)
            write("w1", 1_000, T0 + 60)
            wait_for(lambda: output.exists() and on_time_panes(), "window 0's on-time pane")
        except TimeoutError as error:
            failures.append(error)
        finally:
            os.kill(os.getpid(), signal.SIGTERM)

    store = f"sqlite:///{tmp_path / 'estimates.db'}"
    job = EstimateJob(REGISTRY, (), str(output),
                      WindowSpec(60_000, 60_000, allowed_lateness_ms=60_000), store)
    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    printed = io.StringIO()
    run_live(job, LiveConfig("directory", str(inbox), WatermarkPolicy(0, None), poll_s=0.2,
                             until_s=600), [], out=printed)
    feeder.join(timeout=5)
    assert not failures, failures
    assert "records read: 10000, accepted: 10000" in printed.getvalue(), printed.getvalue()
    entry = on_time_panes()[-1]
    record = json.loads((output / entry["path"]).read_text())
    expected = direct([written["w0-a"], written["w0-b"]], T0 * 1000, (T0 + 60) * 1000)
    check_record(record, expected)
    assert set(record["labels"]) == set(WORDS[:4])
    stored = [w for w in open_store(store).windows(METRIC) if w["window_start"] == w0]
    assert stored and stored[-1]["n"] == 9_000
