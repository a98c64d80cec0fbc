"""Serve the dashboard on a local address, or export its pages as static files.

    GET /                                 the index of metrics
    GET /metric-<segment>.html            one metric's page (pages.metric_page_name, requested
                                          URL-quoted as pages.metric_page_link links to it)
    GET /static/dashboard.{js,css}        the page's script and style, from this package
    GET /api/windows?metric=M&since=C     {"cursor": C', "windows": [...]}: the windows of M
                                          whose latest pane or rejects changed after cursor C
    GET /api/window?metric=M&start=S&end=E&version=V  one window's latest pane, whole (S, E:
                                          ISO-8601; V: its configuration version, v1, combined)

A live page polls /api/windows with its cursor, so it receives only new panes. Responses carry a
Content-Security-Policy allowing only this server ('self'): a page can request nothing from any
other host. The server binds to 127.0.0.1 unless another host is given.
"""
from __future__ import annotations

import json
import os
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from urllib.parse import parse_qs, unquote, urlsplit

from ldp_telemetry.dashboard.pages import (DEFAULT_TOP_K, FULL_WINDOWS, PAGE_PREFIX,
                                           PAGE_SUFFIX, embedded_json, finite, index_page,
                                           metric_page, metric_page_name, metric_summary,
                                           page_windows)
from ldp_telemetry.ldp.times import ms_from_iso
from ldp_telemetry.ldp.errors import ConfigError

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8050
STATIC_FILES = {"dashboard.js": "text/javascript; charset=utf-8",
                "dashboard.css": "text/css; charset=utf-8"}
CONTENT_SECURITY_POLICY = ("default-src 'none'; script-src 'self'; style-src 'self'; "
                           "img-src 'self' data:; connect-src 'self'; base-uri 'none'; "
                           "form-action 'none'; frame-ancestors 'none'")
#: Longest metric name accepted in a request.
MAX_QUERY_CHARS = 4096


def static_file(name: str) -> bytes:
    return resources.files("ldp_telemetry.dashboard").joinpath("static", name).read_bytes()


class Dashboard:
    """The pages of one source (`source.StoreSource` or `source.FolderSource`)."""

    def __init__(self, source, top_k: int = DEFAULT_TOP_K, poll_ms: int = 2000):
        if top_k < 1:
            raise ConfigError(f"top must be at least 1, got {top_k}", "top")
        self.source = source
        self.top_k = top_k
        self.poll_ms = poll_ms

    def index(self, live: bool) -> str:
        summaries = []
        for metric in self.source.metrics():
            _, windows = self.source.windows(metric)
            if windows:
                summaries.append(metric_summary(metric, windows))
        return index_page(summaries, self.source.unattributed_rejects(),
                          self.source.description, live)

    def page(self, metric: str, live: bool) -> str:
        """A metric's page; a served (live) one embeds the whole record of its latest
        `FULL_WINDOWS` windows only (`pages.page_windows`), an exported one of every window."""
        cursor, windows = self.source.windows(metric)
        return metric_page(metric, page_windows(windows, self.top_k,
                                                FULL_WINDOWS if live else None),
                           cursor, self.source.description, live, self.top_k, self.poll_ms)

    def metric_of_page(self, name: str) -> str | None:
        """The metric whose page file is called `name` (already URL-unquoted), or None."""
        for metric in self.source.metrics():
            if metric_page_name(metric) == name:
                return metric
        return None

    def export(self, folder: str) -> list[str]:
        """Write index.html, one page per metric and static/ into `folder`; returns the paths."""
        os.makedirs(os.path.join(folder, "static"), exist_ok=True)
        written = []
        pages = {"index.html": self.index(live=False)}
        for metric in self.source.metrics():
            pages[metric_page_name(metric)] = self.page(metric, live=False)
        for name, text in pages.items():
            path = os.path.join(folder, name)
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(text)
            written.append(path)
        for name in STATIC_FILES:
            path = os.path.join(folder, "static", name)
            with open(path, "wb") as handle:
                handle.write(static_file(name))
            written.append(path)
        return written


def make_server(dashboard: Dashboard, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT
                ) -> ThreadingHTTPServer:
    """An HTTP server for `dashboard` bound to (host, port); port 0 picks a free one."""

    class Handler(BaseHTTPRequestHandler):
        server_version = "ldp-dashboard"

        def log_message(self, format, *args):  # noqa: A002 - the base class's name
            pass  # quiet: one line per poll would flood the terminal

        def do_GET(self):  # noqa: N802 - the base class's name
            url = urlsplit(self.path)
            path = url.path
            if path in ("/", "/index.html"):
                return self._send(dashboard.index(live=True).encode(), "text/html; charset=utf-8")
            if path.startswith("/static/") and path[len("/static/"):] in STATIC_FILES:
                name = path[len("/static/"):]
                return self._send(static_file(name), STATIC_FILES[name])
            if path == "/api/windows":
                return self._windows(parse_qs(url.query))
            if path == "/api/window":
                return self._window(parse_qs(url.query))
            if path.startswith("/" + PAGE_PREFIX) and path.endswith(PAGE_SUFFIX):
                metric = dashboard.metric_of_page(unquote(path[1:]))
                if metric is not None:
                    return self._send(dashboard.page(metric, live=True).encode(),
                                      "text/html; charset=utf-8")
            return self._send(b"not found\n", "text/plain; charset=utf-8", HTTPStatus.NOT_FOUND)

        def _windows(self, query: dict) -> None:
            metric = (query.get("metric") or [""])[0]
            try:
                since = int((query.get("since") or ["0"])[0])
            except ValueError:
                since = -1
            if not metric or len(metric) > MAX_QUERY_CHARS or since < 0:
                return self._send(b'{"error": "metric and a cursor since >= 0 are required"}',
                                  "application/json", HTTPStatus.BAD_REQUEST)
            cursor, windows = dashboard.source.windows(metric, since)
            body = json.dumps(finite({"cursor": cursor, "windows": windows}),
                              allow_nan=False).encode()
            self._send(body, "application/json")

        def _window(self, query: dict) -> None:
            metric = (query.get("metric") or [""])[0]
            try:
                start = ms_from_iso((query.get("start") or [""])[0])
                end = ms_from_iso((query.get("end") or [""])[0])
            except ValueError:
                start = end = None
            version = (query.get("version") or [""])[0]
            view = (None if not metric or len(metric) > MAX_QUERY_CHARS or start is None
                    or len(version) > MAX_QUERY_CHARS
                    else dashboard.source.window(metric, start, end, version))
            if view is None:
                return self._send(b'{"error": "no such window"}', "application/json",
                                  HTTPStatus.NOT_FOUND)
            self._send(json.dumps(finite(view), allow_nan=False).encode(), "application/json")

        def _send(self, body: bytes, content_type: str, status=HTTPStatus.OK) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Content-Security-Policy", CONTENT_SECURITY_POLICY)
            self.send_header("X-Content-Type-Options", "nosniff")
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    return server


def serve_in_thread(dashboard: Dashboard, host: str = DEFAULT_HOST, port: int = 0):
    """Start a server in a daemon thread; returns (server, its base URL).
    Stop it with server.shutdown()."""
    server = make_server(dashboard, host, port)
    thread = threading.Thread(target=server.serve_forever, name="ldp-dashboard", daemon=True)
    thread.start()
    bound_host, bound_port = server.server_address[:2]
    return server, f"http://{bound_host}:{bound_port}/"


__all__ = ["Dashboard", "make_server", "serve_in_thread", "embedded_json"]
