"""Ingesting uploaded objects (bootstrap snapshots, payload spills).

An object is zstd-compressed JSON lines: a header line with the batch envelope fields
(``format_version``, ``capture_strategy``, ``source_table``, ``journal_epoch``,
``schema_hash``, ``schema_columns``), then one row operation per line, exactly as in
``rows`` of a row batch. It is cut into ordinary row batches (≤ 4,096 rows and well
under 512 KiB) with batch ids derived from the upload id, and each goes through the
normal pipeline — validation, dedupe, governance, staging — so a re-run after a crash
finds the chunks already in the ledger. The object is streamed, never held whole.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import io
import logging
import uuid
from collections.abc import Generator, Iterator
from typing import Any, NoReturn

import asyncpg
import orjson
import zstandard

from edgesync.control import MAX_OBJECT_BYTES, ObjectStore, note_ingested
from edgesync.ingest._outcome import OutcomeStatus
from edgesync.ingest._pipeline import IngestPipeline
from edgesync.protocol import periodic_loop

__all__ = ["ObjectIngester", "chunk_batch_id"]

_log = logging.getLogger(__name__)
_MAX_ROWS = 4096
_MAX_CHUNK_BYTES = 400 * 1024
_HEADER_KEYS = ("format_version", "capture_strategy", "source_table", "journal_epoch",
                "schema_hash", "schema_columns")


def chunk_batch_id(upload_id: uuid.UUID, index: int) -> str:
    """A UUIDv7 for chunk ``index``: the upload's timestamp, deterministic random bits."""
    digest = int.from_bytes(hashlib.sha256(f"{upload_id}:{index}".encode()).digest()[:10], "big")
    ms = upload_id.int >> 80
    value = (ms << 80) | (0x7 << 76) | (((digest >> 62) & 0xFFF) << 64) | (0b10 << 62) | (
        digest & ((1 << 62) - 1))
    return str(uuid.UUID(int=value))


def _lines(path: Any) -> Iterator[bytes]:
    with open(path, "rb") as raw:
        reader = zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True)
        for line in io.BufferedReader(reader, buffer_size=1 << 20):
            line = line.strip()
            if line:
                yield line


def _chunks(path: Any) -> Generator[tuple[dict[str, Any], list[bytes]], None, None]:
    lines = _lines(path)
    header = orjson.loads(next(lines, b"{}"))
    if not isinstance(header, dict):
        header = {}
    chunk: list[bytes] = []
    size = 0
    for line in lines:
        if chunk and (len(chunk) >= _MAX_ROWS or size + len(line) > _MAX_CHUNK_BYTES):
            yield header, chunk
            chunk, size = [], 0
        chunk.append(line)
        size += len(line) + 1
    if chunk:
        yield header, chunk


def _payload(header: dict[str, Any], rows: list[bytes], batch_id: str) -> bytes:
    seqs = [orjson.loads(r).get("commit_seq") for r in (rows[0], rows[-1])]
    envelope = {k: header.get(k) for k in _HEADER_KEYS if k in header}
    envelope.update(batch_id=batch_id, first_commit_seq=seqs[0], last_commit_seq=seqs[1])
    head = orjson.dumps(envelope)[:-1]
    return head + b',"rows":[' + b",".join(rows) + b"]}"


class ObjectIngester:
    """Background job: ingest finalized uploads, one at a time, restart-safe."""

    def __init__(self, pool: asyncpg.Pool, pipeline: IngestPipeline, store: ObjectStore, *,
                 poll_interval: float = 1.0) -> None:
        self._pool = pool
        self._pipeline = pipeline
        self._store = store
        self._poll = poll_interval

    async def run(self) -> NoReturn:
        await periodic_loop("object ingest", self.ingest_pending, interval=self._poll,
                            logger=_log)

    async def ingest_pending(self) -> None:
        while await self.ingest_next():
            pass

    async def ingest_next(self) -> bool:
        async with self._pool.acquire() as conn:
            row = await conn.fetchrow(
                "SELECT u.id, u.source_table, d.name, p.topic_slug FROM edge_uploads u "
                "JOIN edge_devices d ON d.id = u.device_id "
                "JOIN edge_projects p ON p.id = d.project_id "
                "WHERE u.status = 'uploaded' AND u.finalized_at IS NOT NULL "
                "ORDER BY u.finalized_at LIMIT 1")
        if row is None:
            return False
        topic = f"{row['topic_slug']}/{row['name']}/sync/rows/batch"
        rows, error = await self._ingest(row["id"], row["source_table"], topic)
        await note_ingested(self._pool, row["id"], rows, error)
        if error is None:
            # Every row is in the ledger now (a crash before this line re-ingests the object,
            # as duplicates). A failed object stays in the store for an operator to inspect
            # (docs/production.md).
            await asyncio.to_thread(self._store.remove, row["id"])
        return True

    async def _ingest(self, upload_id: uuid.UUID, table: str, topic: str
                      ) -> tuple[int, str | None]:
        path = self._store.path(upload_id)
        done = 0
        chunks = _chunks(path)
        try:
            index = -1
            while True:
                # Decompression and reading happen off the event loop, a chunk at a time.
                item = await asyncio.to_thread(next, chunks, None)
                if item is None:
                    break
                index += 1
                header, lines = item
                if header.get("source_table") != table:
                    return done, "object header names another source_table"
                payload = _payload(header, lines, chunk_batch_id(upload_id, index))
                outcome = await self._pipeline.handle(topic, payload,
                                                      max_payload_bytes=MAX_OBJECT_BYTES)
                if outcome.status is OutcomeStatus.REJECTED:
                    return done, f"chunk {index}: {outcome.code}: {outcome.detail}"
                done += len(lines)
        except (OSError, zstandard.ZstdError, orjson.JSONDecodeError) as exc:
            return done, f"object unreadable: {exc}"
        finally:
            with contextlib.suppress(Exception):
                chunks.close()
        return done, None
