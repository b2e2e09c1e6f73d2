"""Versioned schema migrations, applied at ``serve`` start-up.

Each ``migrations/NNNN_name.sql`` runs once, in its own transaction, under an
advisory lock so several workers starting together do not race. A database that
already carries a version this build does not know is refused: running old code
against a newer schema could corrupt it silently.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from importlib import resources

from edgesync.errors import SchemaTooNewError, StoreError
from edgesync.store._conn import Conn
from edgesync.store._pool import unlock_session_lock

__all__ = ["KNOWN_VERSION", "Migration", "applied_version", "applied_versions", "load_migrations",
           "migrate"]

_log = logging.getLogger(__name__)
_LOCK_KEY = 0x6564_6765_7379_6E63 >> 1  # "edgesync", kept inside bigint range
_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    name: str
    sql: str


def load_migrations() -> list[Migration]:
    found = []
    for entry in resources.files("edgesync.store").joinpath("migrations").iterdir():
        m = _NAME.match(entry.name)
        if m:
            found.append(Migration(int(m.group(1)), m.group(2), entry.read_text("utf-8")))
    found.sort(key=lambda mig: mig.version)
    versions = [mig.version for mig in found]
    if len(set(versions)) != len(versions):
        raise StoreError(f"two migration files share a number: {versions}")
    return found


KNOWN_VERSION = max(m.version for m in load_migrations())

_LEDGER = """
CREATE TABLE IF NOT EXISTS edge_schema_migrations (
    version     integer PRIMARY KEY,
    name        text NOT NULL,
    applied_at  timestamptz NOT NULL DEFAULT now()
)"""


async def applied_versions(conn: Conn) -> set[int]:
    exists = await conn.fetchval("SELECT to_regclass('edge_schema_migrations') IS NOT NULL")
    if not exists:
        return set()
    rows = await conn.fetch("SELECT version FROM edge_schema_migrations")
    return {int(r["version"]) for r in rows}


async def applied_version(conn: Conn) -> int:
    return max(await applied_versions(conn), default=0)


async def migrate(conn: Conn) -> int:
    """Bring the schema up to date; returns how many migrations ran (0 when current)."""
    migrations = load_migrations()
    await conn.execute("SELECT pg_advisory_lock($1)", _LOCK_KEY)
    try:
        await conn.execute(_LEDGER)
        applied = await applied_versions(conn)
        unknown = sorted(applied - {m.version for m in migrations})
        if unknown:
            raise SchemaTooNewError(
                f"database carries schema version(s) {unknown} that this edgesync does not know "
                f"(it knows up to {KNOWN_VERSION}): upgrade edgesync before serving this database"
            )
        ran = 0
        # Every known migration not yet applied runs, in number order; a gap left by a
        # migration added later on another branch is filled when it arrives.
        for mig in (m for m in migrations if m.version not in applied):
            async with conn.transaction():
                await conn.execute(mig.sql)
                await conn.execute(
                    "INSERT INTO edge_schema_migrations (version, name) VALUES ($1, $2)",
                    mig.version,
                    mig.name,
                )
            _log.info("applied migration %04d_%s", mig.version, mig.name)
            ran += 1
        return ran
    finally:
        await unlock_session_lock(conn, _LOCK_KEY)
