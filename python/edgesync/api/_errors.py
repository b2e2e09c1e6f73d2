"""Every error the API answers with, mapped in one place to ``{"error": {...}}``.

Domain errors (``edgesync.errors``) map to a status and a stable code; routes raise
``ApiError`` for anything more specific. Unexpected exceptions become a 500 whose
body says nothing about the internals.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException

from edgesync.api._envelopes import ErrorDetail, ErrorEnvelope, RefusalOut, RefusedDetail
from edgesync.errors import (
    ApiError,
    ApiErrorCode,
    ConfigError,
    ConflictError,
    EdgesyncError,
    IdentifierError,
    InvalidRequestError,
    NotFoundError,
    StateWriteError,
)
from edgesync.governance import refusals_of

__all__ = ["ApiError", "describe", "error_responses", "install_error_handlers"]

_log = logging.getLogger(__name__)


# Write-back refusals keep the reference's lower-case codes (docs/api.md, "Write-back").
_STATE_WRITE_STATUS: dict[str, int] = {ApiErrorCode.STATE_NOT_CLOUD_AUTHORITATIVE: 403,
                                        ApiErrorCode.STATE_MIRROR_NOT_PROVISIONED: 404,
                                        ApiErrorCode.STATE_WRITE_FAILED: 500}


def _envelope(code: str, message: str, field: str | None = None) -> ErrorEnvelope:
    return ErrorEnvelope(error=ErrorDetail(code=code, message=message, field=field))


def describe(exc: ApiError | EdgesyncError) -> tuple[int, ErrorEnvelope]:
    """Status and body for an expected error (also stored for idempotent replays)."""
    if isinstance(exc, ApiError):
        return exc.status, _envelope(exc.code, exc.message, exc.field)
    refusals = refusals_of(exc)
    if refusals is not None:
        # The same list the preview answers with, so a client shows each on its column.
        status, plain = _describe_plain(exc)
        return status, ErrorEnvelope(error=RefusedDetail(
            **plain.error.model_dump(),
            refusals=[RefusalOut(**r.as_json()) for r in refusals]))
    return _describe_plain(exc)


def _describe_plain(exc: EdgesyncError) -> tuple[int, ErrorEnvelope]:
    """``describe`` of a domain error, by its class alone."""
    if isinstance(exc, StateWriteError):
        return _STATE_WRITE_STATUS.get(exc.code, 500), _envelope(exc.code, exc.message)
    if isinstance(exc, NotFoundError):
        return 404, _envelope(ApiErrorCode.NOT_FOUND, str(exc))
    if isinstance(exc, ConflictError):
        return 409, _envelope(ApiErrorCode.CONFLICT, str(exc))
    if isinstance(exc, InvalidRequestError | ConfigError):
        return 422, _envelope(ApiErrorCode.INVALID_REQUEST, exc.reason, exc.field)
    if isinstance(exc, IdentifierError):
        return 422, _envelope(ApiErrorCode.INVALID_IDENTIFIER, str(exc))
    return 500, _envelope(ApiErrorCode.INTERNAL_ERROR, "the server could not complete the request")


def _json(status: int, body: ErrorEnvelope, headers: dict[str, str] | None = None
          ) -> JSONResponse:
    return JSONResponse(body.model_dump(mode="json"), status_code=status, headers=headers)


_STATUS_CODES = {400: ApiErrorCode.BAD_REQUEST, 401: ApiErrorCode.UNAUTHENTICATED,
                 403: ApiErrorCode.PERMISSION_DENIED, 404: ApiErrorCode.NOT_FOUND,
                 405: ApiErrorCode.METHOD_NOT_ALLOWED, 409: ApiErrorCode.CONFLICT,
                 413: ApiErrorCode.PAYLOAD_TOO_LARGE, 415: ApiErrorCode.UNSUPPORTED_MEDIA_TYPE}


def _field(loc: tuple[Any, ...]) -> str:
    # pydantic names the member of a union that failed (``str-enum[ReviewStatus]``,
    # ``literal['open']``): not part of the field a caller sent.
    parts = [str(p) for p in loc if "[" not in str(p)]
    if parts and parts[0] in ("body", "query", "path", "header"):
        parts = parts[1:] or parts
    return ".".join(parts)


def _body_fields(request: Request, loc: tuple[Any, ...]) -> list[str]:
    """The fields of the request body's model, for an unknown field at its top level
    (``("body", name)``); empty when that cannot be told."""
    if len(loc) != 2 or loc[0] != "body":
        return []
    body = getattr(request.scope.get("route"), "body_field", None)
    model = getattr(getattr(body, "field_info", None), "annotation", None)
    if isinstance(model, type) and issubclass(model, BaseModel):
        return sorted(model.model_fields)
    return []


def install_error_handlers(app: FastAPI) -> None:
    async def on_api_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ApiError)
        status, body = describe(exc)
        return _json(status, body, exc.headers)

    async def on_domain_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, EdgesyncError)
        status, body = describe(exc)
        if status >= 500:
            _log.error("request failed: %s", exc, exc_info=exc)
        return _json(status, body)

    async def on_validation(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        errors = list(exc.errors())
        first = errors[0] if errors else {"loc": (), "msg": "invalid request"}
        if first.get("type") == "json_invalid":
            return _json(400, _envelope(ApiErrorCode.MALFORMED_JSON,
                                        "the request body is not valid JSON"))
        loc = tuple(first.get("loc", ()))
        message = str(first.get("msg"))
        if first.get("type") == "extra_forbidden" and (known := _body_fields(request, loc)):
            # pydantic says only "Extra inputs are not permitted": name the fields there are.
            message = f"no field {str(loc[-1])!r} here; the fields are: {', '.join(known)}"
        return _json(422, _envelope(ApiErrorCode.VALIDATION_FAILED, message, _field(loc) or None))

    async def on_http(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        code = _STATUS_CODES.get(exc.status_code, ApiErrorCode.HTTP_ERROR)
        return _json(exc.status_code, _envelope(code, str(exc.detail)),
                     dict(exc.headers) if exc.headers else None)

    async def on_unexpected(_: Request, exc: Exception) -> JSONResponse:
        _log.error("unexpected error", exc_info=exc)
        return _json(500, _envelope(ApiErrorCode.INTERNAL_ERROR,
                                    "the server could not complete the request"))

    app.add_exception_handler(ApiError, on_api_error)
    app.add_exception_handler(EdgesyncError, on_domain_error)
    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(StarletteHTTPException, on_http)
    app.add_exception_handler(Exception, on_unexpected)


_DESCRIPTIONS = {
    400: "malformed request: missing ORG-ID or Idempotency-Key header, or invalid JSON",
    401: "missing, unknown, expired or revoked bearer token",
    403: "the token may read this project but not change it",
    404: "no such object, or the token may not see it",
    409: "the object changed meanwhile (action_version) or is in the wrong state",
    422: "the request is well-formed but invalid; error.field names the offending part",
}


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` entries for the error statuses a route can answer with."""
    return {s: {"model": ErrorEnvelope, "description": _DESCRIPTIONS[s]} for s in statuses}
