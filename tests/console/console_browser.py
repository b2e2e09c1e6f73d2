"""Driving the web console in the tests: Selenium's calls block, and the server and the
agent run on the test's event loop, so every call goes through a thread. Waits are
bounded polls (``until``), never timed assertions."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement

from edgesync import identity
from edgesync.identity import Bootstrap
from edgesync.server import Server

__all__ = ["Browser", "log_in_to_project_of"]

# Every form control has an accessible name (a <label>, aria-label or aria-labelledby).
_UNLABELLED = """
return [...document.querySelectorAll('input, select, textarea, button')]
  .filter(e => !e.hidden && e.type !== 'hidden' && !(e.labels && e.labels.length)
          && !e.getAttribute('aria-label') && !e.getAttribute('aria-labelledby')
          && !(e.tagName === 'BUTTON' && e.textContent.trim()))
  .map(e => e.outerHTML.slice(0, 120));
"""


class Browser:
    def __init__(self, driver: WebDriver) -> None:
        self.driver = driver
        self.log: list[dict[str, Any]] = []

    async def do(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.to_thread(fn, *args)

    async def get(self, url: str) -> None:
        await self.do(self.driver.get, url)

    async def until(self, probe: Callable[[WebDriver], Any], what: str, *,
                    limit: float = 60.0, between: Callable[[], Any] | None = None,
                    every: int = 20) -> Any:
        """Poll ``probe(driver)`` (in a thread) until truthy; ``between`` runs every
        ``every`` rounds (a page reload, for pages that do not poll)."""
        deadline = time.monotonic() + limit
        rounds = 0
        while True:
            try:
                value = await self.do(probe, self.driver)
            except (StaleElementReferenceException, WebDriverException) as exc:
                if "no such window" in str(exc):
                    raise
                value = None
            if value:
                return value
            if time.monotonic() > deadline:
                text = await self.do(lambda: self.driver.find_element(By.TAG_NAME, "body").text)
                raise AssertionError(f"{what}: not shown within {limit:.0f}s "
                                     f"(page: {text[:800]!r})")
            rounds += 1
            if between is not None and rounds % every == 0:
                await self.do(between)
            await asyncio.sleep(0.1)

    async def find(self, css: str, what: str | None = None) -> WebElement:
        found: WebElement = await self.until(
            lambda d: next(iter(d.find_elements(By.CSS_SELECTOR, css)), None), what or css)
        return found

    async def click(self, css: str) -> None:
        element = await self.find(css)
        await self.do(element.click)

    async def type(self, css: str, text: str, *, clear: bool = True) -> None:
        element = await self.find(css)
        if clear:
            await self.do(element.clear)
        await self.do(element.send_keys, text)

    async def select(self, css: str, value: str) -> None:
        from selenium.webdriver.support.ui import Select

        element = await self.find(css)
        await self.do(lambda: Select(element).select_by_value(value))

    def text(self, css: str = "main") -> str:
        """The visible text of the first match (blocking: use inside a probe)."""
        found = self.driver.find_elements(By.CSS_SELECTOR, css)
        return found[0].text if found else ""

    def table(self, caption: str) -> list[dict[str, str]]:
        """The rows of the table with this caption, as {header: cell text}."""
        for t in self.driver.find_elements(By.TAG_NAME, "table"):
            caps = t.find_elements(By.TAG_NAME, "caption")
            if caps and caps[0].text == caption:
                heads = [th.text for th in t.find_elements(By.CSS_SELECTOR, "thead th")]
                return [dict(zip(heads, [td.text for td in tr.find_elements(By.TAG_NAME, "td")],
                                 strict=False))
                        for tr in t.find_elements(By.CSS_SELECTOR, "tbody tr")]
        return []

    async def start(self) -> None:
        """A test's start: the log of earlier tests (of other servers) is theirs."""
        await self.drain_log()
        self.log.clear()

    async def leave(self) -> None:
        """A test's end: leave the console (its event stream closes before the test's
        server stops) and read the log."""
        await self.get("about:blank")
        await self.drain_log()

    async def login(self, base: str, token: str, org: str, project: str) -> None:
        """Open the console and log in (typing, then Enter), as nobody yet: a session an
        earlier test of the same server left in this tab is forgotten first."""
        await self.get(f"{base}/console/")
        await self.do(self.driver.execute_script, "sessionStorage.clear()")
        await self.get(f"{base}/console/")
        await self.type("#login-token", token)
        await self.type("#login-org", org)
        await self.type("#login-project", project + "\n")
        await self.until(lambda d: d.find_element(By.ID, "nav").is_displayed(), "logged in")

    def severe(self, expected: tuple[str, ...] = ()) -> list[dict[str, Any]]:
        """Errors of the browser's log, less the network lines of the answers a test
        provoked on purpose (``expected``: " 409 ", …; Chromium logs a fetch answered
        with an error status as a network error)."""
        return [e for e in self.log if e["level"] == "SEVERE" and not (
            e["source"] == "network" and any(s in e["message"] for s in expected))]

    async def unlabelled(self) -> list[str]:
        found: list[str] = await self.do(self.driver.execute_script, _UNLABELLED)
        return found

    async def shot(self, name: str, css: str | None = None) -> None:
        """With ``EDGESYNC_CONSOLE_SCREENSHOTS=DIR``, save the page (or the element
        ``css``) as DIR/name.png (how docs/console/*.png are made: that variable, then the
        tests of tests/console)."""
        where = os.environ.get("EDGESYNC_CONSOLE_SCREENSHOTS")
        if not where:
            return
        if css is not None:
            await self.find(css)
        await self.do(self._full_page, str(Path(where) / f"{name}.png"), css)

    async def downloads_to(self, directory: Path) -> None:
        """Downloads of the page go to ``directory`` (Chromium asks nothing)."""
        await self.do(self.driver.execute_cdp_cmd, "Browser.setDownloadBehavior",
                      {"behavior": "allow", "downloadPath": str(directory)})

    async def downloaded(self, directory: Path, name: str) -> Path:
        """The file ``name`` once Chromium finished writing it into ``directory``."""
        path = directory / name
        await self.until(lambda d: path.is_file() and not (directory / f"{name}.crdownload")
                         .exists(), f"the download {name}")
        return path

    def _full_page(self, path: str, css: str | None = None) -> None:
        """The whole page (up to 2400 px tall), not only the window's part of it; or the
        element ``css`` of it."""
        size = self.driver.get_window_size()
        tall = self.driver.execute_script("return document.documentElement.scrollHeight")
        self.driver.set_window_size(size["width"], min(2400, max(size["height"], tall + 140)))
        try:
            if css is None:
                self.driver.save_screenshot(path)
            else:
                self.driver.find_element(By.CSS_SELECTOR, css).screenshot(path)
        finally:
            self.driver.set_window_size(size["width"], size["height"])

    async def drain_log(self) -> list[dict[str, Any]]:
        entries: list[dict[str, Any]] = await self.do(self.driver.get_log, "browser")
        self.log.extend(entries)
        return entries


async def log_in_to_project_of(browser: Browser, server: Server, project_id: Any) -> Bootstrap:
    """An admin token for a project a test registered its device in (``kits.e2e_kit.
    register`` makes one per device; bootstrap adopts it by name), and the console logged
    in with it."""
    assert server.api is not None and server.pool is not None
    async with server.pool.acquire() as conn:
        project = await conn.fetchrow("SELECT name, topic_slug FROM edge_projects WHERE id = $1",
                                      project_id)
        assert project is not None
        boot = await identity.bootstrap(conn, org=f"org-{project['name']}",
                                        project=project["name"],
                                        topic_slug=project["topic_slug"])
    await browser.login(server.api.url, boot.token.token, str(boot.org_id),
                        str(boot.project_id))
    return boot
