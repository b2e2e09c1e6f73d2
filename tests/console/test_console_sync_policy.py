"""A sync policy made in the browser reaches a running agent (real ``edgesync serve``,
PostgreSQL, Mosquitto, agent, headless Chromium): a file that is not SQLite is refused
with one line at the file input; a sample database's tables come back with suggested
strategies, adjusted and saved; the policy is attached to the device, whose agent
acknowledges it; the device's bundle is downloaded (a tar whose agent.yaml carries the
policy and ``remote_policy: true``, the key mode 0600); an edit (``notes``: ignore → rows)
reaches the agent, whose YAML opts in, without a restart: the table its YAML ignores
appears as a lineage with the rows it held, seen on the Lineages page. And a policy
attached to a fleet by keyboard reaches the agent of a device in it (acknowledged), is
listed among the attachments, and detached again (the agent acknowledges having none)."""

from __future__ import annotations

import contextlib
import io
import sqlite3
import tarfile
import uuid
from pathlib import Path

import asyncpg
import pytest
import yaml
from console_browser import Browser, log_in_to_project_of
from kits.e2e_kit import app, eventually, pool_of, register, running_agent
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webdriver import WebDriver

from edgesync import fleet, syncpolicy
from edgesync.server import Server

pytestmark = [pytest.mark.e2e, pytest.mark.once, pytest.mark.timeout(240)]

