"""Sync policies and their attachments: the only writer of ``edge_sync_policies`` and
``edge_sync_policy_attachments`` (migration 0012).

A device's *effective* policy is the one attached to the device, else the one attached
to its fleet, else none. Every change that can change a device's effective policy (an
edit, a delete, an attach or detach) queues a ``sync_policy`` control for each device
it touches, in the same transaction (``_deliver``).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

import asyncpg

from edgesync.control import ControlStatus, send_sync_policy
from edgesync.errors import ConfigError, ConflictError, InvalidRequestError, NotFoundError
from edgesync.protocol import (
    BUDGET_KEYS,
    ControlKind,
    StrategyKind,
    parse_byte_budget,
    parse_compression,
    parse_table_strategies,
    table_strategies_doc,
)
from edgesync.store import Conn, from_record

__all__ = ["AttachedTo", "EffectivePolicy", "ListedAttachment", "PolicyAttachment",
           "PolicyDevice", "SyncPolicy", "attach_policy", "create_policy", "delete_policy",
           "detach_policy", "effective_policy", "get_policy", "list_attachments",
           "list_policies", "policy_devices", "update_policy"]

# ``table_strategies`` is the agents' own document (table → {strategy, ts_column?,
# include_columns?}, checked by ``protocol.parse_table_strategies`` as the agent checks
# it): it travels to them as JSON, so it stays the JSON the agent reads.
Strategies = dict[str, dict[str, Any]]


@dataclass(frozen=True, slots=True)
class SyncPolicy:
    id: uuid.UUID
    project_id: uuid.UUID
    name: str
    description: str
    table_strategies: Strategies
    sample_tables: dict[str, list[str]] | None  # table → columns the strategies came from
    # What the agents may put on the wire; None: each agent's YAML decides.
    compression: str | None  # none | zstd
    max_bytes_per_second: int | None
    max_bytes_per_day: int | None
    version: int  # raised by every change
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class PolicyAttachment:
    """A policy attached to a device or (exactly one of them) a fleet."""

    id: uuid.UUID
    policy_id: uuid.UUID
    device_id: uuid.UUID | None
    fleet_id: uuid.UUID | None
    created_at: datetime


class AttachedTo(StrEnum):
    """What an attachment names."""

    DEVICE = "device"
    FLEET = "fleet"


@dataclass(frozen=True, slots=True)
class ListedAttachment:
    """An attachment as listed: what it names, by id and by name."""

    id: uuid.UUID
    attached_to: AttachedTo
    device_id: uuid.UUID | None
    fleet_id: uuid.UUID | None
    name: str  # the device's or the fleet's
    created_at: datetime  # when attached (attaching again renews it)


@dataclass(frozen=True, slots=True)
class EffectivePolicy:
    """A device's policy: its own attachment's, else its fleet's."""

    device_id: uuid.UUID
    policy_id: uuid.UUID
    name: str
    version: int
    table_strategies: Strategies
    attached_via: str  # device | fleet
    compression: str | None = None
    max_bytes_per_second: int | None = None
    max_bytes_per_day: int | None = None

    @property
    def wire(self) -> dict[str, Any]:
        """The policy's wire settings as the agents spell them (the ones it gives)."""
        return {k: v for k, v in (("compression", self.compression),
                                  ("max_bytes_per_second", self.max_bytes_per_second),
                                  ("max_bytes_per_day", self.max_bytes_per_day))
                if v is not None}


@dataclass(frozen=True, slots=True)
class PolicyDevice:
    """A device a policy governs, and whether its latest ``sync_policy`` control reached
    it (``delivery``: pending, acked; None: never sent)."""

    device_id: uuid.UUID
    name: str
    attached_via: str  # device | fleet
    delivery: str | None
    delivered_version: int | None
    acked_at: datetime | None

_WIRE = ("compression", *BUDGET_KEYS)
_COLUMNS = ("id, project_id, name, description, table_strategies, sample_tables, "
            f"{', '.join(_WIRE)}, version, created_at, updated_at")
_MAX_NAME, _MAX_DESCRIPTION = 200, 2000


def _check_text(field: str, value: object, limit: int, *, empty: bool) -> str:
    if not isinstance(value, str):
        raise InvalidRequestError(field, "must be a string")
    text = value.strip()
    if not text and not empty:
        raise InvalidRequestError(field, "must not be empty")
    if len(text) > limit:
        raise InvalidRequestError(field, f"must be at most {limit} characters")
    return text


