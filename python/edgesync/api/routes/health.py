"""``/healthz``, ``/readyz`` and ``/metrics``: for load balancers, orchestrators and
Prometheus. No token (probes and scrapers carry none; nothing here names a project or
device); left out of the OpenAPI document. docs/operations.md describes them."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client.exposition import choose_encoder

from edgesync.observe import report

__all__ = ["router"]

router = APIRouter(include_in_schema=False)


@router.get("/healthz")
async def healthz() -> JSONResponse:
    """The process answers (nothing else is checked: that is /readyz)."""
    return JSONResponse({"status": "ok"})


@router.get("/readyz")
async def readyz(request: Request) -> JSONResponse:
    """200 when every check passes, else 503; the body names what is not ready."""
    status, body = report(await request.app.state.readiness())
    return JSONResponse(body, status_code=status)


@router.get("/metrics")
async def metrics(request: Request) -> Response:
    """Prometheus exposition (OpenMetrics when the scraper asks for it)."""
    await request.app.state.db_metrics.refresh()
    encoder, content_type = choose_encoder(request.headers.get("accept", ""))
    return Response(encoder(request.app.state.metrics), media_type=content_type)
