"""``POST /core/api/v1/projects/{project_id}/jitr/enroll``: JITR enrollment over HTTP.

The caller is a device with no API token: the fleet bootstrap certificate in the body
(``bootstrap_cert_pem``) is its credential. Behind a TLS-terminating reverse proxy that
verifies the bootstrap certificate as a client certificate, the proxy would pass it on in
that same field (see docs/security.md). The router reads the database pool from
``request.app.state.pool``, like the rest of the API.
"""

from __future__ import annotations

import os
import uuid
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from edgesync.credentials import DEVICE_CERT_DAYS, EnrollmentError, enroll

__all__ = ["EnrollIn", "EnrollOut", "make_jitr_router", "public_broker_url", "router"]


class EnrollIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    bootstrap_cert_pem: str = Field(min_length=1, max_length=16_384,
                                    description="the fleet bootstrap certificate (PEM)")
    csr_pem: str = Field(min_length=1, max_length=16_384,
                         description="PKCS#10 CSR made on the device; CN = device name")
    fleet_id: uuid.UUID | None = Field(None, description="checked against the certificate")
    org_id: uuid.UUID | None = Field(None, description="checked against the project")
    device_name: str | None = Field(None, description="if given, must equal the CSR's CN")


class EnrollOut(BaseModel):
    device_id: uuid.UUID
    device_name: str
    project_id: uuid.UUID
    fleet_id: uuid.UUID
    root_topic: str
    certificate_pem: str = Field(description="the device's MQTT client certificate")
    ca_pem: str = Field(description="the device CA that signed it")
    not_after: datetime
    mqtt_broker_url: str | None


class _Error(BaseModel):
    code: str
    message: str
    field: str | None = None


class _ErrorEnvelope(BaseModel):
    error: _Error


class _Item(BaseModel):
    data: EnrollOut


def _error(exc: EnrollmentError) -> JSONResponse:
    body = _ErrorEnvelope(error=_Error(code=exc.code, message=exc.message, field=exc.field))
    return JSONResponse(body.model_dump(mode="json"), status_code=exc.status)


def public_broker_url(url: str | None) -> str | None:
    """The URL handed to devices, without any ``user:password@`` it may carry (a worker's
    URL must never leak its credentials to devices)."""
    if not url:
        return None
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def make_jitr_router(*, mqtt_broker_url: str | None = None,
                     device_cert_days: int = DEVICE_CERT_DAYS) -> APIRouter:
    """The JITR router. Enrolled devices are told the broker address of env
    ``EDGESYNC_PUBLIC_MQTT_URL`` (the device-facing mTLS listener), else ``mqtt_broker_url``;
    credentials in either are dropped."""
    router = APIRouter(prefix="/core/api/v1/projects/{project_id}/jitr", tags=["jitr"])
    errors: dict[int | str, dict[str, Any]] = {
        s: {"model": _ErrorEnvelope} for s in (400, 403, 409, 422)}

    @router.post("/enroll", status_code=201, response_model=_Item, responses=errors,
                 summary="Enroll a device with a fleet bootstrap certificate and a CSR")
    async def enroll_device(project_id: uuid.UUID, body: EnrollIn,
                            request: Request) -> JSONResponse:
        pool: asyncpg.Pool = request.app.state.pool
        try:
            async with pool.acquire() as conn:
                got = await enroll(conn, project_id, bootstrap_cert_pem=body.bootstrap_cert_pem,
                                   csr_pem=body.csr_pem, fleet_id=body.fleet_id,
                                   org_id=body.org_id, device_name=body.device_name,
                                   days=device_cert_days)
        except EnrollmentError as exc:
            return _error(exc)
        out = EnrollOut(
            device_id=got.device_id, device_name=got.device_name, project_id=got.project_id,
            fleet_id=got.fleet_id, root_topic=got.root_topic,
            certificate_pem=got.certificate.cert_pem, ca_pem=got.certificate.device_ca_pem,
            not_after=got.certificate.not_after,
            mqtt_broker_url=public_broker_url(
                os.environ.get("EDGESYNC_PUBLIC_MQTT_URL") or mqtt_broker_url))
        return JSONResponse(_Item(data=out).model_dump(mode="json"), status_code=201)

    return router


router = make_jitr_router()
