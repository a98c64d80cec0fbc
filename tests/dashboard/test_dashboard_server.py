"""The dashboard server without a browser: where it listens, what it sends, its cursor API, and
that `ldp dashboard` runs without Apache Beam."""
from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request

import numpy as np
import pytest

from ldp_telemetry.dashboard.cli import add_dashboard_arguments
from ldp_telemetry.dashboard.pages import embedded_json, metric_page_link, metric_page_name
from ldp_telemetry.dashboard.payload import unpack
from ldp_telemetry.dashboard.server import Dashboard, make_server, serve_in_thread
from ldp_telemetry.dashboard.source import FolderSource
from ldp_telemetry.ldp.estimation.frequency_bands import score_bands
from ldp_telemetry.ldp.protocols import make_protocol
from ldp_telemetry.ldp.protocols.noise import smallest_resolvable
from ldp_telemetry.store import open_store

GRR = make_protocol("grr", 1.0, 2)


def record(start: str, end: str, n: int, index: int = 0, timing: str = "ON_TIME") -> dict:
    return {"metric": "m", "window_start": start, "window_end": end, "n": n, "protocol": "grr",
            "epsilon": 1.0, "p_star": GRR.p_star, "q_star": GRR.q_star,
            "smallest_resolvable": smallest_resolvable(GRR.p_star, GRR.q_star, n),
            "estimator": {"method": "unbiased", "params": {}},
            "postprocess": {"method": "norm-sub", "params": {}}, "labels": ["a", "b"],
            "estimate": [0.6, 0.4], "unbiased_estimate": [0.6, 0.4], "std_error": [0.1, 0.1],
            "pane": {"timing": timing, "index": index, "is_last": False}}


def bands_of(n: int) -> tuple[list, list]:
    """The record's value bands: the score band of the unbiased estimates [0.6, 0.4] at GRR's
    p*, q* and n (output.bands.value_bands)."""
    lower, upper = score_bands(np.array([0.6, 0.4]), GRR.p_star, GRR.q_star, n)
    return lower.tolist(), upper.tolist()


def halves(n: int) -> list:
    lower, upper = bands_of(n)
    return [(high - low) / 2 for low, high in zip(lower, upper, strict=True)]


def assert_drawn_as_computed_once(window: dict) -> None:
    """A window view carries what the page draws: bands, half widths, p*, q*, smallest
    resolvable (the script computes none of them)."""
    lower, upper = bands_of(window["n"])
    assert window["lower95"] == pytest.approx(lower)
    assert window["upper95"] == pytest.approx(upper)
    assert window["half95"] == pytest.approx(halves(window["n"]))
    assert (window["p_star"], window["q_star"]) == pytest.approx((GRR.p_star, GRR.q_star))
    assert window["smallest_resolvable"] == pytest.approx(
        smallest_resolvable(GRR.p_star, GRR.q_star, window["n"]))


def unpacked(payload: dict) -> list[dict]:
    """The rows of a page's or /api/windows' payload (dashboard/payload.py) as dicts by field,
    with `series` the series' name and `timing` the pane's."""
    rows = unpack(payload)
    for row in rows:
        row["series"] = payload["series"][row["series"]]["name"]
        row["timing"] = payload["timings"][row["timing"]]
    return rows


def get(url: str):
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.headers, response.read()


def test_the_server_listens_on_localhost_unless_told_otherwise(tmp_path):
    import argparse
    parser = argparse.ArgumentParser()
    add_dashboard_arguments(parser)
    args = parser.parse_args(["--output", str(tmp_path)])
    assert args.host == "127.0.0.1"
    (tmp_path / "estimates-00000-of-00001.jsonl").write_text(
        json.dumps(record("2024-03-01T00:00:00Z", "2024-03-01T01:00:00Z", 10)) + "\n")
    server = make_server(Dashboard(FolderSource(str(tmp_path))), port=0)
    try:
        assert server.server_address[0] == "127.0.0.1"
    finally:
        server.server_close()


