"""Screenshots of the dashboard's demo pages for docs/: serve a store, open each page in headless
Chromium (tests/dashboard/browser.py) and save a PNG per page.

    python -m tests.dashboard.screenshots --store sqlite:///demo-output/store.db --out docs
"""
from __future__ import annotations

import argparse
import time

from ldp_telemetry.dashboard.pages import metric_page_link
from ldp_telemetry.dashboard.server import Dashboard, serve_in_thread
from ldp_telemetry.dashboard.source import StoreSource

from tests.dashboard.browser import open_browser

#: (metric, file in --out) of the pages shown in the documentation.
PAGES = (("flight.carrier", "dashboard.png"), ("flight.dest", "dashboard-ranked.png"),
         ("flight.dep_min", "dashboard-numeric.png"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    source = StoreSource(args.store)
    server, url = serve_in_thread(Dashboard(source, top_k=5, poll_ms=60_000))
    browser = open_browser()
    try:
        for metric, name in PAGES:
            browser.driver.set_window_size(1280, 1000)
            browser.get(url + metric_page_link(metric))
            time.sleep(1.0)
            browser.screenshot(f"{args.out}/{name}")
            print(f"{args.out}/{name}")
    finally:
        browser.quit()
        server.shutdown()
        source.close()


if __name__ == "__main__":
    main()
