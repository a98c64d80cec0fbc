"""Measure the dashboard at operating size: a store of M metrics × W hourly windows × D labels
(SQLite, and PostgreSQL when a server can be started here) served over HTTP, each endpoint asked
R times; p50 and p95 per endpoint, the bytes a metric page loads, and `--export`.

    python benchmarks/dashboard.py [--metrics 10] [--windows 1000] [--labels 500]
                                   [--requests 40] [--stores sqlite,postgresql] [--browser]
                                   [--strings] [--name dashboard] [--json PATH]

With `--strings` every metric is a string metric (PEM): each window holds its own `--labels`
heavy hitters, the largest noisy estimates over a vocabulary of `STRING_VOCABULARY` words whose
Zipf ranking shifts by one word a day, so the strings of a series change over time and the
chart over windows is keyed by label (docs/cli.md#ldp-dashboard).

Endpoints: the index; a metric page (its HTML); the page's script; `/api/windows` with cursor 0
(every window's chart row) and with the newest cursor (a live page's poll); a week of windows by
time range; the page of windows before the latest page (what "earlier windows" loads; one window
when all fit in a page); one window by its key (what choosing a window fetches). The server is
warmed by one request per metric page first (the series' top-k sums are computed once per metric
and kept). Requests go one at a time from this process over real sockets. The goals: p95 ≤ 200 ms
for every request; the charts of a metric page drawn ≤ 1 s after navigation in headless Chromium
(`--browser`; the chart over windows alone is timed too); a page ≤ 300 KB with its scripts (the
vendored uPlot's included), styles and the chosen window (uncompressed; the server gzips what it
sends to a browser, and both are reported); export ≤ 10 s. Asserts nothing. PostgreSQL is the test
suite's throw-away server (tests/store/postgres_server.py).
"""
from __future__ import annotations

import argparse
import gzip
import importlib.util
import os
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlencode

import numpy as np
from bench_json import Run, add_json_argument

from ldp_telemetry.dashboard.pages import metric_page_link
from ldp_telemetry.dashboard.server import Dashboard, serve_in_thread
from ldp_telemetry.dashboard.source import StoreSource
from ldp_telemetry.ldp.base.times import iso_from_ms
from ldp_telemetry.ldp.estimation.heavy_hitters import HEAVY_HITTER_BAND_REASON
from ldp_telemetry.ldp.estimation.uncertainty import BAND_NONE
from ldp_telemetry.ldp.protocols.noise import smallest_resolvable
from ldp_telemetry.store import open_store

POSTGRES_SERVER = Path(__file__).resolve().parents[1] / "tests" / "store" / "postgres_server.py"
BROWSER = Path(__file__).resolve().parents[1] / "tests" / "dashboard" / "browser.py"
T0_MS = 1_709_251_200_000
HOUR_MS = 3_600_000
#: Goals of issue 30: every request's p95, a page's bytes, an export's seconds.
GOAL_P95_MS, GOAL_PAGE_KB, GOAL_EXPORT_S, GOAL_PAINT_MS = 200.0, 300.0, 10.0, 1000.0


#: Words a string metric's heavy hitters are drawn from (`--strings`).
STRING_VOCABULARY = 5000


