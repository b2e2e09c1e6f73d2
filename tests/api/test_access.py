"""Authentication, the ORG-ID header, permissions, and no existence leaks: every
mutating route answers 404 to a token of another org or project (403 ORG_MISMATCH when it
names an org that is not its own), 403 to a reader."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import asyncpg
import httpx
import pytest

from edgesync import governance, identity, syncpolicy


def idem() -> dict[str, str]:
    return {"Idempotency-Key": str(uuid.uuid4())}


@dataclass
class World:
    """One tenant's objects: a device review (mode none), then a fleet registry review."""

    lineage_id: uuid.UUID
    review_id: uuid.UUID
    device_id: uuid.UUID
    registry_review_id: uuid.UUID
    fleet_id: uuid.UUID
    data_point_id: uuid.UUID
    policy_id: uuid.UUID

    @property
    def ids(self) -> dict[str, uuid.UUID]:
        return {"lineage_id": self.lineage_id, "review_id": self.review_id,
                "device_id": self.device_id, "registry_review_id": self.registry_review_id,
                "fleet_id": self.fleet_id, "policy_id": self.policy_id}


async def _world(tenant, stage, stage_registry, pool: asyncpg.Pool) -> World:
    s = await stage(tenant)
    registry_review_id, (r,) = await stage_registry(tenant, "gw-r1", mode="fleet",
                                                    fleet="north")
    async with pool.acquire() as conn:
        dp = await governance.create_data_point(conn, tenant.project_id, name="temp",
                                                value_type="real")
        policy = await syncpolicy.create_policy(conn, tenant.project_id, name="floor",
                                                table_strategies={"t": {"strategy": "rows"}})
    return World(s.lineage_id, s.review_id, s.device.device_id, registry_review_id,
                 r.device.fleet_id, dp.id, policy.id)


# A quarantined row id in the listed paths.
_ROW = 987654321

# (method, path under the project, body): every mutation the API has.
def mutations(lineage_id: uuid.UUID, review_id: uuid.UUID, device_id: uuid.UUID,
              registry_review_id: uuid.UUID, fleet_id: uuid.UUID, policy_id: uuid.UUID
              ) -> list[tuple[str, str, Any]]:
    registry = [
        (f"{prefix}/edge/registry-reviews/{registry_review_id}/{action}", body)
        for prefix in ("", f"/fleets/{fleet_id}")
        for action, body in (("claim", {"action_version": 1}),
                             ("approve", {"action_version": 1}),
                             ("reject", {"action_version": 1, "reason": "no"}),
                             ("abandon", {"action_version": 1}))]
    return [
        ("POST", f"/edge/lineages/{lineage_id}/reset-materialization", None),
        ("POST", f"/edge/lineages/{lineage_id}/reopen-review", None),
        ("POST", f"/edge/lineages/{lineage_id}/discard-staged", {}),
        ("POST", f"/edge/lineages/{lineage_id}/resnapshot", None),
        ("POST", f"/edge/lineages/{lineage_id}/verify", None),
        ("POST", f"/edge/lineages/{lineage_id}/replay-rejected", {}),
        ("POST", f"/edge/lineages/{lineage_id}/sync-authority",
         {"sync_authority": "cloud_authoritative"}),
        ("POST", f"/edge/lineages/{lineage_id}/quarantine/retry", None),
        ("POST", f"/edge/lineages/{lineage_id}/quarantine/discard", None),
        ("POST", f"/edge/lineages/{lineage_id}/quarantine/{_ROW}/retry", None),
        ("POST", f"/edge/lineages/{lineage_id}/quarantine/{_ROW}/discard", None),
        ("DELETE", f"/edge/lineages/{lineage_id}", None),
        ("POST", f"/edge/schema-reviews/{review_id}/claim", {"action_version": 1}),
        ("POST", f"/edge/schema-reviews/{review_id}/approve", {"action_version": 1}),
        ("POST", f"/edge/schema-reviews/{review_id}/reject", {"action_version": 1}),
        *(("POST", path, body) for path, body in registry),
        *(("POST", f"{prefix}/edge/coalesced-mirrors/device_state/consolidate", None)
          for prefix in ("", f"/fleets/{fleet_id}")),
        ("POST", "/edge/data-points", {"name": "intruder", "value_type": "real"}),
        ("PATCH", "/edge/policy", {"schema_coalescing_mode": "project"}),
        ("POST", "/edge/sync-policies", {"name": "intruder"}),
        ("PATCH", f"/edge/sync-policies/{policy_id}",
         {"table_strategies": {"t": {"strategy": "ignore"}}}),
        ("DELETE", f"/edge/sync-policies/{policy_id}", None),
        ("POST", f"/edge/sync-policies/{policy_id}/attach", {"device_id": str(device_id)}),
        ("POST", f"/edge/sync-policies/{policy_id}/detach", {"device_id": str(device_id)}),
        ("POST", "/devices", {"name": "intruder"}),
        ("POST", f"/devices/{device_id}/credentials", {"kind": "password"}),
        ("POST", f"/devices/{device_id}/bundle", {"mqtt_url": "ssl://broker.example:8883"}),
        ("POST", f"/devices/{device_id}/revoke", {}),
        ("POST", f"/devices/{device_id}/edge/state-tables/{lineage_id}/rows",
         {"rows": [{"pk": {"id": 1}, "values": {"mode": "off"}}]}),
    ]


