"""Projects, fleets and devices.

A message's topic names ``{topic_slug}/{device_name}``; the device resolver turns that
pair into the device, its project and fleet. Nothing in a payload can.
"""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

from edgesync.errors import ConfigError, ConflictError
from edgesync.fleet._policy import ProjectPolicy
from edgesync.store import Conn, any_of

__all__ = ["DeviceResolver", "DeviceScope", "add_device", "ensure_fleet", "ensure_project",
           "get_device", "revoke_device"]

# Device names become one MQTT topic level and the client id: no wildcards, no slash.
_DEVICE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_SLUG = re.compile(r"^(|[a-z0-9][a-z0-9._-]{0,62})$")


@dataclass(frozen=True, slots=True)
class DeviceScope:
    device_id: uuid.UUID
    device_name: str
    project_id: uuid.UUID
    fleet_id: uuid.UUID | None
    topic_slug: str
    policy: ProjectPolicy

    @property
    def root_topic(self) -> str:
        return f"{self.topic_slug}/{self.device_name}"


_SCOPE_SQL = """
SELECT d.id AS device_id, d.name AS device_name, d.project_id, d.fleet_id,
       p.topic_slug, p.policy
FROM edge_devices d JOIN edge_projects p ON p.id = d.project_id
"""


# One project's devices by name, each found by one probe of the (project_id, name)
# index whatever the statistics say (LIMIT keeps the planner from flattening the
# lateral join). Joined with an unnest of (slug, name) pairs instead, it could probe the
# index by project alone and filter every device of the project for each name (seen:
# ~1,000 buffers and 28 ms a lookup at 10,000 devices, whose scopes expire every 30 s).
# A revoked device is unknown to ingest: its messages are refused.
_BY_NAMES_SQL = """
SELECT d.id AS device_id, d.name AS device_name, d.project_id, d.fleet_id,
       p.topic_slug, p.policy
FROM edge_projects p CROSS JOIN unnest($2::text[]) AS k(name)
CROSS JOIN LATERAL (SELECT id, name, project_id, fleet_id FROM edge_devices
                    WHERE project_id = p.id AND name = k.name AND revoked_at IS NULL
                    LIMIT 1) AS d
WHERE p.topic_slug = $1
"""


def _scope(row: asyncpg.Record) -> DeviceScope:
    return DeviceScope(row["device_id"], row["device_name"], row["project_id"], row["fleet_id"],
                       row["topic_slug"], ProjectPolicy.from_stored(row["policy"]))


async def ensure_project(conn: Conn, name: str, topic_slug: str) -> uuid.UUID:
    if not _SLUG.match(topic_slug):
        raise ConfigError("topic_slug", f"{topic_slug!r} must be lowercase letters, digits, . _ -")
    row = await conn.fetchrow("SELECT id, topic_slug FROM edge_projects WHERE name = $1", name)
    if row:
        if row["topic_slug"] != topic_slug:
            raise ConflictError(
                f"project {name!r} exists with topic slug {row['topic_slug']!r}, "
                f"not {topic_slug!r}")
        return uuid.UUID(str(row["id"]))
    try:
        await conn.execute(
            "INSERT INTO edge_projects (id, name, topic_slug) VALUES ($1, $2, $3)",
            new_id := uuid.uuid4(), name, topic_slug)
    except asyncpg.UniqueViolationError as exc:
        raise ConflictError(f"topic slug {topic_slug!r} is used by another project") from exc
    return new_id


async def ensure_fleet(conn: Conn, project_id: uuid.UUID, name: str) -> uuid.UUID:
    row = await conn.fetchval(
        "INSERT INTO edge_fleets (id, project_id, name) VALUES ($1, $2, $3) "
        "ON CONFLICT (project_id, name) DO UPDATE SET name = EXCLUDED.name RETURNING id",
        uuid.uuid4(), project_id, name)
    return uuid.UUID(str(row))


async def add_device(conn: Conn, *, project: str, name: str, topic_slug: str = "",
                     fleet: str | None = None) -> DeviceScope:
    """Register a device (creating its project and fleet when new)."""
    if not _DEVICE_NAME.match(name):
        raise ConfigError("name", f"device name {name!r} must match {_DEVICE_NAME.pattern}")
    async with conn.transaction():
        project_id = await ensure_project(conn, project, topic_slug)
        fleet_id = await ensure_fleet(conn, project_id, fleet) if fleet else None
        try:
            await conn.execute(
                "INSERT INTO edge_devices (id, project_id, fleet_id, name) "
                "VALUES ($1, $2, $3, $4)",
                uuid.uuid4(), project_id, fleet_id, name)
        except asyncpg.UniqueViolationError as exc:
            raise ConflictError(
                f"device name {name!r} is already in use in project {project!r}") from exc
        scope = await get_device(conn, topic_slug, name)
    assert scope is not None
    return scope


async def get_device(conn: Conn, topic_slug: str, name: str) -> DeviceScope | None:
    row = await conn.fetchrow(_SCOPE_SQL + "WHERE p.topic_slug = $1 AND d.name = $2",
                              topic_slug, name)
    return _scope(row) if row else None


