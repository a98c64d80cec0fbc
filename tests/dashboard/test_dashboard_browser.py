"""The dashboard in headless Chromium, on a job run over the bundled demo data: no request leaves
the server, no console error, the page's numbers are the job's, a new pane appears without a
reload, and names from the data render as text. Screenshots go to test-artifacts/dashboard/."""
from __future__ import annotations

import itertools
import json
import shutil
import time

import pytest

from ldp_telemetry.dashboard.pages import metric_page_link, metric_page_name
from ldp_telemetry.dashboard.server import Dashboard, serve_in_thread
from ldp_telemetry.dashboard.source import FolderSource, StoreSource
from ldp_telemetry.ldp.protocols import make_protocol
from ldp_telemetry.ldp.protocols.noise import smallest_resolvable
from ldp_telemetry.output.bands import value_bands
from ldp_telemetry.output.coverage import RunInputs
from ldp_telemetry.output.text import CONSERVATIVE_NOTE
from ldp_telemetry.store import open_store

#: How long a page may take to show a pane written while it is open (it polls every 0.3 s).
LIVE_TIMEOUT_S = 10


def wait_for(browser, script: str, timeout: float = 15.0):
    """Poll a JavaScript expression until it is truthy; returns its value."""
    deadline = time.monotonic() + timeout
    while True:
        value = browser.driver.execute_script(f"return ({script});")
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.1)


def wait_loaded(browser, timeout: float = 30.0) -> int:
    """Wait until the chosen window's values (fetched when it is chosen) fill the values table;
    returns its rows."""
    return wait_for(browser, "document.querySelectorAll('#values-table tbody tr').length",
                    timeout)


@pytest.fixture(autouse=True)
def blank_page(request):
    """Each test starts on about:blank with empty logs (a previous page's last polls of its
    stopped server are not this test's errors)."""
    if "browser" in request.fixturenames:
        browser = request.getfixturevalue("browser")
        browser.get("about:blank")
        browser.requests(), browser.console_errors()
    yield
    if "browser" in request.fixturenames:
        request.getfixturevalue("browser").get("about:blank")


@pytest.fixture
def served(demo_run):
    servers = []

    def serve(source, poll_ms=300):
        server, url = serve_in_thread(Dashboard(source, top_k=5, poll_ms=poll_ms))
        servers.append((server, source))
        return url
    yield serve
    for server, source in servers:
        server.shutdown()
        server.server_close()
        source.close()


def open_record_page(browser, served, path, record: dict) -> None:
    """Write one window-estimate record into a fresh store at `path`, serve it and open its
    metric's page, waiting until that one window's values are loaded."""
    url_db = f"sqlite:///{path}"
    with open_store(url_db) as store:
        store.write_panes([record])
    url = served(StoreSource(url_db))
    browser.get(url + metric_page_link(record["metric"]))
    assert wait_for(browser, "document.body.getAttribute('data-windows')") == "1"
    assert wait_loaded(browser)


def check_clean(browser):
    assert browser.foreign_requests("127.0.0.1") == []
    assert browser.console_errors() == []


def test_pages_show_the_jobs_numbers_for_a_chosen_window(browser, demo_run, served, artifacts):
    url = served(StoreSource(demo_run["store"]))
    browser.get(url)
    links = browser.driver.execute_script(
        "return Array.from(document.querySelectorAll('#metrics a')).map(a => a.textContent)")
    assert links == ["flight.carrier", "flight.dest"]
    browser.screenshot(str(artifacts / "index.png"))
    check_clean(browser)

    carrier = sorted((r for r in demo_run["records"] if r["metric"] == "flight.carrier"),
                     key=lambda r: r["window_start"])
    chosen = carrier[1]  # the second week, which holds one rejected report
    browser.get(url + metric_page_link("flight.carrier"))
    assert wait_for(browser, "document.body.getAttribute('data-windows')") == str(len(carrier))
    browser.driver.execute_script(
        "const s = document.getElementById('window-select');"
        "s.value = arguments[0]; s.dispatchEvent(new Event('change'));",
        f"{chosen['window_start']}|{chosen['window_end']}")
    # the chosen window's values are fetched when it is chosen
    assert wait_for(browser, "document.querySelectorAll('#values-table tbody tr').length") \
        == len(chosen["labels"])
    rows = browser.driver.execute_script(
        "return Array.from(document.querySelectorAll('#values-table tbody tr')).map(tr => "
        "Array.from(tr.cells).map(td => td.textContent))")
    shown = {row[1]: row[2:] for row in rows}
    assert set(shown) == set(chosen["labels"])
    lower, upper = value_bands(chosen)  # the record's bands (output.bands)
    for label, estimate, error, unbiased, low, high in zip(
            chosen["labels"], chosen["estimate"], chosen["std_error"],
            chosen["unbiased_estimate"], lower, upper, strict=True):
        half = (high - low) / 2  # "± h" only where the band prints as centred on the estimate
        centred = (f"{estimate - half:.4f}", f"{estimate + half:.4f}") == (f"{low:.4f}",
                                                                         f"{high:.4f}")
        band = f"\u00b1 {half:.4f}" if centred else f"[{low:.4f}, {high:.4f}]"
        assert shown[label] == [f"{estimate:.4f}", band, f"{unbiased:.4f}",
                                f"{error:.4f}"], label
    facts = browser.driver.execute_script(
        "return Object.fromEntries(Array.from(document.querySelectorAll('#window-facts div'))"
        ".map(d => [d.dataset.fact, d.querySelector('dd').textContent]))")
    assert facts["n"] == f"{chosen['n']:,}"
    assert facts["rejected"] == "1" and facts["late reports"] == "0"
    grr = make_protocol("grr", 2.0, 16)
    p, q = grr.p_star, grr.q_star
    assert facts["smallest resolvable"].startswith(f"{smallest_resolvable(p, q, chosen['n']):.4f}")
    header = browser.driver.execute_script(
        "return Object.fromEntries(Array.from(document.querySelectorAll('header dl.facts div'))"
        ".map(d => [d.querySelector('dt').textContent, d.querySelector('dd').textContent]))")
    assert header["protocol"] == "grr" and header["ε"] == "2"
    assert header["p*"] == f"{p:.4g}" and header["q*"] == f"{q:.4g}"
    assert header["estimator"].startswith("unbiased")
    assert header["post-processing"].startswith("norm-hyb")
    rejects = browser.driver.execute_script(
        "return Array.from(document.querySelectorAll('#accounting-rows tbody tr')).map(tr => "
        "[tr.dataset.window, tr.querySelector('.rejects').textContent])")
    assert dict(rejects)[carrier[0]["window_start"]] == "invalid_payload 2"
    assert dict(rejects)[chosen["window_start"]] == "invalid_payload 1"
    browser.screenshot(str(artifacts / "metric-flight.carrier.png"))
    check_clean(browser)

    browser.get(url + metric_page_link("flight.dest"))
    assert wait_for(browser, "document.querySelectorAll('#values-table tbody tr').length") == 105
    browser.screenshot(str(artifacts / "metric-flight.dest.png"))
    check_clean(browser)


