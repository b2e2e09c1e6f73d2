"""Object storage for device uploads: files under the data directory.

Uploads are streamed to a temporary file and renamed into place only when complete
and within the size limit, so a half-written object is never ingested.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

from edgesync.errors import InvalidRequestError

__all__ = ["MAX_OBJECT_BYTES", "ObjectStore"]

MAX_OBJECT_BYTES = 1 << 30


class ObjectStore:
    def __init__(self, root: Path, *, max_bytes: int = MAX_OBJECT_BYTES) -> None:
        self.root = root
        self.max_bytes = max_bytes

    def path(self, upload_id: uuid.UUID) -> Path:
        return self.root / f"{upload_id}.jsonl.zst"

    def remove(self, upload_id: uuid.UUID) -> None:
        """Delete an object once its rows are ingested (gone already is fine)."""
        self.path(upload_id).unlink(missing_ok=True)

    async def put(self, upload_id: uuid.UUID, chunks: AsyncIterator[bytes]) -> int:
        """Store a stream; returns its size. Refuses (and discards) an object over the limit."""
        await asyncio.to_thread(self.root.mkdir, parents=True, exist_ok=True)
        final = self.path(upload_id)
        partial = final.with_suffix(f".part-{os.getpid()}-{uuid.uuid4().hex[:6]}")
        size = 0
        handle = await asyncio.to_thread(partial.open, "wb")
        try:
            async for chunk in chunks:
                size += len(chunk)
                if size > self.max_bytes:
                    raise InvalidRequestError(
                        "body", f"object larger than {self.max_bytes} bytes")
                await asyncio.to_thread(handle.write, chunk)
            await asyncio.to_thread(handle.flush)
            await asyncio.to_thread(os.fsync, handle.fileno())
        except BaseException:
            handle.close()
            partial.unlink(missing_ok=True)
            raise
        handle.close()
        await asyncio.to_thread(partial.replace, final)
        return size
