"""The dashboard server's limits against a hostile client or page (issue 29): the Host header,
idle sockets, concurrent connections, malformed parameters, and names that carry bidirectional
or other control characters."""
from __future__ import annotations

import http.client
import json
import socket
import threading
import time

import pytest

from ldp_telemetry.dashboard.pages import index_page, metric_page
from ldp_telemetry.dashboard.server import (Dashboard, allowed_hosts, host_name,
                                            serve_in_thread)
from ldp_telemetry.dashboard.source import StoreSource
from ldp_telemetry.output.estimate import EstimateRecord
from ldp_telemetry.output.names import printable
from ldp_telemetry.output.text import format_pane, format_top, metric_title
from ldp_telemetry.store import open_store

from tests.dashboard.test_dashboard_server import record, unpacked

RLO = "\u202e"  # RIGHT-TO-LEFT OVERRIDE


@pytest.fixture()
def served(tmp_path):
    """A store of two hourly windows of metric "m", served on a free port of 127.0.0.1 with a
    small connection bound and read timeout; yields (server, host, port)."""
    url = f"sqlite:///{tmp_path}/s.db"
    with open_store(url) as store:
        store.write_panes([record("2024-03-01T00:00:00Z", "2024-03-01T01:00:00Z", 10),
                           record("2024-03-01T01:00:00Z", "2024-03-01T02:00:00Z", 20)])
    source = StoreSource(url)
    server, _ = serve_in_thread(Dashboard(source), max_connections=4, read_timeout_s=1.0)
    try:
        yield server, *server.server_address[:2]
    finally:
        server.shutdown()
        server.server_close()
        source.close()


