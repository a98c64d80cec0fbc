"""What the dashboard sends grows with windows × top-k, never with the domain: the metric page,
/api/windows (paged by time), one window by its key, and an export's data files."""
from __future__ import annotations

import json
import os
import urllib.error

import numpy as np
import pytest

from ldp_telemetry.dashboard.pages import metric_page_link
from ldp_telemetry.dashboard.server import Dashboard, serve_in_thread
from ldp_telemetry.dashboard.source import StoreSource
from ldp_telemetry.ldp.base.times import iso_from_ms
from ldp_telemetry.store import open_store

from tests.dashboard.test_dashboard_server import get, unpacked

START = 1_709_251_200_000
HOUR = 3_600_000


def write_store(url: str, windows: int, d: int, seed: int = 3) -> list[dict]:
    """`windows` hourly windows of metric "m" over d labels (value 7 largest on average)."""
    rng = np.random.default_rng(seed)
    records = []
    for k in range(windows):
        estimate = rng.dirichlet(np.ones(d))
        estimate[7] += 0.5
        estimate /= estimate.sum()
        records.append({
            "metric": "m", "window_start": iso_from_ms(START + k * HOUR),
            "window_end": iso_from_ms(START + (k + 1) * HOUR), "n": 5000, "protocol": "oue",
            "epsilon": 2.0, "p_star": 0.5, "q_star": 0.12, "smallest_resolvable": 0.01,
            "estimator": {"method": "unbiased", "params": {}},
            "postprocess": {"method": "norm-sub", "params": {}},
            "labels": [f"v{i}" for i in range(d)], "estimate": estimate.tolist(),
            "unbiased_estimate": estimate.tolist(), "std_error": [0.01] * d,
            "pane": {"timing": "ON_TIME", "index": 0, "is_last": True}})
    with open_store(url) as store:
        store.write_panes(records)
    return records


@pytest.fixture()
def two_domains(tmp_path):
    """The same 40 windows over 200 and over 800 labels, each in its own store."""
    urls = {}
    for d in (200, 800):
        urls[d] = f"sqlite:///{tmp_path}/d{d}.db"
        write_store(urls[d], 40, d)
    return urls


def test_pages_api_and_exports_do_not_grow_with_the_domain(two_domains, tmp_path):
    sizes = {}
    for d, url in two_domains.items():
        source = StoreSource(url)
        dashboard = Dashboard(source, top_k=5)
        server, base = serve_in_thread(dashboard)
        try:
            _, page = get(base + metric_page_link("m"))
            _, rows = get(base + "api/windows?metric=m&since=0")
            written = dashboard.export(str(tmp_path / f"site{d}"))
        finally:
            server.shutdown()
            server.server_close()
            source.close()
        data = [p for p in written if os.sep + "windows" + os.sep in p]
        sizes[d] = (len(page), len(rows), sum(os.path.getsize(p) for p in data))
    for small, large in zip(sizes[200], sizes[800], strict=True):
        assert large < 1.1 * small, sizes  # four times the domain, the same bytes


def test_windows_are_paged_by_time_and_one_window_is_read_by_its_key(tmp_path):
    url = f"sqlite:///{tmp_path}/s.db"
    records = write_store(url, 30, 50)
    source = StoreSource(url)
    server, base = serve_in_thread(Dashboard(source, top_k=3))
    try:
        _, body = get(base + "api/windows?metric=m&since=0&from=" + iso_from_ms(START + 5 * HOUR)
                      + "&to=" + iso_from_ms(START + 12 * HOUR) + "&limit=4")
        page = json.loads(body)
        rows = unpacked(page)
        # the latest 4 of the windows starting in [5 h, 12 h)
        assert [r["start_ms"] for r in rows] == [START + k * HOUR for k in (8, 9, 10, 11)]
        [series] = page["series"]
        assert series["indices"][0] == 7 and len(series["indices"]) == 3
        assert series["labels"][0] == "v7"
        for row, k in zip(rows, (8, 9, 10, 11), strict=True):
            assert row["top"] == pytest.approx([records[k]["estimate"][i]
                                                for i in series["indices"]], rel=1e-5)
        start, end, version = rows[0]["start_ms"], rows[0]["end_ms"], rows[0]["version"]
        _, whole = get(base + f"api/window?metric=m&start={iso_from_ms(start)}"
                              f"&end={iso_from_ms(end)}&version={version}")
        whole = json.loads(whole)
        assert whole["estimate"] == records[8]["estimate"] and len(whole["labels"]) == 50
        assert whole["window_start"] == records[8]["window_start"]
    finally:
        server.shutdown()
        server.server_close()
        source.close()


