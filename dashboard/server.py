"""Serve the dashboard on a local address, or export its pages as static files.

    GET /                                 the index of metrics
    GET /metric-<segment>.html            one metric's page (pages.metric_page_name, requested
                                          URL-quoted as pages.metric_page_link links to it)
    GET /static/<name>                    the page's script and style and the vendored uPlot
                                          (STATIC_FILES), from this package
    GET /api/windows?metric=M&since=C[&from=T&to=T&limit=L]
                                          the windows of M whose latest pane changed after
                                          cursor C (starting in [from, to), the latest L), as
                                          `payload.pack` rows: what the charts draw, no values
    GET /api/window?metric=M&start=S&end=E&version=V  one window's latest pane, whole (S, E:
                                          ISO-8601; V: its configuration version, v1, combined)

A live page polls /api/windows with its cursor, so it receives only new panes. Responses carry a
Content-Security-Policy allowing only this server ('self'): a page can request nothing from any
other host. The server binds to 127.0.0.1 unless another host is given.

Limits (docs/hostile-input.md): a request whose Host header names anything but the bound
address, localhost, 127.0.0.1, [::1], `--host` or an `--allow-host` name gets 421 (a web page
the operator visits cannot rebind its own name to this server and read it); a connection that
sends nothing for `READ_TIMEOUT_S` is closed; at most `MAX_CONNECTIONS` are served at once
(one more gets 503 and is closed); every malformed parameter gets a 400 with a JSON error.
"""
from __future__ import annotations

import gzip
import json
import os
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from urllib.parse import parse_qs, quote, unquote, urlsplit

from ldp_telemetry.dashboard.pages import (DEFAULT_TOP_K, EXPORT_ALL_VALUES, PAGE_PREFIX,
                                           PAGE_SUFFIX, export_chunks,
                                           embedded_json, export_window_file, finite,
                                           index_page, metric_page, metric_page_name,
                                           window_file_name)
from ldp_telemetry.dashboard.payload import last_bounds, shown_view
from ldp_telemetry.dashboard.source import MAX_WINDOWS_PER_PAGE
from ldp_telemetry.ldp.base.errors import ConfigError
from ldp_telemetry.ldp.base.times import ms_from_iso
from ldp_telemetry.output.layout import window_key
from ldp_telemetry.store.reads import MAX_TOP_VALUES

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8050
STATIC_FILES = {"dashboard.js": "text/javascript; charset=utf-8",
                "dashboard.css": "text/css; charset=utf-8",
                # the vendored chart library, its style and licence (docs/architecture.md)
                "uPlot.iife.min.js": "text/javascript; charset=utf-8",
                "uPlot.min.css": "text/css; charset=utf-8",
                "uPlot.LICENSE": "text/plain; charset=utf-8"}
CONTENT_SECURITY_POLICY = ("default-src 'none'; script-src 'self'; style-src 'self'; "
                           "img-src 'self' data:; connect-src 'self'; base-uri 'none'; "
                           "form-action 'none'; frame-ancestors 'none'")
#: Longest metric name accepted in a request.
MAX_QUERY_CHARS = 4096
#: Seconds a connection may stay silent (sending its request line or headers) before it is closed.
READ_TIMEOUT_S = 10.0
#: Connections served at once; one more is answered 503 and closed at once (no thread for it).
MAX_CONNECTIONS = 32
#: Largest cursor (`since`) accepted: a store's sequence numbers are signed 64-bit integers.
MAX_CURSOR = 2**63 - 1
#: Responses longer than this many bytes are gzip-compressed for a client that accepts it, at
#: this level (a page's rows and a window's values shrink about 3 to 4 times; level 1 costs a
#: quarter of level 6's time for a few percent more bytes).
GZIP_ABOVE, GZIP_LEVEL = 1024, 1
#: Host names always accepted in the Host header (a port after them is ignored).
LOCAL_NAMES = ("localhost", "127.0.0.1", "[::1]")


class BadRequest(ValueError):
    """A request parameter that is malformed: answered 400 with its message as JSON."""


