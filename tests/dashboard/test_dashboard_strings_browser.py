"""A string metric in headless Chromium, end to end: `ldp simulate` of a CSV column of words
(markup, quotes, right-to-left text and an override, "constructor" and "__proto__") into Avro,
a batch run into a SQLite store, the dashboard on it and its static export. The chart's lines
are the series' top strings by label, a string missing from a window's heavy hitters is a gap
("not found" in the read-out), and the chosen window lists its heavy hitters with their standard
errors and no band (output.bands.value_band_method: the search chose them for their estimates)."""
from __future__ import annotations

import csv
import io
import json

import numpy as np
import pytest

from ldp_telemetry.dashboard.pages import metric_page_link, metric_page_name
from ldp_telemetry.dashboard.server import Dashboard, serve_in_thread
from ldp_telemetry.dashboard.source import FolderSource, StoreSource, top_labels
from ldp_telemetry.ldp.config.registry import load_registry
from ldp_telemetry.ldp.config.windows import WindowSpec
from ldp_telemetry.output.names import printable
from ldp_telemetry.pipelines.batch import run_job
from ldp_telemetry.pipelines.cli import main
from ldp_telemetry.pipelines.job import EstimateJob

from tests.dashboard.test_dashboard_browser import (  # noqa: F401 - blank_page: autouse
    blank_page, check_clean, wait_for, wait_loaded)
from tests.dashboard.test_dashboard_strings import string_record, write_store

T0 = 1_709_251_200  # 2024-03-01T00:00:00Z
HOUR_MS = 3_600_000
METRIC = "app.name"
TOP_K = 8
WORDS = ["mail", "<script>x", "\"q'&", "שלום", "\u202eexe", "__proto__", "constructor"]
#: Shares per hourly window: "mail" and "<script>x" swap ranks after two hours, "__proto__" is
#: held only in the first two and "constructor" only in the last two.
SHARES = [[0.40, 0.25, 0.10, 0.08, 0.07, 0.10, 0.00]] * 2 + \
         [[0.22, 0.38, 0.10, 0.08, 0.07, 0.00, 0.15]] * 2
REPORTS_PER_HOUR = 30_000