@pytest.mark.parametrize("kind", ["folder", "store"])
def test_a_pane_written_while_the_page_is_open_appears_without_a_reload(
        kind, browser, demo_run, served, tmp_path, artifacts):
    last = max((r for r in demo_run["records"] if r["metric"] == "flight.carrier"),
               key=lambda r: r["window_start"])
    late = json.loads(json.dumps(last))
    late["n"] = last["n"] + 250
    late["estimate"] = [round(v * 0.9 + 0.1 / len(v_all), 6) for v_all in [last["estimate"]]
                        for v in v_all]
    late["pane"] = {"timing": "LATE", "index": 1, "is_last": False}
    if kind == "folder":
        output = tmp_path / "output"
        shutil.copytree(demo_run["output"], output)
        source = FolderSource(str(output))
    else:
        db = tmp_path / "live.db"
        shutil.copy(demo_run["store"][len("sqlite:///"):], db)
        source = StoreSource(f"sqlite:///{db}")
    url = served(source)
    browser.get(url + metric_page_link("flight.carrier"))
    assert wait_for(browser, "document.body.getAttribute('data-windows')")
    # the page opens on the latest complete week; the last, partial one is chosen
    browser.driver.execute_script(
        "const s = document.getElementById('window-select');"
        "s.value = arguments[0]; s.dispatchEvent(new Event('change'));",
        f"{last['window_start']}|{last['window_end']}")
    browser.driver.execute_script("window.__notReloaded = true;")
    if kind == "folder":  # a live run's sink adds a file per pane
        with open(output / "estimates-live-pane-00001.jsonl", "w", encoding="utf-8") as handle:
            handle.write(json.dumps(late) + "\n")
    else:
        with open_store(f"sqlite:///{db}") as store:  # a late pane of the run that wrote it
            store.write_panes([late], run=store.runs()[-1]["run_seq"])
    shown = wait_for(browser, "document.querySelector('#window-facts [data-fact=\"n\"] dd')"
                              f".textContent === '{late['n']:,}'", timeout=LIVE_TIMEOUT_S)
    assert shown, "the new pane did not appear"
    assert browser.driver.execute_script("return window.__notReloaded === true")
    facts = browser.driver.execute_script(
        "return Object.fromEntries(Array.from(document.querySelectorAll('#window-facts div'))"
        ".map(d => [d.dataset.fact, d.querySelector('dd').textContent]))")
    assert facts["pane"] == "late #1" and facts["late reports"] == "250"
    # the late pane is marked under its window on the chart over windows, and in its legend
    assert wait_for(browser, "document.getElementById('topk').getAttribute('data-pane-markers')"
                             " === '1'", timeout=LIVE_TIMEOUT_S)
    assert browser.driver.execute_script(
        "return Array.from(document.querySelectorAll('#topk-legend .pane-mark'))"
        ".map(n => n.dataset.timing)") == ["LATE"]
    # the new pane's values are fetched whole for the chosen window
    assert wait_for(browser, "document.querySelector('#values-table tbody tr') && document"
                             ".querySelector('#values-table tbody tr').cells[2].textContent === "
                             f"'{max(late['estimate']):.4f}'", timeout=LIVE_TIMEOUT_S)
    browser.screenshot(str(artifacts / f"live-pane-{kind}.png"))
    check_clean(browser)