def test_pages_allow_no_other_origin_and_the_api_returns_only_changes(tmp_path):
    url_db = f"sqlite:///{tmp_path}/s.db"
    with open_store(url_db) as store:
        store.write_panes([record("2024-03-01T00:00:00Z", "2024-03-01T01:00:00Z", 10),
                           record("2024-03-01T01:00:00Z", "2024-03-01T02:00:00Z", 20)])
    from ldp_telemetry.dashboard.source import StoreSource
    source = StoreSource(url_db)
    server, base = serve_in_thread(Dashboard(source))
    try:
        headers, body = get(base + metric_page_link("m"))
        policy = headers["Content-Security-Policy"]
        assert "default-src 'none'" in policy and "connect-src 'self'" in policy
        assert "script-src 'self'" in policy and "http" not in policy
        assert b"<script src=\"static/dashboard.js\">" in body
        _, first = get(base + "api/windows?metric=m&since=0")
        first = json.loads(first)
        assert [w["n"] for w in unpacked(first)] == [10, 20]
        [series] = first["series"]
        assert (series["name"], series["indices"], series["labels"]) == ("1 h", [0, 1],
                                                                        ["a", "b"])
        light = unpacked(first)[0]
        assert light["floor"] == pytest.approx(smallest_resolvable(GRR.p_star, GRR.q_star, 10))
        assert light["top"] == [0.6, 0.4]  # in units of 1/FREQUENCY_SCALE:
        lower, upper = bands_of(10)  # the saved band, not centred on the estimate
        assert light["low"] == pytest.approx(list(lower), rel=1e-5)
        assert light["high"] == pytest.approx(list(upper), rel=1e-5)
        assert '"estimate"' not in json.dumps(first)  # no record, no value arrays
        _, whole = get(base + "api/window?metric=m&start=2024-03-01T00:00:00Z"
                              "&end=2024-03-01T01:00:00Z")
        assert_drawn_as_computed_once(json.loads(whole))
        with open_store(url_db) as store:
            store.write_panes([record("2024-03-01T01:00:00Z", "2024-03-01T02:00:00Z", 26,
                                      index=1, timing="LATE")])
        _, changed = get(base + f"api/windows?metric=m&since={first['cursor']}")
        changed = json.loads(changed)
        assert [(w["n"], w["late"]) for w in unpacked(changed)] == [(26, 6)]
        assert changed["cursor"] > first["cursor"]
        for bad in ("api/windows?since=0", "api/windows?metric=m&since=x", "nothing.html",
                    "static/../server.py"):
            with pytest.raises(urllib.error.HTTPError):
                get(base + bad)
    finally:
        server.shutdown()
        server.server_close()
        source.close()


def test_a_folder_is_followed_line_by_line_and_half_written_lines_wait(tmp_path):
    path = tmp_path / "estimates-live.jsonl"
    path.write_text(json.dumps(record("2024-03-01T00:00:00Z", "2024-03-01T01:00:00Z", 10)) + "\n")
    source = FolderSource(str(tmp_path))
    cursor, windows = source.windows("m")
    assert [w["n"] for w in windows] == [10]
    late = json.dumps(record("2024-03-01T00:00:00Z", "2024-03-01T01:00:00Z", 15, 1, "LATE"))
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(late[:20])  # a writer in the middle of a line
    assert source.windows("m", cursor) == (cursor, [])
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(late[20:] + "\n")
    cursor2, windows = source.windows("m", cursor)
    assert cursor2 > cursor and [(w["n"], w["late_reports"]) for w in windows] == [(15, 5)]
    assert_drawn_as_computed_once(windows[0])
    (tmp_path / "dead_letters-live.jsonl").write_text(json.dumps(
        {"source": "x", "reason": "invalid_payload", "detail": "", "records": 1,
         "report": json.dumps({"metric": "m", "event_time": "2024-03-01T00:10:00+00:00"})})
        + "\n" + json.dumps({"source": "y", "reason": "undecodable", "detail": "",
                             "records": 4, "report": None}) + "\n")
    _, windows = source.windows("m", cursor2)
    assert windows[0]["rejects"] == {"invalid_payload": 1}
    assert source.unattributed_rejects() == {("", "undecodable"): 4}


