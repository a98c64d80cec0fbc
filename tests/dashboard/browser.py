"""Headless system Chromium driven by Selenium and the system chromedriver (nothing is
downloaded): every request the page makes and every console message are recorded.

`open_browser()` returns a Browser or raises `Unavailable` with the reason to skip with.
"""
from __future__ import annotations

import json
import shutil
import tempfile
from urllib.parse import urlsplit

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")
DRIVER_NAMES = ("chromedriver",)
FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--no-first-run", "--disable-sync",
         "--disable-default-apps", "--disable-extensions", "--window-size=1280,1000",
         "--force-device-scale-factor=1", "--disable-dev-shm-usage")


class Unavailable(RuntimeError):
    """No browser can run here; the message says why."""


class Browser:
    def __init__(self, driver, profile: str):
        self.driver = driver
        self._profile = profile

    def get(self, url: str) -> None:
        self.driver.get(url)

    def requests(self) -> list[str]:
        """URLs of every request the browser sent since the last call (DevTools log)."""
        urls = []
        for entry in self.driver.get_log("performance"):
            message = json.loads(entry["message"])["message"]
            if message.get("method") == "Network.requestWillBeSent":
                urls.append(message["params"]["request"]["url"])
        return urls

    def foreign_requests(self, allowed_host: str) -> list[str]:
        """Requests to anything but `allowed_host` (data: URLs are in-page, not requests)."""
        return [url for url in self.requests()
                if not url.startswith("data:") and urlsplit(url).hostname != allowed_host]

    def console_errors(self) -> list[dict]:
        """Console messages of level SEVERE (errors) since the last call."""
        return [entry for entry in self.driver.get_log("browser") if entry["level"] == "SEVERE"]

    def screenshot(self, path: str) -> None:
        """A full-page PNG (the window is grown to the page's height first)."""
        height = self.driver.execute_script(
            "return Math.max(document.body.scrollHeight, document.documentElement.scrollHeight)")
        self.driver.set_window_size(1280, min(max(int(height) + 40, 700), 6000))
        self.driver.save_screenshot(path)

    def quit(self) -> None:
        try:
            self.driver.quit()
        finally:
            shutil.rmtree(self._profile, ignore_errors=True)


def open_browser() -> Browser:
    try:
        from selenium import webdriver
        from selenium.common.exceptions import WebDriverException
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        raise Unavailable("selenium is not installed (pip install '.[test]')") from None
    binary = next((shutil.which(name) for name in CHROMIUM_NAMES if shutil.which(name)), None)
    driver_path = next((shutil.which(n) for n in DRIVER_NAMES if shutil.which(n)), None)
    if binary is None or driver_path is None:
        raise Unavailable("no system Chromium with chromedriver (Debian: apt-get install "
                          "chromium chromium-driver)")
    profile = tempfile.mkdtemp(prefix="ldp-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    options.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
    try:
        driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=options)
    except WebDriverException as error:
        shutil.rmtree(profile, ignore_errors=True)
        raise Unavailable(f"Chromium did not start: {error.msg}") from None
    driver.set_page_load_timeout(60)
    browser = Browser(driver, profile)
    browser.get("about:blank")
    browser.requests(), browser.console_errors()  # drop what the start-up page did
    return browser