def request(port: int, path: str, host: str | None = None) -> tuple[int, bytes]:
    """GET `path` from 127.0.0.1:`port` with the Host header `host` (the address by default)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.putrequest("GET", path, skip_host=host is not None)
        if host is not None:
            connection.putheader("Host", host)
        connection.endheaders()
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


@pytest.mark.parametrize("host", ["evil.example", "evil.example:8050", "127.0.0.1.evil.example",
                                  "localhost.evil.example", "", "a b", "user@127.0.0.1"])
def test_a_request_naming_another_host_gets_421_and_no_data(served, host):
    _, _, port = served
    status, body = request(port, "/api/windows?metric=m&since=0", host)
    assert status == 421
    assert b"window" not in body and b"estimate" not in body
    assert request(port, "/", host)[0] == 421


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "LOCALHOST:{port}", "[::1]",
                                  "[::1]:{port}", "127.0.0.1:{port}"])
def test_the_local_names_and_the_bound_address_are_served(served, host):
    _, _, port = served
    status, body = request(port, "/api/windows?metric=m&since=0", host.format(port=port))
    assert status == 200
    assert [w["n"] for w in unpacked(json.loads(body))] == [10, 20]


def test_host_names_parse_strictly():
    assert host_name("Example.COM:80") == "example.com"
    assert host_name("[::1]:8050") == "[::1]"
    for bad in (None, "", "[::1", "[::1]x", "a:b", "a:x1", "a b", "a/b", "u@a", ":80"):
        assert host_name(bad) is None, bad
    names = allowed_hosts("0.0.0.0", "0.0.0.0", ("dash.lan", "::2"))
    assert {"dash.lan", "[::2]", "localhost", "127.0.0.1", "[::1]"} <= names
    assert "evil.example" not in names


@pytest.mark.parametrize("query", [
    "metric=m&since=99999999999999999999999999", "metric=m&since=-1", "metric=m&since=x",
    "metric=m&since=1e3", "metric=m&since=%C2%B2", "since=0", "metric=&since=0",
    "metric=m&metric=n&since=0", "metric=" + "m" * 5000 + "&since=0", "metric=m&since=0&&&=",
    "metric=m&since=9223372036854775808"])
def test_every_bad_parameter_of_the_windows_api_gets_400_json(served, query):
    _, _, port = served
    status, body = request(port, "/api/windows?" + query)
    assert status == 400
    assert "error" in json.loads(body)


@pytest.mark.parametrize("query", [
    "metric=m&start=x&end=2024-03-01T01:00:00Z", "metric=m&start=2024-03-01T00:00:00Z",
    "metric=m&start=99999-01-01T00:00:00Z&end=2024-03-01T01:00:00Z",
    "metric=m&start=2024-03-01T00:00:00Z&end=2024-03-01T01:00:00Z&version=" + "v" * 5000,
    "start=2024-03-01T00:00:00Z&end=2024-03-01T01:00:00Z"])
def test_every_bad_parameter_of_the_window_api_gets_400_json(served, query):
    _, _, port = served
    status, body = request(port, "/api/window?" + query)
    assert status == 400
    assert "error" in json.loads(body)


def test_a_missing_window_is_404_and_a_well_formed_one_200(served):
    _, _, port = served
    window = "&start=2024-03-01T00:00:00Z&end=2024-03-01T01:00:00Z"
    assert request(port, "/api/window?metric=m" + window)[0] == 200
    assert request(port, "/api/window?metric=zz" + window)[0] == 404
    assert request(port, "/api/windows?metric=m&since=9223372036854775807")[0] == 200


def test_idle_sockets_are_closed_and_cannot_pin_more_threads_than_the_bound(served):
    """40 idle sockets against a bound of 4: the server's threads stay at most 4 above where
    they were, the extra connections get 503 at once, and after the read timeout (1 s) the
    idle ones are closed and a request is served again."""
    server, _, port = served
    before = threading.active_count()
    idle = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(40)]
    try:
        deadline = time.monotonic() + 10
        while server.refused < 36 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.refused >= 36  # answered without a thread each
        assert threading.active_count() <= before + 4
        answers = []
        for sock in idle:
            sock.settimeout(10)
            answers.append(sock.recv(64))  # 503 at once, or '' when the timeout closes it
        assert sum(a.startswith(b"HTTP/1.0 503") for a in answers) >= 36
        assert all(a == b"" or a.startswith(b"HTTP/1.0 503") for a in answers)
    finally:
        for sock in idle:
            sock.close()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # the slots come back once the idle ones are closed
        if request(port, "/api/windows?metric=m&since=0")[0] == 200:
            break
        time.sleep(0.1)
    assert request(port, "/api/windows?metric=m&since=0")[0] == 200


def test_control_characters_in_names_are_escaped_on_the_page_and_in_the_terminal():
    name = f"cpu{RLO}lanigiro\u2066x\x1b[31m\u200fy"
    shown = printable(name)
    assert shown == "cpu\\u202elanigiro\\u2066x\\x1b[31m\\u200fy"
    assert printable("flight.dest été") == "flight.dest été"  # letters stay as they are
    assert printable("a\u0085b\u2028c\ud800") == "a\\x85b\\u2028c\\ud800"
    window = record("2024-03-01T00:00:00Z", "2024-03-01T01:00:00Z", 10)
    window["metric"] = name
    window["labels"] = [f"a{RLO}", "b"]
    window = EstimateRecord.from_json(window)
    for text in (metric_title(window), format_top(window), format_pane(window)):
        assert RLO not in text and "\x1b" not in text and "\u2066" not in text
        assert "cpu\\u202elanigiro" in text
    assert "a\\u202e" in format_top(window)
    summary = {"metric": name, "protocol": "grr", "epsilon": 1.0, "windows": 1,
               "latest_start_ms": 1_709_251_200_000, "latest_n": 10, "rejects": 0,
               "latest_timing": "ON_TIME"}
    pages = (index_page([summary], {(name, f"bad{RLO}"): 3}, "s", live=True),
             metric_page(name, {"fields": [], "rows": [], "series": [], "cursor": 0}, None,
                         "s", live=True))
    for page in pages:
        visible = page.split('<script id="ldp-data"')[0]  # the data keeps the name as it is
        assert RLO not in visible and "\x1b" not in visible
        assert "cpu\\u202elanigiro" in visible