# Routes that create in, or change, the caller's own project whatever ids they name.
_OWN_PROJECT = ("/devices", "/edge/policy", "/edge/data-points", "/edge/sync-policies")
# Routes naming only a table: in the caller's own project (mode none there) they are a 409.
_OWN_PROJECT_CONFLICT = ("/edge/coalesced-mirrors/device_state/consolidate",)
_NOT_FOUND = ("LINEAGE_NOT_FOUND", "REVIEW_NOT_FOUND", "DEVICE_NOT_FOUND",
              "REGISTRY_REVIEW_NOT_FOUND", "FLEET_NOT_FOUND", "SYNC_POLICY_NOT_FOUND")


# POST only to carry a body: they change nothing (approval previews, the introspection
# of a sample database).
_READ_ONLY_POSTS = ("/preview", "/introspect")


def test_every_mutating_route_is_listed(app) -> None:
    routes = {(m.upper(), path) for path, ops in app.openapi()["paths"].items()
              for m in ops if m in ("post", "patch", "put", "delete")
              and not path.endswith(_READ_ONLY_POSTS)}
    ids = {name: uuid.uuid4() for name in ("lineage_id", "review_id", "device_id",
                                           "registry_review_id", "fleet_id", "policy_id")}
    listed = set()
    for method, path, _ in mutations(**ids):
        for name, value in ids.items():
            path = path.replace(str(value), "{review_id}" if name == "registry_review_id"
                                else "{" + name + "}")
        path = path.replace("/device_state/consolidate", "/{source_table}/consolidate")
        path = path.replace(f"/quarantine/{_ROW}/", "/quarantine/{row_id}/")
        listed.add((method, "/core/api/v1/projects/{project_id}" + path))
    assert routes == listed


async def _state(pool: asyncpg.Pool, tenant, w: World) -> tuple[Any, ...]:
    return (
        await pool.fetchval("SELECT count(*) FROM edge_table_lineages WHERE id = $1",
                            w.lineage_id),
        tuple(await pool.fetchrow("SELECT status, action_version FROM edge_schema_reviews "
                                  "WHERE id = $1", w.review_id)),
        tuple(await pool.fetchrow("SELECT status, action_version FROM edge_registry_reviews "
                                  "WHERE id = $1", w.registry_review_id)),
        await pool.fetchval("SELECT count(*) FROM edge_schema_reviews r JOIN "
                            "edge_table_lineages l ON l.id = r.lineage_id "
                            "WHERE l.project_id = $1", tenant.project_id),
        await pool.fetchval("SELECT count(*) FROM edge_device_data_points "
                            "WHERE project_id = $1", tenant.project_id),
        await pool.fetchval("SELECT policy FROM edge_projects WHERE id = $1", tenant.project_id),
        await pool.fetchval("SELECT count(*) FROM edge_devices WHERE project_id = $1",
                            tenant.project_id),
        await pool.fetchval("SELECT count(*) FROM edge_replay_intents WHERE lineage_id = $1",
                            w.lineage_id),
        await pool.fetchval("SELECT count(*) FROM edge_pending_controls WHERE lineage_id = $1",
                            w.lineage_id),
        tuple(await pool.fetchrow("SELECT version, table_strategies::text FROM "
                                  "edge_sync_policies WHERE id = $1", w.policy_id)),
        await pool.fetchval("SELECT count(*) FROM edge_sync_policy_attachments "
                            "WHERE policy_id = $1", w.policy_id),
        tuple(await pool.fetchrow("SELECT revoked_at, control_token, (SELECT count(*) FROM "
                                  "edge_device_credentials WHERE device_id = d.id) FROM "
                                  "edge_devices d WHERE id = $1", w.device_id)),
        await pool.fetchval("SELECT count(*) FROM edge_sync_policies WHERE project_id = $1",
                            tenant.project_id),
    )


