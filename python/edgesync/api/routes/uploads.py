"""The HTTP endpoint devices PUT presigned uploads to (served by ``edgesync serve``).

It lives in the API package, not in ``control``, so that the embedding API
(``edgesync.ingest``, ``edgesync.control``) loads no FastAPI."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable

import asyncpg
from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse

from edgesync.control import ObjectStore
from edgesync.control._uploads import (
    UPLOAD_PATH,
    UploadStatus,
    note_uploaded,
    verify_upload_url,
)
from edgesync.errors import ApiErrorCode, ConflictError, InvalidRequestError, NotFoundError

__all__ = ["upload_router"]


def _error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status)


def upload_router(pool: Callable[[], asyncpg.Pool], store: ObjectStore) -> APIRouter:
    router = APIRouter(tags=["uploads"])

    @router.put(f"{UPLOAD_PATH}/{{upload_id}}", status_code=200,
                summary="Upload a presigned object (.jsonl.zst)")
    async def put_object(upload_id: uuid.UUID, request: Request,
                         expires: int = Query(...), signature: str = Query(...)
                         ) -> JSONResponse:
        try:
            async with pool().acquire() as conn:
                upload = await verify_upload_url(conn, upload_id, expires, signature)
            if upload.status != UploadStatus.GRANTED:
                raise ConflictError(f"upload {upload_id} is already {upload.status}")

            async def body() -> AsyncIterator[bytes]:
                async for chunk in request.stream():
                    yield chunk

            size = await store.put(upload_id, body())
        except NotFoundError as exc:
            return _error(404, ApiErrorCode.UPLOAD_NOT_FOUND, str(exc))
        except ConflictError as exc:
            return _error(409, ApiErrorCode.UPLOAD_ALREADY_RECEIVED, str(exc))
        except InvalidRequestError as exc:
            code = (ApiErrorCode.UPLOAD_URL_EXPIRED if exc.field == "expires"
                    else ApiErrorCode.UPLOAD_TOO_LARGE)
            return _error(403 if exc.field == "expires" else 413, code, exc.reason)
        await note_uploaded(pool(), upload_id, size)
        return JSONResponse({"data": {"batch_id": str(upload_id), "byte_count": size}})

    return router