def allowed_hosts(bound: str, host: str, extra: tuple[str, ...] = ()) -> frozenset[str]:
    """The names a request's Host header may carry (lower case, without a port): the bound
    address, the `--host` given, the local names and any `extra` (`--allow-host`)."""
    names = {*LOCAL_NAMES, host, bound, *extra}
    return frozenset(f"[{name}]" if ":" in name and not name.startswith("[") else name.lower()
                     for name in names if name)


def host_name(header: str | None) -> str | None:
    """The name in a Host header without its port (`[::1]:8050` -> `[::1]`), lower case; None
    for a missing or malformed header."""
    if not header or any(char.isspace() for char in header) or "/" in header or "@" in header:
        return None
    header = header.lower()
    if header.startswith("["):
        end = header.find("]")
        if end < 0 or (header[end + 1:] and not _port(header[end + 1:])):
            return None
        return header[:end + 1]
    name, _, port = header.partition(":")
    if port and not _port(":" + port) or not name:
        return None
    return name


def _port(text: str) -> bool:
    return text.startswith(":") and text[1:].isdigit() and len(text) <= 6


def cursor_param(query: dict) -> int:
    """The `since` cursor of a request: a decimal integer in [0, MAX_CURSOR]; BadRequest
    otherwise."""
    text = _one(query, "since", "0")
    if not text.isdigit() or not text.isascii() or len(text) > len(str(MAX_CURSOR)) \
            or int(text) > MAX_CURSOR:
        raise BadRequest(f"since must be an integer cursor from 0 to {MAX_CURSOR}")
    return int(text)


def metric_param(query: dict) -> str:
    metric = _one(query, "metric", "")
    if not metric or len(metric) > MAX_QUERY_CHARS:
        raise BadRequest(f"metric is required, at most {MAX_QUERY_CHARS} characters")
    return metric


def _one(query: dict, name: str, default: str) -> str:
    values = query.get(name)
    if values is None:
        return default
    if len(values) != 1:
        raise BadRequest(f"{name} must be given once")
    return values[0]


def static_file(name: str) -> bytes:
    return resources.files("ldp_telemetry.dashboard").joinpath("static", name).read_bytes()


class Dashboard:
    """The pages of one source (`source.StoreSource` or `source.FolderSource`)."""

    def __init__(self, source, top_k: int = DEFAULT_TOP_K, poll_ms: int = 2000):
        if top_k < 1 or top_k > MAX_TOP_VALUES:
            raise ConfigError(f"top must be from 1 to {MAX_TOP_VALUES}, got {top_k}", "top")
        self.source = source
        self.top_k = top_k
        self.poll_ms = poll_ms

    def index(self, live: bool) -> str:
        return index_page(self.source.summaries(), self.source.unattributed_rejects(),
                          self.source.description, live)

    def page(self, metric: str, live: bool, window_files: dict | None = None) -> str:
        """A metric's page: its header from the latest window's record, and the rows of its
        latest `MAX_WINDOWS_PER_PAGE` windows (`payload.pack`); a window's values are fetched
        when it is chosen (from /api/window, or an exported page's `window_files`)."""
        data = self.source.payload(metric, self.top_k)
        bounds = last_bounds(data)
        latest = None if bounds is None else self.source.header(metric, *bounds)
        return metric_page(metric, data, latest, self.source.description, live, self.top_k,
                           self.poll_ms, window_files)

    def metric_of_page(self, name: str) -> str | None:
        """The metric whose page file is called `name` (already URL-unquoted), or None."""
        for metric in self.source.metrics():
            if metric_page_name(metric) == name:
                return metric
        return None

    def export(self, folder: str) -> list[str]:
        """Write index.html, one page per metric, its windows' data files
        (`windows/<page name>/<first window's start ms>.js`, each holding the views of up to
        `EXPORT_CHUNK` consecutive windows: `export_window_file`) and static/ into `folder`;
        returns the paths."""
        os.makedirs(os.path.join(folder, "static"), exist_ok=True)
        written = [_write(os.path.join(folder, "index.html"), self.index(live=False))]
        for metric in self.source.metrics():
            name = metric_page_name(metric)
            data_dir = os.path.join("windows", name[:-len(PAGE_SUFFIX)])
            os.makedirs(os.path.join(folder, data_dir), exist_ok=True)
            chunks = export_chunks([shown_view(view) for view in self.source.export_windows(
                metric, self.top_k, EXPORT_ALL_VALUES)])
            files = []
            for chunk in chunks:
                first = window_key(chunk[0]).start_ms
                files.append([first, window_file_name(first)])
                written.append(_write(os.path.join(folder, data_dir, files[-1][1]),
                                      export_window_file(chunk)))
            prefix = quote(data_dir.replace(os.sep, "/")) + "/"
            written.append(_write(os.path.join(folder, name), self.page(
                metric, live=False, window_files={"prefix": prefix, "files": files})))
        for name in STATIC_FILES:
            path = os.path.join(folder, "static", name)
            with open(path, "wb") as handle:
                handle.write(static_file(name))
            written.append(path)
        return written