def _check_sample(sample: object) -> dict[str, list[str]] | None:
    if sample is None:
        return None
    if not isinstance(sample, dict) or not all(
            isinstance(cols, list) and all(isinstance(c, str) for c in cols)
            for cols in sample.values()):
        raise InvalidRequestError("sample_tables", "must map each table name to a list of its "
                                                   "column names (from the introspection)")
    return {str(t): list(cols) for t, cols in sample.items()}


def _check_wire(key: str, value: object) -> str | int | None:
    """``compression`` or a budget by the agent's own rule (None: the agents' YAML)."""
    if value is None:
        return None
    try:
        return (parse_compression(value, key).value if key == "compression"
                else parse_byte_budget(value, key))
    except ConfigError as exc:
        raise InvalidRequestError(exc.field, exc.reason) from exc


def _check_strategies(doc: object, sample: dict[str, list[str]] | None) -> Strategies:
    """``table_strategies`` by the agent's own rules; with a sample, every table and column
    named must be one of it. Raises the first problem found."""
    strategies, errors = parse_table_strategies(doc)
    if errors:
        raise InvalidRequestError(errors[0].field, errors[0].reason)
    for table, ts in strategies.items():
        if sample is None or ts.strategy == StrategyKind.IGNORE:
            continue
        at = f"table_strategies.{table}"
        if table not in sample:
            raise InvalidRequestError(at, f"{table!r} is not a table of the sample database")
        for key, names in (("ts_column", [ts.ts_column] if ts.ts_column else []),
                           ("include_columns", list(ts.include_columns or ()))):
            missing = [n for n in names if n not in sample[table]]
            if missing:
                raise InvalidRequestError(f"{at}.{key}", f"{', '.join(map(repr, missing))} "
                                                         f"is not a column of {table!r}")
    return table_strategies_doc(strategies)


def _out(row: asyncpg.Record) -> SyncPolicy:
    return from_record(SyncPolicy, row)


async def get_policy(conn: Conn, project_id: uuid.UUID, policy_id: uuid.UUID, *,
                     for_update: bool = False) -> SyncPolicy:
    row = await conn.fetchrow(
        f"SELECT {_COLUMNS} FROM edge_sync_policies WHERE id = $1 AND project_id = $2"
        + (" FOR UPDATE" if for_update else ""), policy_id, project_id)
    if row is None:
        raise NotFoundError(f"no sync policy {policy_id} in this project")
    return _out(row)


async def list_policies(conn: Conn, project_id: uuid.UUID, *, offset: int = 0,
                        limit: int = 100) -> tuple[list[SyncPolicy], int]:
    total = await conn.fetchval("SELECT count(*) FROM edge_sync_policies WHERE project_id = $1",
                                project_id)
    rows = await conn.fetch(
        f"SELECT {_COLUMNS} FROM edge_sync_policies WHERE project_id = $1 "
        "ORDER BY name OFFSET $2 LIMIT $3", project_id, offset, limit)
    return [_out(r) for r in rows], int(total)


async def create_policy(conn: Conn, project_id: uuid.UUID, *, name: str,
                        description: str = "", table_strategies: object = None,
                        sample_tables: object = None, wire: dict[str, object] | None = None
                        ) -> SyncPolicy:
    """``wire``: ``compression``, ``max_bytes_per_second``, ``max_bytes_per_day`` (each
    optional)."""
    sample = _check_sample(sample_tables)
    given = wire or {}
    row = await conn.fetchrow(
        "INSERT INTO edge_sync_policies (id, project_id, name, description, table_strategies, "
        f"sample_tables, {', '.join(_WIRE)}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) "
        f"ON CONFLICT DO NOTHING RETURNING {_COLUMNS}",
        uuid.uuid4(), project_id, _check_text("name", name, _MAX_NAME, empty=False),
        _check_text("description", description, _MAX_DESCRIPTION, empty=True),
        _check_strategies({} if table_strategies is None else table_strategies, sample),
        sample, *(_check_wire(k, given.get(k)) for k in _WIRE))
    if row is None:
        raise ConflictError(f"a sync policy named {name.strip()!r} exists in this project")
    return _out(row)


