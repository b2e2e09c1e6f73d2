"""The batch ledger through the API: accepted and refused batches with their codes."""

from __future__ import annotations

import uuid

from edgesync.ingest import IngestPipeline


async def test_rejections_are_visible_with_code_and_field(client, tenant, other_tenant, stage,
                                                          pool, batches):
    staged = await stage(tenant)
    f = batches()
    bad = f.payload(f.rows(("insert", {"id": 9, "mode": "x", "setpoint": 1.0})),
                    batch_id=str(uuid.uuid4()))
    topic = f"{staged.device.root_topic}/sync/rows/batch"
    await IngestPipeline(pool).handle(topic, bad)
    await IngestPipeline(pool).handle(topic, b"{nope")

    r = await client.get(tenant.url("/edge/segments"), headers=tenant.reader(),
                         params={"outcome": "rejected"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["meta"]["total"] == 2
    codes = {s["rejection_code"]: s for s in body["data"]}
    assert set(codes) == {"invalid_batch_id", "malformed_json"}
    assert codes["invalid_batch_id"]["rejection_field"] == "batch_id"
    assert codes["invalid_batch_id"]["lineage_id"] == str(staged.lineage_id)

    r = await client.get(tenant.url("/edge/segments"), headers=tenant.reader(),
                         params={"lineage_id": str(staged.lineage_id), "outcome": "staged"})
    assert r.json()["meta"]["total"] == 1
    r = await client.get(tenant.url("/edge/segments"), headers=tenant.reader(),
                         params={"rejection_code": "malformed_json", "limit": 1})
    assert [s["rejection_code"] for s in r.json()["data"]] == ["malformed_json"]
    # Another tenant's token sees nothing of this project.
    r = await client.get(tenant.url("/edge/segments"), headers=other_tenant.headers())
    assert r.status_code == 404