async def test_other_org_gets_404_on_every_mutation(client: httpx.AsyncClient, tenant,
                                                    other_tenant, stage, stage_registry,
                                                    pool: asyncpg.Pool) -> None:
    w = await _world(tenant, stage, stage_registry, pool)
    before = await _state(pool, tenant, w)
    nowhere = await client.request("POST", f"/core/api/v1/projects/{uuid.uuid4()}/devices",
                                   headers=other_tenant.headers(**idem()), json={"name": "x"})
    assert nowhere.status_code == 404
    mismatch = await client.request(
        "POST", f"/core/api/v1/projects/{uuid.uuid4()}/devices", json={"name": "x"},
        headers={**other_tenant.headers(**idem()), "ORG-ID": str(tenant.org_id)})
    assert mismatch.json()["error"] == {
        "code": "ORG_MISMATCH", "field": "ORG-ID",
        "message": f"this token belongs to organization {other_tenant.org_id}, not "
                   f"{tenant.org_id}; send that id as ORG-ID (--org-id, env EDGESYNC_ORG_ID)"}
    for method, path, body in mutations(**w.ids):
        # Other org's token and ORG-ID, aimed at this tenant's project.
        r = await client.request(method, tenant.url(path), json=body,
                                 headers=other_tenant.headers(**idem()))
        assert (r.status_code, r.json()) == (404, nowhere.json()), (method, path, r.text)
        # Other org's token, claiming this tenant's org: told the org is not its own,
        # before any project is looked at (the same answer for a project that does not
        # exist: nothing of this tenant leaks).
        r = await client.request(method, tenant.url(path), json=body, headers={
            **other_tenant.headers(**idem()), "ORG-ID": str(tenant.org_id)})
        assert (r.status_code, r.json()) == (403, mismatch.json()), (method, path, r.text)
        # Other org's token on its own project, naming this tenant's objects.
        r = await client.request(method, other_tenant.url(path), json=body,
                                 headers=other_tenant.headers(**idem()))
        if path in _OWN_PROJECT:
            assert r.status_code in (200, 201), (method, path, r.text)  # its own project
        elif path in _OWN_PROJECT_CONFLICT:
            assert r.status_code == 409, (method, path, r.text)
        else:
            assert r.status_code == 404, (method, path, r.text)
            assert r.json()["error"]["code"] in _NOT_FOUND, (method, path, r.text)
    assert await _state(pool, tenant, w) == before


async def test_other_project_in_same_org_gets_404(client: httpx.AsyncClient, tenant, stage,
                                                  stage_registry, pool: asyncpg.Pool,
                                                  unique: str) -> None:
    w = await _world(tenant, stage, stage_registry, pool)
    async with pool.acquire() as conn:
        other = await identity.bootstrap(conn, org=f"org-{unique}", project=f"side-{unique}",
                                         topic_slug=f"side-{unique}", admin="side-admin")
    assert other.org_id == tenant.org_id
    before = await _state(pool, tenant, w)
    headers = tenant.headers(other.token.token)
    for method, path, body in mutations(**w.ids):
        r = await client.request(method, tenant.url(path), json=body,
                                 headers={**headers, **idem()})
        assert r.status_code == 404, (method, path, r.text)
        assert r.json()["error"]["code"] == "PROJECT_NOT_FOUND"
        # Its own project, this tenant's lineage/review ids.
        r = await client.request(method, f"/core/api/v1/projects/{other.project_id}{path}",
                                 json=body, headers={**headers, **idem()})
        if path in _OWN_PROJECT_CONFLICT:
            assert r.status_code == 409, (method, path, r.text)
        elif path not in _OWN_PROJECT:
            assert r.status_code == 404, (method, path, r.text)
            assert r.json()["error"]["code"] in _NOT_FOUND, (method, path, r.text)
    assert await _state(pool, tenant, w) == before


async def test_readers_get_403_on_every_mutation(client: httpx.AsyncClient, tenant, stage,
                                                 stage_registry, pool: asyncpg.Pool) -> None:
    w = await _world(tenant, stage, stage_registry, pool)
    before = await _state(pool, tenant, w)
    for method, path, body in mutations(**w.ids):
        r = await client.request(method, tenant.url(path), json=body,
                                 headers=tenant.reader(**idem()))
        assert r.status_code == 403, (method, path, r.text)
        assert r.json()["error"]["code"] == "PERMISSION_DENIED"
    assert await _state(pool, tenant, w) == before