def test_names_from_the_data_render_as_text(browser, served, tmp_path, artifacts):
    hostile = "<script>window.__owned = 1</script><img src=x onerror=\"window.__owned=2\">"
    label = "<b onmouseover=alert(1)>bold</b>"
    record = {"metric": hostile, "window_start": "2024-03-01T00:00:00Z",
              "window_end": "2024-03-01T01:00:00Z", "n": 500, "protocol": "grr",
              "epsilon": 1.0, "estimator": {"method": "unbiased", "params": {}},
              "postprocess": {"method": "norm-sub", "params": {}},
              "labels": [label, "</script><script>window.__owned=3</script>", "plain",
                         "AT&amp;T & \"double\" 'single' &lt;", "\u202egnp.exe\u200b"],
              "estimate": [0.4, 0.25, 0.15, 0.12, 0.08],
              "unbiased_estimate": [0.4, 0.25, 0.15, 0.12, 0.08],
              "std_error": [0.04] * 5,
              "pane": {"timing": "ON_TIME", "index": 0, "is_last": False}}
    url_db = f"sqlite:///{tmp_path}/hostile.db"
    with open_store(url_db) as store:
        store.write_panes([record])
        store.write_rejects({(hostile, "<i>reason</i>", 1_709_251_200_000,
                              1_709_251_200_000 + 3_600_000): 2})
    url = served(StoreSource(url_db))
    browser.get(url)
    assert browser.driver.execute_script("return document.querySelector('#metrics a')"
                                         ".textContent") == hostile
    browser.get(url + metric_page_link(hostile))
    assert wait_for(browser, "document.body.getAttribute('data-windows')") == "1"
    assert wait_loaded(browser)  # the chosen window's values, fetched
    assert browser.driver.execute_script("return window.__owned === undefined")
    assert browser.driver.execute_script("return document.querySelector('h1').textContent") \
        == hostile
    labels = browser.driver.execute_script(
        "return Array.from(document.querySelectorAll('#values-table td.label'))"
        ".map(td => td.textContent)")
    # as text: markup, entities and quotes as they are; a right-to-left override and a zero-width
    # space escaped (output.text.printable), in the table, the legend and the ranked bars
    shown = [*record["labels"][:4], "\\u202egnp.exe\\u200b"]
    assert labels == shown
    legend = browser.driver.execute_script(
        "return Array.from(document.querySelectorAll('#topk-legend button.toggle'))"
        ".map(b => b.textContent)")
    assert legend == shown
    bars = browser.driver.execute_script(
        "return Array.from(document.querySelectorAll('#distribution text.bar-label'))"
        ".map(t => t.textContent)")
    assert bars == [text if len(text) <= 22 else text[:21] + "\u2026" for text in shown]
    assert browser.driver.execute_script(
        "return document.querySelectorAll('main b, main img, main i').length") == 0
    assert browser.driver.execute_script(
        "return document.querySelector('#accounting-rows .rejects').textContent") \
        == "<i>reason</i> 2"
    browser.screenshot(str(artifacts / "escaped-names.png"))
    check_clean(browser)


def test_exported_pages_open_from_files_without_any_request_elsewhere(
        browser, demo_run, tmp_path, artifacts):
    source = FolderSource(str(demo_run["output"]))
    written = Dashboard(source).export(str(tmp_path / "site"))
    # index, two pages, five static files (the dashboard's script and style, the vendored
    # uPlot's script, style and licence) and a data file per metric (5 weekly windows each)
    assert (tmp_path / "site" / "index.html").exists() and len(written) == 10
    page = tmp_path / "site" / metric_page_name("flight.dest")
    browser.get(page.as_uri())
    assert wait_for(browser, "document.querySelectorAll('#values-table tbody tr').length") == 105
    assert browser.driver.execute_script(
        "return document.getElementById('status').textContent") == "static export"
    requests = browser.requests()
    assert requests and all(r.startswith(("file://", "data:")) for r in requests), requests
    assert browser.console_errors() == []
    browser.screenshot(str(artifacts / "export-flight.dest.png"))


def test_a_numeric_metric_shows_its_density_with_quantiles(browser, served, tmp_path, artifacts):
    """A record with bucket_edges (a numeric metric) is drawn as a density: bar heights are the
    bucket's estimate over its width; quantiles are marked; estimator iterations are shown."""
    edges = [0.0, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0]
    estimate = [0.05, 0.15, 0.3, 0.25, 0.15, 0.1]
    record = {"metric": "latency.seconds", "window_start": "2024-03-01T00:00:00Z",
              "window_end": "2024-03-01T01:00:00Z", "n": 20000, "protocol": "sw",
              "epsilon": 1.0,
              "estimator": {"method": "ems", "params": {"tolerance": 1e-6}, "iterations": 42,
                            "last_change": 3.2e-7},
              "postprocess": {"method": "none", "params": {}},
              "labels": [f"[{a}, {b})" for a, b in zip(edges, edges[1:], strict=False)],
              "bucket_edges": edges, "estimate": estimate,
              "unbiased_estimate": estimate, "std_error": [0.01] * 6,
              "mean": 0.47, "variance": 0.05, "mean_std_error": 0.0123,
              "quantiles": {"0.5": 0.45, "0.9": 0.82},
              # the record's own bands: not centred on the estimate, and none for q0.9
              "band_method": "bias-corrected-bootstrap",
              "bands": {"mean": {"lower": 0.452, "upper": 0.5}, "variance": None,
                        "0.5": {"lower": 0.43, "upper": 0.49}, "0.9": None},
              "band_reasons": {"variance": "no band", "0.9": "no calibrated band"},
              "pane": {"timing": "EARLY", "index": 0, "is_last": False}}
    # the chosen window's values, fetched
    open_record_page(browser, served, tmp_path / "numeric.db", record)
    quantiles = browser.driver.execute_script(
        "return Array.from(document.querySelectorAll('#quantiles .quantile-label'))"
        ".map(t => t.textContent)")
    assert quantiles == ["q50 = 0.450", "q90 = 0.82"]  # digits set by the band (q90 has none)
    # each row shows the record's band, [lower, upper] (never estimate ± z · s.e.), or none
    intervals = browser.driver.execute_script(
        "return Array.from(document.querySelectorAll('#quantiles .interval-text'))"
        ".map(t => t.textContent)")
    assert intervals == ["[0.452, 0.500]", "[0.430, 0.490]", "no band"]
    heights = browser.driver.execute_script(
        "return Array.from(document.querySelectorAll('#distribution rect.bar'))"
        ".map(r => r.getBoundingClientRect().height)")
    densities = [e / (b - a) for e, a, b in zip(estimate, edges, edges[1:], strict=False)]
    ratios = [h / d for h, d in zip(heights, densities, strict=True)]
    assert max(ratios) == pytest.approx(min(ratios), rel=0.02)  # heights ∝ density
    facts = browser.driver.execute_script(
        "return Object.fromEntries(Array.from(document.querySelectorAll('#window-facts div'))"
        ".map(d => [d.dataset.fact, d.querySelector('dd').textContent]))")
    # digits set by the band's half width (0.024), so the mean to 3 decimals
    assert facts["pane"] == "early #0" and facts["mean"] == "0.470"
    assert facts["mean, 95% band"] == "[0.452, 0.500]"
    assert facts["estimator"].startswith("ems, 42 iterations")
    header = browser.driver.execute_script(
        "return Object.fromEntries(Array.from(document.querySelectorAll('header dl.facts div'))"
        ".map(d => [d.querySelector('dt').textContent, d.querySelector('dd').textContent]))")
    assert header["p*"] == "—" and header["estimator"].startswith("ems")
    browser.screenshot(str(artifacts / "numeric-density.png"))
    check_clean(browser)


