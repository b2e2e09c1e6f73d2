"""``/devices``: the project's devices (list, one, register)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Query, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from edgesync import fleet
from edgesync.api._auth import CanManage, CanRead
from edgesync.api._db import Db
from edgesync.api._envelopes import Item, Page
from edgesync.api._errors import ApiError, error_responses
from edgesync.api._idempotency import IdempotencyKey, idempotent
from edgesync.api._pagination import Paging
from edgesync.errors import ApiErrorCode, ConflictError
from edgesync.store import Conn

__all__ = ["DeviceIn", "DeviceOut", "router"]

router = APIRouter(prefix="/core/api/v1/projects/{project_id}/devices", tags=["devices"])


class DeviceOut(BaseModel):
    id: uuid.UUID
    name: str
    project_id: uuid.UUID
    fleet_id: uuid.UUID | None
    fleet: str | None
    root_topic: str = Field(description="the device's MQTT root topic ({topic_slug}/{name})")
    created_at: datetime
    revoked_at: datetime | None = Field(
        None, description="when the device was revoked (ingest and the broker refuse it)")
    # Presence and the agent's last status report (docs/operations.md "Device status").
    connected: bool = Field(
        False, description="heard from within 3 report intervals (at least 90 s) and its "
                           "agent has not said it stopped, nor the broker that it vanished")
    last_seen_at: datetime | None = Field(
        None, description="the device's last message of any kind (batch, ACK, report)")
    last_batch_at: datetime | None = Field(None, description="its last committed batch")
    last_ack_at: datetime | None = Field(None, description="its last control ACK")
    reported_at: datetime | None = Field(None, description="its agent's last status report")
    agent_state: str | None = Field(
        None, description="running, stopped (a clean stop) or offline (its MQTT will)")
    agent_version: str | None = None
    journal_depth: int | None = Field(None, description="journaled changes the agent holds")
    oldest_unconfirmed_age_s: float | None = Field(
        None, description="age of the oldest change the cloud has not confirmed yet")
    buffer_bytes: int | None = Field(
        None, description="journal (estimated) and telemetry outbox bytes on the device")
    unconfirmed_batches: int | None = None
    paused_tables: list[str] | None = None
    # What its batches cost on the wire (docs/protocol.md "Compressed batches").
    batch_bytes_received: int = Field(
        0, description="bytes of its row and telemetry batches as received (zstd frames or "
                       "plain JSON), since its first batch")
    batch_bytes_json: int = Field(0, description="the same batches' bytes as JSON")
    compression_ratio: float | None = Field(
        None, description="batch_bytes_received / batch_bytes_json (1.0: sent plain; "
                          "0.2: a fifth of the JSON); null before its first batch")
    bytes_sent: int | None = Field(
        None, description="what its agent reports having published (docs/agent.md budget)")
    budget_left_bytes: int | None = Field(
        None, description="what its agent may still publish today under max_bytes_per_day")


class DeviceIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=128,
                      description="MQTT client id and topic level: letters, digits, . _ -")
    fleet: str | None = Field(None, min_length=1, max_length=200,
                              description="fleet name (created when new)")


_SELECT = """
SELECT d.id, d.name, d.project_id, d.fleet_id, f.name AS fleet, d.created_at, d.revoked_at,
       p.topic_slug || '/' || d.name AS root_topic,
       coalesce(s.online AND s.last_seen_at > now() - make_interval(secs => greatest(90,
           3 * coalesce((s.report->>'report_interval_s')::float8, 30))), false) AS connected,
       s.last_seen_at, s.last_batch_at, s.last_ack_at, s.last_report_at AS reported_at,
       s.report->>'state' AS agent_state, s.report->>'agent_version' AS agent_version,
       (s.report->>'journal_depth')::bigint AS journal_depth,
       (s.report->>'oldest_unconfirmed_age_s')::float8 AS oldest_unconfirmed_age_s,
       (s.report->>'buffer_bytes')::bigint AS buffer_bytes,
       (s.report->>'unconfirmed_batches')::bigint AS unconfirmed_batches,
       s.report->'paused_tables' AS paused_tables,
       coalesce(s.batch_bytes_received, 0) AS batch_bytes_received,
       coalesce(s.batch_bytes_json, 0) AS batch_bytes_json,
       round((s.batch_bytes_received::numeric / nullif(s.batch_bytes_json, 0)), 4)::float8
           AS compression_ratio,
       (s.report->>'bytes_sent')::bigint AS bytes_sent,
       (s.report->>'budget_left_bytes')::bigint AS budget_left_bytes
FROM edge_devices d JOIN edge_projects p ON p.id = d.project_id
LEFT JOIN edge_fleets f ON f.id = d.fleet_id
LEFT JOIN edge_device_status s ON s.device_id = d.id
WHERE d.project_id = $1
"""


@router.get("", response_model=Page[DeviceOut], responses=error_responses(400, 401, 404, 422),
            summary="List the project's devices")
async def list_devices(access: CanRead, conn: Db, paging: Paging,
                       fleet_id: Annotated[uuid.UUID | None, Query()] = None) -> Page[DeviceOut]:
    where = " AND ($2::uuid IS NULL OR d.fleet_id = $2)"
    total = await conn.fetchval("SELECT count(*) FROM edge_devices d WHERE d.project_id = $1"
                                + where, access.project_id, fleet_id)
    rows = await conn.fetch(_SELECT + where + " ORDER BY d.name OFFSET $3 LIMIT $4",
                            access.project_id, fleet_id, paging.offset, paging.limit)
    return paging.of([DeviceOut.model_validate(dict(r)) for r in rows], int(total))


@router.get("/{device_id}", response_model=Item[DeviceOut],
            responses=error_responses(400, 401, 404, 422), summary="One device")
async def get_device(access: CanRead, conn: Db, device_id: uuid.UUID) -> Item[DeviceOut]:
    row = await conn.fetchrow(_SELECT + " AND d.id = $2", access.project_id, device_id)
    if row is None:
        raise ApiError(404, ApiErrorCode.DEVICE_NOT_FOUND, f"no device {device_id} in this project",
                       "device_id")
    return Item[DeviceOut](data=DeviceOut.model_validate(dict(row)))


@router.post("", status_code=201, response_model=Item[DeviceOut],
             responses=error_responses(400, 401, 403, 404, 409, 422),
             summary="Register a device (name unique per project)")
async def create_device(access: CanManage, conn: Db, request: Request, body: DeviceIn,
                        idempotency_key: IdempotencyKey = None) -> Response:
    async def work(tx: Conn) -> tuple[int, Item[DeviceOut]]:
        project = await tx.fetchrow("SELECT name, topic_slug FROM edge_projects WHERE id = $1",
                                    access.project_id)
        assert project is not None
        try:
            scope = await fleet.add_device(tx, project=project["name"], name=body.name,
                                           topic_slug=project["topic_slug"], fleet=body.fleet)
        except ConflictError as exc:
            raise ApiError(409, ApiErrorCode.DEVICE_NAME_ALREADY_IN_USE, str(exc), "name") from exc
        row = await tx.fetchrow(_SELECT + " AND d.id = $2", access.project_id, scope.device_id)
        assert row is not None
        return 201, Item[DeviceOut](data=DeviceOut.model_validate(dict(row)))

    return await idempotent(conn, access, request, idempotency_key, work)
