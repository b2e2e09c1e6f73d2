"""Devices and recovery in the browser (real ``edgesync serve``, PostgreSQL, Mosquitto,
headless Chromium): a device registered on the Devices page, a password issued once, a
revocation cancelled and then confirmed with a reason (ingest's registry and the
credentials say so); on a state lineage with a real agent, a verification found equal,
a row changed in PostgreSQL found by a verification with repair whose re-snapshot puts it
back, a filtered re-snapshot that sends only the rows of its condition; deleted and back,
the lineage offers a verification (``recovery_offers``) that its button takes."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from console_browser import Browser
from kits.e2e_kit import (
    app,
    approve,
    pool_of,
    register,
    running_agent,
    target_of,
    wait_equal,
    wait_lineage,
)
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webdriver import WebDriver

from edgesync import identity
from edgesync.materialize import quote_ident
from edgesync.server import Server

pytestmark = [pytest.mark.e2e, pytest.mark.once, pytest.mark.timeout(240)]

ROWS = 40


def reload(driver: WebDriver) -> object:
    return driver.execute_script("window.dispatchEvent(new Event('console:reload'))")


async def test_register_issue_and_revoke_a_device(console_server: Server, browser: Browser) -> None:
    await browser.start()
    unique = uuid.uuid4().hex[:8]
    pool = pool_of(console_server)
    async with pool.acquire() as conn:
        boot = await identity.bootstrap(conn, org=f"org-dev-{unique}",
                                        project=f"e2e-dev-{unique}", topic_slug=f"e2e-dev-{unique}")
    assert console_server.api is not None
    await browser.login(console_server.api.url, boot.token.token, str(boot.org_id),
                        str(boot.project_id))
    name = f"gw-{unique}"
    await browser.click("#nav a[href='#/devices']")
    await browser.until(lambda d: "0 device(s)" in browser.text("main"), "no device yet")
    await browser.type("#device-name", name)
    await browser.type("#device-fleet", "north" + Keys.ENTER)
    await browser.until(lambda d: f"Device {name}" in browser.text("h1"), "registered: its page")
    device_id = uuid.UUID(browser.driver.current_url.rsplit("/", 1)[1])
    await browser.until(lambda d: "Credentials: none issued" in browser.text("#credentials"),
                        "no credential yet")
    assert "No sync policy is attached" in browser.text("#bundle-form")
    # What its batches cost on the wire (written by the worker's presence flush; here
    # as the flush would write it): nothing yet, then compressed batches.
    assert "batches on the wire" in browser.text("main")
    await pool.execute("INSERT INTO edge_device_status (device_id, online_at, "
                       "batch_bytes_received, batch_bytes_json) VALUES ($1, now(), 1200, 6000)",
                       device_id)
    await browser.until(lambda d: "1,200 bytes (compressed: 20 % of 6,000 bytes of JSON)"
                        in browser.text("main"), "its traffic",
                        between=lambda: reload(browser.driver))

    await browser.click("#issue-password")
    await browser.until(lambda d: "shown once" in browser.text("#issued-password"), "a password")
    shown = browser.text("#issued-password")
    assert f"username\n{name}" in shown or name in shown
    await browser.until(lambda d: [r["kind"] for r in browser.table("Credentials")] == ["password"],
                        "the credential listed")
    assert await browser.unlabelled() == []

    # Revoke: Escape cancels; then a reason, and Revoke.
    await browser.click("#revoke")
    await browser.find("dialog[open] #dialog-input", "the confirmation")
    await browser.shot("device-revoke")
    await browser.do(lambda: browser.driver.switch_to.active_element.send_keys(Keys.ESCAPE))
    await browser.until(lambda d: "revoke cancelled" in browser.text("#status"), "cancelled")
    revoked = "SELECT revoked_at IS NOT NULL FROM edge_devices WHERE id = $1"
    assert not await pool.fetchval(revoked, device_id)
    await browser.click("#revoke")
    await browser.type("dialog[open] #dialog-input", "stolen")
    await browser.click("dialog[open] #dialog-yes")
    await browser.until(lambda d: f"device {name} revoked: 1 credential(s) revoked"
                        in browser.text("#status") and d.find_elements(By.ID, "revoked-note"),
                        "revoked")
    assert not browser.driver.find_elements(By.ID, "bundle-form")
    assert "revoked" in browser.text("h1")
    assert await pool.fetchval(revoked, device_id)
    assert [tuple(r) for r in await pool.fetch(
        "SELECT kind, revoke_reason FROM edge_device_credentials WHERE device_id = $1",
        device_id)] == [("password", "stolen")]
    await browser.click("#nav a[href='#/devices']")
    await browser.until(lambda d: [(r["device"], r["fleet"], r["connected"])
                                   for r in browser.table("Devices")]
                        == [(name, "north", "revoked")], "listed as revoked")
    await browser.leave()
    assert browser.severe() == []


async def test_verify_repair_and_resnapshot_buttons(console_server: Server, browser: Browser,
                                                    tmp_path: Path, mqtt_url: str) -> None:
    await browser.start()
    unique = uuid.uuid4().hex[:8]
    pool = pool_of(console_server)
    dev = await register(pool, tmp_path, mqtt_url, unique, tag="rec")
    async with pool.acquire() as conn:
        boot = await identity.bootstrap(conn, org=f"org-rec-{unique}",
                                        project=f"e2e-rec-{unique}", topic_slug=f"e2e-rec-{unique}")
    assert console_server.api is not None
    app(dev.db, "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
    async with running_agent(dev):
        app(dev.db, ("INSERT INTO t VALUES (?, ?)", [(i, f"v{i}") for i in range(1, ROWS + 1)]))
        await approve(pool, dev, "t", limit=60)
        await wait_equal(pool, dev, "t", ["id", "v"], limit=60)
        target = await target_of(pool, dev, "t")
        await browser.login(console_server.api.url, boot.token.token, str(boot.org_id),
                            str(boot.project_id))
        await browser.click("#nav a[href='#/lineages']")
        link = await browser.until(lambda d: next(iter(d.find_elements(By.LINK_TEXT, "t")), None),
                                   "the lineage listed")
        await browser.do(link.click)
        await browser.until(lambda d: "Verifications: none yet" in browser.text("#recovery-jobs"),
                            "the recovery section")
        assert not browser.driver.find_elements(By.ID, "recovery-offers")  # none offered
        assert await browser.unlabelled() == []

        # A verification: equal.
        await browser.click("#verify")
        await browser.until(lambda d: [(r["status"], r["device rows"], r["cloud rows"])
                                       for r in browser.table("Verifications")]
                            == [("equal", "40", "40")], "verified equal", limit=90)

        # A row changed in PostgreSQL: found, and repaired by the re-snapshot of its bucket.
        await pool.execute(f"UPDATE {quote_ident(target)} SET v = 'tampered' "
                           "WHERE device_id = $1 AND id = 7", dev.id)
        await browser.click("#verify-repair")
        await browser.type("#verify", Keys.ENTER, clear=False)  # by keyboard
        await browser.until(lambda d: [(r["status"], r["repair"]) for r in
                                       browser.table("Verifications")][:1]
                            == [("different", "re-snapshot started")], "the difference found",
                            limit=90)
        bucket = browser.table("Verifications")[0]["differing buckets"]
        await browser.until(lambda d: [(r["status"], r["filter"])
                                       for r in browser.table("Re-snapshots")]
                            == [("completed", f"bucket(s) {bucket}")], "the bucket re-sent",
                            limit=90)
        await wait_equal(pool, dev, "t", ["id", "v"], limit=60)

        # A filtered re-snapshot: id <= 10 only.
        await browser.click("#add-term")
        await browser.select("#term-0-column", "id")
        await browser.select("#term-0-op", "le")
        await browser.type("#term-0-value", "10")
        assert await browser.unlabelled() == []
        await browser.click("#resnapshot")
        await browser.until(lambda d: "re-snapshot" in browser.text("#status")
                            and "(1 condition(s))" in browser.text("#status"), "requested")
        await browser.until(lambda d: [(r["status"], r["filter"], r["rows"]) for r in
                                       browser.table("Re-snapshots")][:1]
                            == [("completed", "id le 10", "10 sent in 1 chunk(s)")],
                            "only the filtered rows sent", limit=90)
        await browser.shot("lineage-recovery", "#recovery")

        # Deleted and back: the new lineage offers a verification (recovery_offers); the
        # button takes it, and once it came back equal nothing is offered.
        old = uuid.UUID(browser.driver.current_url.rsplit("/", 1)[1])
        await browser.click("#delete")
        await browser.click("dialog[open] #dialog-yes")
        await browser.until(lambda d: "lineage t deleted" in browser.text("#status")
                            and "then: Once the table is back" in browser.text("#status"),
                            "deleted, the next step said")
        app(dev.db, "UPDATE t SET v = 'meanwhile' WHERE id = 3")
        await wait_lineage(pool, dev, "t", lambda r: r["id"] != old, "re-created", limit=60)
        await approve(pool, dev, "t", limit=60)
        await wait_equal(pool, dev, "t", ["id", "v"], limit=60)
        link = await browser.until(lambda d: next(iter(d.find_elements(By.LINK_TEXT, "t")), None),
                                   "the new lineage listed", between=lambda: reload(browser.driver))
        await browser.do(link.click)
        offer = await browser.find("#recovery-offers li[data-action='verify']", "the offer")
        assert "re-created after a delete" in await browser.do(lambda: offer.text)
        assert await browser.unlabelled() == []
        await browser.shot("lineage-offer")
        await browser.click("#recovery-offers button")
        await browser.until(lambda d: "requested for re-created after a delete"
                            in browser.text("#status"), "the offer taken")
        await browser.until(lambda d: [r["status"] for r in browser.table("Verifications")]
                            == ["equal"] and not d.find_elements(By.ID, "recovery-offers"),
                            "equal, nothing offered any more", limit=90,
                            between=lambda: reload(browser.driver), every=10)
    await browser.leave()
    assert browser.severe() == []