async def test_reads_are_scoped_too(client: httpx.AsyncClient, tenant, other_tenant,
                                    stage, stage_registry, pool: asyncpg.Pool) -> None:
    w = await _world(tenant, stage, stage_registry, pool)
    entry = await pool.fetchval("SELECT registry_id FROM edge_registry_reviews WHERE id = $1",
                                w.registry_review_id)
    fleet = f"/fleets/{w.fleet_id}/edge"
    owned = (f"/edge/lineages/{w.lineage_id}", f"/edge/schema-reviews/{w.review_id}",
             f"/edge/lineages/{w.lineage_id}/telemetry", f"/edge/registry/{entry}",
             f"/edge/registry-reviews/{w.registry_review_id}",
             f"/edge/data-points/{w.data_point_id}",
             f"/edge/data-points/{w.data_point_id}/values", f"{fleet}/registry",
             f"{fleet}/registry-reviews", f"{fleet}/coalesced-mirrors",
             f"{fleet}/registry-reviews/{w.registry_review_id}",
             f"/edge/sync-policies/{w.policy_id}", f"/edge/sync-policies/{w.policy_id}/devices",
             f"/edge/sync-policies/{w.policy_id}/attachments",
             f"/devices/{w.device_id}", f"/devices/{w.device_id}/credentials",
             f"/devices/{w.device_id}/sync-policy")
    for path in ("/edge/lineages", f"/edge/lineages/{w.lineage_id}/staged-rows",
                 f"/edge/lineages/{w.lineage_id}/mirror-rows", "/edge/schema-reviews",
                 "/edge/policy", "/devices", "/events/stream", "/edge/registry",
                 "/edge/registry-reviews", "/edge/coalesced-mirrors", "/edge/data-points",
                 "/edge/sync-policies", "/edge/observations", "/fleets", *owned):
        r = await client.get(tenant.url(path), headers=other_tenant.headers())
        assert r.status_code == 404, (path, r.text)
        assert r.json()["error"]["code"] == "PROJECT_NOT_FOUND"
        if any(k in path for k in ("registry", "mirrors", "data-points")):  # the reader may
            r = await client.get(tenant.url(path), headers=tenant.reader())
            assert r.status_code == 200, (path, r.text)
    for path in owned:  # the other tenant's own project, naming this tenant's objects
        r = await client.get(other_tenant.url(path), headers=other_tenant.headers())
        assert r.status_code == 404, (path, r.text)


@pytest.mark.parametrize("headers, status, code", [
    ({}, 401, "UNAUTHENTICATED"),
    ({"Authorization": "Bearer esk_nope"}, 401, "UNAUTHENTICATED"),
    ({"Authorization": "Basic dXNlcjpwYXNz"}, 401, "UNAUTHENTICATED"),
])
async def test_authentication_is_required(client: httpx.AsyncClient, tenant, headers, status,
                                          code) -> None:
    r = await client.get(tenant.url("/edge/lineages"),
                         headers={"ORG-ID": str(tenant.org_id), **headers})
    assert (r.status_code, r.json()["error"]["code"]) == (status, code)
    assert r.headers["WWW-Authenticate"].startswith("Bearer")


async def test_org_id_header_is_required(client: httpx.AsyncClient, tenant) -> None:
    auth = {"Authorization": f"Bearer {tenant.admin_token}"}
    r = await client.get(tenant.url("/edge/lineages"), headers=auth)
    assert (r.status_code, r.json()["error"]["code"]) == (400, "ORG_ID_REQUIRED")
    r = await client.get(tenant.url("/edge/lineages"), headers={**auth, "ORG-ID": "acme"})
    assert (r.status_code, r.json()["error"]["code"]) == (400, "INVALID_ORG_ID")
    assert r.json()["error"]["field"] == "ORG-ID"


async def test_revoked_token_stops_working(client: httpx.AsyncClient, tenant,
                                           pool: asyncpg.Pool) -> None:
    ok = await client.get(tenant.url("/devices"), headers=tenant.reader())
    assert ok.status_code == 200
    await pool.execute("UPDATE edge_api_tokens SET revoked_at = now() WHERE token_hash = $1",
                       identity.hash_token(tenant.reader_token))
    r = await client.get(tenant.url("/devices"), headers=tenant.reader())
    assert r.status_code == 401
