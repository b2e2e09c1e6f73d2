"""``/healthz``, ``/readyz`` and ``/metrics``: for load balancers, orchestrators and
Prometheus. No token (probes and scrapers carry none; nothing here names a project or
device); left out of the OpenAPI document. docs/operations.md describes them."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client.exposition import choose_encoder
from pydantic import BaseModel

from edgesync.observe import ReadinessReport, report

__all__ = ["router"]

router = APIRouter(include_in_schema=False)


class NotReady(BaseModel):
    check: str
    detail: str | None


class CheckOut(BaseModel):
    ok: bool
    detail: str | None


class Readyz(BaseModel):
    status: Literal["ready", "not_ready"]
    not_ready: list[NotReady]
    checks: dict[str, CheckOut]

    @classmethod
    def of(cls, r: ReadinessReport) -> Readyz:
        return cls(status="ready" if r.ready else "not_ready",
                   not_ready=[NotReady(check=c.name, detail=c.detail) for c in r.not_ready],
                   checks={c.name: CheckOut(ok=c.ok, detail=c.detail) for c in r.checks})


@router.get("/healthz")
async def healthz() -> JSONResponse:
    """The process answers (nothing else is checked: that is /readyz)."""
    return JSONResponse({"status": "ok"})


@router.get("/readyz")
async def readyz(request: Request) -> JSONResponse:
    """200 when every check passes, else 503; the body names what is not ready."""
    found = report(await request.app.state.readiness())
    return JSONResponse(Readyz.of(found).model_dump(mode="json"), status_code=found.http_status)


@router.get("/metrics")
async def metrics(request: Request) -> Response:
    """Prometheus exposition (OpenMetrics when the scraper asks for it)."""
    await request.app.state.db_metrics.refresh()
    encoder, content_type = choose_encoder(request.headers.get("accept", ""))
    return Response(encoder(request.app.state.metrics), media_type=content_type)
