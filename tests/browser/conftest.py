"""Headless Chromium from pytest (selenium, Debian's chromium + chromium-driver), against a live server.

Tests marked `browser` need both binaries; without them they are skipped with a reason, and CI
(`RELAY_REQUIRE_BROWSER=1`, set by .ci/run) fails if any was skipped. On failure a test keeps a screenshot
and the page's HTML under `browser-artifacts/<test>/` (RELAY_BROWSER_ARTIFACTS overrides the folder); the
log names the folder. Screenshots a test takes on purpose (`page.shot("name")`) go there too.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("RELAY_BROWSER_ARTIFACTS", ROOT / "browser-artifacts"))
CHROME_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-dev-shm-usage",
    "--window-size=1360,1000",
)


def chromium_paths() -> tuple[str | None, str | None]:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    return browser, driver


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: Any) -> Generator[None, Any, None]:
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)


@pytest.fixture(scope="session")
def chrome() -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    browser, driver = chromium_paths()
    options = webdriver.ChromeOptions()
    options.binary_location = browser or ""
    for flag in CHROME_FLAGS:
        options.add_argument(flag)
    service = Service(executable_path=driver or "")
    session = webdriver.Chrome(options=options, service=service)
    session.set_page_load_timeout(30)
    yield session
    session.quit()


class Page:
    """The browser on one test: visit, find, type, wait, and screenshots into the test's folder."""

    def __init__(self, driver: Any, base_url: str, folder: Path) -> None:
        self.driver, self.base_url, self.folder = driver, base_url, folder
        self.shots: list[Path] = []

    def visit(self, path: str) -> None:
        self.driver.get(self.base_url + path)

    def find(self, css: str) -> Any:
        from selenium.webdriver.common.by import By

        return self.driver.find_element(By.CSS_SELECTOR, css)

    def find_all(self, css: str) -> list[Any]:
        from selenium.webdriver.common.by import By

        return self.driver.find_elements(By.CSS_SELECTOR, css)

    def wait_for(self, check: Callable[[], Any], timeout: float = 15, what: str = "the page") -> Any:
        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            try:
                value = check()
                if value:
                    return value
            except Exception as exc:  # an element not there yet
                last = exc
            time.sleep(0.1)
        raise AssertionError(f"timed out after {timeout} s waiting for {what}" + (f" ({last})" if last else ""))

    def wait_css(self, css: str, timeout: float = 15) -> Any:
        return self.wait_for(lambda: self.find(css), timeout, css)

    def text(self) -> str:
        return self.find("body").text

    def shot(self, name: str) -> Path:
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / f"{len(self.shots) + 1:02d}-{name}.png"
        height = self.driver.execute_script("return document.documentElement.scrollHeight")
        self.driver.set_window_size(1360, min(max(int(height), 800), 6000))
        self.driver.save_screenshot(str(path))
        self.driver.set_window_size(1360, 1000)
        self.shots.append(path)
        return path

    def keep_evidence(self, name: str) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        self.driver.save_screenshot(str(self.folder / f"{name}.png"))
        (self.folder / f"{name}.html").write_text(self.driver.page_source)


@pytest.fixture
def page(request: pytest.FixtureRequest, chrome: Any, live_server: Any) -> Iterator[Page]:
    folder = ARTIFACTS / re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name)
    if folder.exists():
        shutil.rmtree(folder)
    chrome.delete_all_cookies()
    browser_page = Page(chrome, live_server.url, folder)
    yield browser_page
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        browser_page.keep_evidence("failure")
        print(f"\nBROWSER ARTEFACTS: screenshot and HTML of the failure kept in {folder}")
    elif browser_page.shots:
        print(f"\nbrowser screenshots: {folder}")
