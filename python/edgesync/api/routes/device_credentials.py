"""``/devices/{device_id}/…``: a device's credentials, bundle, sync policy and
revocation (what ``edgesync devices credentials|bundle|revoke`` do, over HTTP).

Secrets (passwords, private keys, the bundle's files) are in the first answer only: the
idempotency record keeps a copy without them, so a retry with the same key answers
``"shown once"`` in their place (issue again to get new ones)."""

from __future__ import annotations

import os
import tempfile
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from edgesync import credentials, fleet, operations, syncpolicy
from edgesync._defaults import DEVICE_CERT_DAYS
from edgesync.api._auth import CanManage, CanRead
from edgesync.api._db import Db
from edgesync.api._domain import model_of
from edgesync.api._envelopes import Item
from edgesync.api._errors import ApiError, error_responses
from edgesync.api._idempotency import IdempotencyKey, idempotent
from edgesync.errors import ApiErrorCode
from edgesync.fleet import DeviceScope
from edgesync.store import Conn

__all__ = ["router"]

router = APIRouter(prefix="/core/api/v1/projects/{project_id}/devices", tags=["devices"])

SHOWN_ONCE = "shown once: issue again for a new one"
_READ = error_responses(400, 401, 404, 422)
_WRITE = error_responses(400, 401, 403, 404, 409, 422)
Days = Field(DEVICE_CERT_DAYS, ge=1, le=3650, description="certificate validity in days")


async def _scope(conn: Conn, project_id: uuid.UUID, device_id: uuid.UUID) -> DeviceScope:
    row = await conn.fetchrow(
        "SELECT d.name, p.topic_slug FROM edge_devices d JOIN edge_projects p "
        "ON p.id = d.project_id WHERE d.id = $1 AND d.project_id = $2", device_id, project_id)
    scope = None if row is None else await fleet.get_device(conn, row["topic_slug"],
                                                            row["name"])
    if scope is None:
        raise ApiError(404, ApiErrorCode.DEVICE_NOT_FOUND, f"no device {device_id} in this project",
                       "device_id")
    return scope


async def _live(conn: Conn, scope: DeviceScope) -> None:
    if await conn.fetchval("SELECT revoked_at IS NOT NULL FROM edge_devices WHERE id = $1",
                           scope.device_id):
        raise ApiError(409, ApiErrorCode.DEVICE_REVOKED,
                       f"device {scope.device_name!r} is revoked: it gets no new credentials",
                       "device_id")


class Credential(BaseModel):
    id: uuid.UUID
    kind: Literal["password", "certificate"]
    cert_serial: str | None
    cert_fingerprint: str | None
    not_after: datetime | None
    bootstrap_id: uuid.UUID | None
    created_at: datetime
    revoked_at: datetime | None
    revoke_reason: str | None


class CredentialIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["password", "certificate"]
    csr_pem: str | None = Field(None, max_length=20_000,
                                description="certificate only: sign this CSR (CN = device "
                                            "name) instead of making a key here")
    days: int = Days


class IssuedCredential(BaseModel):
    credential_id: uuid.UUID
    kind: Literal["password", "certificate"]
    username: str | None = None
    password: str | None = None
    certificate_pem: str | None = None
    private_key_pem: str | None = None
    device_ca_pem: str | None = None
    serial: str | None = None
    not_after: datetime | None = None
    broker: str = Field(description="what the broker was told (see docs/security.md)")


def _redact_credential(body: BaseModel) -> BaseModel:
    data: Any = body.model_copy(deep=True)
    item: IssuedCredential = data.data
    if item.password is not None:
        item.password = SHOWN_ONCE
    if item.private_key_pem is not None:
        item.private_key_pem = SHOWN_ONCE
    return data  # type: ignore[no-any-return]


async def _tell_broker(request: Request, conn: Conn) -> str:
    refresh = getattr(request.app.state, "broker_refresh", None)
    if refresh is None:
        return ("this server does not manage the broker's files: run `edgesync "
                "broker-config` and reload Mosquitto (SIGHUP)")
    return str(await refresh(conn))


@router.get("/{device_id}/credentials", response_model=Item[list[Credential]],
            responses=_READ, summary="The device's MQTT credentials (no secrets)")
async def list_credentials(access: CanRead, conn: Db, device_id: uuid.UUID
                           ) -> Item[list[Credential]]:
    scope = await _scope(conn, access.project_id, device_id)
    found = await credentials.list_credentials(conn, scope.device_id)
    return Item[list[Credential]](data=[model_of(Credential, c) for c in found])


@router.post("/{device_id}/credentials", status_code=201,
             response_model=Item[IssuedCredential], responses=_WRITE,
             summary="Issue a password (revokes the previous one) or a client certificate")
async def issue_credential(access: CanManage, conn: Db, request: Request, device_id: uuid.UUID,
                           body: CredentialIn, idempotency_key: IdempotencyKey = None
                           ) -> Response:
    if body.kind == "password" and body.csr_pem is not None:
        raise ApiError(422, ApiErrorCode.INVALID_REQUEST, "only valid with kind certificate",
                       "csr_pem")

    async def work(tx: Conn) -> tuple[int, Item[IssuedCredential]]:
        scope = await _scope(tx, access.project_id, device_id)
        await _live(tx, scope)
        if body.kind == "password":
            pw = await credentials.issue_password(tx, scope)
            out = IssuedCredential(credential_id=pw.credential_id, kind="password",
                                   username=pw.username, password=pw.password,
                                   broker=await _tell_broker(request, tx))
        else:
            cert = await credentials.issue_certificate(tx, scope, csr_pem=body.csr_pem,
                                                       days=body.days)
            out = IssuedCredential(credential_id=cert.credential_id, kind="certificate",
                                   certificate_pem=cert.cert_pem, private_key_pem=cert.key_pem,
                                   device_ca_pem=cert.device_ca_pem, serial=cert.serial,
                                   not_after=cert.not_after,
                                   broker="the project's mTLS listener trusts its device CA")
        return 201, Item[IssuedCredential](data=out)

    return await idempotent(conn, access, request, idempotency_key, work,
                            redact=_redact_credential)


class BundleIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    mqtt_url: str | None = Field(None, max_length=500,
                                 description="the broker as the device reaches it (ssl://…); "
                                             "default: the server's EDGESYNC_PUBLIC_MQTT_URL")
    auth: Literal["cert", "password"] = "cert"
    install_dir: str = Field("/etc/edgesync", min_length=1, max_length=500)
    source_db_path: str = Field("/var/lib/myapp/data.db", min_length=1, max_length=500)
    days: int = Days


class BundleFile(BaseModel):
    name: str
    mode: str = Field(description="file mode to give it on the device, e.g. 0600")
    content: str


class BundlePolicy(BaseModel):
    policy_id: uuid.UUID
    name: str
    version: int
    attached_via: Literal["device", "fleet"]


class BundleOut(BaseModel):
    device_id: uuid.UUID
    device: str
    root_topic: str
    credential_id: uuid.UUID
    sync_policy: BundlePolicy | None = Field(
        description="the attached policy written into agent.yaml, or none")
    files: list[BundleFile]
    broker: str


def _redact_bundle(body: BaseModel) -> BaseModel:
    data: Any = body.model_copy(deep=True)
    for f in data.data.files:
        f.content = SHOWN_ONCE
    return data  # type: ignore[no-any-return]


@router.post("/{device_id}/bundle", status_code=201, response_model=Item[BundleOut],
             responses=_WRITE,
             summary="Issue credentials and answer the device's files (agent.yaml with the "
                     "attached sync policy, agent.env, CA, certificate and key)")
async def bundle(access: CanManage, conn: Db, request: Request, device_id: uuid.UUID,
                 body: BundleIn, idempotency_key: IdempotencyKey = None) -> Response:
    async def work(tx: Conn) -> tuple[int, Item[BundleOut]]:
        scope = await _scope(tx, access.project_id, device_id)
        await _live(tx, scope)
        with tempfile.TemporaryDirectory(prefix="edgesync-bundle-") as tmp:
            issued = await credentials.issue_bundle(
                tx, scope, Path(tmp), mqtt_url=body.mqtt_url or os.environ.get(
                    "EDGESYNC_PUBLIC_MQTT_URL"), auth=body.auth, days=body.days,
                install_dir=Path(body.install_dir), source_db_path=body.source_db_path,
                mqtt_url_field="mqtt_url")
            files = [BundleFile(name=n, mode=f"{(Path(tmp) / n).stat().st_mode & 0o777:04o}",
                                content=(Path(tmp) / n).read_text(encoding="utf-8"))
                     for n in issued.files.files]
        broker = (await _tell_broker(request, tx) if body.auth == "password"
                  else "the project's mTLS listener trusts its device CA")
        return 201, Item[BundleOut](data=BundleOut(
            device_id=scope.device_id, device=scope.device_name, root_topic=scope.root_topic,
            credential_id=issued.credential_id, files=files, broker=broker,
            sync_policy=None if issued.sync_policy is None
            else model_of(BundlePolicy, issued.sync_policy)))

    return await idempotent(conn, access, request, idempotency_key, work,
                            redact=_redact_bundle)


class RevokeIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reason: str = Field("revoked", min_length=1, max_length=200)


class Revoked(BaseModel):
    device_id: uuid.UUID
    device: str
    revoked_at: datetime
    credentials_revoked: int
    broker: str


@router.post("/{device_id}/revoke", response_model=Item[Revoked], responses=_WRITE,
             summary="Revoke the device: ingest refuses it, its credentials are revoked and "
                     "the broker's files rewritten")
async def revoke(access: CanManage, conn: Db, request: Request, device_id: uuid.UUID,
                 body: RevokeIn, idempotency_key: IdempotencyKey = None) -> Response:
    async def work(tx: Conn) -> tuple[int, Item[Revoked]]:
        scope = await _scope(tx, access.project_id, device_id)
        revoked = await operations.revoke_device(tx, scope.device_id, reason=body.reason)
        revoked_at, n = revoked.revoked_at, revoked.credentials_revoked
        assert revoked_at is not None
        return 200, Item[Revoked](data=Revoked(
            device_id=scope.device_id, device=scope.device_name, revoked_at=revoked_at,
            credentials_revoked=n, broker=await _tell_broker(request, tx)))

    response = await idempotent(conn, access, request, idempotency_key, work)
    forget = getattr(request.app.state, "device_revoked", None)
    if forget is not None and response.status_code == 200:
        forget()  # committed: this server's ingest refuses the device from now on
    return response


class EffectivePolicy(BaseModel):
    policy_id: uuid.UUID
    name: str
    version: int
    table_strategies: dict[str, dict[str, Any]]
    attached_via: Literal["device", "fleet"]


@router.get("/{device_id}/sync-policy", response_model=Item[EffectivePolicy | None],
            responses=_READ, summary="The device's sync policy (its own, else its fleet's)")
async def device_sync_policy(access: CanRead, conn: Db, device_id: uuid.UUID
                             ) -> Item[EffectivePolicy | None]:
    scope = await _scope(conn, access.project_id, device_id)
    policy = await syncpolicy.effective_policy(conn, scope.device_id)
    return Item[EffectivePolicy | None](data=None if policy is None
                                        else model_of(EffectivePolicy, policy))