APP = ("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)",
       "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
SAMPLE = (*APP, "CREATE TABLE readings (id INTEGER PRIMARY KEY, read_at TEXT NOT NULL, "
                "temp REAL, hum REAL)")
NOTES = 6
# The refused upload (422) is provoked on purpose.
EXPECTED_NETWORK = (" 422 ",)


def _sample(path: Path) -> Path:
    with contextlib.closing(sqlite3.connect(path)) as db, db:
        for stmt in SAMPLE:
            db.execute(stmt)
        db.execute("INSERT INTO readings (read_at, temp, hum) "
                   "VALUES ('2026-01-01T00:00:00Z', 20, 50)")
    return path


def reload(driver: WebDriver) -> object:
    return driver.execute_script("window.dispatchEvent(new Event('console:reload'))")


def strategy_of(browser: Browser, table: str) -> str:
    found = browser.driver.find_elements(By.CSS_SELECTOR, f"select.strategy[data-table='{table}']")
    return str(found[0].get_attribute("value")) if found else ""


async def test_sync_policy_from_a_sample_reaches_the_running_agent(
        console_server: Server, browser: Browser, tmp_path: Path, mqtt_url: str) -> None:
    await browser.start()
    unique = uuid.uuid4().hex[:8]
    pool = pool_of(console_server)
    dev = await register(pool, tmp_path, mqtt_url, unique, tag="pol", remote_policy=True,
                         snapshot_on_first_run=True)
    # The YAML opts in to the remote policy and ignores notes.
    dev.config.write_text(dev.config.read_text()
                          + "  table_strategies:\n    notes:\n      strategy: ignore\n")
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    await browser.downloads_to(downloads)
    not_sqlite = tmp_path / "notes.txt"
    not_sqlite.write_text("just text\n")
    sample = _sample(tmp_path / "sample.db")
    app(dev.db, *APP, ("INSERT INTO notes VALUES (?, ?)",
                       [(i, f"note {i}") for i in range(1, NOTES + 1)]))

    async with running_agent(dev):
        app(dev.db, ("INSERT INTO t VALUES (?, ?)", [(1, "one"), (2, "two")]))
        await log_in_to_project_of(browser, console_server, dev.scope.project_id)
        await browser.click("#nav a[href='#/lineages']")
        await browser.until(lambda d: [r["table"] for r in browser.table("Lineages")] == ["t"],
                            "t synced, notes ignored by the YAML",
                            between=lambda: reload(browser.driver))

        # ---- a new policy: a file that is not SQLite first, then the sample
        await browser.click("#nav a[href='#/sync-policies']")
        await browser.until(lambda d: "Sync policies: none yet" in browser.text("main"),
                            "no policy")
        await browser.type("#new-policy-name", "floor")
        await browser.type("#new-policy-description", "the plant floor's gateways")
        await browser.type("#sample-file", str(not_sqlite), clear=False)
        await browser.until(lambda d: "not a SQLite database" in browser.text("#sample-error"),
                            "a file that is not SQLite refused in one line")
        assert "\n" not in browser.text("#sample-error")
        assert await browser.do(lambda: browser.driver.find_element(
            By.ID, "sample-file").get_attribute("aria-invalid")) == "true"
        assert not await browser.do(lambda: browser.driver.find_element(
            By.ID, "create-policy").is_enabled())
        await browser.type("#sample-file", str(sample), clear=False)
        await browser.until(lambda d: strategy_of(browser, "readings") == "telemetry",
                            "the sample's tables with suggestions")
        assert [strategy_of(browser, t) for t in ("t", "notes")] == ["rows", "rows"]
        assert "1 row(s) in the sample" in browser.text(
            "fieldset.table-strategy[data-table='readings']")
        assert await browser.do(lambda: browser.driver.find_element(
            By.CSS_SELECTOR, "select.ts-column[data-table='readings']").get_attribute("value")
        ) == "read_at"
        # notes stays ignored; readings does not send hum (unticked)
        await browser.select("select.strategy[data-table='notes']", "ignore")
        await browser.click("input[data-table='readings'][data-column='hum']")
        assert await browser.unlabelled() == []
        await browser.shot("sync-policy-new")
        await browser.click("#create-policy")
        await browser.until(lambda d: "Sync policy floor" in browser.text("h1"), "created")
        policy_id = browser.driver.current_url.rsplit("/", 1)[1]
        stored = await pool.fetchrow("SELECT table_strategies, sample_tables, version "
                                     "FROM edge_sync_policies WHERE id = $1", uuid.UUID(policy_id))
        assert stored["table_strategies"] == {
            "t": {"strategy": "rows"}, "notes": {"strategy": "ignore"},
            "readings": {"strategy": "telemetry", "ts_column": "read_at",
                         "include_columns": ["id", "temp"]}}
        assert stored["sample_tables"]["readings"] == ["id", "read_at", "temp", "hum"]

        # ---- attached to the device: its agent acknowledges version 1
        assert "Governed devices: not attached" in browser.text("#governed")
        await browser.select("#attach-device", str(dev.id))
        await browser.type("#attach-device-button", Keys.ENTER, clear=False)  # by keyboard
        await browser.until(lambda d: [r.get("delivery") for r in browser.table("Governed devices")]
                            == ["version 1 acknowledged"], "version 1 acknowledged by the agent",
                            limit=60)
        assert await browser.unlabelled() == []

        # ---- the bundle, with the policy
        await browser.do(lambda: browser.driver.find_element(
            By.LINK_TEXT, dev.scope.device_name).click())
        await browser.until(lambda d: "floor version 1 (attached to its device)"
                            in browser.text("dl.facts"), "the device's page names its policy")
        await browser.click("#bundle-download")
        await browser.until(lambda d: "mqtt_url" in browser.text("#bundle-error"),
                            "no broker URL (the server has none): the field named")
        await browser.type("#bundle-mqtt-url", "ssl://broker.example:8883")
        await browser.click("#bundle-download")
        await browser.until(lambda d: "with sync policy floor version 1" in browser.text("#status"),
                            "bundle downloaded")
        assert await browser.unlabelled() == []
        await browser.shot("device")
        tar = await browser.downloaded(downloads, f"{dev.scope.device_name}-bundle.tar")
        with tarfile.open(tar) as archive:
            members = {m.name: m for m in archive.getmembers()}
            assert {"agent.yaml", "agent.env", "device.pem", "device.key"} <= set(members)
            assert members["device.key"].mode == 0o600
            assert members["agent.env"].mode == 0o600
            agent_yaml = archive.extractfile("agent.yaml")
            assert agent_yaml is not None
            text = agent_yaml.read().decode()
        replication = yaml.safe_load(io.StringIO(text))["sqlite-replication"]
        assert replication["remote_policy"] is True
        assert replication["table_strategies"] == stored["table_strategies"]
        assert "sync policy 'floor' version 1" in text

        # ---- the edit: notes ignore → rows; version 2 reaches the agent, which applies it
        await browser.click("#nav a[href='#/sync-policies']")
        await browser.until(lambda d: [r.get("version") for r in browser.table("Sync policies")]
                            == ["1"], "the policy listed")
        await browser.do(lambda: browser.driver.find_element(By.LINK_TEXT, "floor").click())
        await browser.until(lambda d: strategy_of(browser, "notes") == "ignore", "the editor")
        await browser.select("select.strategy[data-table='notes']", "rows")
        await browser.click("#save-policy")
        await browser.until(lambda d: "saved: version 2; its devices are sent the change"
                            in browser.text("#status"), "saved")
        await browser.until(lambda d: [r.get("delivery") for r in browser.table("Governed devices")]
                            == ["version 2 acknowledged"], "version 2 acknowledged", limit=60)
        await browser.shot("sync-policy")

        # The agent runs with the policy now: notes (ignored by its YAML) is a lineage, its
        # rows sent by the first-run snapshot.
        await browser.click("#nav a[href='#/lineages']")
        await browser.until(lambda d: [r["staged rows"] for r in browser.table("Lineages")
                                       if r["table"] == "notes"] == [str(NOTES)],
                            "notes newly synced, all its rows",
                            between=lambda: reload(browser.driver), every=10, limit=60)
    await browser.leave()
    assert browser.severe(EXPECTED_NETWORK) == []


async def test_attached_to_a_fleet_and_detached(console_server: Server, browser: Browser,
                                                tmp_path: Path, mqtt_url: str) -> None:
    await browser.start()
    unique = uuid.uuid4().hex[:8]
    pool = pool_of(console_server)
    dev = await register(pool, tmp_path, mqtt_url, unique, tag="flt", fleet="line-2")
    assert dev.scope.fleet_id is not None
    fleet_id = str(dev.scope.fleet_id)
    async with pool.acquire() as conn:
        policy = await syncpolicy.create_policy(conn, dev.scope.project_id, name="line",
                                                table_strategies={"t": {"strategy": "rows"}})
        # A fleet no device is in yet: offered too (GET /fleets, not the devices' fleets).
        await fleet.ensure_fleet(conn, dev.scope.project_id, "spare")
    app(dev.db, APP[0])

    async def last_control() -> asyncpg.Record | None:
        return await pool.fetchrow(
            "SELECT status, body FROM edge_pending_controls WHERE device_id = $1 "
            "AND control_kind = 'sync_policy' ORDER BY created_at DESC LIMIT 1", dev.id)

    async with running_agent(dev):
        await log_in_to_project_of(browser, console_server, dev.scope.project_id)
        await browser.click("#nav a[href='#/sync-policies']")
        await browser.click(f"main a[href='#/sync-policies/{policy.id}']")
        await browser.until(lambda d: "Attachments: not attached to any device or fleet"
                            in browser.text("#attachments"), "nothing attached yet")
        assert await browser.do(lambda: [o.text for o in browser.driver.find_elements(
            By.CSS_SELECTOR, "#attach-fleet option")]) == ["line-2 (1 device)", "spare (0 devices)"]

        # ---- attached to the fleet, by keyboard: its device's agent acknowledges
        await browser.select("#attach-fleet", fleet_id)
        await browser.type("#attach-fleet-button", Keys.ENTER, clear=False)
        await browser.until(lambda d: "attached to fleet line-2" in browser.text("#status"),
                            "attached")
        await browser.until(lambda d: [(r["kind"], r["name"], r["devices"])
                                       for r in browser.table("Attachments")]
                            == [("fleet", "line-2", "1 device")], "the fleet's attachment listed")
        await browser.until(lambda d: [(r["device"], r["attached via"], r["delivery"])
                                       for r in browser.table("Governed devices")]
                            == [(dev.scope.device_name, "fleet line-2", "version 1 acknowledged")],
                            "version 1 acknowledged by the fleet's device", limit=60)
        control = await last_control()
        assert control is not None and control["status"] == "acked"
        assert control["body"]["policy_name"] == "line"
        assert await browser.unlabelled() == []
        await browser.shot("sync-policy-attachments", "#attachments")

        # ---- detached, by keyboard: the device has no policy, its agent acknowledges that
        detach = await browser.find("button[aria-label='detach from fleet line-2']")
        await browser.do(detach.send_keys, Keys.ENTER)
        await browser.until(lambda d: "detached from fleet line-2" in browser.text("#status"),
                            "detached")
        await browser.until(lambda d: "Attachments: not attached" in browser.text("#attachments")
                            and "Governed devices: not attached" in browser.text("#governed"),
                            "nothing attached, nothing governed")

        async def none_acked() -> asyncpg.Record | None:
            c = await last_control()
            return c if c and c["status"] == "acked" and c["body"]["policy_id"] is None else None
        control = await eventually(none_acked, 60, "the detach acknowledged by the agent")
        assert control["body"]["table_strategies"] is None
        assert await browser.unlabelled() == []
    await browser.leave()
    assert browser.severe() == []
