"""Per-project permissions. Managing devices includes reading."""

from __future__ import annotations

import uuid

from edgesync.errors import InvalidRequestError
from edgesync.store import Conn

__all__ = ["MANAGE_DEVICES", "PERMISSIONS", "READ", "grant", "implied"]

READ = "PROJECT_CAN_READ"
MANAGE_DEVICES = "PROJECT_CAN_MANAGE_DEVICES"
PERMISSIONS = (READ, MANAGE_DEVICES)


def implied(granted: set[str]) -> set[str]:
    """The permissions a set of grants amounts to."""
    return granted | {READ} if MANAGE_DEVICES in granted else set(granted)


async def grant(conn: Conn, principal_id: uuid.UUID, project_id: uuid.UUID,
                permission: str) -> None:
    if permission not in PERMISSIONS:
        raise InvalidRequestError("permission", f"must be one of {', '.join(PERMISSIONS)}")
    await conn.execute(
        "INSERT INTO edge_project_permissions (principal_id, project_id, permission) "
        "VALUES ($1, $2, $3) ON CONFLICT DO NOTHING", principal_id, project_id, permission)