async def update_policy(conn: Conn, project_id: uuid.UUID, policy_id: uuid.UUID,
                        changes: dict[str, Any]) -> SyncPolicy:
    """Change ``name``, ``description``, ``table_strategies``, ``sample_tables``,
    ``compression``, ``max_bytes_per_second``, ``max_bytes_per_day`` (the keys
    of ``changes``, each as a request gave it: checked here); the version goes up and
    attached devices are sent the new strategies."""
    async with conn.transaction():
        old = await get_policy(conn, project_id, policy_id, for_update=True)
        sample = (_check_sample(changes["sample_tables"]) if "sample_tables" in changes
                  else old.sample_tables)
        name = (_check_text("name", changes["name"], _MAX_NAME, empty=False)
                if "name" in changes else old.name)
        description = (_check_text("description", changes["description"], _MAX_DESCRIPTION,
                                   empty=True) if "description" in changes
                       else old.description)
        strategies = _check_strategies(changes.get("table_strategies",
                                                   old.table_strategies), sample)
        wire = [_check_wire(k, changes[k]) if k in changes else getattr(old, k)
                for k in _WIRE]
        if name != old.name and await conn.fetchval(
                "SELECT 1 FROM edge_sync_policies WHERE project_id = $1 AND name = $2",
                project_id, name):
            raise ConflictError(f"a sync policy named {name!r} exists in this project")
        row = await conn.fetchrow(
            "UPDATE edge_sync_policies SET name = $2, description = $3, table_strategies = $4, "
            "sample_tables = $5, compression = $6, max_bytes_per_second = $7, "
            "max_bytes_per_day = $8, version = version + 1, updated_at = now() "
            f"WHERE id = $1 RETURNING {_COLUMNS}", policy_id, name, description, strategies,
            sample, *wire)
        assert row is not None
        if strategies != old.table_strategies or wire != [getattr(old, k) for k in _WIRE]:
            await _deliver(conn, await _governed(conn, policy_id))
    return _out(row)


async def delete_policy(conn: Conn, project_id: uuid.UUID, policy_id: uuid.UUID) -> None:
    """Delete the policy and its attachments; its devices fall back to their fleet's
    policy, or to none (their agents then go back to their YAML's strategies)."""
    async with conn.transaction():
        await get_policy(conn, project_id, policy_id, for_update=True)
        devices = await _governed(conn, policy_id)
        await conn.execute("DELETE FROM edge_sync_policies WHERE id = $1", policy_id)
        await _deliver(conn, devices)


async def _target(conn: Conn, project_id: uuid.UUID, device_id: uuid.UUID | None,
                  fleet_id: uuid.UUID | None) -> None:
    if (device_id is None) == (fleet_id is None):
        raise InvalidRequestError("device_id", "give exactly one of device_id or fleet_id")
    table, ident = (("edge_devices", device_id) if device_id is not None
                    else ("edge_fleets", fleet_id))
    if not await conn.fetchval(f"SELECT 1 FROM {table} WHERE id = $1 AND project_id = $2",
                               ident, project_id):
        what = "device" if device_id is not None else "fleet"
        raise NotFoundError(f"no {what} {ident} in this project")


async def _in_scope(conn: Conn, device_id: uuid.UUID | None, fleet_id: uuid.UUID | None
                    ) -> list[uuid.UUID]:
    if device_id is not None:
        return [device_id]
    rows = await conn.fetch("SELECT id FROM edge_devices WHERE fleet_id = $1", fleet_id)
    return [r["id"] for r in rows]


async def attach_policy(conn: Conn, project_id: uuid.UUID, policy_id: uuid.UUID, *,
                        device_id: uuid.UUID | None = None,
                        fleet_id: uuid.UUID | None = None) -> PolicyAttachment:
    """Attach to a device or a fleet (replacing what was attached to it)."""
    async with conn.transaction():
        await get_policy(conn, project_id, policy_id, for_update=True)
        await _target(conn, project_id, device_id, fleet_id)
        key = "device_id" if device_id is not None else "fleet_id"
        row = await conn.fetchrow(
            "INSERT INTO edge_sync_policy_attachments (id, policy_id, device_id, fleet_id) "
            f"VALUES ($1, $2, $3, $4) ON CONFLICT ({key}) WHERE {key} IS NOT NULL "
            "DO UPDATE SET policy_id = EXCLUDED.policy_id, created_at = now() "
            "RETURNING id, policy_id, device_id, fleet_id, created_at",
            uuid.uuid4(), policy_id, device_id, fleet_id)
        assert row is not None
        await _deliver(conn, await _in_scope(conn, device_id, fleet_id))
    return from_record(PolicyAttachment, row)


async def detach_policy(conn: Conn, project_id: uuid.UUID, policy_id: uuid.UUID, *,
                        device_id: uuid.UUID | None = None,
                        fleet_id: uuid.UUID | None = None) -> None:
    async with conn.transaction():
        await get_policy(conn, project_id, policy_id, for_update=True)
        await _target(conn, project_id, device_id, fleet_id)
        done = await conn.execute(
            "DELETE FROM edge_sync_policy_attachments WHERE policy_id = $1 AND "
            "device_id IS NOT DISTINCT FROM $2 AND fleet_id IS NOT DISTINCT FROM $3",
            policy_id, device_id, fleet_id)
        if done.endswith(" 0"):
            raise NotFoundError("the policy is not attached to it")
        await _deliver(conn, await _in_scope(conn, device_id, fleet_id))