def string_window(metric: str, k: int, heavy: int, rng) -> dict:
    """The k-th hourly window of a string metric: its `heavy` largest noisy estimates over
    STRING_VOCABULARY words (Zipf 1.1 over a ranking that shifts by a word a day), best first,
    as a PEM job writes them (no band: output.records.string_estimate_record)."""
    ranks = (np.arange(STRING_VOCABULARY) + k // 24) % STRING_VOCABULARY
    truth = 1.0 / (ranks + 1.0) ** 1.1
    truth /= truth.sum()
    n = int(rng.integers(80_000, 120_000))
    error = np.sqrt(truth * (1 - truth) / n + 4e-7)
    estimate = truth + rng.normal(0, error)
    best = np.argsort(-estimate, kind="stable")[:heavy]
    start = T0_MS + k * HOUR_MS
    return {"metric": metric, "window_start": iso_from_ms(start),
            "window_end": iso_from_ms(start + HOUR_MS), "n": n, "protocol": "pem",
            "epsilon": 4.0, "p_star": None, "q_star": None, "smallest_resolvable": None,
            "estimator": {"method": "heavy-hitters",
                          "params": {"top": heavy, "threshold": 0.0, "width": 0}},
            "postprocess": {"method": "none", "params": {}},
            "labels": [f"word-{i:05d}" for i in best.tolist()],
            "estimate": estimate[best].tolist(), "unbiased_estimate": estimate[best].tolist(),
            "std_error": error[best].tolist(), "band_method": BAND_NONE,
            "band_reasons": {"estimate": HEAVY_HITTER_BAND_REASON},
            "heavy_hitters": {"top": heavy, "threshold": 0.0, "width": 2 * heavy,
                              "level_reports": [n // 16] * 16, "reason": None},
            "pane": {"timing": "ON_TIME", "index": 0, "is_last": True}}


def build(url: str, metrics: int, windows: int, labels: int, seed: int = 30,
          strings: bool = False) -> float:
    """Write the store: per metric, `windows` hourly windows of an OUE metric over `labels`
    Zipf-like values with noise (`strings`: of a string metric with `labels` heavy hitters per
    window, `string_window`); returns the seconds taken."""
    rng = np.random.default_rng(seed)
    base = 1.0 / np.arange(1, labels + 1) ** 1.1
    names = [f"v{i:04d}" for i in range(labels)]
    p_star, q_star = 0.5, 0.1192
    started = time.perf_counter()
    with open_store(url) as store:
        for m in range(metrics):
            batch = []
            for k in range(windows):
                if strings:
                    batch.append(string_window(f"bench.m{m:02d}", k, labels, rng))
                    if len(batch) == 100:
                        store.write_panes(batch)
                        batch = []
                    continue
                truth = base / base.sum()
                n = int(rng.integers(80_000, 120_000))
                error = np.full(labels, np.sqrt(q_star * (1 - q_star) / n) / (p_star - q_star))
                estimate = np.clip(truth + rng.normal(0, error), 0, None)
                start = T0_MS + k * HOUR_MS
                batch.append({
                    "metric": f"bench.m{m:02d}", "window_start": iso_from_ms(start),
                    "window_end": iso_from_ms(start + HOUR_MS), "n": n, "protocol": "oue",
                    "epsilon": 2.0, "p_star": p_star, "q_star": q_star,
                    "smallest_resolvable": smallest_resolvable(p_star, q_star, n),
                    "estimator": {"method": "unbiased", "params": {}},
                    "postprocess": {"method": "norm-sub", "params": {}}, "labels": names,
                    "estimate": estimate.tolist(), "unbiased_estimate": estimate.tolist(),
                    "std_error": error.tolist(),
                    "pane": {"timing": "ON_TIME", "index": 0, "is_last": True}})
                if len(batch) == 100:
                    store.write_panes(batch)
                    batch = []
            if batch:
                store.write_panes(batch)
    return time.perf_counter() - started


def fetch(url: str) -> tuple[float, int, int]:
    """(seconds, bytes sent, bytes of the content) of one GET from a client that accepts gzip,
    as a browser does."""
    started = time.perf_counter()
    request = urllib.request.Request(url, headers={"Accept-Encoding": "gzip"})
    with urllib.request.urlopen(request, timeout=120) as response:
        body = response.read()
        if response.headers.get("Content-Encoding") == "gzip":
            sent, body = len(body), gzip.decompress(body)
        else:
            sent = len(body)
    return time.perf_counter() - started, sent, len(body)


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q))


def measure(url: str, name: str, args) -> dict:
    source = StoreSource(url)
    if args.page_windows:  # a page embeds more windows than MAX_WINDOWS_PER_PAGE: charts timed
        payload = source.payload

        def wider(metric, top_k, since=0, start_ms=-(2**62), end_ms=2**62, limit=None,
                  oldest=False):
            return payload(metric, top_k, since, start_ms, end_ms, limit or args.page_windows,
                           oldest)
        source.payload = wider
    if args.script:  # serve another version of the page's script (to time it)
        from ldp_telemetry.dashboard import server as served
        package_file = served.static_file
        with open(args.script, "rb") as handle:
            script = handle.read()
        served.static_file = lambda name: script if name == "dashboard.js" else package_file(name)
    server, base = serve_in_thread(Dashboard(source, top_k=args.top_k))
    rng = np.random.default_rng(7)
    metrics = [f"bench.m{m:02d}" for m in range(args.metrics)]
    try:
        for metric in metrics:  # warm: each metric's series once, as a running server has them
            fetch(base + metric_page_link(metric))
        cursor = source.payload(metrics[0], 5, limit=1)["cursor"]

        def page(k):
            return base + metric_page_link(metrics[k % len(metrics)])

        def window(k):
            at = T0_MS + int(rng.integers(0, args.windows)) * HOUR_MS
            return base + "api/window?" + urlencode({
                "metric": metrics[k % len(metrics)], "start": iso_from_ms(at),
                "end": iso_from_ms(at + HOUR_MS), "version": ""})

        def week(k):
            at = T0_MS + int(rng.integers(0, max(1, args.windows - 168))) * HOUR_MS
            return base + "api/windows?" + urlencode({
                "metric": metrics[k % len(metrics)], "since": 0, "from": iso_from_ms(at),
                "to": iso_from_ms(at + 168 * HOUR_MS)})
        endpoints = {
            "index": lambda k: base,
            "metric page": page,
            "static/dashboard.js": lambda k: base + "static/dashboard.js",
            "api/windows since 0": lambda k: base + "api/windows?" + urlencode(
                {"metric": metrics[k % len(metrics)], "since": 0}),
            "api/windows poll": lambda k: base + "api/windows?" + urlencode(
                {"metric": metrics[k % len(metrics)], "since": cursor}),
            "api/windows one week": week,
            "api/windows earlier page": lambda k: base + "api/windows?" + urlencode({
                "metric": metrics[k % len(metrics)], "since": 0,
                "to": iso_from_ms(T0_MS + max(1, args.windows - 2000) * HOUR_MS)}),
            "api/window": window,
        }
        rows = []
        for endpoint, make in endpoints.items():
            times, sent, sizes = [], [], []
            for k in range(args.requests):
                seconds, compressed, size = fetch(make(k))
                times.append(seconds * 1000)
                sent.append(compressed)
                sizes.append(size)
            rows.append({"endpoint": endpoint, "p50_ms": percentile(times, 50),
                         "p95_ms": percentile(times, 95), "max_ms": max(times),
                         "bytes": int(statistics.median(sizes)),
                         "bytes_sent": int(statistics.median(sent))})
            print(f"{name:<11} {endpoint:<22} p50 {rows[-1]['p50_ms']:7.1f} ms  p95 "
                  f"{rows[-1]['p95_ms']:7.1f} ms  {rows[-1]['bytes'] / 1024:8.1f} KB "
                  f"({rows[-1]['bytes_sent'] / 1024:.1f} KB sent)")
        loads = ("metric page", "static/dashboard.js", "api/window")
        # the style, and the vendored chart library (its script and style)
        css_sent = css = 0
        for static in ("dashboard.css", "uPlot.iife.min.js", "uPlot.min.css"):
            _, sent_bytes, size = fetch(base + "static/" + static)
            css_sent, css = css_sent + sent_bytes, css + size
        page_kb = (sum(row["bytes"] for row in rows if row["endpoint"] in loads) + css) / 1024
        page_sent_kb = (sum(row["bytes_sent"] for row in rows if row["endpoint"] in loads)
                        + css_sent) / 1024
        print(f"{name:<11} a metric page loads {page_kb:.0f} KB ({page_sent_kb:.0f} KB sent "
              f"gzip-compressed): HTML, scripts (with uPlot), styles and the chosen window's "
              f"values")
        paint = first_paint(base, metrics) if args.browser else None
        with tempfile.TemporaryDirectory() as folder:
            started = time.perf_counter()
            written = Dashboard(source, top_k=args.top_k).export(folder)
            export_s = time.perf_counter() - started
            export_mb = sum(os.path.getsize(path) for path in written) / 1e6
        print(f"{name:<11} export: {export_s:.1f} s, {len(written):,} files, {export_mb:.1f} MB")
    finally:
        server.shutdown()
        server.server_close()
        source.close()
    worst = max(row["p95_ms"] for row in rows)
    return {"store": name, "metrics": args.metrics, "windows": args.windows,
            "labels": args.labels, "strings": args.strings, "endpoints": rows, "page_kb": page_kb,
            "page_sent_kb": page_sent_kb,
            "export_s": export_s, "export_mb": export_mb, "export_files": len(written),
            "worst_p95_ms": worst, "first_paint": paint,
            "goals_met": worst <= GOAL_P95_MS and page_kb <= GOAL_PAGE_KB
            and export_s <= GOAL_EXPORT_S
            and (paint is None or paint["drawn_p95_ms"] <= GOAL_PAINT_MS)}


def first_paint(base: str, metrics: list[str], loads: int = 10) -> dict | None:
    """Headless Chromium (tests/dashboard/browser.py) loading metric pages: the first
    contentful paint, and when the charts are drawn (the page's first render), in ms from
    navigation; p50 and p95 over `loads` loads. None when no browser can be started."""
    spec = importlib.util.spec_from_file_location("browser", BROWSER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    try:
        browser = module.open_browser()
    except module.Unavailable as reason:
        print(f"first paint not measured: {reason}")
        return None
    painted, drawn, chart = [], [], []
    try:
        browser.driver.set_window_size(1280, 1000)
        for k in range(loads):
            browser.get(base + metric_page_link(metrics[k % len(metrics)]))
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                found = browser.driver.execute_script(
                    "const p = performance.getEntriesByName('first-contentful-paint')[0];"
                    "const r = document.body.getAttribute('data-drawn-ms');"
                    "const c = document.body.getAttribute('data-topk-ms');"
                    "return p && r ? [p.startTime, Number(r), Number(c)] : null;")
                if found:
                    break
                time.sleep(0.05)
            painted.append(found[0])
            drawn.append(found[1])
            chart.append(found[2])
    finally:
        browser.quit()
    row = {"paint_p50_ms": percentile(painted, 50), "paint_p95_ms": percentile(painted, 95),
           "drawn_p50_ms": percentile(drawn, 50), "drawn_p95_ms": percentile(drawn, 95),
           "chart_p50_ms": percentile(chart, 50), "chart_p95_ms": percentile(chart, 95)}
    print(f"            first paint p50 {row['paint_p50_ms']:.0f} ms, charts drawn p50 "
          f"{row['drawn_p50_ms']:.0f} ms, p95 {row['drawn_p95_ms']:.0f} ms; the chart over "
          f"windows alone p50 {row['chart_p50_ms']:.0f} ms, p95 {row['chart_p95_ms']:.0f} ms "
          f"(headless Chromium)")
    return row


def postgres_server():
    """The test suite's throw-away PostgreSQL server module, loaded by its file path."""
    spec = importlib.util.spec_from_file_location("postgres_server", POSTGRES_SERVER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_stores(args) -> dict:
    results, not_measured = [], {}
    wanted = args.stores.split(",")
    if "sqlite" in wanted:
        with tempfile.TemporaryDirectory() as folder:
            url = f"sqlite:///{folder}/bench.db"
            seconds = build(url, args.metrics, args.windows, args.labels,
                            strings=args.strings)
            print(f"SQLite      built in {seconds:.0f} s "
                  f"({os.path.getsize(folder + '/bench.db') / 1e6:.0f} MB)")
            results.append(measure(url, "SQLite", args))
    if "postgresql" in wanted:
        server = postgres_server()
        try:
            base, stop = server.start_server()
        except server.Unavailable as reason:
            print(f"PostgreSQL  not measured: {reason}")
            not_measured["PostgreSQL"] = str(reason)
        else:
            try:
                import psycopg
                with psycopg.connect(base, autocommit=True) as admin:
                    admin.execute("CREATE DATABASE bench_dashboard")
                url = base.replace("/postgres?", "/bench_dashboard?")
                seconds = build(url, args.metrics, args.windows, args.labels,
                                strings=args.strings)
                with psycopg.connect(url, autocommit=True) as connection:
                    connection.execute("VACUUM ANALYZE")  # as autovacuum would, in time
                print(f"PostgreSQL  built in {seconds:.0f} s")
                results.append(measure(url, "PostgreSQL", args))
            finally:
                stop()
    return {"runs": results, "not_measured": not_measured}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--metrics", type=int, default=10)
    parser.add_argument("--windows", type=int, default=1000)
    parser.add_argument("--labels", type=int, default=500)
    parser.add_argument("--requests", type=int, default=40)
    parser.add_argument("--page-windows", type=int, default=0,
                        help="windows a metric page embeds (default: the dashboard's "
                             "MAX_WINDOWS_PER_PAGE), to time the charts at more windows")
    parser.add_argument("--script", default=None,
                        help="serve this file as static/dashboard.js (to time another version "
                             "of the page's script)")
    parser.add_argument("--top-k", type=int, default=5,
                        help="values drawn over windows per metric page (the series count)")
    parser.add_argument("--stores", default="sqlite,postgresql")
    parser.add_argument("--strings", action="store_true",
                        help="string metrics: --labels heavy hitters per window, changing over "
                             "time (the chart over windows keyed by label)")
    parser.add_argument("--name", default="dashboard",
                        help="the results' name (benchmarks/report.py has a section per name: "
                             "dashboard, dashboard_long for 10⁴ windows, dashboard_strings)")
    parser.add_argument("--browser", action="store_true",
                        help="also time first paint and the charts' first drawing in headless "
                             "Chromium")
    add_json_argument(parser)
    args = parser.parse_args()
    with Run(args.name, args.json, vars(args)) as run:
        run.save(run_stores(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
