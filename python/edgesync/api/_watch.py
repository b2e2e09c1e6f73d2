"""``edgesync events watch``: follow a project's event stream over HTTP, one JSON line
per event on stdout, reconnecting with ``Last-Event-ID`` when the connection drops."""

from __future__ import annotations

import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import IO

from edgesync.errors import ConfigError, EdgesyncError

__all__ = ["watch_events"]


def _events(lines: Iterator[bytes]) -> Iterator[tuple[str | None, str | None]]:
    """(id, data) of each block of an SSE byte stream; data is None for a block that only
    moves the last event id (the stream's first block does, so a reconnect resumes there)."""
    event_id: str | None = None
    data: list[str] = []
    for raw in lines:
        line = raw.decode("utf-8").rstrip("\r\n")
        if not line:
            if data or event_id is not None:
                yield event_id, "\n".join(data) if data else None
            event_id, data = None, []
        elif line.startswith("id:"):
            event_id = line[3:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))


def watch_events(api_url: str, *, token: str | None, org_id: str | None, project_id: str,
                 after: int | None = None, max_events: int | None = None,
                 out: IO[str] = sys.stdout, reconnect: bool = True) -> int:
    if not token:
        raise ConfigError("--token", "an API token is needed (or env EDGESYNC_TOKEN)")
    if not org_id:
        raise ConfigError("--org-id", "the organization id is needed (or env EDGESYNC_ORG_ID)")
    url = f"{api_url.rstrip('/')}/core/api/v1/projects/{project_id}/events/stream"
    last = str(after) if after is not None else None
    seen = 0
    while True:
        headers = {"Authorization": f"Bearer {token}", "ORG-ID": org_id,
                   "Accept": "text/event-stream"}
        if last is not None:
            headers["Last-Event-ID"] = last
        try:
            with urllib.request.urlopen(urllib.request.Request(url, headers=headers)) as resp:
                for event_id, data in _events(iter(resp.readline, b"")):
                    last = event_id or last
                    if data is None:
                        continue
                    out.write(data + "\n")
                    out.flush()
                    seen += 1
                    if max_events is not None and seen >= max_events:
                        return 0
        except urllib.error.HTTPError as exc:
            raise EdgesyncError(f"{url}: HTTP {exc.code}: {exc.read().decode(errors='replace')}"
                                ) from exc
        except (urllib.error.URLError, OSError) as exc:
            if not reconnect:
                raise EdgesyncError(f"{url}: {exc}") from exc
            sys.stderr.write(f"edgesync: event stream interrupted ({exc}); reconnecting\n")
        if not reconnect:
            return 0
        time.sleep(2.0)
