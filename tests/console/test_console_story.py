"""The web console in a real headless Chromium against a real ``edgesync serve``
(PostgreSQL, Mosquitto) and a real agent: log in (keyboard only), lineages searched on
the server, a review claimed by someone else meanwhile (the stale ``action_version``'s 409
reloads the review), approved with a rename and an ignore after the live preview
refused a clashing name on its column (Approve disabled meanwhile), the written rows, the
circuit breaker reset, a quarantined row retried, a lineage deleted after a confirmation,
policy validation, and no error in the browser's console log."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from console_browser import Browser
from kits.e2e_kit import Device, app, pool_of, register, running_agent, sqlite_rows, target_of
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webdriver import WebDriver

from edgesync import governance, identity
from edgesync.materialize import quote_ident
from edgesync.server import Server

pytestmark = [pytest.mark.e2e, pytest.mark.once, pytest.mark.timeout(240)]

SCHEMA = ("CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT, level INTEGER, note TEXT)",
          "CREATE TABLE alarms (id INTEGER PRIMARY KEY, code TEXT)")
# What the test provokes on purpose (the wrong token, the stale claim, the refused
# preview and policy): Chromium logs a fetch answered with an error status as a network error.
EXPECTED_NETWORK = (" 401 ", " 409 ", " 422 ")


def cells(browser: Browser, caption: str, column: str) -> dict[str, dict[str, str]]:
    return {r.get(column, ""): r for r in browser.table(caption)}


async def test_console_story(console_server: Server, browser: Browser, tmp_path: Path,
                             mqtt_url: str) -> None:
    await browser.start()
    unique = uuid.uuid4().hex[:8]
    pool = pool_of(console_server)
    dev: Device = await register(pool, tmp_path, mqtt_url, unique, tag="web",
                                 policy={"materialization_breaker_threshold": 1})
    async with pool.acquire() as conn:
        boot = await identity.bootstrap(conn, org=f"org-web-{unique}",
                                        project=f"e2e-web-{unique}", topic_slug=f"e2e-web-{unique}")
    assert console_server.api is not None
    base = console_server.api.url
    app(dev.db, *SCHEMA)
    async with running_agent(dev):
        app(dev.db, ("INSERT INTO settings VALUES (?, ?, ?, ?)",
                     [(f"k{i:02}", f"v{i}", i, f"n{i}") for i in range(1, 9)]),
            ("INSERT INTO alarms VALUES (?, ?)", [(i, f"A{i}") for i in range(1, 4)]))

        # ---- login, by keyboard
        await browser.get(f"{base}/console")
        await browser.find("#login-token", "login form")
        await browser.drain_log()
        await browser.shot("login")
        assert await browser.unlabelled() == []
        # the token field has the focus; before it in the Tab order, only the skip link
        assert await browser.do(browser.driver.execute_script,
                                "return document.activeElement.id") == "login-token"
        await browser.do(lambda: browser.driver.switch_to.active_element.send_keys(
            Keys.SHIFT, Keys.TAB))
        assert await browser.do(browser.driver.execute_script,
                                "return document.activeElement.textContent") == "Skip to content"
        await browser.type("#login-token", "esk_wrong")
        await browser.type("#login-org", str(boot.org_id))
        await browser.type("#login-project", str(boot.project_id) + Keys.ENTER)
        await browser.until(lambda d: "unknown, expired or revoked" in browser.text("#login-error"),
                            "a wrong token refused")
        # A project by a name it does not have: the ones there are (issue 27)
        await browser.type("#login-token", boot.token.token)
        await browser.type("#login-project", "nosuch" + Keys.ENTER)
        await browser.until(lambda d: 'no project "nosuch"' in browser.text("#login-error")
                            and f"there are: e2e-web-{unique}" in browser.text("#login-error"),
                            "an unknown project name refused with the names there are")
        # by its topic slug, as the CLI and the TUI take it; the header names the project
        await browser.type("#login-project", f"e2e-web-{unique}" + Keys.ENTER)
        await browser.until(lambda d: d.find_element(By.ID, "nav").is_displayed(), "logged in")
        assert browser.text("#who") == f"project e2e-web-{unique}"
        assert await browser.do(browser.driver.execute_script,
                                "return sessionStorage.length") == 1

        # ---- Overview: charts sampled by the page
        await browser.until(lambda d: d.find_elements(By.ID, "chart-status")
                            and "Lineages by status" in browser.text("#chart-status"), "overview")
        # the cards say what their figures are (not "3 / devices", "written rows")
        await browser.until(lambda d: "devices\n1\n1 connected" in browser.text(".cards")
                            and "row writes\n" in browser.text(".cards"), "the cards' words")
        await browser.until(lambda d: "lineages\n2" in browser.text(".cards"),
                            "two lineages counted", between=d_refresh(browser.driver))

        # ---- Lineages: both wait for review; the search runs on the server
        await browser.click("#nav a[href='#/lineages']")
        await browser.until(lambda d: len(browser.table("Lineages")) == 2 and all(
            r["pause reason"] == "schema review" for r in browser.table("Lineages")),
            "two lineages paused for review", between=d_refresh(browser.driver))
        assert await browser.unlabelled() == []
        await browser.type("#filter-q", "ALARM" + Keys.ENTER)
        await browser.until(lambda d: [r["table"] for r in browser.table("Lineages")] == ["alarms"]
                            and "matching \"ALARM\"" in browser.text("#lineage-count"),
                            "search narrowed to alarms")
        await browser.type("#filter-q", Keys.ENTER)
        await browser.until(lambda d: len(browser.table("Lineages")) == 2, "search cleared")
        await browser.shot("lineages")

        # ---- a paused lineage's page leads with its next step, the review (issue 27)
        await browser.do(lambda: browser.driver.find_element(By.LINK_TEXT, "settings").click())
        await browser.until(lambda d: "Waiting for a schema review"
                            in browser.text("#next-step"), "the next step first")
        assert await browser.do(browser.driver.execute_script, (
            "return [...document.querySelectorAll('#next-step, #delete')].map(e => e.id)")) \
            == ["next-step", "delete"]
        # its staged rows as columns (they were raw JSON), the staging fields last
        await browser.click("#rows-staged")
        await browser.until(lambda d: browser.table("Staged rows") and all(
            r.get("op") == "insert" and r.get("key", "").startswith("k") and "row" not in r
            for r in browser.table("Staged rows")), "staged rows spread into columns")
        # (scrolled down to the rows: the link at the top sits under the status bar)
        await browser.do(browser.driver.execute_script,
                         "document.getElementById('next-review').click()")
        await browser.find("#claim", "the review, from its lineage")

        # ---- the settings review; someone else claims it meanwhile
        await browser.click("#nav a[href='#/reviews']")
        await browser.until(lambda d: "settings" in cells(browser, "Schema reviews", "table"),
                            "reviews listed")
        await browser.do(lambda: browser.driver.find_element(By.LINK_TEXT, "settings").click())
        await browser.find("#claim", "claim button")
        review_id = browser.driver.current_url.rsplit("/", 1)[1]
        async with pool.acquire() as conn:
            review = await governance.get_review(conn, uuid.UUID(review_id))
            await governance.claim_review(conn, review.id, actor="someone-else",
                                          action_version=review.action_version)
        await browser.click("#claim")
        await browser.until(lambda d: "changed since you loaded it" in browser.text("#conflict"),
                            "the stale action_version's conflict")
        assert "ACTION_VERSION_CONFLICT" in browser.text("#status")
        await browser.shot("review-conflict")
        await browser.click("#conflict-reload")
        await browser.until(lambda d: "someone-else" in browser.text("main")
                            and not d.find_elements(By.ID, "claim"), "reloaded: in review")

        # ---- column actions with the live preview: a clashing name is refused first
        await browser.find("#preview-table", "first preview")
        assert await browser.unlabelled() == []
        await browser.type("#rename-value", "key")
        await browser.until(lambda d: "name taken" in browser.text("#refusal-value")
                            and "another mirror_column_name" in browser.text("#refusal-value")
                            and "refused: 1 column" in browser.text("#preview"),
                            "the preview refuses a duplicate column name, on its column")
        assert await browser.do(lambda: browser.driver.find_element(
            By.ID, "rename-value").get_attribute("aria-invalid")) == "true"
        assert not await browser.do(lambda: browser.driver.find_element(
            By.ID, "approve").is_enabled()), "Approve disabled while a column is refused"
        await browser.type("#rename-value", "setting_value")
        await browser.select("#type-level", "numeric")
        await browser.select("#action-note", "ignore")
        await browser.until(lambda d: {r["target column"]: r["type"] for r in
                                       browser.table("Target columns")} == {
            "key": "text", "setting_value": "text", "level": "numeric"}
            and "not synced: note" in browser.text("#preview")
            and d.find_element(By.ID, "approve").is_enabled(), "the API's preview")
        await browser.shot("review")
        await browser.click("#approve")
        await browser.until(lambda d: {r["column"]: r["decided"] for r in
                                       browser.table("Schema columns")} == {
            "key": "mirror", "value": "mirror as setting_value", "level": "mirror (numeric)",
            "note": "ignore"}, "approved with the actions")

        # ---- the written rows of the lineage
        await browser.do(lambda: browser.driver.find_element(By.LINK_TEXT, "lineage").click())
        want = sorted((k, v) for k, v in sqlite_rows(dev.db, "SELECT key, value FROM settings"))

        def written(d: WebDriver) -> bool:
            if not d.find_elements(By.ID, "rows-written"):
                return False
            d.find_element(By.ID, "rows-written").click()
            got = sorted((r.get("key"), r.get("setting_value"))
                         for r in browser.table("Written rows"))
            return got == want and "note" not in browser.text("#rows")

        await browser.until(written, "the mirror's rows, renamed",
                            between=d_refresh(browser.driver), every=10)
        assert "source: written state mirror edge_state_" in browser.text("#rows-source")
        await browser.shot("lineage")

        # ---- the circuit breaker: a target that refuses every batch; Reset after the fix
        target = await target_of(pool, dev, "settings")
        await pool.execute(f"ALTER TABLE {quote_ident(target)} RENAME COLUMN level TO poison")
        app(dev.db, "INSERT INTO settings VALUES ('bad', 'b', 5000, 'x')")
        await browser.until(lambda d: d.find_elements(By.ID, "reset")
                            and "circuit breaker" in browser.text("main"),
                            "paused by the breaker", between=d_refresh(browser.driver), every=10)
        await browser.shot("lineage-breaker")
        # The approval's replay is done and a new batch waits staged (failed): the bar shows
        # the finished replay full, not done / (done + waiting) (it looked stuck: issue 27)
        assert "latest replay: done" in browser.text("#replay-text")
        assert "0 staged batch(es)" not in browser.text("#replay-text")
        assert await browser.do(browser.driver.execute_script,
                                "const b = document.getElementById('replay-bar');"
                                "return b.value === b.max")
        await pool.execute(f"ALTER TABLE {quote_ident(target)} RENAME COLUMN poison TO level")
        await browser.click("#reset")
        await browser.until(lambda d: "materialization reset" in browser.text("#status"), "reset")
        await browser.until(lambda d: "no errors" in browser.text("main")
                            and not d.find_elements(By.ID, "reset")
                            and "latest replay: done" in browser.text("#replay-text"),
                            "resumed and replayed", between=d_refresh(browser.driver), every=10)
        assert await pool.fetchval(f"SELECT level FROM {quote_ident(target)} "
                                   "WHERE key = 'bad'") == 5000

        # ---- a row the target refuses (a CHECK) is quarantined; Retry writes it once fixed
        await pool.execute(f"ALTER TABLE {quote_ident(target)} ADD CONSTRAINT console_cap "
                           "CHECK (level < 10000)")
        app(dev.db, "INSERT INTO settings VALUES ('big', 'b', 20000, 'x')")
        await browser.until(lambda d: any("23514" in r.get("reason", "") and "big" in r["row"]
                                          for r in browser.table("Quarantined rows")),
                            "the refused row quarantined", between=d_refresh(browser.driver),
                            every=10)
        assert "Quarantine (1 open)" in browser.text("#quarantine")
        await browser.shot("lineage-quarantine")
        await pool.execute(f"ALTER TABLE {quote_ident(target)} DROP CONSTRAINT console_cap")
        await browser.click("#quarantine button[aria-label^='retry row']")
        await browser.until(lambda d: "written" in browser.text("#status")
                            and "Quarantine (0 open)" in browser.text("#quarantine"),
                            "the row retried and written")
        assert await pool.fetchval(f"SELECT level FROM {quote_ident(target)} "
                                   "WHERE key = 'big'") == 20000

        # ---- delete the alarms lineage: Cancel keeps it, Delete removes it
        await browser.get(f"{base}/console/#/lineages?q=alarms")
        await browser.until(lambda d: d.find_elements(By.LINK_TEXT, "alarms"), "alarms listed")
        await browser.do(lambda: browser.driver.find_element(By.LINK_TEXT, "alarms").click())
        await browser.click("#delete")
        await browser.find("dialog[open]", "the confirmation")
        await browser.shot("delete-confirm")
        await browser.do(lambda: browser.driver.switch_to.active_element.send_keys(Keys.ESCAPE))
        await browser.until(lambda d: "delete cancelled" in browser.text("#status"), "cancelled")
        lineage_id = browser.driver.current_url.rsplit("/", 1)[1]
        await browser.click("#delete")
        await browser.click("dialog[open] #dialog-yes")
        await browser.until(lambda d: d.current_url.endswith("#/lineages")
                            and "alarms deleted" in browser.text("#status"), "deleted")
        assert await pool.fetchval("SELECT count(*) FROM edge_table_lineages WHERE id = $1",
                                   uuid.UUID(lineage_id)) == 0

        # ---- the overview again: its charts sampled since the first visit
        await browser.click("#nav a[href='#/overview']")
        await browser.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#chart-backlog polyline")
                            and "rows/s" in browser.text("#chart-rate"),
                            "the charts drawn from samples")
        await browser.shot("overview")

        # ---- policy: the API's validation message next to its field
        await browser.click("#nav a[href='#/policy']")
        # sizes and durations in their unit; which of the two policies this is (issue 27)
        await browser.until(lambda d: browser.text("#policy-max_pending_bytes_per_lineage-unit")
                            == "= 1 GiB", "bytes in GiB")
        assert browser.text("#policy-verify_interval_seconds-unit").startswith("= ")
        assert "sync policy" in browser.text("#policy-about")
        await browser.type("#policy-max_pending_bytes_per_lineage", "52428800")
        await browser.until(lambda d: browser.text("#policy-max_pending_bytes_per_lineage-unit")
                            == "= 50 MiB", "the unit follows the input")
        await browser.type("#policy-max_pending_bytes_per_lineage", str(1 << 30))
        await browser.type("#policy-resume_threshold_percent", "150")
        await browser.click("#policy-save")
        await browser.until(lambda d: "less than or equal to 99"
                            in browser.text("#policy-resume_threshold_percent-error"),
                            "the 422 shown at its field")
        assert await browser.unlabelled() == []
        await browser.shot("policy")
        await browser.type("#policy-resume_threshold_percent", "70")
        await browser.click("#policy-save")
        await browser.until(lambda d: "policy saved: resume_threshold_percent"
                            in browser.text("#status"), "saved")

        # ---- devices
        await browser.click("#nav a[href='#/devices']")
        await browser.until(lambda d: dev.scope.device_name in cells(browser, "Devices", "device"),
                            "the device listed")
        await browser.shot("devices")

        # ---- log out: the token leaves the tab
        await browser.click("#logout")
        await browser.find("#login-token", "the login form again")
        assert await browser.do(browser.driver.execute_script,
                                "return sessionStorage.length") == 0

    # ---- nothing but the provoked 401, 409 and 422 answers in the browser's log
    await browser.leave()
    assert browser.severe(EXPECTED_NETWORK) == []
    assert any(" 409 " in e["message"] for e in browser.log)


def d_refresh(driver: WebDriver) -> object:
    """Re-render the current page (the pages read the API when shown)."""
    return lambda: driver.execute_script("window.dispatchEvent(new Event('console:reload'))")
