"""``/console``: the web console, static files shipped in the package (issue 16).

Plain ES modules and one stylesheet under ``console/``: nothing is fetched from elsewhere
or built at install time. The page talks to the same HTTP API as every client, with the
token the operator types in (kept in the browser tab's ``sessionStorage``). The answers
carry a Content-Security-Policy that allows only this server's own scripts, styles and
API, so a device-sent name can never run as script (the modules also only ever set
text, never HTML). docs/console.md describes the pages.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import RedirectResponse
from starlette.responses import Response
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

__all__ = ["ASSETS", "install_console"]

ASSETS = Path(__file__).parent / "console"

_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; "
                               "object-src 'none'; base-uri 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    # A new edgesync version's files replace the old ones: the browser checks first.
    "Cache-Control": "no-cache",
}


class _ConsoleFiles(StaticFiles):
    async def get_response(self, path: str, scope: Scope) -> Response:
        response = await super().get_response(path, scope)
        response.headers.update(_HEADERS)
        return response


def install_console(app: FastAPI) -> None:
    @app.get("/console", include_in_schema=False)
    async def console() -> RedirectResponse:
        return RedirectResponse("/console/", status_code=308)

    app.mount("/console", _ConsoleFiles(directory=ASSETS, html=True), name="console")