def test_a_conservative_quantile_band_is_drawn_as_such_never_as_a_95_band(browser, served,
                                                                          tmp_path):
    """A CFO-binning or hierarchical-histogram record's quantile has no 95% band but a
    conservative one (`conservative_bands`): its row draws that band dashed and labels it
    "conservative", with no 95% band's solid interval; a quantile with neither says "no
    band"; the mean keeps its 95% band."""
    edges = [0.0, 8.0, 16.0, 24.0, 32.0]
    estimate = [0.2, 0.4, 0.3, 0.1]
    record = {"metric": "latency.cfo", "window_start": "2024-03-01T00:00:00Z",
              "window_end": "2024-03-01T01:00:00Z", "n": 20000, "protocol": "cfo-grr",
              "epsilon": 2.0,
              "estimator": {"method": "norm-sub", "params": {}, "iterations": None,
                            "last_change": None},
              "postprocess": {"method": "none", "params": {}},
              "labels": [f"[{a}, {b})" for a, b in zip(edges, edges[1:], strict=False)],
              "bucket_edges": edges, "estimate": estimate,
              "unbiased_estimate": estimate, "std_error": [0.01] * 4,
              "mean": 13.6, "variance": 50.0, "mean_std_error": 0.1,
              "quantiles": {"0.5": 14.0, "0.9": 26.0},
              "band_method": "none", "band_methods": {"mean": "exact-variance"},
              "bands": {"mean": {"lower": 13.4, "upper": 13.8}, "variance": None,
                        "0.5": None, "0.9": None},
              "band_reasons": {"variance": "no band", "0.5": "conservative", "0.9": "none"},
              "conservative_bands": {"0.5": {"lower": 8.0, "upper": 16.0}, "0.9": None},
              "pane": {"timing": "ON_TIME", "index": 0, "is_last": True}}
    open_record_page(browser, served, tmp_path / "conservative.db", record)
    intervals = browser.driver.execute_script(
        "return Array.from(document.querySelectorAll('#quantiles .interval-text'))"
        ".map(t => t.textContent)")
    assert intervals == ["[13.40, 13.80]", "[8.0, 16.0] conservative", "no band"]
    drawn = browser.driver.execute_script(
        "return ['quantile-interval', 'conservative-interval'].map(c => "
        "document.querySelectorAll('#quantiles .' + c).length)")
    assert drawn == [0, 1]
    assert "95%" not in " ".join(intervals[1:])
    told = browser.driver.execute_script(
        "return document.querySelector('#quantiles .conservative-interval title').textContent")
    assert told.endswith(f"[8.0, 16.0] conservative ({CONSERVATIVE_NOTE})"), told
    check_clean(browser)


def test_a_conservative_mean_band_is_drawn_as_such_never_as_a_95_band(browser, served,
                                                                      tmp_path):
    """A Square Wave record whose mean band the bucketing bound widened past its share has no
    95% band for the mean but a conservative one (`conservative_bands["mean"]`): the mean's
    row draws it dashed and labels it "conservative", no solid 95% interval, and the window's
    facts give the mean no 95% band and the conservative one."""
    edges = [0.0, 8.0, 16.0, 24.0, 32.0]
    estimate = [0.2, 0.4, 0.3, 0.1]
    record = {"metric": "latency.sw", "window_start": "2024-03-01T00:00:00Z",
              "window_end": "2024-03-01T01:00:00Z", "n": 1000000, "protocol": "sw",
              "epsilon": 4.0,
              "estimator": {"method": "ems", "params": {}, "iterations": 40,
                            "last_change": None},
              "postprocess": {"method": "none", "params": {}},
              "labels": [f"[{a}, {b})" for a, b in zip(edges, edges[1:], strict=False)],
              "bucket_edges": edges, "estimate": estimate, "std_error": [0.01] * 4,
              "mean": 13.6, "variance": 50.0, "mean_std_error": 0.1,
              "quantiles": {"0.5": 14.0},
              "band_method": "bias-corrected-bootstrap",
              "band_methods": {"mean": "none", "variance": "exact-variance"},
              "bands": {"mean": None, "variance": {"lower": 45.0, "upper": 55.0},
                        "0.5": {"lower": 13.5, "upper": 14.5}},
              "band_reasons": {"mean": "no 95% band: the band is widened by 0.1"},
              "conservative_bands": {"mean": {"lower": 13.2, "upper": 14.0}, "0.5": None},
              "pane": {"timing": "ON_TIME", "index": 0, "is_last": True}}
    open_record_page(browser, served, tmp_path / "conservative-mean.db", record)
    intervals = browser.driver.execute_script(
        "return Array.from(document.querySelectorAll('#quantiles .interval-text'))"
        ".map(t => t.textContent)")
    assert intervals == ["[13.20, 14.00] conservative", "[13.50, 14.50]"]
    drawn = browser.driver.execute_script(
        "return ['mean-interval', 'conservative-interval'].map(c => "
        "document.querySelectorAll('#quantiles .' + c).length)")
    assert drawn == [0, 1]
    told = browser.driver.execute_script(
        "return document.querySelector('#quantiles .conservative-interval title').textContent")
    assert "no 95% band" in told and told.endswith(f"conservative ({CONSERVATIVE_NOTE})"), told
    facts = browser.driver.execute_script(
        "return Object.fromEntries(Array.from(document.querySelectorAll('#window-facts div'))"
        ".map(d => [d.dataset.fact, d.querySelector('dd').textContent]))")
    assert facts["mean, 95% band"] == "none"
    assert facts["mean, conservative band"].endswith("conservative (not a 95% band)")
    check_clean(browser)


