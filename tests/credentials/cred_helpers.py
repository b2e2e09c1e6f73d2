"""Shared by the credentials tests."""

from __future__ import annotations

import uuid
from dataclasses import dataclass


@dataclass(frozen=True)
class Project:
    id: uuid.UUID
    org_id: uuid.UUID
    name: str
    slug: str
    fleet_id: uuid.UUID
    fleet: str
