"""The FastAPI application: routers, error envelopes, the event hub, the pool."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable

import asyncpg
from fastapi import APIRouter, FastAPI
from prometheus_client import CollectorRegistry

from edgesync._version import version
from edgesync.api._console import install_console
from edgesync.api._docs_page import install_docs_page
from edgesync.api._errors import install_error_handlers
from edgesync.api._event_hub import EventHub
from edgesync.api.routes import ROUTERS
from edgesync.api.routes.health import router as health_router
from edgesync.observe import Check, Readiness, database_checks
from edgesync.observe._db_metrics import DatabaseCollector
from edgesync.store import Conn, create_pool

__all__ = ["create_app"]

_DESCRIPTION = """\
Operate edgesync: lineages (and their telemetry), schema reviews, registry coalescing
(registry reviews, coalesced mirrors), device data points, project policy, devices, state
write-back and the governance event stream. Every call carries
`Authorization: Bearer <token>` and an `ORG-ID` header; mutations also need an
`Idempotency-Key`. See docs/api.md.
"""


def create_app(pool: asyncpg.Pool | None = None, *, database_url: str | None = None,
               routers: Iterable[APIRouter] = (), readiness: Readiness | None = None,
               metrics: CollectorRegistry | None = None,
               broker_refresh: Callable[[Conn], Awaitable[str]] | None = None,
               device_revoked: Callable[[], object] | None = None) -> FastAPI:
    """The API on an existing pool, or (``database_url``) on a pool of its own that the
    app's lifespan opens and closes. The schema must already be migrated. ``routers`` are
    mounted too (they find the pool at ``request.app.state.pool``).

    ``/readyz`` runs ``readiness`` (default: the database and migration checks);
    ``/metrics`` exposes ``metrics`` (the server's registry: ingest counters and its
    own gauges; default an empty one) with the database gauges added to it.
    ``broker_refresh`` (``credentials.BrokerRefresh``) rewrites and reloads the broker's
    files after a device's credentials change through the API; ``device_revoked`` is
    called after a revocation committed (the server clears its device resolvers' caches,
    so its own ingest refuses the device at once)."""
    if (pool is None) == (database_url is None):
        raise ValueError("create_app needs exactly one of pool or database_url")

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        own = None
        if app.state.pool is None:
            assert database_url is not None
            own = app.state.pool = await create_pool(database_url, max_size=8)
        try:
            yield
        finally:
            if own is not None:
                app.state.pool = None
                await own.close()

    app = FastAPI(title="edgesync API", version=version(), description=_DESCRIPTION,
                  lifespan=lifespan, openapi_url="/openapi.json", docs_url=None,
                  redoc_url=None)
    app.state.pool = pool
    app.state.broker_refresh = broker_refresh
    app.state.device_revoked = device_revoked
    app.state.events = EventHub(lambda: app.state.pool)

    async def database_ready() -> list[Check]:
        return await database_checks(app.state.pool)

    app.state.readiness = readiness or database_ready
    app.state.metrics = metrics if metrics is not None else CollectorRegistry()
    app.state.db_metrics = DatabaseCollector(lambda: app.state.pool)
    app.state.metrics.register(app.state.db_metrics)
    install_error_handlers(app)
    install_docs_page(app)  # no CDN: see _docs_page
    for router in (health_router, *ROUTERS, *routers):
        app.include_router(router)
    install_console(app)  # static files under /console: see _console
    return app
