"""``/docs``: the API's reference as one self-contained HTML page.

FastAPI's Swagger UI and ReDoc pages load their JavaScript and CSS from a CDN, and are
blank without internet (issue 12); no installed package carries those assets. This
page is rendered on the server from the same OpenAPI document (``/openapi.json``,
which Swagger UI, ReDoc or any client generator can load from anywhere) and needs
nothing else: every operation with its method, path, summary, description,
parameters and responses.
"""

from __future__ import annotations

import html
from typing import Any

from fastapi import FastAPI
from fastapi.responses import HTMLResponse

__all__ = ["install_docs_page"]

_STYLE = """
body{font-family:system-ui,sans-serif;max-width:70em;margin:2em auto;padding:0 1em;color:#222}
h2{border-bottom:1px solid #ccc;margin-top:2em}code{background:#f4f4f4;padding:0 .2em}
.op{margin:1em 0;padding:.5em 1em;border-left:4px solid #888;background:#fafafa}
.m{font-weight:bold;text-transform:uppercase;margin-right:.5em}
.get{border-color:#2a7}.post{border-color:#27c}.patch,.put{border-color:#c82}.delete{border-color:#c33}
table{border-collapse:collapse}td{padding:0 1em 0 0;vertical-align:top}
"""


def _e(text: Any) -> str:
    return html.escape(str(text))


def _operation(path: str, method: str, op: dict[str, Any]) -> str:
    params = "".join(
        f"<tr><td><code>{_e(p.get('name'))}</code></td><td>{_e(p.get('in'))}</td>"
        f"<td>{'required' if p.get('required') else ''}</td>"
        f"<td>{_e(p.get('description', ''))}</td></tr>" for p in op.get("parameters", []))
    responses = ", ".join(f"<code>{_e(code)}</code> {_e(r.get('description', ''))}"
                          for code, r in op.get("responses", {}).items())
    return (f'<div class="op {method}"><p><span class="m">{_e(method)}</span>'
            f"<code>{_e(path)}</code> — {_e(op.get('summary', ''))}</p>"
            f"<p>{_e(op.get('description', ''))}</p>"
            + (f"<table>{params}</table>" if params else "")
            + (f"<p>Responses: {responses}</p>" if responses else "") + "</div>")


def render(doc: dict[str, Any]) -> str:
    by_tag: dict[str, list[str]] = {}
    for path, item in doc.get("paths", {}).items():
        for method, op in item.items():
            if isinstance(op, dict) and "responses" in op:
                tag = (op.get("tags") or ["other"])[0]
                by_tag.setdefault(tag, []).append(_operation(path, method, op))
    info = doc.get("info", {})
    body = "".join(f"<h2>{_e(tag)}</h2>{''.join(ops)}" for tag, ops in by_tag.items())
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{_e(info.get('title'))}"
            f"</title><style>{_STYLE}</style></head><body><h1>{_e(info.get('title'))} "
            f"{_e(info.get('version'))}</h1><p>{_e(info.get('description', ''))}</p>"
            "<p>The OpenAPI document: <a href='/openapi.json'><code>/openapi.json</code></a> "
            "(load it into Swagger UI, ReDoc or a client generator).</p>"
            f"{body}</body></html>")


def install_docs_page(app: FastAPI) -> None:
    page: list[str] = []

    @app.get("/docs", include_in_schema=False)
    async def docs() -> HTMLResponse:
        if not page:  # the document is complete only once every router is in
            page.append(render(app.openapi()))
        return HTMLResponse(page[0])
