"""Issue 27 through the HTTP API, with a real agent making the schema changes (a column
retyped by a table rebuild, then one dropped and one renamed):

1. the preview refuses what the approval refuses (the retyped column onto its old column
   of another type), column by column with a fix; the refused approval of a *queued*
   review changes nothing (status, action_version, claimant), and approving it as it is
   (claim and approve in one transaction) works;
2. the next review carries the previous decisions (``suggested_column_actions``: a
   renamed mirror, an ignored column), and proposes the retyped column;
3. the target columns an approval stops writing are listed by the preview and then by
   the lineage detail (``retired_columns``);

and the CLI shows the suggestions column by column and approves from them."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from kits.e2e_kit import (
    app,
    cloud,
    eventually,
    pool_of,
    register,
    running_agent,
    sqlite_rows,
    state_rows,
    target_of,
    wait_rows,
)
from kits.review_helpers import (
    MACHINES_DROPPED_RENAMED,
    MACHINES_RETYPED,
    MACHINES_V1,
    MACHINES_V1_DECISION,
    MACHINES_V1_ROWS,
)

from edgesync import cli, identity
from edgesync.client._actions import suggested_by_column

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(150)]


class Api:
    def __init__(self, client: httpx.AsyncClient, project: uuid.UUID, token: str,
                 org: uuid.UUID) -> None:
        self.client = client
        self.base = f"/core/api/v1/projects/{project}"
        self.token = token
        self.headers = {"Authorization": f"Bearer {token}", "ORG-ID": str(org)}

    async def get(self, path: str) -> Any:
        r = await self.client.get(self.base + path, headers=self.headers)
        assert r.status_code == 200, r.text
        return r.json()["data"]

    async def cli(self, *args: str) -> tuple[int, str]:
        """``edgesync ARGS`` against this API, in a thread (the server answers on this
        event loop), with its standard output and error."""
        import contextlib
        import io

        out = io.StringIO()

        def run() -> int:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
                return cli.main([*args, "--api-url", str(self.client.base_url),
                                 "--token", self.token, "--org-id", self.headers["ORG-ID"],
                                 "--project", self.base.rsplit("/", 1)[1]])

        code = await asyncio.to_thread(run)
        return code, out.getvalue()

    async def post(self, path: str, body: dict[str, Any]) -> httpx.Response:
        return await self.client.post(self.base + path, json=body, headers={
            **self.headers, "Idempotency-Key": uuid.uuid4().hex})


def suggested(review: dict[str, Any]) -> dict[str, tuple[str, str | None, str]]:
    return {s["source_column_name"]: (s["action"], s["mirror_column_name"], s["suggestion"])
            for s in review["suggested_column_actions"]}


def as_actions(review: dict[str, Any]) -> list[dict[str, Any]]:
    """The suggestions as the body of an approval (what a console sends by default)."""
    return list(suggested_by_column(review["suggested_column_actions"]).values())


async def test_preview_equals_approval_decisions_carry_and_columns_retire(
        tmp_path: Path, database_url: str, mqtt_url: str) -> None:
    unique = uuid.uuid4().hex[:8]
    async with cloud(database_url, mqtt_url, tmp_path / "cloud", unique) as server:
        pool = pool_of(server)
        dev = await register(pool, tmp_path, mqtt_url, unique, tag="dec")
        async with pool.acquire() as conn:
            boot = await identity.bootstrap(conn, org=f"org-dec-{unique}",
                                            project=f"e2e-dec-{unique}",
                                            topic_slug=f"e2e-dec-{unique}")
        assert server.api is not None
        async with httpx.AsyncClient(base_url=server.api.url, timeout=30) as client:
            api = Api(client, boot.project_id, boot.token.token, boot.org_id)
            app(dev.db, MACHINES_V1)
            async with running_agent(dev):
                app(dev.db, MACHINES_V1_ROWS)
                await _story(api, pool, dev)


async def _open_review(api: Api, not_ids: set[str]) -> dict[str, Any]:
    async def probe() -> dict[str, Any] | None:
        for r in await api.get("/edge/schema-reviews?status=queued"):
            if r["id"] not in not_ids:
                return dict(await api.get(f"/edge/schema-reviews/{r['id']}"))
        return None

    found: dict[str, Any] = await eventually(probe, 30, "a queued review")
    return found


async def _story(api: Api, pool: Any, dev: Any) -> None:
    # ---- v1: the first review; state mirrored as machine_state, note ignored
    first = await _open_review(api, set())
    assert {s["suggestion"] for s in first["suggested_column_actions"]} == {"new"}
    r = await api.post(f"/edge/schema-reviews/{first['id']}/approve", {
        "action_version": 1, "column_actions": MACHINES_V1_DECISION})
    assert r.status_code == 200, r.text  # a queued review approved in one step
    assert (r.json()["data"]["status"], r.json()["data"]["action_version"]) == ("approved", 3)
    table = await target_of(pool, dev, "machines")
    await wait_rows(lambda: state_rows(pool, table, dev, ["id", "machine_state", "temp_c"]),
                    lambda: sqlite_rows(dev.db, "SELECT id, state, temp_c FROM machines "
                                                "ORDER BY id"), "v1 mirrored")

    # ---- v2: temp_c REAL → TEXT (the table rebuilt)
    app(dev.db, *MACHINES_RETYPED)
    second = await _open_review(api, {first["id"]})
    assert second["classification"] == "breaking" and second["diff"]["type_changed"] == [
        "temp_c"]
    code, out = await api.cli("reviews", "show", second["id"])
    assert code == 0 and "type changed: temp_c (REAL → TEXT)" in out, out
    assert "needs decision" in out and "carried" in out
    # 2. the decisions carry forward; the retyped column gets a name of its own
    assert suggested(second) == {
        "id": ("mirror", None, "carried"), "state": ("mirror", "machine_state", "carried"),
        "temp_c": ("mirror", "temp_c_text", "needs_decision"),
        "note": ("ignore", None, "carried")}
    # 1. the defaults (mirror everything) are refused by the preview as by the approval
    preview = (await api.post(f"/edge/schema-reviews/{second['id']}/preview", {})).json()
    refusals = preview["data"]["refusals"]
    assert [(x["source_column_name"], x["code"]) for x in refusals] == [
        ("temp_c", "type_conflict")]
    assert "double precision, not text" in refusals[0]["detail"]
    assert "temp_c_text" in refusals[0]["fix"]
    # 3. mirroring state under its own name would stop writing machine_state
    assert [(c["name"], c["source_column_name"]) for c in
            preview["data"]["retired_columns"]] == [("machine_state", "state")]
    code, out = await api.cli("reviews", "approve", second["id"], "--mirror-all")
    assert code != 0 and "refused: temp_c: type_conflict" in out and "temp_c_text" in out, out
    r = await api.post(f"/edge/schema-reviews/{second['id']}/approve", {"action_version": 1})
    assert r.status_code == 409, r.text
    assert r.json()["error"]["code"] == "CONFLICT"
    assert r.json()["error"]["refusals"] == refusals
    unchanged = await api.get(f"/edge/schema-reviews/{second['id']}")
    assert (unchanged["status"], unchanged["action_version"], unchanged["claimed_by"]) == (
        "queued", 1, None)
    # the suggestions pass: the preview has no refusal, the approval goes through
    body = {"column_actions": as_actions(second)}
    preview = (await api.post(f"/edge/schema-reviews/{second['id']}/preview", body)).json()
    assert preview["data"]["refusals"] == []
    assert [c["name"] for c in preview["data"]["retired_columns"]] == ["temp_c"]
    r = await api.post(f"/edge/schema-reviews/{second['id']}/approve",
                       {"action_version": 1, **body})
    assert r.status_code == 200, r.text
    await wait_rows(lambda: state_rows(pool, table, dev, ["id", "machine_state",
                                                          "temp_c_text"]),
                    lambda: sqlite_rows(dev.db, "SELECT id, state, temp_c FROM machines "
                                                "ORDER BY id"), "v2 mirrored")
    assert "note" not in {r["attname"] for r in await pool.fetch(
        "SELECT attname FROM pg_attribute WHERE attrelid = to_regclass($1)", table)}
    lineage = await api.get(f"/edge/lineages/{second['lineage_id']}")
    v2_hash = second["schema_hash"]
    assert [(c["name"], c["pg_type"], c["retired_by_schema_hash"])
            for c in lineage["retired_columns"]] == [("temp_c", "double precision", v2_hash)]

    # ---- v3: note dropped, state renamed to status
    app(dev.db, *MACHINES_DROPPED_RENAMED)
    third = await _open_review(api, {first["id"], second["id"]})
    assert suggested(third) == {
        "id": ("mirror", None, "carried"), "status": ("mirror", None, "new"),
        "temp_c": ("mirror", "temp_c_text", "carried")}
    body = {"column_actions": as_actions(third)}
    preview = (await api.post(f"/edge/schema-reviews/{third['id']}/preview", body)).json()
    assert preview["data"]["refusals"] == []
    assert [c["name"] for c in preview["data"]["retired_columns"]] == ["machine_state"]
    # the CLI: shows the suggestions column by column and approves from them
    code, out = await api.cli("reviews", "show", third["id"])
    assert code == 0, out
    assert "suggested column actions" in out and "needs decision" not in out
    assert "dropped: note, state" in out and "added: status" in out  # not raw JSON
    code, out = await api.cli("reviews", "approve", third["id"])
    assert code == 0, out
    sent = out[out.index("column actions sent"):out.index("\napproved")]
    by_column = {line.split()[0]: line for line in sent.splitlines()[2:] if line.strip()}
    assert "carried" in by_column["id"] and "new" in by_column["status"], sent
    assert "temp_c_text" in by_column["temp_c"] and "carried" in by_column["temp_c"], sent
    await wait_rows(lambda: state_rows(pool, table, dev, ["id", "status", "temp_c_text"]),
                    lambda: sqlite_rows(dev.db, "SELECT id, status, temp_c FROM machines "
                                                "ORDER BY id"), "v3 mirrored")
    lineage = await api.get(f"/edge/lineages/{third['lineage_id']}")
    assert {(c["name"], c["retired_by_schema_hash"]) for c in lineage["retired_columns"]} == {
        ("temp_c", v2_hash), ("machine_state", third["schema_hash"])}
    # the retired column keeps its last values: never written again, never dropped
    stale = await pool.fetchval(f'SELECT machine_state FROM "{table}" WHERE id = 2')
    assert stale == "idle"
