"""Fixtures of the web console's browser tests: ``edgesync serve`` in-process (real
PostgreSQL and Mosquitto, its HTTP API and /console on a free port), one per module, and
Debian's headless Chromium driven by Selenium through Debian's chromedriver (no browser
is downloaded: the set-up installs the two Debian packages when they are missing)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator

import pytest
from console_browser import Browser
from kits.debian_packages import ensure_commands
from kits.e2e_kit import cloud

from edgesync.server import Server

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    ensure_commands(["chromium", "chromedriver"], ["chromium", "chromium-driver"])
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                "--window-size=1360,1000", "--disable-gpu", "--no-first-run",
                "--disable-extensions", "--disable-background-networking"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    try:
        yield Browser(driver)
    finally:
        driver.quit()


@pytest.fixture(scope="module")
async def console_server(database_url: str, mqtt_url: str,
                         tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Server]:
    unique = uuid.uuid4().hex[:8]
    async with cloud(database_url, mqtt_url, tmp_path_factory.mktemp("cloud"), unique) as s:
        yield s
