"""Property-based run of the OpenAPI document against the app (in-process ASGI): no
request schemathesis generates may get a 5xx, an undocumented status, or a body that
breaks the documented schema. Bounded examples keep it short."""

from __future__ import annotations

import asyncio
import random
import threading
import uuid
from typing import Any

import hypothesis
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from edgesync import fleet
from edgesync.api import create_app
from edgesync.ingest import IngestPipeline
from edgesync.store import create_pool

EXAMPLES = 25
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance,
          response_schema_conformance]


def _in_thread(coro: Any) -> Any:
    """Run a coroutine on a loop of its own (the test itself is synchronous)."""
    result: dict[str, Any] = {}

    def target() -> None:
        try:
            result["value"] = asyncio.run(coro)
        except BaseException as exc:
            result["error"] = exc

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if "error" in result:
        raise result["error"]
    return result["value"]


async def _seed(database_url: str, tag: str, make_tenant: Any, batches: Any
                ) -> dict[str, Any]:
    pool = await create_pool(database_url, max_size=2)
    try:
        tenant = await make_tenant(pool, tag)
        async with pool.acquire() as conn:
            device = await fleet.add_device(conn, project=tenant.project_name, name="gw",
                                            topic_slug=tenant.slug)
        f = batches()
        out = await IngestPipeline(pool).handle(
            f"{device.root_topic}/sync/rows/batch",
            f.payload(f.rows(("insert", {"id": 1, "mode": "heat", "setpoint": 1.5}))))
        review_id = await pool.fetchval(
            "SELECT id FROM edge_schema_reviews WHERE lineage_id = $1", out.lineage_id)
        return {"tenant": tenant, "lineage_id": out.lineage_id, "review_id": review_id,
                "device_id": device.device_id}
    finally:
        await pool.close()


# Once: the API under test runs on a loop of its own thread, so the uvloop pass would
# repeat the same ~80 s of generated requests.
@pytest.mark.slow
@pytest.mark.once
def test_openapi_schema_holds(pool: Any, database_url: str, unique: str,
                              tenant_factory: Any, batches: Any) -> None:
    # ``pool`` is requested for its side effect: the session database is migrated.
    seed = _in_thread(_seed(database_url, unique, tenant_factory, batches))
    tenant = seed["tenant"]
    app = create_app(database_url=database_url)
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    real = {"project_id": tenant.project_id, "lineage_id": seed["lineage_id"],
            "review_id": seed["review_id"]}
    operations = [result.ok() for result in schema.get_all_operations()]
    operations.sort(key=lambda op: op.method.upper() == "DELETE")  # deleting the lineage last
    tested = 0
    cases = [(op, mode) for op in operations for mode in GenerationMode]
    for operation, mode in cases:
        if operation.path.endswith("/events/stream"):
            continue  # endless by design; covered by tests/api/test_events.py
        tested += 1

        @settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
                  suppress_health_check=list(HealthCheck),
                  phases=[Phase.explicit, Phase.generate])
        @hypothesis.given(case=operation.as_strategy(generation_mode=mode))
        def check(case: Any) -> None:
            rnd = random.Random(str(case.path_parameters))
            # Mostly aim at the real project and objects, so requests get past the 404s.
            for name in list(case.path_parameters or {}):
                if name in real and rnd.random() < 0.8:
                    case.path_parameters[name] = real[name]
            headers = tenant.headers()
            if case.method.upper() != "GET":
                headers["Idempotency-Key"] = str(uuid.uuid4())
            case.call_and_validate(headers=headers, checks=CHECKS)

        check()
    assert tested >= 30
