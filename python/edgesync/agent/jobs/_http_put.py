"""HTTP PUT of a file to a presigned URL with the standard library, streamed.

Blocking: the agent runs it in a worker thread (``asyncio.to_thread``).
"""

from __future__ import annotations

import http.client
import ssl
from pathlib import Path
from urllib.parse import urlsplit

__all__ = ["PutResult", "put_file"]

_TIMEOUT_S = 120.0
_BLOCK = 1 << 16


class PutResult:
    __slots__ = ("body", "status")

    def __init__(self, status: int, body: bytes) -> None:
        self.status, self.body = status, body

    def __repr__(self) -> str:
        return f"PutResult({self.status}, {self.body[:200]!r})"


def put_file(url: str, path: Path, *, content_type: str = "application/zstd",
             ssl_context: ssl.SSLContext | None = None) -> PutResult:
    """PUT ``path`` to ``url``; returns the status and (the start of) the body.
    ``OSError`` / ``http.client.HTTPException`` when the request cannot be made."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"not an http(s) URL: {url!r}")
    target = parts.path + (f"?{parts.query}" if parts.query else "")
    conn: http.client.HTTPConnection
    if parts.scheme == "https":
        conn = http.client.HTTPSConnection(parts.hostname, parts.port, timeout=_TIMEOUT_S,
                                           context=ssl_context or ssl.create_default_context())
    else:
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=_TIMEOUT_S)
    try:
        size = path.stat().st_size
        conn.putrequest("PUT", target)
        conn.putheader("Content-Type", content_type)
        conn.putheader("Content-Length", str(size))
        conn.endheaders()
        with path.open("rb") as f:
            while block := f.read(_BLOCK):
                conn.send(block)
        resp = conn.getresponse()
        return PutResult(resp.status, resp.read(64 * 1024))
    finally:
        conn.close()
