"""``/console`` serves the static files shipped in the package: with the JavaScript MIME
type browsers require of modules, the Content-Security-Policy that keeps a device-sent
name from ever running as script, and nothing that refers to another host."""

from __future__ import annotations

import re

import httpx
import pytest

from edgesync.api._console import ASSETS
from edgesync.server import Server

pytestmark = pytest.mark.e2e


async def test_console_is_served_from_the_package(console_server: Server) -> None:
    assert console_server.api is not None
    async with httpx.AsyncClient(base_url=console_server.api.url) as http:
        moved = await http.get("/console")
        assert moved.status_code == 308 and moved.headers["location"] == "/console/"
        page = await http.get("/console/")
        assert page.status_code == 200
        assert page.headers["content-type"].startswith("text/html")
        csp = page.headers["content-security-policy"]
        assert "default-src 'self'" in csp and "unsafe-inline" not in csp
        assert '<script type="module" src="js/app.js">' in page.text
        files = sorted(p.relative_to(ASSETS).as_posix() for p in ASSETS.rglob("*") if p.is_file())
        assert "js/pages/review.js" in files
        for name in files:
            got = await http.get(f"/console/{name}")
            assert got.status_code == 200, name
            if name.endswith(".js"):
                assert got.headers["content-type"].split(";")[0] in (
                    "text/javascript", "application/javascript"), name
            # no CDN, no other host: every URL in the assets is relative
            assert not re.search(r"""(?:src|href|import)\W+["'](?:https?:)?//""", got.text), name
        assert (await http.get("/console/nothing.js")).status_code == 404
