"""``/projects``: the projects of the ``ORG-ID`` organization the token may read, so that
a project can be named by its name or topic slug (the CLI's ``--project plant``, the
TUI's settings) and not only by its id."""

from __future__ import annotations

import uuid

from fastapi import APIRouter
from pydantic import BaseModel, Field

from edgesync.api._auth import Member
from edgesync.api._db import Db
from edgesync.api._envelopes import Page
from edgesync.api._errors import error_responses
from edgesync.api._pagination import Paging
from edgesync.identity import READ

__all__ = ["router"]

router = APIRouter(prefix="/core/api/v1/projects", tags=["projects"])


class ProjectOut(BaseModel):
    id: uuid.UUID
    name: str
    topic_slug: str = Field(description="the first level of its devices' MQTT topics")


@router.get("", response_model=Page[ProjectOut], responses=error_responses(400, 401, 403, 422),
            summary="List the organization's projects this token may read")
async def list_projects(principal: Member, conn: Db, paging: Paging) -> Page[ProjectOut]:
    readable = [pid for pid in principal.permissions if principal.can(pid, READ)]
    where = "WHERE org_id = $1 AND id = ANY($2::uuid[])"
    total = await conn.fetchval(f"SELECT count(*) FROM edge_projects {where}",
                                principal.org_id, readable)
    rows = await conn.fetch(
        f"SELECT id, name, topic_slug FROM edge_projects {where} ORDER BY name, id "
        "OFFSET $3 LIMIT $4", principal.org_id, readable, paging.offset, paging.limit)
    return paging.of([ProjectOut(id=r["id"], name=r["name"], topic_slug=r["topic_slug"])
                      for r in rows], int(total))
