"""Issue 27 in a real Chromium, with a real agent making the schema changes: a state table
approved with a renamed mirror and an ignored column, then rebuilt with a column retyped,
then with a column dropped and one renamed.

The review page starts from the carried decisions and says column by column which are
carried, new or need a decision; a refused column shows its refusal and fix on its row and
keeps Approve disabled; an approval refused by the server (the target changed after the
preview) changes nothing and reloads the review; the Overview counts the reviews waiting
(queued and in review); the preview and then the lineage page list the retired columns."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from console_browser import Browser
from kits.e2e_kit import app, pool_of, register, running_agent, target_of
from kits.review_helpers import (
    MACHINES_DROPPED_RENAMED,
    MACHINES_RETYPED,
    MACHINES_V1,
    MACHINES_V1_DECISION,
    MACHINES_V1_ROWS,
    claim_and_approve,
    queued_review,
)
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from edgesync import governance, identity
from edgesync.materialize import quote_ident
from edgesync.server import Server

pytestmark = [pytest.mark.e2e, pytest.mark.once, pytest.mark.timeout(240)]


def suggestions(browser: Browser) -> dict[str, str]:
    return {r["column"]: r["suggested"].split("\n")[0] for r in
            browser.table("One action per source column")}


def enabled(d: WebDriver, css: str) -> bool:
    found = d.find_elements(By.CSS_SELECTOR, css)
    return bool(found) and found[0].is_enabled()


async def _wait_review(pool: object, lineage_id: uuid.UUID, not_ids: set[uuid.UUID]
                       ) -> governance.Review:
    from kits.e2e_kit import eventually

    async def probe() -> governance.Review | None:
        try:
            review = await queued_review(pool, lineage_id)  # type: ignore[arg-type]
        except ValueError:
            return None
        return review if review.id not in not_ids else None

    found: governance.Review = await eventually(probe, 30, "the next review")
    return found


async def test_review_decisions_in_the_browser(console_server: Server, browser: Browser,
                                               tmp_path: Path, mqtt_url: str) -> None:
    await browser.start()
    unique = uuid.uuid4().hex[:8]
    pool = pool_of(console_server)
    dev = await register(pool, tmp_path, mqtt_url, unique, tag="dcs")
    async with pool.acquire() as conn:
        boot = await identity.bootstrap(conn, org=f"org-dcs-{unique}",
                                        project=f"e2e-dcs-{unique}", topic_slug=f"e2e-dcs-{unique}")
    assert console_server.api is not None
    base = console_server.api.url
    app(dev.db, MACHINES_V1)
    async with running_agent(dev):
        app(dev.db, MACHINES_V1_ROWS)
        first = await _wait_review(pool, await _lineage_id(pool, dev.id), set())
        lineage_id = first.lineage_id
        await claim_and_approve(pool, first, MACHINES_V1_DECISION)
        table = await target_of(pool, dev, "machines")

        # ---- temp_c retyped: the review starts from the carried decisions
        app(dev.db, *MACHINES_RETYPED)
        second = await _wait_review(pool, lineage_id, {first.id})
        await browser.login(base, boot.token.token, str(boot.org_id), str(boot.project_id))
        await browser.until(lambda d: "queued reviews\n1" in browser.text(".cards"),
                            "the overview counts the waiting review")
        await browser.get(f"{base}/console/#/reviews/schema/{second.id}")
        await browser.find("#preview-table", "the review's preview")
        await browser.until(lambda d: suggestions(browser) == {
            "id": "carried", "state": "carried", "temp_c": "needs decision",
            "note": "carried"}, "column by column: carried or needs a decision")
        assert await browser.do(lambda: browser.driver.find_element(
            By.ID, "rename-state").get_attribute("value")) == "machine_state"
        assert await browser.do(lambda: browser.driver.find_element(
            By.ID, "action-note").get_attribute("value")) == "ignore"
        assert await browser.do(lambda: browser.driver.find_element(
            By.ID, "rename-temp_c").get_attribute("value")) == "temp_c_text"
        await browser.until(lambda d: "the approval would pass" in browser.text("#preview")
                            and enabled(d, "#approve"), "the suggestions pass")
        assert "temp_c (double precision, from temp_c)" in browser.text("#preview-retired")
        assert await browser.unlabelled() == []
        change = {r["column"]: r["change"] for r in browser.table("Schema columns")}
        assert change["temp_c"] == "type changed (REAL → TEXT)", change

        # the retyped column back under its old name: refused on its row, Approve disabled
        await browser.type("#rename-temp_c", "temp_c")
        await browser.until(lambda d: "type conflict" in browser.text("#refusal-temp_c")
                            and "temp_c_text" in browser.text("#refusal-temp_c")
                            and not enabled(d, "#approve"), "the refusal on its column")
        await browser.shot("review-refused")
        await browser.type("#rename-temp_c", "temp_c_text")
        await browser.until(lambda d: enabled(d, "#approve"), "fixed: Approve enabled")

        # someone claims it meanwhile: the Overview still counts it as waiting
        async with pool.acquire() as conn:
            await governance.claim_review(conn, second.id, actor="someone-else",
                                          action_version=1)
        await browser.get(f"{base}/console/#/overview")
        await browser.until(lambda d: "queued reviews\n1" in browser.text(".cards"),
                            "a review in review still waits")
        await browser.get(f"{base}/console/#/reviews/schema/{second.id}")
        await browser.until(lambda d: "someone-else" in browser.text("main")
                            and enabled(d, "#approve"), "claimed by someone else")
        # the target gets a temp_c_text of another type after the preview: the server
        # refuses the approval, nothing changes, and the review is reloaded
        await pool.execute(f"ALTER TABLE {quote_ident(table)} ADD COLUMN temp_c_text bigint")
        await browser.click("#approve")
        await browser.until(lambda d: "approval was refused" in browser.text("#conflict")
                            and "temp_c_text" in browser.text("#conflict"),
                            "the server's refusal, then the review reloaded")
        assert "CONFLICT" in browser.text("#status")
        async with pool.acquire() as conn:
            still = await governance.get_review(conn, second.id)
        assert (still.status, still.action_version, still.claimed_by) == (
            "in_review", 2, "someone-else"), "a refused approval changed nothing"
        # reloaded: the suggestion now avoids the new column
        await browser.until(lambda d: d.find_element(By.ID, "rename-temp_c")
                            .get_attribute("value") == "temp_c_text_2"
                            and enabled(d, "#approve"), "a free name suggested")
        await browser.click("#approve")
        await browser.until(lambda d: "review approved" in browser.text("#status")
                            and "machines approved" in browser.text("h1"), "approved")
        await browser.click("#nav a[href='#/overview']")
        await browser.until(lambda d: "queued reviews\n0" in browser.text(".cards"),
                            "nothing waits any more")

        # ---- note dropped, state renamed to status: machine_state is retired
        app(dev.db, *MACHINES_DROPPED_RENAMED)
        third = await _wait_review(pool, lineage_id, {first.id, second.id})
        await browser.get(f"{base}/console/#/reviews/schema/{third.id}")
        await browser.until(lambda d: suggestions(browser) == {
            "id": "carried", "status": "new", "temp_c": "carried"}, "carried and new")
        await browser.until(lambda d: "machine_state (text, from state)"
                            in browser.text("#preview-retired") and enabled(d, "#approve"),
                            "the preview names the column it stops writing")
        await browser.shot("review-retired")
        await browser.click("#approve")
        await browser.until(lambda d: "review approved" in browser.text("#status")
                            and "machines approved" in browser.text("h1"), "approved")
        await browser.get(f"{base}/console/#/lineages/{lineage_id}")
        await browser.until(lambda d: {r["target column"]: r["from"] for r in
                                       browser.table("Retired columns")} == {
            "temp_c": "temp_c", "machine_state": "state"}, "the lineage's retired columns")
        await browser.shot("lineage-retired")

    await browser.leave()
    assert browser.severe((" 409 ",)) == []


async def _lineage_id(pool: object, device_id: uuid.UUID) -> uuid.UUID:
    from kits.e2e_kit import eventually

    async def probe() -> uuid.UUID | None:
        return await pool.fetchval(  # type: ignore[attr-defined, no-any-return]
            "SELECT id FROM edge_table_lineages WHERE device_id = $1", device_id)

    found: uuid.UUID = await eventually(probe, 30, "the lineage")
    return found