# -- real sizes: 1,000 windows x 500 labels, and the numeric demo metric -------------------------

#: Every text label drawn in a chart, with its bounding box (empty ones left out).
TEXT_BOXES = """
return Array.from(document.querySelectorAll(arguments[0] + ' svg text')).map(t => {
  const r = t.getBoundingClientRect();
  return [t.textContent, r.left, r.top, r.right, r.bottom];
}).filter(b => b[0].trim() && b[3] - b[1] > 0);
"""


def overlapping(boxes, slack=0.5):
    """Pairs of text boxes that overlap by more than `slack` pixels each way."""
    found = []
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            if (min(a[3], b[3]) - max(a[1], b[1]) > slack
                    and min(a[4], b[4]) - max(a[2], b[2]) > slack):
                found.append((a[0], b[0]))
    return found


def headers_align(browser, table: str) -> list:
    """Columns of a table whose header cell's alignment differs from its first row's cells."""
    return browser.driver.execute_script(
        "const t = document.querySelector(arguments[0]); const bad = [];"
        "const heads = t.querySelectorAll('thead th'), cells = t.querySelectorAll('tbody tr');"
        "if (!cells.length) return bad;"
        "Array.from(heads).forEach((th, i) => {"
        "  const td = cells[0].cells[i];"
        "  if (getComputedStyle(th).textAlign !== getComputedStyle(td).textAlign)"
        "    bad.push(th.textContent); });"
        "return bad;", table)


@pytest.fixture(scope="module")
def big_store(tmp_path_factory):
    """1,000 hourly windows of a metric with 500 labels (Zipf-like, one label's share rising
    over time), written to a SQLite store by a run whose inputs start with the first window and
    end 1,000 s into the last one (which is thus partial, and has fewer reports); returns (url,
    the records)."""
    import numpy as np
    folder = tmp_path_factory.mktemp("big")
    url = f"sqlite:///{folder}/big.db"
    labels = [f"label-{i:03d}" for i in range(500)]
    rng = np.random.default_rng(20)
    base = 1.0 / np.arange(1, 501) ** 1.1
    records = []
    for k in range(1000):
        weights = base.copy()
        weights[7] *= 1 + 3 * k / 1000
        truth = weights / weights.sum()
        error = np.full(500, 0.004)
        estimate = np.clip(truth + rng.normal(0, 0.004, 500), 0, None)
        estimate /= estimate.sum()
        start = 1_709_251_200 + 3600 * k
        records.append({
            "metric": "big.metric", "window_start": f"{_iso(start)}",
            "window_end": f"{_iso(start + 3600)}", "n": 100_000 if k < 999 else 28_000,
            "protocol": "oue", "epsilon": 2.0, "p_star": 0.5, "q_star": 0.1192,
            "smallest_resolvable": 0.0035,
            "estimator": {"method": "unbiased", "params": {}},
            "postprocess": {"method": "norm-sub", "params": {}}, "labels": labels,
            "estimate": estimate.tolist(), "unbiased_estimate": estimate.tolist(),
            "std_error": error.tolist(),
            "pane": {"timing": "ON_TIME", "index": 0, "is_last": False}})
    first_ms, last_ms = 1_709_251_200_000, (1_709_251_200 + 3600 * 999 + 1000) * 1000
    with open_store(url) as store:
        run = store.begin_run("batch", ["big.avro"], str(folder)).seq
        for at in range(0, 1000, 100):
            store.write_panes(records[at:at + 100], run=run)
        store.record_inputs(run, RunInputs({"big.metric": (first_ms + 2, last_ms)}))
        # the same windows of a metric whose inputs cover its last window whole (its fewer
        # reports notwithstanding)
        whole = store.begin_run("batch", ["whole.avro"], str(folder)).seq
        for at in range(0, 1000, 100):
            store.write_panes([{**r, "metric": "big.whole"} for r in records[at:at + 100]],
                              run=whole)
        store.record_inputs(whole, RunInputs({"big.whole": (first_ms + 2,
                                                            first_ms + 1000 * 3_600_000 - 9)}))
    return url, records


def _iso(seconds: int) -> str:
    from ldp_telemetry.ldp.base.times import iso_from_ms
    return iso_from_ms(seconds * 1000)


def test_a_complete_last_window_with_fewer_reports_is_not_partial(browser, served, big_store):
    """At 1,000 windows × 500 labels, a last window whose run's inputs cover it whole is not
    partial, however few its reports (28,000 where the others have 100,000): the page opens on
    it and flags nothing; the same window cut by its inputs' end is partial (the next test)."""
    url, records = big_store
    browser.driver.set_window_size(1280, 1000)
    browser.get(served(StoreSource(url)) + metric_page_link("big.whole"))
    assert wait_for(browser, "document.body.getAttribute('data-windows')", 60) == "1000"
    last = records[-1]
    assert browser.driver.execute_script(
        "return document.getElementById('window-select').value") == \
        f"{last['window_start']}|{last['window_end']}"
    assert wait_loaded(browser)
    facts = browser.driver.execute_script(
        "return Array.from(document.querySelectorAll('#window-facts div'))"
        ".map(d => d.dataset.fact)")
    assert "partial" not in facts
    flags = browser.driver.execute_script(
        "return Array.from(document.querySelectorAll('#accounting-rows tbody tr'))"
        ".filter(tr => tr.querySelector('.flags').textContent.includes('partial')).length")
    assert flags == 0
    check_clean(browser)
    browser.get(served(StoreSource(url)) + metric_page_link("big.metric"))
    assert wait_for(browser, "document.body.getAttribute('data-windows')", 60) == "1000"
    assert wait_for(browser, "document.querySelector('#accounting-rows tbody tr .flags')"
                             ".textContent") == "partial"  # the newest row: cut by the inputs
    check_clean(browser)


