"""A device column named like a PostgreSQL system column (xmin, ctid, ...) cannot be a
target column: approving it as it is answers 422 naming the column (it was a 500 when
PostgreSQL refused the CREATE TABLE), and a mirror_column_name makes it approvable."""

from __future__ import annotations

import re
import uuid

import httpx
import pytest

from edgesync import fleet
from edgesync.ingest import IngestPipeline
from edgesync.materialize._identifiers import SYSTEM_COLUMNS


def idem() -> dict[str, str]:
    return {"Idempotency-Key": str(uuid.uuid4())}


@pytest.mark.parametrize("system", SYSTEM_COLUMNS)
async def test_system_column_names_are_refused_with_422(client: httpx.AsyncClient, tenant,
                                                       pool, batches, system: str) -> None:
    async with pool.acquire() as conn:
        device = await fleet.add_device(conn, project=tenant.project_name, name="gw-sys",
                                        topic_slug=tenant.slug)
    f = batches("readings", columns=[("id", "INTEGER", 1, True), (system, "INTEGER", 0, False)])
    out = await IngestPipeline(pool).handle(f"{device.root_topic}/sync/rows/batch",
                                            f.payload(f.rows(("insert", {"id": 1, system: 7}))))
    review_id = await pool.fetchval("SELECT id FROM edge_schema_reviews WHERE lineage_id = $1",
                                    out.lineage_id)
    url = tenant.url(f"/edge/schema-reviews/{review_id}")
    r = await client.post(url + "/claim", headers=tenant.headers(**idem()),
                          json={"action_version": 1})
    assert r.status_code == 200, r.text
    # The preview answers what the approval refuses, as a refusal of the column.
    r = await client.post(url + "/preview", headers=tenant.reader(), json={})
    assert r.status_code == 200, r.text
    (refusal,) = r.json()["data"]["refusals"]
    assert (refusal["source_column_name"], refusal["code"]) == (system, "invalid_name")
    r = await client.post(url + "/approve", headers=tenant.headers(**idem()),
                          json={"action_version": 2})
    assert r.status_code == 422, r.text
    err = r.json()["error"]
    # default actions come in column-name order: the system column is either one
    assert re.fullmatch(r"column_actions\[[01]\]\.mirror_column_name", err["field"]), err
    assert "system column" in err["message"] and system in err["message"]
    assert err["refusals"] == [refusal]
    r = await client.post(url + "/approve", headers=tenant.headers(**idem()), json={
        "action_version": 2, "column_actions": [
            {"source_column_name": "id", "action": "mirror"},
            {"source_column_name": system, "action": "mirror",
             "mirror_column_name": f"{system}_value"}]})
    assert r.status_code == 200, r.text
