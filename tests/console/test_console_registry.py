"""A registry review in the browser: with ``schema_coalescing_mode: project`` a new table
waits for one registry review of the project, which appears on the open reviews page
through the event stream; the console offers no ``defer`` there
(the API refuses it at approval), previews the coalesced target, and approving (the
queued review is claimed in the same transaction) writes the device's rows under the
renamed column."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from console_browser import Browser
from kits.e2e_kit import app, pool_of, register, running_agent
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from edgesync import identity
from edgesync.server import Server

pytestmark = [pytest.mark.e2e, pytest.mark.once, pytest.mark.timeout(180)]


async def test_registry_review_approved_in_the_browser(console_server: Server, browser: Browser,
                                                       tmp_path: Path, mqtt_url: str) -> None:
    await browser.start()
    unique = uuid.uuid4().hex[:8]
    pool = pool_of(console_server)
    dev = await register(pool, tmp_path, mqtt_url, unique, tag="reg",
                         policy={"schema_coalescing_mode": "project"})
    async with pool.acquire() as conn:
        boot = await identity.bootstrap(conn, org=f"org-reg-{unique}",
                                        project=f"e2e-reg-{unique}", topic_slug=f"e2e-reg-{unique}")
    assert console_server.api is not None
    app(dev.db, "CREATE TABLE meters (id INTEGER PRIMARY KEY, kwh REAL, raw TEXT)")
    # The reviews page is open before the device sends anything: the review appears on
    # it through the event stream, with no reload.
    await browser.login(console_server.api.url, boot.token.token, str(boot.org_id),
                        str(boot.project_id))
    await browser.click("#nav a[href='#/reviews']")
    await browser.until(lambda d: "Registry reviews: none" in browser.text("main"),
                        "no review yet")

    def reload(d: WebDriver) -> object:
        return d.execute_script("window.dispatchEvent(new Event('console:reload'))")

    async with running_agent(dev):
        app(dev.db, ("INSERT INTO meters VALUES (?, ?, ?)",
                     [(i, i * 1.5, f"r{i}") for i in range(1, 6)]))
        await browser.until(lambda d: "meters" in {r["table"] for r in
                                                   browser.table("Registry reviews")},
                            "the registry review listed, live")
        await browser.do(lambda: browser.driver.find_element(
            By.CSS_SELECTOR, "a[href^='#/reviews/registry/']").click())
        await browser.find("#abandon", "the registry review's decisions")
        options = await browser.do(lambda: [o.get_attribute("value") for o in browser.driver
                                            .find_elements(By.CSS_SELECTOR, "#action-raw option")])
        assert "defer" not in options and "ignore" in options
        await browser.type("#rename-kwh", "energy")
        await browser.select("#action-raw", "ignore")
        await browser.until(lambda d: {r["target column"] for r in browser.table("Target columns")}
                            == {"id", "energy"} and "not synced: raw" in browser.text("#preview")
                            and "edge_state_p" in browser.text("#preview-table"),
                            "the coalesced target previewed")
        assert await browser.unlabelled() == []
        await browser.shot("registry-review")
        await browser.click("#approve")
        await browser.until(lambda d: "review approved" in browser.text("#status")
                            and "approved" in browser.text("h1"), "approved")

        await browser.click("#nav a[href='#/lineages']")
        link = await browser.until(lambda d: next(iter(d.find_elements(By.LINK_TEXT, "meters")),
                                                  None), "the lineage listed")
        await browser.do(link.click)

        def written(d: WebDriver) -> bool:
            if not d.find_elements(By.ID, "rows-written"):
                return False
            d.find_element(By.ID, "rows-written").click()
            rows = browser.table("Written rows")
            if len(rows) != 5 or "raw" in rows[0] or "energy" not in rows[0]:
                return False
            return sorted((int(r["id"]), float(r["energy"])) for r in rows) == [
                (i, i * 1.5) for i in range(1, 6)]

        await browser.until(written, "the rows in the coalesced target",
                            between=lambda: reload(browser.driver), every=10)
    await browser.leave()
    assert browser.severe() == []