def test_a_thousand_windows_of_five_hundred_labels_stay_readable(browser, served, big_store,
                                                                  artifacts):
    url, records = big_store
    browser.driver.set_window_size(1280, 1000)  # as the browser opens (a screenshot grows it)
    started = time.monotonic()
    browser.get(served(StoreSource(url)) + metric_page_link("big.metric"))
    assert wait_for(browser, "document.body.getAttribute('data-windows')", 60) == "1000"
    assert wait_loaded(browser)  # the chosen window's values, fetched
    loaded = time.monotonic() - started
    # it opens on the latest complete window (the last one is partial), and says so in the URL
    chosen = records[-2]
    assert browser.driver.execute_script(
        "return document.getElementById('window-select').value") == \
        f"{chosen['window_start']}|{chosen['window_end']}"
    assert chosen["window_start"] in browser.driver.execute_script(
        "return decodeURIComponent(location.hash)")
    # the ranked bars: the top values in the right order, on screen without scrolling
    ranked = sorted(range(500), key=lambda i: (-chosen["estimate"][i], i))
    bars = browser.driver.execute_script(
        "return Array.from(document.querySelectorAll('#distribution rect.bar')).map(r => {"
        "const b = r.getBoundingClientRect(); return [Number(r.dataset.index), b.left, b.top,"
        " b.right, b.bottom]; })")
    assert [b[0] for b in bars] == ranked[:20]
    box = browser.driver.execute_script(
        "const r = document.getElementById('distribution').getBoundingClientRect();"
        "return [r.left, r.right, window.innerWidth];")
    assert all(box[0] <= b[1] and b[3] <= box[1] <= box[2] for b in bars)  # no horizontal scroll
    assert browser.driver.execute_script(
        "const d = document.getElementById('distribution'); return d.scrollWidth <= d.clientWidth")
    for chart in ("#topk", "#distribution", "#accounting"):
        assert overlapping(browser.driver.execute_script(TEXT_BOXES, chart)) == [], chart
    for table in ("#values-table", "#accounting-rows"):
        assert headers_align(browser, table) == [], table
    # an older window's record is fetched whole when chosen
    browser.driver.execute_script(
        "const s = document.getElementById('window-select');"
        "s.value = arguments[0]; s.dispatchEvent(new Event('change'));",
        f"{records[10]['window_start']}|{records[10]['window_end']}")
    top = max(range(500), key=lambda i: records[10]["estimate"][i])
    assert wait_for(browser, "document.querySelector('#values-table tbody tr') && "
                             "document.querySelector('#values-table tbody tr').cells[1]"
                             f".textContent === 'label-{top:03d}'", 30)
    browser.screenshot(str(artifacts / "big-metric.png"))
    check_clean(browser)
    assert loaded < 60


def test_the_numeric_demo_metric_draws_its_mean_with_an_error_bar(browser, served, tmp_path,
                                                                  artifacts):
    from ldp_telemetry.pipelines.cli import main
    from tests.dashboard.conftest import REPO_ROOT
    registry = REPO_ROOT / "demo" / "registry.json"
    assert main(["simulate", "--registry", str(registry), "--metric", "flight.dep_min",
                 "--input", str(REPO_ROOT / "demo" / "nycflights13_2013-01_dep_min.csv.gz"),
                 "--value-column", "dep_min", "--time-column", "event_time",
                 "--out", str(tmp_path / "reports"), "--seed", "2013"]) == 0
    store = f"sqlite:///{tmp_path}/numeric.db"
    assert main(["run", "--registry", str(registry), "--input", str(tmp_path / "reports/*.avro"),
                 "--output", str(tmp_path / "out"), "--window", "604800", "--window-offset",
                 "432000", "--store", store, "--create-store"]) == 0
    browser.get(served(StoreSource(store)) + metric_page_link("flight.dep_min"))
    assert wait_for(browser, "document.body.getAttribute('data-windows')") == "5"
    assert wait_loaded(browser)  # the chosen window's values, fetched
    assert browser.driver.execute_script("return document.getElementById('order-select')") \
        is None  # no top-k and no ranking for a numeric metric
    mean = browser.driver.execute_script(
        "return Array.from(document.querySelectorAll('#quantiles .mean-interval'))"
        ".map(l => l.getBoundingClientRect().width)")
    assert mean and mean[0] > 2  # the mean's 95% interval is drawn
    labels = browser.driver.execute_script(
        "return Array.from(document.querySelectorAll('#quantiles .quantile-label'))"
        ".map(t => t.textContent)")
    assert len(labels) == 9 and labels[4].startswith("q50 = ")
    assert browser.driver.execute_script(
        "return document.querySelector('#distribution .axis-label:last-of-type').textContent"
        ).startswith("value of flight.dep_min")
    for chart in ("#topk", "#distribution", "#quantiles", "#accounting"):
        assert overlapping(browser.driver.execute_script(TEXT_BOXES, chart)) == [], chart
    assert headers_align(browser, "#values-table") == []
    browser.screenshot(str(artifacts / "numeric-demo.png"))
    check_clean(browser)