def test_threads_read_in_parallel_through_a_bounded_pool(tmp_path):
    """16 threads reading at once share at most `pool_size` connections, each used by one thread
    at a time (SQLite would fail or crash on a connection used by two threads at once), and
    closing the source closes every connection."""
    import threading
    url = f"sqlite:///{tmp_path}/s.db"
    write_store(url, 20, 30)
    source = StoreSource(url, pool_size=3)
    errors, results = [], []

    def read():
        try:
            for _ in range(10):
                results.append(source.payload("m", 3)["count"])
                results.append(source.window("m", START, START + HOUR, "")["n"])
        except Exception as error:  # noqa: BLE001 - any failure is the test's finding
            errors.append(error)
    threads = [threading.Thread(target=read) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == []
    assert results.count(20) == 160 and results.count(5000) == 160
    assert source._pool._open <= 3
    source.close()
    assert source._pool._free == []


def test_a_payload_is_sent_by_column_and_reads_back_exactly(tmp_path):
    """Columns every row shares are sent once; starts as differences; frequencies as integers
    of 1/FREQUENCY_SCALE, within half a unit of the stored value (what the chart draws)."""
    from ldp_telemetry.dashboard.payload import FREQUENCY_SCALE, unpack
    url = f"sqlite:///{tmp_path}/s.db"
    records = write_store(url, 30, 20)
    source = StoreSource(url)
    try:
        payload = source.payload("m", 3)
    finally:
        source.close()
    columns = payload["columns"]
    for shared in ("series", "late", "timing", "pane", "last", "rejects", "mean", "few",
                   "integrity", "partial"):
        assert isinstance(columns[shared], dict), shared  # {"all": value}
    assert columns["start"] == [0] + [3600] * 29 and payload["unit"] == 1000
    rows = unpack(payload)
    indices = payload["series"][0]["indices"]
    for row, written in zip(rows, records, strict=True):
        assert row["start_ms"] == START + records.index(written) * HOUR
        assert row["n"] == written["n"]
        for value, i in zip(row["top"], indices, strict=True):
            assert abs(value - written["estimate"][i]) <= 0.5 / FREQUENCY_SCALE
    # the page embeds the same columns: 30 windows in a few kilobytes
    assert len(json.dumps(payload, separators=(",", ":"))) < 30 * 60 + 2000


def test_a_page_of_windows_reads_forward_in_time_and_says_how_many_there_are(tmp_path):
    url = f"sqlite:///{tmp_path}/s.db"
    write_store(url, 12, 8)
    source = StoreSource(url)
    server, base = serve_in_thread(Dashboard(source, top_k=2))
    try:
        _, body = get(base + "api/windows?metric=m&since=0&from=" + iso_from_ms(START + 3 * HOUR)
                      + "&order=oldest&limit=4")
        page = json.loads(body)
        assert [r["start_ms"] for r in unpacked(page)] == [START + k * HOUR for k in (3, 4, 5, 6)]
        assert page["span"] == {"windows": 12, "first_start_ms": START,
                                "last_start_ms": START + 11 * HOUR}
        with pytest.raises(urllib.error.HTTPError) as refused:
            get(base + "api/windows?metric=m&since=0&order=sideways")
        assert refused.value.code == 400
    finally:
        server.shutdown()
        server.server_close()
        source.close()