def _write(path: str, text: str) -> str:
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)
    return path


class BoundedServer(ThreadingHTTPServer):
    """A threading HTTP server that serves at most `max_connections` connections at once: one
    more is answered 503 in the accepting thread and closed, so idle sockets cannot pin an
    unbounded number of threads."""

    daemon_threads = True
    block_on_close = False
    request_queue_size = 128  # connections the kernel holds before one is accepted

    def __init__(self, address, handler, max_connections: int = MAX_CONNECTIONS):
        self.slots = threading.BoundedSemaphore(max_connections)
        self.max_connections = max_connections
        self.refused = 0  # connections answered 503
        super().__init__(address, handler)

    def process_request(self, request, client_address):
        if not self.slots.acquire(blocking=False):
            self.refused += 1
            try:
                request.settimeout(1.0)
                request.sendall(b"HTTP/1.0 503 Service Unavailable\r\nContent-Type: "
                                b"application/json\r\nContent-Length: 32\r\nConnection: close"
                                b"\r\n\r\n" + b'{"error": "too many connections"}')
            except OSError:
                pass  # the client went away: nothing to answer
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.slots.release()
            raise

    def process_request_thread(self, request, client_address):
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()


def make_server(dashboard: Dashboard, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT,
                allow_hosts: tuple[str, ...] = (), max_connections: int = MAX_CONNECTIONS,
                read_timeout_s: float = READ_TIMEOUT_S) -> BoundedServer:
    """An HTTP server for `dashboard` bound to (host, port); port 0 picks a free one. Requests
    must name it in their Host header (`allowed_hosts`, plus `allow_hosts`)."""

    class Handler(BaseHTTPRequestHandler):
        server_version = "ldp-dashboard"
        timeout = read_timeout_s  # StreamRequestHandler sets it on the socket

        def log_message(self, format, *args):  # noqa: A002 - the base class's name
            pass  # quiet: one line per poll would flood the terminal

        def do_GET(self):  # noqa: N802 - the base class's name
            if host_name(self.headers.get("Host")) not in names:
                return self._send(b'{"error": "this server answers only to its own address '
                                  b'(Host header)"}', "application/json",
                                  HTTPStatus.MISDIRECTED_REQUEST)
            try:
                self._get()
            except BadRequest as error:
                self._send(json.dumps({"error": str(error)}).encode(), "application/json",
                           HTTPStatus.BAD_REQUEST)

        def _get(self) -> None:
            url = urlsplit(self.path)
            path = url.path
            if path in ("/", "/index.html"):
                return self._send(dashboard.index(live=True).encode(), "text/html; charset=utf-8")
            if path.startswith("/static/") and path[len("/static/"):] in STATIC_FILES:
                name = path[len("/static/"):]
                return self._send(static_file(name), STATIC_FILES[name])
            if path == "/api/windows":
                return self._windows(_query(url.query))
            if path == "/api/window":
                return self._window(_query(url.query))
            if path.startswith("/" + PAGE_PREFIX) and path.endswith(PAGE_SUFFIX):
                metric = dashboard.metric_of_page(unquote(path[1:]))
                if metric is not None:
                    return self._send(dashboard.page(metric, live=True).encode(),
                                      "text/html; charset=utf-8")
            return self._send(b"not found\n", "text/plain; charset=utf-8", HTTPStatus.NOT_FOUND)

        def _windows(self, query: dict) -> None:
            metric, since = metric_param(query), cursor_param(query)
            low = time_param(query, "from") if "from" in query else -(2**62)
            high = time_param(query, "to") if "to" in query else 2**62
            limit = int_param(query, "limit", MAX_WINDOWS_PER_PAGE, 1, MAX_WINDOWS_PER_PAGE)
            order = _one(query, "order", "newest")
            if order not in ("newest", "oldest"):
                raise BadRequest("order must be newest or oldest")
            data = dashboard.source.payload(metric, dashboard.top_k, since, low, high, limit,
                                            oldest=order == "oldest")
            # rows hold no NaN (`payload.rounded`, `payload.scaled`); allow_nan=False would say
            # if one did
            self._send(json.dumps(data, allow_nan=False, separators=(",", ":")).encode(),
                       "application/json")

        def _window(self, query: dict) -> None:
            metric = metric_param(query)
            start, end = time_param(query, "start"), time_param(query, "end")
            version = _one(query, "version", "")
            if len(version) > MAX_QUERY_CHARS:
                raise BadRequest(f"version must be at most {MAX_QUERY_CHARS} characters")
            view = dashboard.source.window(metric, start, end, version)
            if view is None:
                return self._send(b'{"error": "no such window"}', "application/json",
                                  HTTPStatus.NOT_FOUND)
            self._send(json.dumps(finite(shown_view(view)), allow_nan=False).encode(),
                       "application/json")

        def _send(self, body: bytes, content_type: str, status=HTTPStatus.OK) -> None:
            self.send_response(status)
            if len(body) > GZIP_ABOVE and "gzip" in self.headers.get("Accept-Encoding", ""):
                body = gzip.compress(body, compresslevel=GZIP_LEVEL, mtime=0)
                self.send_header("Content-Encoding", "gzip")
            self.send_header("Vary", "Accept-Encoding")
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Content-Security-Policy", CONTENT_SECURITY_POLICY)
            self.send_header("X-Content-Type-Options", "nosniff")
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)

    server = BoundedServer((host, port), Handler, max_connections)
    names = allowed_hosts(server.server_address[0], host, allow_hosts)
    return server