def test_a_thousand_windows_navigate_by_time_filter_and_warn_once(browser, served, big_store,
                                                                  tmp_path, artifacts):
    """At 1,000 windows × 500 labels: the band of the value in focus is drawn without hovering,
    the arrow keys and the slider move between windows (the URL follows), the values table
    filters by label, the too-few-reports advice is shown once for the metric, and an export
    opened from disk loads a chosen window's values from its data file."""
    url, records = big_store
    browser.driver.set_window_size(1280, 1000)
    browser.get(served(StoreSource(url)) + metric_page_link("big.metric"))
    assert wait_for(browser, "document.body.getAttribute('data-windows')", 60) == "1000"
    assert browser.driver.execute_script(
        "return document.getElementById('topk').getAttribute('data-band')") == "label-000"
    chosen = records[-2]
    assert wait_for(browser, "document.querySelectorAll('#values-table tbody tr').length", 30)
    body = browser.driver.find_element("tag name", "body")
    body.send_keys("\ue012")  # ArrowLeft: the window before
    before = records[-3]
    assert wait_for(browser, "document.getElementById('window-select').value === "
                             f"'{before['window_start']}|{before['window_end']}'")
    assert before["window_start"] in browser.driver.execute_script(
        "return decodeURIComponent(location.hash)")
    assert browser.driver.execute_script(
        "return document.getElementById('window-slider').value") == "997"
    browser.driver.execute_script(
        "const s = document.getElementById('window-slider'); s.value = '10';"
        "s.dispatchEvent(new Event('input'));")
    assert wait_for(browser, "document.getElementById('window-select').value === "
                             f"'{records[10]['window_start']}|{records[10]['window_end']}'")
    body.send_keys("\ue014")  # ArrowRight
    assert wait_for(browser, "document.getElementById('window-select').value === "
                             f"'{records[11]['window_start']}|{records[11]['window_end']}'")
    assert wait_for(browser, "document.querySelectorAll('#values-table tbody tr').length", 30) \
        == 500
    browser.driver.execute_script(
        "const f = document.getElementById('values-filter'); f.value = 'label-00';"
        "f.dispatchEvent(new Event('input'));")
    shown = browser.driver.execute_script(
        "return Array.from(document.querySelectorAll('#values-table td.label'))"
        ".map(td => td.textContent)")
    assert sorted(shown) == [f"label-{i:03d}" for i in range(10)]
    # every window has too few reports for 500 values: one advice for the metric, none per window
    advice = browser.driver.execute_script(
        "return Array.from(document.querySelectorAll('.advice')).map(p => p.textContent)")
    assert len(advice) == 1 and "every window" in advice[0]
    assert browser.driver.execute_script(
        "return document.getElementById('window-warning').hidden")
    assert chosen["window_start"] != records[11]["window_start"]
    browser.screenshot(str(artifacts / "big-metric-navigation.png"))
    check_clean(browser)

    source = StoreSource(url)
    try:
        Dashboard(source, top_k=5).export(str(tmp_path / "site"))
    finally:
        source.close()
    browser.get((tmp_path / "site" / metric_page_name("big.metric")).as_uri()
                + f"#window={records[10]['window_start']}|{records[10]['window_end']}")
    assert wait_for(browser, "document.querySelectorAll('#values-table tbody tr').length", 30) \
        == 5  # an export keeps the series' top 5 of a 500-value domain
    assert "of 500 values" in browser.driver.execute_script(
        "return document.getElementById('values-cut').textContent")
    assert browser.console_errors() == []


#: The band of the first value: #2563eb at opacity 0.18 on the chart's transparent canvas, RGBA.
BAND_RGBA = (0x25, 0x63, 0xEB, round(0.18 * 255))
COUNT_BAND_PIXELS = """
const canvas = document.querySelector('#topk canvas');
const pixels = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
let found = 0;
for (let i = 0; i < pixels.length; i += 4) {
  if (Math.abs(pixels[i] - arguments[0][0]) <= 6 && Math.abs(pixels[i + 1] - arguments[0][1]) <= 6
      && Math.abs(pixels[i + 2] - arguments[0][2]) <= 6
      && Math.abs(pixels[i + 3] - arguments[0][3]) <= 6) { found++; }
}
return found;"""


def visible_range(browser) -> list:
    return browser.driver.execute_script(
        "const h = document.getElementById('topk');"
        "return [h.getAttribute('data-x-min'), h.getAttribute('data-x-max')];")


def time_ticks(browser) -> list:
    """The ticks of the time axis of the chart over windows, as UTC datetimes."""
    import datetime as dt
    text = browser.driver.execute_script(
        "return document.getElementById('topk').getAttribute('data-x-ticks')")
    return [dt.datetime.fromisoformat(t.replace("Z", "+00:00")) for t in text.split()]