def test_embedded_data_cannot_close_its_script_element():
    text = embedded_json({"label": "</script><script>alert(1)</script>", "x": float("nan")})
    assert "<" not in text and ">" not in text
    assert json.loads(text) == {"label": "</script><script>alert(1)</script>", "x": None}


def test_ldp_dashboard_does_not_import_apache_beam(tmp_path):
    (tmp_path / "estimates-0.jsonl").write_text(
        json.dumps(record("2024-03-01T00:00:00Z", "2024-03-01T01:00:00Z", 10)) + "\n")
    code = ("import sys\n"
            "from ldp_telemetry.pipelines.cli import main\n"
            f"assert main(['dashboard', '--output', {str(tmp_path)!r}, '--export', "
            f"{str(tmp_path / 'site')!r}]) == 0\n"
            "print('apache_beam' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=True)
    assert done.stdout.strip().splitlines()[-1] == "False"
    assert (tmp_path / "site" / "index.html").exists()
    assert (tmp_path / "site" / "static" / "dashboard.js").exists()


def test_ldp_dashboard_serves_until_stopped(tmp_path):
    (tmp_path / "estimates-0.jsonl").write_text(
        json.dumps(record("2024-03-01T00:00:00Z", "2024-03-01T01:00:00Z", 10)) + "\n")
    code = ("import sys\nfrom ldp_telemetry.pipelines.cli import main\n"
            f"sys.exit(main(['dashboard', '--output', {str(tmp_path)!r}, '--port', '0']))\n")
    process = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        line = process.stdout.readline()
        assert line.startswith("dashboard: http://127.0.0.1:"), line
        base = line.split()[1]
        _, body = get(base)
        assert b'href="metric-m.html"' in body
        _, page = get(base + metric_page_link("m"))
        assert b'id="ldp-data"' in page
    finally:
        process.terminate()
        process.wait(timeout=30)
        process.stdout.close()


def test_a_live_runs_pane_log_dead_letters_and_too_late_counts_are_followed(tmp_path):
    """The live layout: panes.log lines point to one record file per pane; dead letters in
    dead_letters/*.jsonl; too_late.jsonl holds cumulative too-late counts per window."""
    start, end = "2024-03-01T00:00:00Z", "2024-03-01T01:00:00Z"

    def pane(index: int, timing: str, n: int) -> None:
        relative = f"panes/metric=m/date=2024-03-01/w/pane-{index:05d}-{timing}.json"
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(record(start, end, n, index, timing)))
        with open(tmp_path / "panes.log", "a", encoding="utf-8") as log:
            log.write(json.dumps({"metric": "m", "window_start": start, "window_end": end,
                                  "pane": {"timing": timing, "index": index, "is_last": False},
                                  "n": n, "path": relative}) + "\n")

    pane(0, "EARLY", 40)
    with open(tmp_path / "panes.log", "a", encoding="utf-8") as log:  # hostile or broken lines
        log.write(json.dumps({"path": "../../../etc/passwd"}) + "\n")
        log.write(json.dumps({"path": "panes/missing.json"}) + "\n")
    source = FolderSource(str(tmp_path))
    cursor, [window] = source.windows("m")
    assert (window["n"], window["late_reports"]) == (40, None)
    pane(1, "ON_TIME", 100)
    pane(2, "LATE", 130)
    (tmp_path / "dead_letters").mkdir()
    (tmp_path / "dead_letters" / "reports-7.avro.jsonl").write_text(json.dumps(
        {"source": "reports-7.avro", "reason": "invalid_payload", "detail": "", "records": 1,
         "report": json.dumps({"metric": "m", "event_time": "2024-03-01T00:30:00+00:00"})})
        + "\n")
    (tmp_path / "too_late.jsonl").write_text(
        json.dumps({"metric": "m", "window_start": start, "window_end": end, "too_late": 5,
                    "accepted": 140}) + "\n"
        + json.dumps({"metric": "m", "window_start": start, "window_end": end, "too_late": 9,
                      "accepted": 144}) + "\n")
    cursor2, [window] = source.windows("m", cursor)
    assert cursor2 > cursor
    assert (window["pane"]["index"], window["n"], window["late_reports"]) == (2, 130, 30)
    assert window["rejects"] == {"invalid_payload": 1, "too_late": 9}
    assert source.windows("m", cursor2) == (cursor2, [])