async def list_attachments(conn: Conn, project_id: uuid.UUID, policy_id: uuid.UUID
                           ) -> list[ListedAttachment]:
    """The policy's attachments, devices first, then fleets, each by name. Unlike
    ``policy_devices`` this lists a fleet without devices, and a device whose own
    attachment is all it has."""
    await get_policy(conn, project_id, policy_id)
    rows = await conn.fetch(
        "SELECT a.id, a.device_id, a.fleet_id, a.created_at, "
        "CASE WHEN a.device_id IS NOT NULL THEN 'device' ELSE 'fleet' END AS attached_to, "
        "coalesce(d.name, f.name) AS name FROM edge_sync_policy_attachments a "
        "LEFT JOIN edge_devices d ON d.id = a.device_id "
        "LEFT JOIN edge_fleets f ON f.id = a.fleet_id "
        "WHERE a.policy_id = $1 "
        "ORDER BY a.fleet_id IS NOT NULL, coalesce(d.name, f.name), a.id", policy_id)
    return [ListedAttachment(id=r["id"], attached_to=AttachedTo(r["attached_to"]),
                             device_id=r["device_id"], fleet_id=r["fleet_id"], name=r["name"],
                             created_at=r["created_at"]) for r in rows]


_EFFECTIVE = """
SELECT d.id AS device_id, p.id AS policy_id, p.name, p.version, p.table_strategies,
       p.compression, p.max_bytes_per_second, p.max_bytes_per_day,
       CASE WHEN own.id IS NOT NULL THEN 'device' ELSE 'fleet' END AS attached_via
FROM edge_devices d
LEFT JOIN edge_sync_policy_attachments own ON own.device_id = d.id
LEFT JOIN edge_sync_policy_attachments fl ON fl.fleet_id = d.fleet_id AND own.id IS NULL
JOIN edge_sync_policies p ON p.id = coalesce(own.policy_id, fl.policy_id)
"""


async def effective_policy(conn: Conn, device_id: uuid.UUID) -> EffectivePolicy | None:
    """The device's policy, or None."""
    row = await conn.fetchrow(_EFFECTIVE + "WHERE d.id = $1", device_id)
    return from_record(EffectivePolicy, row) if row else None


async def _governed(conn: Conn, policy_id: uuid.UUID) -> list[uuid.UUID]:
    rows = await conn.fetch(_EFFECTIVE + "WHERE p.id = $1", policy_id)
    return [r["device_id"] for r in rows]


async def policy_devices(conn: Conn, project_id: uuid.UUID, policy_id: uuid.UUID
                         ) -> list[PolicyDevice]:
    """The devices the policy governs, with how (device or fleet) and whether the latest
    ``sync_policy`` control reached them."""
    await get_policy(conn, project_id, policy_id)
    rows = await conn.fetch(
        "SELECT e.device_id, d.name, e.attached_via, c.status AS delivery, c.acked_at, "
        "(c.body->>'policy_version')::bigint AS delivered_version FROM (" + _EFFECTIVE
        + "WHERE p.id = $1) e JOIN edge_devices d ON d.id = e.device_id "
        "LEFT JOIN LATERAL (SELECT status, acked_at, body FROM edge_pending_controls "
        f"  WHERE device_id = e.device_id AND control_kind = '{ControlKind.SYNC_POLICY}' "
        f"  AND status <> '{ControlStatus.SUPERSEDED}' ORDER BY created_at DESC LIMIT 1) c ON true "
        "ORDER BY d.name", policy_id)
    return [from_record(PolicyDevice, r) for r in rows]


async def _deliver(conn: Conn, device_ids: list[uuid.UUID]) -> None:
    """Queue each (live) device's effective policy; none left: ``table_strategies`` (and
    the wire settings) null, which puts the agent back on its YAML's."""
    if not device_ids:
        return
    live = await conn.fetch("SELECT id FROM edge_devices WHERE id = ANY($1::uuid[]) "
                            "AND revoked_at IS NULL ORDER BY id", list(set(device_ids)))
    for rec in live:
        policy = await effective_policy(conn, rec["id"])
        revision = await conn.fetchval("SELECT nextval('edge_sync_policy_revisions')")
        await send_sync_policy(conn, rec["id"], {
            "revision": int(revision),
            "policy_id": str(policy.policy_id) if policy else None,
            "policy_name": policy.name if policy else None,
            "policy_version": policy.version if policy else None,
            "table_strategies": policy.table_strategies if policy else None,
            **{k: getattr(policy, k) if policy else None for k in _WIRE}})
