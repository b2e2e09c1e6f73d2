"""A project (in an organization) with a fleet, per test."""

from __future__ import annotations

import asyncpg
import pytest
from cred_helpers import Project

from edgesync import fleet, identity


@pytest.fixture
async def project(pool: asyncpg.Pool, unique: str) -> Project:
    name, slug = f"cred-{unique}", f"c{unique}"
    async with pool.acquire() as conn:
        boot = await identity.bootstrap(conn, org=f"org-cred-{unique}", project=name,
                                        topic_slug=slug)
        fleet_id = await fleet.ensure_fleet(conn, boot.project_id, "line-1")
    return Project(boot.project_id, boot.org_id, name, slug, fleet_id, "line-1")