def test_a_store_source_sends_the_bands_and_facts_the_store_saved(tmp_path):
    url_db = f"sqlite:///{tmp_path}/s.db"
    with open_store(url_db) as store:
        store.write_panes([record("2024-03-01T00:00:00Z", "2024-03-01T01:00:00Z", 10)])
        cursor = store._connection.cursor()  # what the store saved is what a page shows
        cursor.execute("UPDATE ldp_window_values SET lower95 = -1.5 WHERE value_index = 1")
        cursor.execute("UPDATE ldp_windows SET smallest_resolvable = 0.125")
    from ldp_telemetry.dashboard.source import StoreSource
    source = StoreSource(url_db)
    try:
        _, [window] = source.windows("m")
    finally:
        source.close()
    lower, upper = bands_of(10)
    assert window["lower95"] == pytest.approx([lower[0], -1.5])
    assert window["upper95"] == pytest.approx(upper)
    assert window["smallest_resolvable"] == 0.125


def test_a_record_written_before_p_star_existed_shows_no_p_star(tmp_path):
    old = record("2024-03-01T00:00:00Z", "2024-03-01T01:00:00Z", 10)
    for name in ("p_star", "q_star", "smallest_resolvable"):
        del old[name]
    (tmp_path / "estimates-00000-of-00001.jsonl").write_text(json.dumps(old) + "\n")
    dashboard = Dashboard(FolderSource(str(tmp_path)))
    _, [window] = dashboard.source.windows("m")
    assert (window["p_star"], window["q_star"], window["smallest_resolvable"]) == \
        (None, None, None)
    page = dashboard.page("m", live=False)
    assert "<dt>p*</dt><dd>—</dd>" in page and "<dt>q*</dt><dd>—</dd>" in page


def test_page_names_are_injective_and_links_reach_them(tmp_path):
    metrics = ["a/b", "a_b", "a%2Fb", "größe.µs", "..", "x-y", "x"]
    lines = []
    for n, metric in enumerate(metrics, start=1):
        lines.append(json.dumps(dict(record("2024-03-01T00:00:00Z", "2024-03-01T01:00:00Z", n),
                                     metric=metric)))
    (tmp_path / "estimates-00000-of-00001.jsonl").write_text("\n".join(lines) + "\n")
    assert len({metric_page_name(m) for m in metrics}) == len(metrics)
    assert all("/" not in metric_page_name(m) and not metric_page_name(m).startswith(".")
               for m in metrics)
    server, base = serve_in_thread(Dashboard(FolderSource(str(tmp_path))))
    try:
        _, index = get(base)
        for n, metric in enumerate(metrics, start=1):
            assert f'href="{metric_page_link(metric)}"'.encode() in index
            _, page = get(base + metric_page_link(metric))
            data = page.split(b'<script id="ldp-data" type="application/json">')[1]
            data = json.loads(data.split(b"</script>")[0])
            assert data["metric"] == metric and [w["n"] for w in unpacked(data)] == [n]
    finally:
        server.shutdown()
        server.server_close()
