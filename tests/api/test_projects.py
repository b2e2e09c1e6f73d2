"""``GET /core/api/v1/projects``: the organization's projects a token may read, and the
CLI naming a project by its name or topic slug (``--project plant``: issue 27, where the
worker's own log suggested ``--project plant`` and the CLI wanted a UUID)."""

from __future__ import annotations

import asyncpg
import httpx

from edgesync import identity


async def test_a_token_lists_the_projects_it_may_read(client: httpx.AsyncClient, tenant,
                                                      other_tenant, pool: asyncpg.Pool,
                                                      unique: str) -> None:
    async with pool.acquire() as conn:  # a second project in the org, not granted to the reader
        side = await identity.bootstrap(conn, org=f"org-{unique}", project=f"side-{unique}",
                                        topic_slug=f"side-{unique}", admin="admin")
    r = await client.get("/core/api/v1/projects", headers=tenant.headers())
    assert r.status_code == 200, r.text
    assert [(p["id"], p["name"], p["topic_slug"]) for p in r.json()["data"]] == [
        (str(tenant.project_id), tenant.project_name, tenant.slug),
        (str(side.project_id), f"side-{unique}", f"side-{unique}")]
    assert r.json()["meta"]["total"] == 2
    r = await client.get("/core/api/v1/projects", headers=tenant.reader())
    assert [p["name"] for p in r.json()["data"]] == [tenant.project_name]
    # Another organization's token sees its own projects only, and is told when it names
    # an organization that is not its own.
    r = await client.get("/core/api/v1/projects", headers=other_tenant.headers())
    assert [p["name"] for p in r.json()["data"]] == [other_tenant.project_name]
    r = await client.get("/core/api/v1/projects", headers={
        **other_tenant.headers(), "ORG-ID": str(tenant.org_id)})
    assert (r.status_code, r.json()["error"]["code"]) == (403, "ORG_MISMATCH")
    r = await client.get("/core/api/v1/projects")
    assert (r.status_code, r.json()["error"]["code"]) == (401, "UNAUTHENTICATED")


async def test_the_cli_takes_a_project_by_name_or_topic_slug(run, tenant, pool: asyncpg.Pool,
                                                             unique: str) -> None:
    ids = run.conn.index("--project") + 1
    for how, ref in (("name", tenant.project_name), ("slug", tenant.slug)):
        run.conn[ids] = ref
        run("devices", "add", f"gw-by-{how}")
    _, out, _ = run("devices", "list")
    assert "gw-by-name" in out and "gw-by-slug" in out
    run.conn[ids] = "nosuch"
    code, _, err = run("devices", "list", ok=False)
    assert code == 2 and "PROJECT_NOT_FOUND: no project named 'nosuch'" in err
    assert f"there are: {tenant.project_name} (topic slug '{tenant.slug}')" in err
    # A name that is another project's topic slug: ambiguous, each id listed.
    async with pool.acquire() as conn:
        twin = await identity.bootstrap(conn, org=f"org-{unique}", project=tenant.slug,
                                        topic_slug=f"twin-{unique}")
    run.conn[ids] = tenant.slug
    code, _, err = run("devices", "list", ok=False)
    assert code == 2 and "PROJECT_AMBIGUOUS" in err, err
    assert str(tenant.project_id) in err and str(twin.project_id) in err