@pytest.fixture(scope="module")
def string_run(tmp_path_factory):
    """The words simulated from a CSV, run into hourly windows in a SQLite store; the store's
    URL, the job's records and the folder."""
    folder = tmp_path_factory.mktemp("dashboard-strings")
    rng = np.random.default_rng(7)
    with open(folder / "words.csv", "w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out)
        writer.writerow(["word", "event_time"])
        for hour, shares in enumerate(SHARES):
            words = rng.choice(len(WORDS), size=REPORTS_PER_HOUR, p=shares)
            times = T0 + hour * 3600 + rng.integers(0, 3600, REPORTS_PER_HOUR)
            writer.writerows([WORDS[w], int(t)] for w, t in zip(words, times, strict=True))
    registry_path = folder / "registry.json"
    registry_path.write_text(json.dumps({"metrics": [
        {"name": METRIC, "protocol": "pem", "epsilon": 4.0,
         "domain": {"strings": {"max_bytes": 12, "pool": 128}},
         "estimator": {"method": "heavy-hitters", "top": TOP_K, "threshold": 0.03}}]}),
        encoding="utf-8")
    assert main(["simulate", "--registry", str(registry_path), "--metric", METRIC, "--input",
                 str(folder / "words.csv"), "--value-column", "word", "--time-column",
                 "event_time", "--out", str(folder / "reports"), "--seed", "5"]) == 0
    store = f"sqlite:///{folder}/store.db"
    job = EstimateJob(load_registry(registry_path),
                      tuple(sorted(str(p) for p in (folder / "reports").glob("*.avro"))),
                      str(folder / "estimates"), WindowSpec(HOUR_MS, HOUR_MS), store=store)
    run_job(job, ["--runner=FnApiRunner"], out=io.StringIO())
    records = sorted((json.loads(line) for path in (folder / "estimates").glob("estimates-*.jsonl")
                      for line in path.read_text(encoding="utf-8").splitlines()),
                     key=lambda r: r["window_start"])
    return {"store": store, "records": records, "folder": folder}


def expected_lines(records: list[dict]) -> list[str]:
    """The series' strings as the page shows them: the largest sums over the windows."""
    totals: dict[str, float] = {}
    for record in records:
        for label, value in zip(record["labels"], record["estimate"], strict=True):
            totals[label] = totals.get(label, 0.0) + value
    return [printable(label) for label in top_labels(totals, TOP_K)]


def legend(browser) -> list[tuple[str, str]]:
    return browser.driver.execute_script(
        "return Array.from(document.querySelectorAll('#topk-legend button.toggle'))"
        ".map(b => [b.textContent, b.getAttribute('aria-pressed')])")


#: Tries at pointing at a chart that a poll may redraw meanwhile (`readout_at`).
STALE_ATTEMPTS = 5


def readout_at(browser, fraction: float, window: str) -> list[str]:
    """The read-out of the chart over windows with the pointer `fraction` across the plot, once
    it reads the window whose times start with `window`."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.action_chains import ActionChains
    for attempt in range(STALE_ATTEMPTS):  # a poll may redraw the chart between find and move
        over = browser.driver.find_element("css selector", "#topk .u-over")
        try:
            width = over.size["width"]
            ActionChains(browser.driver).move_to_element_with_offset(
                over, int((fraction - 0.5) * (width - 4)), 0).perform()
            break
        except StaleElementReferenceException:
            if attempt == STALE_ATTEMPTS - 1:
                raise
    assert wait_for(browser, "(document.querySelector('#topk-readout strong') || {})"
                             f".textContent.startsWith({json.dumps(window)})")
    return browser.driver.execute_script(
        "return Array.from(document.querySelectorAll('#topk-readout .readout-item'))"
        ".map(s => s.textContent)")


def test_the_chart_of_a_string_metric_draws_each_string_by_label(browser, string_run,
                                                                 tmp_path, artifacts):
    records = string_run["records"]
    assert len(records) == 4
    found = [set(r["labels"]) for r in records]
    # the job found what the test is about: ranks swapped, two strings in half the windows
    assert records[0]["labels"][:2] == ["mail", "<script>x"]
    assert records[3]["labels"][:2] == ["<script>x", "mail"]
    assert "__proto__" in found[0] - found[3] and "constructor" in found[3] - found[0]
    lines = expected_lines(records)
    # all seven among the lines, the override escaped (a window's heavy hitters may hold a
    # string the noise made up, as any run's may)
    assert {printable(w) for w in WORDS} <= set(lines)
    source = StoreSource(string_run["store"])
    server, base = serve_in_thread(Dashboard(source, top_k=TOP_K, poll_ms=300))
    try:
        browser.get(base + metric_page_link(METRIC))
        assert wait_for(browser, "document.body.getAttribute('data-windows')") == "4"
        assert wait_loaded(browser) == len(records[-1]["labels"])
        # one line per string, by label, every one shown (neither "constructor" nor
        # "__proto__" is taken for a hidden line)
        assert legend(browser) == [[label, "true"] for label in lines]
        assert browser.driver.execute_script("return window.__owned === undefined")
        note = browser.driver.execute_script(
            "return document.getElementById('topk-note').textContent")
        assert "not found above the heavy-hitter threshold" in note
        assert "Top 8 strings over windows" in browser.driver.execute_script(
            "return document.querySelector('main h2').textContent")
        # the first window: "__proto__" drawn, "constructor" a gap; the last the other way
        first = readout_at(browser, 0.0, "2024-03-01 \u2013 ")
        last = readout_at(browser, 1.0, "2024-03-01 03:00 \u2013 ")
        assert "constructor not found" in first and "__proto__ not found" in last
        for items, record in ((first, records[0]), (last, records[-1])):
            for label, value in zip(record["labels"], record["estimate"], strict=True):
                assert f"{printable(label)} {value:.4f} no band" in items, (label, items)
        # the chosen (latest) window lists its own heavy hitters, best first, with no band and
        # their standard errors
        rows = browser.driver.execute_script(
            "return Array.from(document.querySelectorAll('#values-table tbody tr'))"
            ".map(tr => [tr.querySelector('td.label').textContent,"
            " tr.querySelector('td.band').textContent,"
            " tr.querySelector('td.std-error').textContent])")
        latest = records[-1]
        assert [row[:2] for row in rows] == [[printable(label), "no band"]
                                             for label in latest["labels"]]
        assert all(float(row[2]) == pytest.approx(error, abs=5e-5)
                   for row, error in zip(rows, latest["std_error"], strict=True)), rows
        # the chosen window's chart names no 95% band: its axis and each bar's tooltip read
        # "no band" without "(95%)"
        axis, titles = browser.driver.execute_script(
            "return [document.querySelector('#distribution .axis-label').textContent,"
            " Array.from(document.querySelectorAll('#distribution title'))"
            ".map(t => t.textContent)]")
        assert axis == "estimated frequency (no band)", axis
        assert titles and all(t.endswith(" no band") and "95%" not in t for t in titles), titles
        # no band filled for the string in focus: no window has one
        assert browser.driver.execute_script(
            "return document.getElementById('topk').getAttribute('data-banded-windows')"
        ) in ("0", None)
        # a legend entry named like an Object property toggles its line
        browser.driver.find_element(
            "css selector", "#topk-legend button[data-label='constructor']").click()
        assert wait_for(browser, "document.querySelector(\"#topk-legend "
                                 "button[data-label='constructor']\")"
                                 ".getAttribute('aria-pressed') === 'false'")
        browser.screenshot(str(artifacts / "string-metric.png"))
        check_clean(browser)
        # the job's output folder draws the same lines
        folder_source = FolderSource(str(string_run["folder"] / "estimates"))
        folder_server, folder_base = serve_in_thread(Dashboard(folder_source, top_k=TOP_K))
        try:
            browser.get(folder_base + metric_page_link(METRIC))
            assert wait_loaded(browser) == len(latest["labels"])
            assert legend(browser) == [[label, "true"] for label in lines]
            check_clean(browser)
        finally:
            folder_server.shutdown()
            folder_server.server_close()
            folder_source.close()
        # the static export shows the same lines and the same heavy hitters
        Dashboard(source, top_k=TOP_K).export(str(tmp_path / "site"))
        browser.get((tmp_path / "site" / metric_page_name(METRIC)).as_uri())
        assert wait_loaded(browser) == len(latest["labels"])
        assert legend(browser) == [[label, "true"] for label in lines]
        assert browser.driver.execute_script(
            "return Array.from(document.querySelectorAll('#values-table td.label'))"
            ".map(td => td.textContent)") == [printable(label) for label in latest["labels"]]
        assert browser.driver.execute_script("return window.__owned === undefined")
        assert browser.console_errors() == []
        browser.screenshot(str(artifacts / "string-metric-export.png"))
    finally:
        server.shutdown()
        server.server_close()
        source.close()


def test_a_window_without_heavy_hitters_says_why(browser, tmp_path):
    """A window whose heavy-hitter list is empty (a level without reports) is drawn as a sentence
    with the record's reason, not as an empty chart; the other windows stay ranked, even when
    their strings look like numbers."""
    empty = string_record(1, [])
    empty["heavy_hitters"]["reason"] = "level 3 has no reports"
    url = f"sqlite:///{tmp_path}/s.db"
    write_store(url, [string_record(0, [("42", 0.3), ("7", 0.5)]), empty])
    source = StoreSource(url)
    server, base = serve_in_thread(Dashboard(source, top_k=TOP_K, poll_ms=300))
    try:
        browser.get(base + metric_page_link(METRIC))
        assert wait_for(browser, "document.body.getAttribute('data-windows')") == "2"
        text = wait_for(browser, "(document.querySelector('#distribution p.empty') || {})"
                                 ".textContent")
        assert text == ("No values in this window: no string was found above the heavy-hitter "
                        "threshold (level 3 has no reports).")
        assert "0 found" in browser.driver.execute_script(
            "return document.querySelector(\"[data-fact='heavy hitters'] dd\").textContent")
        browser.driver.execute_script("document.getElementById('window-prev').click()")
        assert wait_for(browser, "document.querySelectorAll('#distribution text.bar-label')"
                                 ".length") == 2
        assert browser.driver.execute_script(  # ranked by estimate: "7" first
            "return Array.from(document.querySelectorAll('#distribution text.bar-label'))"
            ".map(t => t.textContent)") == ["7", "42"]
        check_clean(browser)
    finally:
        server.shutdown()
        server.server_close()
        source.close()


def test_the_values_table_says_how_each_heavy_hitter_was_found(browser, tmp_path):
    """A window decoded against a candidate dictionary (its record has `found_by`) gets a
    "found by" column in its values table, each row the record's word for its string; a window
    without `found_by` has no such column."""
    found = string_record(1, [("mail", 0.4), ("maps", 0.3), ("chat", 0.05)])
    found["heavy_hitters"].update(dictionary=2, found_by=["both", "search", "dictionary"])
    url = f"sqlite:///{tmp_path}/s.db"
    write_store(url, [string_record(0, [("mail", 0.5), ("maps", 0.2)]), found])
    source = StoreSource(url)
    server, base = serve_in_thread(Dashboard(source, top_k=TOP_K, poll_ms=300))
    table = ("return [Array.from(document.querySelectorAll('#values-table th'))"
             ".map(th => th.textContent), Array.from(document.querySelectorAll("
             "'#values-table tbody tr')).map(tr => [tr.querySelector('td.label').textContent, "
             "(tr.querySelector('td.found-by') || {}).textContent || null])]")
    try:
        browser.get(base + metric_page_link(METRIC))
        assert wait_for(browser, "document.body.getAttribute('data-windows')") == "2"
        assert wait_loaded(browser) == 3  # the latest window, decoded with the dictionary
        heads, rows = browser.driver.execute_script(table)
        assert heads[-1] == "found by"
        assert rows == [["mail", "both"], ["maps", "search"], ["chat", "dictionary"]]
        browser.driver.execute_script("document.getElementById('window-prev').click()")
        assert wait_for(browser, "document.querySelectorAll('#values-table tbody tr')"
                                 ".length") == 2
        heads, rows = browser.driver.execute_script(table)
        assert "found by" not in heads and rows == [["mail", None], ["maps", None]]
        check_clean(browser)
    finally:
        server.shutdown()
        server.server_close()
        source.close()


def test_a_live_page_redraws_its_lines_when_the_top_strings_change(browser, tmp_path,
                                                                   monkeypatch):
    """A pane that changes a series' top strings: the windows already on the page are asked
    again, so a string that enters the top is drawn in them too (not as gaps)."""
    from ldp_telemetry.dashboard import source as sources
    monkeypatch.setattr(sources, "SERIES_REFRESH_S", 0.0)  # the series follow every change
    url = f"sqlite:///{tmp_path}/s.db"
    write_store(url, [string_record(k, [("a", 0.5), ("b", 0.3), ("c", 0.1)]) for k in range(3)])
    source = StoreSource(url)
    server, base = serve_in_thread(Dashboard(source, top_k=2, poll_ms=300))
    try:
        browser.get(base + metric_page_link(METRIC))
        assert wait_for(browser, "document.body.getAttribute('data-windows')") == "3"
        assert [label for label, _ in legend(browser)] == ["a", "b"]
        write_store(url, [string_record(3, [("c", 0.9), ("a", 0.05)])])  # c: 1.2 > b: 0.9
        assert wait_for(browser, "document.body.getAttribute('data-windows') === '4' && "
                                 "document.querySelectorAll('#topk-legend button.toggle')[1]"
                                 ".textContent === 'c'")
        first = readout_at(browser, 0.0, "2024-03-01 \u2013 ")
        assert "c 0.1000 no band" in first, first
        check_clean(browser)
    finally:
        server.shutdown()
        server.server_close()
        source.close()


def test_a_live_page_holding_more_than_a_page_of_windows_redraws_them_all(browser, tmp_path,
                                                                          monkeypatch):
    """A live page that holds more windows than a server's page (MAX_WINDOWS_PER_PAGE: its
    2,000 windows and those that arrived since) asks again for all of them, page by page, when
    the top strings change: the oldest windows draw the string that entered the top too."""
    from ldp_telemetry.dashboard import source as sources
    monkeypatch.setattr(sources, "SERIES_REFRESH_S", 0.0)  # the series follow every change
    held = sources.MAX_WINDOWS_PER_PAGE
    url = f"sqlite:///{tmp_path}/s.db"
    write_store(url, [string_record(k, [("a", 0.5), ("b", 0.11), ("c", 0.1)])
                      for k in range(held)])  # b: 220 > c: 200
    source = StoreSource(url)
    server, base = serve_in_thread(Dashboard(source, top_k=2, poll_ms=300))
    try:
        browser.get(base + metric_page_link(METRIC))
        assert wait_for(browser, "document.body.getAttribute('data-windows')") == str(held)
        assert [label for label, _ in legend(browser)] == ["a", "b"]
        # 50 windows more in one poll: c 245 > b 220; the page holds 2,050 windows
        write_store(url, [string_record(k, [("c", 0.9), ("a", 0.05)])
                          for k in range(held, held + 50)])
        assert wait_for(browser, f"document.body.getAttribute('data-windows') === '{held + 50}'"
                                 " && document.querySelectorAll('#topk-legend button.toggle')[1]"
                                 ".textContent === 'c'")
        first = readout_at(browser, 0.0, "2024-03-0")  # one of the first windows held
        assert "c 0.1000 no band" in first, first
        check_clean(browser)
    finally:
        server.shutdown()
        server.server_close()
        source.close()
