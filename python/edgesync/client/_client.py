"""``ApiClient``: the HTTP API from Python (httpx, synchronous).

Every call carries ``Authorization: Bearer`` and ``ORG-ID``; every mutation gets a fresh
``Idempotency-Key`` (a uuid4) unless the caller passes one, so a retry of one logical
call can reuse its key. An error envelope becomes ``ApiClientError`` with its stable
``code``.
"""

from __future__ import annotations

import urllib.parse
import uuid
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import httpx

from edgesync._defaults import DEFAULT_API_URL
from edgesync.errors import ApiClientError, ApiErrorCode

__all__ = ["DEFAULT_API_URL", "ApiClient", "ApiClientError"]

_MUTATIONS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def _error(response: httpx.Response, base_url: str) -> ApiClientError:
    try:
        detail = response.json()["error"]
        code, message = str(detail["code"]), str(detail.get("message", ""))
    except (ValueError, KeyError, TypeError):
        text = response.text.strip()[:200] or response.reason_phrase
        return ApiClientError(response.status_code, ApiErrorCode.HTTP_ERROR, text)
    if response.status_code == 404 and code == ApiErrorCode.NOT_FOUND and message == "Not Found":
        # No such route at all (the API's own 404s name what is missing): the base URL
        # is wrong, most often the console's address given for the API's.
        hint = (" (drop the trailing /console: that is the web console's address)"
                if base_url.endswith("/console") else "")
        message = (f"no such API route: {response.request.url.path} at {base_url}{hint}; "
                   "--api-url (env EDGESYNC_API_URL) must be the API's root (e.g. "
                   "http://127.0.0.1:8080), on a server as new as this client")
    exc = ApiClientError(response.status_code, code, message, detail.get("field"))
    exc.refusals = tuple(detail.get("refusals") or ())
    return exc


