"""Metric names that an encoding could confuse, in one live run: `a/b`, `a_b`, `a%2Fb`, a
unicode name and `..`. Every metric's pane files and `latest.json` are its own and hold its
record, `ldp show`'s reader gives each its record, and so does each metric's dashboard page
(through the folder source, the server and the page link)."""
from __future__ import annotations

import io
import json
import os

from urllib.parse import urlencode
from urllib.request import urlopen

import numpy as np
import pytest

from ldp_telemetry.dashboard.pages import metric_page_link
from ldp_telemetry.dashboard.payload import unpack
from ldp_telemetry.dashboard.server import Dashboard, serve_in_thread
from ldp_telemetry.dashboard.source import FolderSource
from ldp_telemetry.ldp.base.times import iso_from_ms
from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.ldp.config.windows import WindowSpec
from ldp_telemetry.ldp.protocols.noise import unbiased_estimate
from ldp_telemetry.output.layout import LATEST, PANES_DIR, metric_segment
from ldp_telemetry.output.reader import latest_panes, read_estimates, read_pane_log
from ldp_telemetry.pipelines.follower import WatermarkPolicy
from ldp_telemetry.pipelines.job import EstimateJob, LiveConfig
from ldp_telemetry.pipelines.live import run_live
from ldp_telemetry.schemas.codec import write_reports

pytestmark = pytest.mark.slow

T0 = 1_709_251_200_000  # 2024-03-01T00:00:00Z
MINUTE = 60_000
#: name -> reports in the one window: a different n and ε per metric tells their records apart
METRICS = {"a/b": (300, 1.0), "a_b": (500, 2.0), "a%2Fb": (700, 3.0), "größe/µs": (900, 4.0),
           "..": (1100, 5.0)}
REGISTRY = parse_registry({"metrics": [
    {"name": name, "protocol": "grr", "epsilon": epsilon, "domain": {"labels": list("abcd")}}
    for name, (_, epsilon) in METRICS.items()]})


def write_inbox(inbox) -> dict[str, np.ndarray]:
    """One report file per metric; returns each metric's unbiased estimate."""
    rng = np.random.default_rng(17)
    expected = {}
    for k, (name, (n, _)) in enumerate(METRICS.items()):
        protocol = REGISTRY[name].protocol
        values = rng.choice(4, size=n, p=[0.4, 0.3, 0.2, 0.1])
        columns = protocol.perturb(values, rng)
        times = (T0 + rng.integers(0, MINUTE, n)).astype(np.int64)
        write_reports(str(inbox / f"m{k}.avro"), name, protocol, np.arange(n), times, columns)
        statistic = protocol.new_statistic()
        protocol.accumulate(statistic, columns)
        expected[name] = unbiased_estimate(protocol.support_counts(statistic), protocol.noise(n))
    return expected


def assert_is_the_record_of(record: dict, name: str, expected: dict) -> None:
    n, epsilon = METRICS[name]
    assert (record["metric"], record["n"], record["epsilon"]) == (name, n, epsilon)
    # the same formula on the same counts, summed in another order: equal to rounding (1e-12),
    # while another metric's estimate differs in the first digits
    np.testing.assert_allclose(record["unbiased_estimate"], expected[name], rtol=1e-12)


def test_every_metric_of_a_live_run_has_its_own_panes_latest_and_page(tmp_path, hard_deadline):
    hard_deadline(600)
    inbox, output = tmp_path / "in", tmp_path / "out"
    inbox.mkdir()
    expected = write_inbox(inbox)
    job = EstimateJob(REGISTRY, (), str(output), WindowSpec(MINUTE, MINUTE))
    counters = run_live(job, LiveConfig("directory", str(inbox), WatermarkPolicy(0, None),
                                        poll_s=0.2, stop_when_idle_s=1.0, until_s=300),
                        [], out=io.StringIO())
    assert counters["records_accepted"] == sum(n for n, _ in METRICS.values())

    # the pane files: one folder per metric, every pane in it the metric's own record
    log = read_pane_log(str(output))
    folders: dict[str, set[str]] = {}
    for entry in log:
        record = json.loads((output / entry["path"]).read_text(encoding="utf-8"))
        assert_is_the_record_of(record, entry["metric"], expected)  # one ON_TIME pane each
        assert (record["pane"], record["n"]) == (entry["pane"], entry["n"])
        folders.setdefault(entry["metric"], set()).add(os.path.dirname(entry["path"]))
    assert set(folders) == set(METRICS)
    for name, paths in folders.items():
        [folder] = paths  # one window per metric
        assert folder.startswith(f"{PANES_DIR}/metric={metric_segment(name)}/")
    assert len({next(iter(p)) for p in folders.values()}) == len(METRICS)
    on_disk = sorted(os.path.relpath(root, output).replace(os.sep, "/")
                     for root, _, files in os.walk(output / PANES_DIR) if LATEST in files)
    assert on_disk == sorted(next(iter(p)) for p in folders.values())

    # latest.json and the latest pane of each window: the metric's own record
    latest = latest_panes(str(output))
    assert sorted(key.metric for key in latest) == sorted(METRICS)
    for key, entry in latest.items():
        record = json.loads((output / entry["path"]).read_text(encoding="utf-8"))
        assert_is_the_record_of(record, key.metric, expected)
        folder = output / os.path.dirname(entry["path"])
        assert json.loads((folder / LATEST).read_text(encoding="utf-8")) == record

    # ldp show / query's reader
    records = read_estimates(str(output))
    assert sorted(r.metric for r in records) == sorted(METRICS)
    for record in records:
        assert_is_the_record_of(record.json_value(), record.metric, expected)

    # the dashboard: the folder source, then each metric's page through the server and its link
    source = FolderSource(str(output))
    assert source.metrics() == sorted(METRICS)
    for name in METRICS:
        _, [window] = source.windows(name)
        assert_is_the_record_of(window, name, expected)
    server, base = serve_in_thread(Dashboard(source))
    try:
        for name in METRICS:
            with urlopen(base + metric_page_link(name), timeout=10) as response:
                page = response.read().decode("utf-8")
            data = page.split('<script id="ldp-data" type="application/json">')[1]
            data = json.loads(data.split("</script>")[0])
            assert data["metric"] == name
            [row] = unpack(data)  # what the charts draw; the record comes when chosen:
            start, end, version = row["start_ms"], row["end_ms"], row["version"]
            query = urlencode({"metric": name, "start": iso_from_ms(start),
                               "end": iso_from_ms(end), "version": version})
            with urlopen(base + "api/window?" + query, timeout=10) as response:
                window = json.loads(response.read())
            assert_is_the_record_of(window, name, expected)
    finally:
        server.shutdown()
        server.server_close()
        source.close()