def test_values_over_windows_zoom_by_dragging_and_reset_by_double_click(browser, served,
                                                                        big_store, artifacts):
    """The chart over windows (uPlot): the band of the value in focus is painted without
    hovering; dragging across the plot narrows the visible time range (kept in the URL) without
    choosing a window, a double click restores every window, a click chooses the window under
    the cursor; nothing is requested from another host and nothing is logged as an error."""
    from selenium.webdriver.common.action_chains import ActionChains
    url, records = big_store
    browser.driver.set_window_size(1280, 1000)
    browser.get(served(StoreSource(url)) + metric_page_link("big.metric"))
    assert wait_for(browser, "document.body.getAttribute('data-windows')", 60) == "1000"
    assert wait_for(browser, "document.querySelectorAll('#values-table tbody tr').length", 30)
    assert browser.driver.execute_script(
        "return document.getElementById('topk').getAttribute('data-band')")
    assert browser.driver.execute_script(COUNT_BAND_PIXELS, BAND_RGBA) > 500  # a filled band
    assert browser.driver.execute_script(  # "all windows" shows only when zoomed
        "return document.getElementById('topk-reset').offsetParent") is None
    full = visible_range(browser)
    assert full[0] <= records[0]["window_start"] and full[1] >= records[-1]["window_start"]
    # 1,000 hours on about 1,000 px: a tick every week, on Mondays at midnight UTC
    ticks = time_ticks(browser)
    assert len(ticks) >= 4 and {t.weekday() for t in ticks} == {0}
    assert all((t.hour, t.minute) == (0, 0) for t in ticks)
    assert all((b - a).days == 7 for a, b in itertools.pairwise(ticks))
    chosen = browser.driver.execute_script("return document.getElementById('window-select').value")
    over = browser.driver.find_element("css selector", "#topk .u-over")
    width = over.size["width"]
    ActionChains(browser.driver).move_to_element_with_offset(over, -width // 4, 0) \
        .click_and_hold().move_by_offset(width // 4, 0).release().perform()
    zoomed = wait_for(browser, "document.getElementById('topk').getAttribute('data-x-min') !== "
                               f"'{full[0]}' && [document.getElementById('topk')"
                               ".getAttribute('data-x-min'), document.getElementById('topk')"
                               ".getAttribute('data-x-max')]")
    assert zoomed and full[0] < zoomed[0] < zoomed[1] < full[1]
    # about a quarter of the run is shown (the drag spans a quarter of the plot)
    span = [_ms(t) for t in full]
    shown = [_ms(t) for t in zoomed]
    assert 0.15 < (shown[1] - shown[0]) / (span[1] - span[0]) < 0.35
    # a quarter of it: a tick every day, or every two, at midnight UTC
    ticks = time_ticks(browser)
    assert len(ticks) >= 4 and all((t.hour, t.minute) == (0, 0) for t in ticks)
    assert {(b - a).days for a, b in itertools.pairwise(ticks)} in ({1}, {2})
    assert "from=" in browser.driver.execute_script("return decodeURIComponent(location.hash)")
    assert browser.driver.execute_script(
        "return document.getElementById('window-select').value") == chosen  # a drag chooses none
    assert browser.driver.execute_script(
        "return document.getElementById('topk-reset').offsetParent") is not None
    # a click chooses the window under the cursor; the zoom stays
    ActionChains(browser.driver).move_to_element(
        browser.driver.find_element("css selector", "#topk .u-over")).click().perform()
    assert wait_for(browser, "document.getElementById('window-select').value !== "
                             f"'{chosen}'")
    picked = browser.driver.execute_script(
        "return document.getElementById('window-select').value").split("|")[0]
    assert zoomed[0] <= picked <= zoomed[1]
    assert visible_range(browser) == zoomed
    for size in ("screenshot", (1280, 1000)):  # each resize redraws the page
        renders = int(browser.driver.execute_script("return document.body.dataset.rendered"))
        if size == "screenshot":
            browser.screenshot(str(artifacts / "big-metric-zoomed.png"))
        else:
            browser.driver.set_window_size(*size)
        assert wait_for(browser, f"Number(document.body.dataset.rendered) > {renders}")
        assert visible_range(browser) == zoomed  # the zoom outlives a redraw
    ActionChains(browser.driver).double_click(
        browser.driver.find_element("css selector", "#topk .u-over")).perform()
    assert wait_for(browser, "document.getElementById('topk').getAttribute('data-x-min') === "
                             f"'{full[0]}'")
    assert visible_range(browser) == full
    assert "from=" not in browser.driver.execute_script(
        "return decodeURIComponent(location.hash)")
    assert browser.driver.execute_script(
        "return document.getElementById('topk-reset').offsetParent") is None
    check_clean(browser)


def _ms(iso: str) -> float:
    from datetime import datetime
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1000


@pytest.fixture(scope="module")
def long_store(tmp_path_factory):
    """2,600 hourly windows of an 8-value metric: more than a page holds (2,000)."""
    from tests.dashboard.test_dashboard_payloads import write_store
    url = f"sqlite:///{tmp_path_factory.mktemp('long')}/long.db"
    return url, write_store(url, 2600, 8)


def test_windows_before_a_page_are_reached_by_paging_through_time(browser, served, long_store,
                                                                  artifacts):
    """The page holds the latest 2,000 windows and says how many there are; "earlier" loads the
    page before it (its last window chosen, the page in the URL), "later" and "latest" come
    back, and the URL of a page of history opens that page."""
    url, records = long_store
    base = served(StoreSource(url))
    browser.driver.set_window_size(1280, 1000)
    browser.get(base + metric_page_link("m"))
    assert wait_for(browser, "document.body.getAttribute('data-windows')", 60) == "2000"
    text = browser.driver.execute_script(
        "return document.getElementById('range-bar').hidden ? null : "
        "document.getElementById('range-text').textContent")
    assert text is not None and "2,000 of 2,600" in text
    browser.driver.execute_script("document.getElementById('range-earlier').click()")
    assert wait_for(browser, "document.body.getAttribute('data-windows') === '600'", 30)
    first, last = records[0], records[599]
    assert browser.driver.execute_script(
        "return document.getElementById('window-select').value") == \
        f"{last['window_start']}|{last['window_end']}"
    assert browser.driver.execute_script(
        "return document.getElementById('range-earlier').disabled")
    shown = browser.driver.execute_script("return decodeURIComponent(location.hash)")
    assert f"page={first['window_start']}" in shown
    assert wait_loaded(browser)
    browser.screenshot(str(artifacts / "long-metric-earlier-page.png"))
    # the address of this page of history opens it again
    browser.get("about:blank")
    browser.get(base + metric_page_link("m") + "#" + shown.lstrip("#"))
    assert wait_for(browser, "document.body.getAttribute('data-windows') === '600'", 60)
    assert browser.driver.execute_script(
        "return document.getElementById('window-select').value") == \
        f"{last['window_start']}|{last['window_end']}"
    browser.driver.execute_script("document.getElementById('range-later').click()")
    after = records[600]  # the 2,000 windows after the page: the first of them chosen
    assert wait_for(browser, "document.getElementById('window-select').value === "
                             f"'{after['window_start']}|{after['window_end']}'", 30)
    assert browser.driver.execute_script("return document.body.getAttribute('data-windows')") \
        == "2000"
    assert browser.driver.execute_script("return document.getElementById('range-later').disabled")
    browser.driver.execute_script("document.getElementById('range-earlier').click()")
    assert wait_for(browser, "document.body.getAttribute('data-windows') === '600'", 30)
    browser.driver.execute_script("document.getElementById('range-latest').click()")
    newest = records[-1]
    assert wait_for(browser, "document.getElementById('window-select').value === "
                             f"'{newest['window_start']}|{newest['window_end']}'", 30)
    assert "page=" not in browser.driver.execute_script("return location.hash")
    check_clean(browser)
