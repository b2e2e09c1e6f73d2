"""``/docs`` is one page with no external asset (usable without internet), rendered
from the OpenAPI document; ``edgesync --version`` prints the version."""

from __future__ import annotations

import re
import subprocess
import sys

import asyncpg
import httpx

from edgesync._version import version
from edgesync.api import create_app


async def test_docs_page_needs_nothing_from_outside(pool: asyncpg.Pool) -> None:
    app = create_app(pool)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://api") as client:
        r = await client.get("/docs")
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
        page = r.text
        # No script, stylesheet or image from anywhere (the CDN the Swagger page needed).
        assert "<script" not in page
        assert not re.search(r"""(src|href)=['"]?https?://""", page)
        paths = (await client.get("/openapi.json")).json()["paths"]
        some = "/core/api/v1/projects/{project_id}/edge/lineages"
        assert some in paths and f"<code>{some}</code>" in page
        assert (await client.get("/redoc")).status_code == 404


def test_version_option() -> None:
    main = "from edgesync.cli import main; main()"
    out = subprocess.run([sys.executable, "-c", main, "--version"], capture_output=True,
                         text=True, check=True, timeout=60)
    assert out.stdout.strip() == f"edgesync {version()}"
    assert re.fullmatch(r"\d+\.\d+\.\d+.*", version())