async def revoke_device(conn: Conn, device_id: uuid.UUID) -> datetime | None:
    """Mark the device revoked (kept, for the record and its data); the resolver stops
    resolving it, so ingest refuses its messages. Returns when it was revoked (the first
    time, for a device revoked before); None when there is no such device."""
    got = await conn.fetchval(
        "UPDATE edge_devices SET revoked_at = coalesce(revoked_at, now()) WHERE id = $1 "
        "RETURNING revoked_at", device_id)
    return got if isinstance(got, datetime) else None


class DeviceResolver:
    """Topic → device scope, cached briefly so ingest does not read ``edge_devices`` per message.
    A revoked device resolves to None (refused as an unknown device) once its cached
    scope expires (``ttl``, 30 s) or ``forget`` is called.

    Lookups of concurrent callers share one query (a fleet coming online resolves
    thousands of devices at once; one round trip and one pool checkout each would cost
    more than their batches)."""

    def __init__(self, pool: asyncpg.Pool, ttl: float = 30.0) -> None:
        self._pool = pool
        self._ttl = ttl
        self._cache: dict[tuple[str, str], tuple[float, DeviceScope | None]] = {}
        self._waiting: dict[tuple[str, str], asyncio.Future[DeviceScope | None]] = {}
        self._lookup: asyncio.Task[None] | None = None

    async def resolve(self, topic_slug: str, device_name: str) -> DeviceScope | None:
        key = (topic_slug, device_name)
        hit = self._cache.get(key)
        now = time.monotonic()
        # Unknown devices are cached for a shorter time so a fresh registration shows up fast.
        if hit and now - hit[0] < (self._ttl if hit[1] else 2.0):
            return hit[1]
        fut = self._waiting.get(key)
        if fut is None:
            fut = self._waiting[key] = asyncio.get_running_loop().create_future()
            if self._lookup is None or self._lookup.done():
                self._lookup = asyncio.create_task(self._look_up_waiting(),
                                                   name="edgesync.fleet.lookup")
        # Shielded: one caller giving up must not cancel the others' answer.
        return await asyncio.shield(fut)

    async def _look_up_waiting(self) -> None:
        await asyncio.sleep(0)  # the other callers of this moment join in
        while self._waiting:
            batch, self._waiting = self._waiting, {}
            names: dict[str, list[str]] = {}
            for slug, name in batch:
                names.setdefault(slug, []).append(name)
            try:
                async with self._pool.acquire() as conn:
                    rows = [r for slug, wanted in names.items()
                            for r in await conn.fetch(_BY_NAMES_SQL, slug, wanted)]
                # Inside the try: a scope that cannot be built (a stored policy that is no
                # policy) fails its callers instead of leaving them waiting.
                found = {(r["topic_slug"], r["device_name"]): _scope(r) for r in rows}
            except BaseException as exc:
                for fut in batch.values():
                    if not fut.done():
                        fut.set_exception(exc)
                if isinstance(exc, Exception):
                    continue
                raise
            now = time.monotonic()
            for key, fut in batch.items():
                scope = found.get(key)
                self._cache[key] = (now, scope)
                if not fut.done():
                    fut.set_result(scope)

    def forget(self) -> None:
        self._cache.clear()


async def stored_policy(conn: Conn, project_id: uuid.UUID, *, for_update: bool = False
                        ) -> dict[str, Any]:
    """The project's stored policy document (its fields set; ``ProjectPolicy.from_stored``
    fills in the defaults)."""
    doc = await conn.fetchval("SELECT policy FROM edge_projects WHERE id = $1"
                              + (" FOR UPDATE" if for_update else ""), project_id)
    return dict(doc or {})


async def store_policy(conn: Conn, project_id: uuid.UUID, doc: dict[str, Any]) -> None:
    """Replace the project's stored policy document (``ProjectPolicy.changed`` made it)."""
    await conn.execute("UPDATE edge_projects SET policy = $2 WHERE id = $1", project_id, doc)


async def adopt_project(conn: Conn, project_id: uuid.UUID, org_id: uuid.UUID) -> object:
    """Give the project to ``org_id`` unless it has an organization; the organization it
    has now (None: no such project)."""
    return await conn.fetchval(
        "UPDATE edge_projects SET org_id = coalesce(org_id, $2) WHERE id = $1 RETURNING org_id",
        project_id, org_id)


async def take_control_seqs(conn: Conn, counts: dict[uuid.UUID, int]) -> list[asyncpg.Record]:
    """Advance each signed device's ``control_seq`` by its count (one statement; the rows
    stay locked until the transaction ends): ``id``, the new ``control_seq`` and the
    ``control_token`` of each device with signed control."""
    return await conn.fetch(
        "UPDATE edge_devices d SET control_seq = d.control_seq + c.n "
        "FROM unnest($1::uuid[], $2::int[]) AS c(id, n) "
        f"WHERE d.id = c.id AND d.id = {any_of(1)} AND d.signed_control "
        "RETURNING d.id, d.control_seq, d.control_token",
        list(counts), list(counts.values()))


async def ensure_control_token(conn: Conn, device_id: uuid.UUID, new_token: str) -> object:
    """The device's control token, ``new_token`` stored (and signed control switched on)
    if it had none."""
    return await conn.fetchval(
        "UPDATE edge_devices SET control_token = coalesce(control_token, $2), "
        "signed_control = true WHERE id = $1 RETURNING control_token", device_id, new_token)
