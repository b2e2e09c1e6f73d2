"""``/events/stream``: the project's governance events as Server-Sent Events."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import StreamingResponse

from edgesync.api._auth import CanRead
from edgesync.api._db import pool_of
from edgesync.api._errors import error_responses
from edgesync.api._event_stream import event_stream, latest_event_id

__all__ = ["router"]

router = APIRouter(prefix="/core/api/v1/projects/{project_id}/events", tags=["events"])

_STREAM: dict[int | str, dict[str, Any]] = {
    200: {"description": "an endless text/event-stream; each event has `id`, `event` (the "
                         "event type) and one `data` line of JSON",
          "content": {"text/event-stream": {"schema": {"type": "string"}}}},
}


@router.get("/stream", response_class=StreamingResponse,
            responses={**_STREAM, **error_responses(400, 401, 404, 422)},
            summary="Follow governance events (Server-Sent Events)")
async def stream(
    access: CanRead, request: Request,
    after: Annotated[int | None, Query(ge=0, le=2**63 - 1,
                                       description="send events with a larger id")] = None,
    last_event_id: Annotated[int | None, Header(alias="Last-Event-ID", ge=0,
                                                le=2**63 - 1)] = None,
) -> StreamingResponse:
    pool = pool_of(request)
    start = last_event_id if last_event_id is not None else after
    if start is None:
        start = await latest_event_id(pool, access.project_id)
    body = event_stream(pool, request.app.state.events, access.project_id, start)
    return StreamingResponse(body, media_type="text/event-stream",
                             headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})