def time_param(query: dict, name: str) -> int:
    """A window bound of a request: ISO-8601 UTC, as the pages send it; BadRequest otherwise."""
    text = _one(query, name, "")
    try:
        if len(text) > 64:
            raise ValueError(text)
        return ms_from_iso(text)
    except (ValueError, OverflowError):
        raise BadRequest(f"{name} must be an ISO-8601 time such as "
                         f"2024-03-01T00:00:00Z") from None


def int_param(query: dict, name: str, default: int, low: int, high: int) -> int:
    """An integer parameter in [low, high]; BadRequest otherwise."""
    text = _one(query, name, str(default))
    if not (text.isascii() and text.isdigit()) or len(text) > 19 or not low <= int(text) <= high:
        raise BadRequest(f"{name} must be an integer from {low} to {high}")
    return int(text)


def _query(text: str) -> dict:
    """The parameters of a query string; BadRequest for one that is not well formed."""
    try:
        return parse_qs(text, strict_parsing=bool(text), max_num_fields=16)
    except ValueError as error:
        raise BadRequest(f"malformed query string: {error}") from None


def serve_in_thread(dashboard: Dashboard, host: str = DEFAULT_HOST, port: int = 0, **limits):
    """Start a server in a daemon thread; returns (server, its base URL); `limits` as
    `make_server`. Stop it with server.shutdown()."""
    server = make_server(dashboard, host, port, **limits)
    thread = threading.Thread(target=server.serve_forever, name="ldp-dashboard", daemon=True)
    thread.start()
    bound_host, bound_port = server.server_address[:2]
    return server, f"http://{bound_host}:{bound_port}/"


__all__ = ["Dashboard", "make_server", "serve_in_thread", "embedded_json"]