class ApiClient:
    """``ApiClient(url, token=, org_id=)``; ``project(id)`` scopes paths to a project.

    ``request`` returns the decoded JSON body (the ``{"data": …}`` envelope); helpers
    below name the routes of docs/api.md."""

    def __init__(self, base_url: str = DEFAULT_API_URL, *, token: str, org_id: str | uuid.UUID,
                 timeout: float = 30.0, transport: httpx.BaseTransport | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self._http = httpx.Client(
            base_url=self.base_url, timeout=timeout, transport=transport,
            headers={"Authorization": f"Bearer {token}", "ORG-ID": str(org_id),
                     "Accept": "application/json"})

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> ApiClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def request(self, method: str, path: str, *, json: Any = None,
                params: Mapping[str, Any] | None = None,
                idempotency_key: str | None = None, content: bytes | None = None) -> Any:
        """``content``: a raw body (application/octet-stream) instead of ``json``."""
        method = method.upper()
        headers = {}
        if content is not None:
            headers["Content-Type"] = "application/octet-stream"
        if method in _MUTATIONS:
            headers["Idempotency-Key"] = idempotency_key or str(uuid.uuid4())
        query = {k: str(v) for k, v in (params or {}).items() if v is not None}
        try:
            response = self._http.request(method, path, json=json, params=query,
                                          headers=headers, content=content)
        except httpx.HTTPError as exc:
            raise ApiClientError(0, ApiErrorCode.CONNECTION_FAILED,
                                 f"{self.base_url}: {exc or type(exc).__name__}") from exc
        if response.status_code >= 400:
            raise _error(response, self.base_url)
        return response.json() if response.content else None

    def get(self, path: str, **params: Any) -> Any:
        return self.request("GET", path, params=params)

    def stream_lines(self, path: str, *, headers: Mapping[str, str] | None = None,
                     read_timeout: float = 30.0,
                     opened: Callable[[httpx.Response], None] | None = None) -> Iterator[str]:
        """The lines of a streaming GET (the event stream), as they arrive; errors as for
        ``request``. ``opened`` gets the response, so another thread can ``close()`` it to
        stop a reader waiting for the next line."""
        timeout = httpx.Timeout(10.0, read=read_timeout)
        try:
            with self._http.stream("GET", path, headers=dict(headers or {}),
                                   timeout=timeout) as response:
                if response.status_code >= 400:
                    response.read()
                    raise _error(response, self.base_url)
                if opened is not None:
                    opened(response)
                yield from response.iter_lines()
        except httpx.HTTPError as exc:
            raise ApiClientError(0, ApiErrorCode.CONNECTION_FAILED,
                                 f"{self.base_url}: {exc or type(exc).__name__}") from exc

    def post(self, path: str, body: Any = None, *, idempotency_key: str | None = None) -> Any:
        return self.request("POST", path, json=body, idempotency_key=idempotency_key)

    def patch(self, path: str, body: Any, *, idempotency_key: str | None = None) -> Any:
        return self.request("PATCH", path, json=body, idempotency_key=idempotency_key)

    def delete(self, path: str, *, idempotency_key: str | None = None) -> Any:
        return self.request("DELETE", path, idempotency_key=idempotency_key)

    def project(self, project_id: str | uuid.UUID) -> ProjectApi:
        return ProjectApi(self, project_id)

    def projects(self) -> list[dict[str, Any]]:
        """The organization's projects this token may read (id, name, topic_slug)."""
        out: list[dict[str, Any]] = []
        page = 1
        while True:
            doc = self.get("/core/api/v1/projects", page=page, limit=200)
            out += doc["data"]
            if len(out) >= int(doc["meta"]["total"]) or not doc["data"]:
                return out
            page += 1

    def resolve_project(self, ref: str | uuid.UUID) -> str:
        """A project's id from its id, name or topic slug (``--project plant``). A name or
        slug that matches no project, or several, is an ``ApiClientError`` listing what
        there is; an id is taken as it is (the API answers for it)."""
        try:
            return str(uuid.UUID(str(ref)))
        except ValueError:
            pass
        projects = self.projects()
        found = [p for p in projects if ref in (p["name"], p["topic_slug"])]
        if len(found) == 1:
            return str(found[0]["id"])
        if found:
            ids = ", ".join(f"{p['id']} ({p['name']}, topic slug {p['topic_slug']!r})"
                            for p in found)
            raise ApiClientError(409, ApiErrorCode.PROJECT_AMBIGUOUS,
                                 f"{ref!r} names several projects: {ids}; give --project the id",
                                 "project")
        known = ", ".join(f"{p['name']} (topic slug {p['topic_slug']!r})" for p in projects)
        raise ApiClientError(404, ApiErrorCode.PROJECT_NOT_FOUND,
                             f"no project named {ref!r} (by name or "
                             "topic slug) that this token may read; "
                             + (f"there are: {known}" if known else "it may read none"),
                             "project")


class ProjectApi:
    """The routes under ``/core/api/v1/projects/{project_id}``; each returns ``data``
    (and list calls the whole page: ``{"data": [...], "meta": {...}}``)."""

    def __init__(self, client: ApiClient, project_id: str | uuid.UUID) -> None:
        self.client = client
        self.prefix = f"/core/api/v1/projects/{project_id}"

    def _data(self, doc: Any) -> Any:
        return doc["data"] if isinstance(doc, dict) and "data" in doc else doc

    def get_page(self, path: str, **params: Any) -> dict[str, Any]:
        doc: dict[str, Any] = self.client.get(self.prefix + path, **params)
        return doc

    def get(self, path: str, **params: Any) -> Any:
        return self._data(self.client.get(self.prefix + path, **params))

    def post(self, path: str, body: Any = None) -> Any:
        return self._data(self.client.post(self.prefix + path, body))

    def patch(self, path: str, body: Any) -> Any:
        return self._data(self.client.patch(self.prefix + path, body))

    def delete(self, path: str) -> Any:
        return self._data(self.client.delete(self.prefix + path))

    # Lineages
    def lineages(self, **params: Any) -> dict[str, Any]:
        return self.get_page("/edge/lineages", **params)

    def lineage(self, lineage_id: str) -> Any:
        return self.get(f"/edge/lineages/{lineage_id}")

    def reset_materialization(self, lineage_id: str) -> Any:
        return self.post(f"/edge/lineages/{lineage_id}/reset-materialization")

    def discard_staged(self, lineage_id: str, *, reason: str | None = None,
                       schema_hash: str | None = None) -> Any:
        body = {k: v for k, v in (("staging_reason", reason), ("schema_hash", schema_hash))
                if v is not None}
        return self.post(f"/edge/lineages/{lineage_id}/discard-staged", body)

    def replay_rejected(self, lineage_id: str, *, schema_hash: str | None = None,
                        dry_run: bool = False) -> Any:
        body: dict[str, Any] = {"dry_run": dry_run}
        if schema_hash is not None:
            body["schema_hash"] = schema_hash
        return self.post(f"/edge/lineages/{lineage_id}/replay-rejected", body)

    def set_sync_authority(self, lineage_id: str, sync_authority: str, *,
                           force: bool = False) -> Any:
        return self.post(f"/edge/lineages/{lineage_id}/sync-authority",
                         {"sync_authority": sync_authority, "force": force})

    def quarantine(self, lineage_id: str, **params: Any) -> dict[str, Any]:
        return self.get_page(f"/edge/lineages/{lineage_id}/quarantine", **params)

    def retry_quarantined(self, lineage_id: str, row_id: int | None = None, *,
                          values: dict[str, Any] | None = None) -> Any:
        """Retry one quarantined row (with ``values`` replaced), or every open one."""
        base = f"/edge/lineages/{lineage_id}/quarantine"
        if row_id is None:
            return self.post(f"{base}/retry")
        return self.post(f"{base}/{row_id}/retry", {"values": values} if values else {})

    def discard_quarantined(self, lineage_id: str, row_id: int | None = None) -> Any:
        """Discard one quarantined row, or every one of the lineage."""
        base = f"/edge/lineages/{lineage_id}/quarantine"
        return self.post(f"{base}/discard" if row_id is None else f"{base}/{row_id}/discard")

    def delete_lineage(self, lineage_id: str) -> Any:
        return self.delete(f"/edge/lineages/{lineage_id}")

    def resnapshot(self, lineage_id: str, filter_doc: dict[str, Any] | None = None) -> Any:
        """Ask the device to send the table again (the whole table without a filter)."""
        return self.post(f"/edge/lineages/{lineage_id}/resnapshot",
                         {"filter": filter_doc} if filter_doc else None)

    def verify(self, lineage_id: str, *, prefix: int = 2, repair: bool = False) -> Any:
        return self.post(f"/edge/lineages/{lineage_id}/verify",
                         {"prefix": prefix, "repair": repair})

    def telemetry(self, lineage_id: str, **params: Any) -> dict[str, Any]:
        return self.get_page(f"/edge/lineages/{lineage_id}/telemetry", **params)

    def write_state_rows(self, device_id: str, lineage_id: str,
                         rows: list[dict[str, Any]]) -> Any:
        return self.post(f"/devices/{device_id}/edge/state-tables/{lineage_id}/rows",
                         {"rows": rows})

    # Schema reviews
    def reviews(self, **params: Any) -> dict[str, Any]:
        return self.get_page("/edge/schema-reviews", **params)

    def review(self, review_id: str) -> Any:
        return self.get(f"/edge/schema-reviews/{review_id}")

    def claim(self, review_id: str, action_version: int) -> Any:
        return self.post(f"/edge/schema-reviews/{review_id}/claim",
                         {"action_version": action_version})

    def approve(self, review_id: str, action_version: int,
                column_actions: list[dict[str, Any]] | None = None,
                sync_authority: str | None = None) -> Any:
        return self.post(f"/edge/schema-reviews/{review_id}/approve",
                         _body(action_version=action_version, column_actions=column_actions,
                               sync_authority=sync_authority))

    def preview_approval(self, review_id: str,
                         column_actions: list[dict[str, Any]] | None = None) -> Any:
        """What approving with ``column_actions`` would give; changes nothing."""
        return self._data(self.client.request(
            "POST", f"{self.prefix}/edge/schema-reviews/{review_id}/preview",
            json=_body(column_actions=column_actions)))

    def reject(self, review_id: str, action_version: int, reason: str | None = None) -> Any:
        return self.post(f"/edge/schema-reviews/{review_id}/reject",
                         {"action_version": action_version, "reason": reason})

    def reopen_review(self, lineage_id: str) -> Any:
        return self.post(f"/edge/lineages/{lineage_id}/reopen-review")

    # Registry coalescing (fleet_id: the fleet-scoped routes)
    def _edge(self, fleet_id: str | None) -> str:
        return f"/fleets/{fleet_id}/edge" if fleet_id else "/edge"

    def registry_entries(self, fleet_id: str | None = None, **params: Any) -> dict[str, Any]:
        return self.get_page(self._edge(fleet_id) + "/registry", **params)

    def registry_entry(self, registry_id: str, fleet_id: str | None = None) -> Any:
        return self.get(f"{self._edge(fleet_id)}/registry/{registry_id}")

    def registry_reviews(self, fleet_id: str | None = None, **params: Any) -> dict[str, Any]:
        return self.get_page(self._edge(fleet_id) + "/registry-reviews", **params)

    def registry_review(self, review_id: str, fleet_id: str | None = None) -> Any:
        return self.get(f"{self._edge(fleet_id)}/registry-reviews/{review_id}")

    def decide_registry_review(self, review_id: str, action: str, action_version: int, *,
                               column_actions: list[dict[str, Any]] | None = None,
                               reason: str | None = None, fleet_id: str | None = None) -> Any:
        """``action``: claim, approve (``column_actions``), reject or abandon (``reason``)."""
        return self.post(f"{self._edge(fleet_id)}/registry-reviews/{review_id}/{action}",
                         _body(action_version=action_version, column_actions=column_actions,
                               reason=reason))

    def preview_registry_approval(self, review_id: str,
                                  column_actions: list[dict[str, Any]] | None = None,
                                  fleet_id: str | None = None) -> Any:
        """What approving a registry review with ``column_actions`` would give."""
        return self._data(self.client.request(
            "POST", f"{self.prefix}{self._edge(fleet_id)}/registry-reviews/{review_id}/preview",
            json=_body(column_actions=column_actions)))

    def coalesced_mirrors(self, fleet_id: str | None = None, **params: Any) -> dict[str, Any]:
        return self.get_page(self._edge(fleet_id) + "/coalesced-mirrors", **params)

    def coalesced_mirror(self, mirror_id: str, fleet_id: str | None = None) -> Any:
        return self.get(f"{self._edge(fleet_id)}/coalesced-mirrors/{mirror_id}")

    def consolidate(self, source_table: str, fleet_id: str | None = None) -> Any:
        """Move device-scoped lineages of ``source_table`` into its coalesced mirror."""
        table = urllib.parse.quote(source_table, safe="")
        return self.post(f"{self._edge(fleet_id)}/coalesced-mirrors/{table}/consolidate")

    # Device data points
    def data_points(self, **params: Any) -> dict[str, Any]:
        return self.get_page("/edge/data-points", **params)

    def data_point(self, data_point_id: str) -> Any:
        return self.get(f"/edge/data-points/{data_point_id}")

    def create_data_point(self, name: str, value_type: str, unit: str | None = None) -> Any:
        return self.post("/edge/data-points", _body(name=name, value_type=value_type, unit=unit))

    def data_point_values(self, data_point_id: str, **params: Any) -> dict[str, Any]:
        return self.get_page(f"/edge/data-points/{data_point_id}/values", **params)

    # Policy and devices
    def policy(self) -> Any:
        return self.get("/edge/policy")

    def set_policy(self, changes: dict[str, Any]) -> Any:
        return self.patch("/edge/policy", changes)

    def devices(self, **params: Any) -> dict[str, Any]:
        return self.get_page("/devices", **params)

    def add_device(self, name: str, fleet: str | None = None) -> Any:
        return self.post("/devices", _body(name=name, fleet=fleet))

    # Sync policies
    def sync_policies(self, **params: Any) -> dict[str, Any]:
        return self.get_page("/edge/sync-policies", **params)

    def sync_policy(self, policy_id: str) -> Any:
        return self.get(f"/edge/sync-policies/{policy_id}")

    def introspect_sample(self, data: bytes) -> Any:
        return self._data(self.client.request(
            "POST", self.prefix + "/edge/sync-policies/introspect", content=data))

    def create_sync_policy(self, body: dict[str, Any]) -> Any:
        return self.post("/edge/sync-policies", body)

    def update_sync_policy(self, policy_id: str, changes: dict[str, Any]) -> Any:
        return self.patch(f"/edge/sync-policies/{policy_id}", changes)

    def delete_sync_policy(self, policy_id: str) -> Any:
        return self.delete(f"/edge/sync-policies/{policy_id}")

    def attach_sync_policy(self, policy_id: str, action: str, *, device_id: str | None = None,
                           fleet_id: str | None = None) -> Any:
        return self.post(f"/edge/sync-policies/{policy_id}/{action}",
                         _body(device_id=device_id, fleet_id=fleet_id))

    def sync_policy_devices(self, policy_id: str) -> Any:
        return self.get(f"/edge/sync-policies/{policy_id}/devices")

    def sync_policy_attachments(self, policy_id: str) -> Any:
        return self.get(f"/edge/sync-policies/{policy_id}/attachments")


def _body(**fields: Any) -> dict[str, Any]:
    """A request body without the fields left out (None), so the API applies its defaults
    rather than an explicit null."""
    return {k: v for k, v in fields.items() if v is not None}
