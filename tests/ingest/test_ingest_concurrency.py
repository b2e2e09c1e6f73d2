"""Two workers on one lineage, batches out of order and repeated: the result is the same
as applying the device's changes in order. And transient database errors are retried."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import asyncpg
import pytest
from kits.review_helpers import approve

from edgesync import fleet
from edgesync.ingest import IngestPipeline, MqttIngest, Replayer, _consumer
from edgesync.ingest._outcome import IngestOutcome, OutcomeStatus
from edgesync.materialize import quote_ident
from edgesync.protocol import parse_broker_url


async def test_two_workers_shuffled_and_repeated_batches_converge(pool, batches, unique):
    async with pool.acquire() as conn:
        scope = await fleet.add_device(conn, project=f"cc-{unique}", name=f"gw-{unique}",
                                       topic_slug=f"cc-{unique}")
    topic = f"{scope.root_topic}/sync/rows/batch"
    f = batches()
    first = await IngestPipeline(pool).handle(topic, f.payload(
        f.rows(("insert", {"id": 0, "mode": "seed", "setpoint": 0.0}))))
    await approve(pool, first.lineage_id)
    await Replayer(pool).drain_pending(project_id=scope.project_id)

    rng = random.Random(7)
    expected: dict[int, tuple[Any, ...]] = {0: (0, "seed", 0.0)}
    payloads = []
    for step in range(120):
        ops = []
        for _ in range(rng.randint(1, 6)):
            key = rng.randint(0, 30)
            if key in expected and rng.random() < 0.25:
                ops.append(("delete", {"id": key, "mode": None, "setpoint": None}))
                del expected[key]
            else:
                row = {"id": key, "mode": f"s{step}", "setpoint": float(rng.randint(0, 99))}
                ops.append(("update" if key in expected else "insert", row))
                expected[key] = (key, row["mode"], row["setpoint"])
        payloads.append(f.payload(f.rows(*ops), with_schema=False))
    delivery = payloads + rng.sample(payloads, 40)  # plus redeliveries
    rng.shuffle(delivery)
    workers = [IngestPipeline(pool), IngestPipeline(pool)]

    async def run(worker: IngestPipeline, share: list[bytes]) -> list[IngestOutcome]:
        return [await worker.handle(topic, p) for p in share]

    results = await asyncio.gather(run(workers[0], delivery[0::2]),
                                   run(workers[1], delivery[1::2]))
    outcomes = [o.status for r in results for o in r]
    assert outcomes.count(OutcomeStatus.MATERIALIZED) == len(payloads)
    assert outcomes.count(OutcomeStatus.DUPLICATE) == 40
    table = await pool.fetchval("SELECT target_table FROM edge_table_lineages WHERE id = $1",
                                first.lineage_id)
    rows = await pool.fetch(f"SELECT id, mode, setpoint FROM {quote_ident(table)} "
                            "WHERE NOT _edge_deleted ORDER BY id")
    assert [tuple(r) for r in rows] == [expected[k] for k in sorted(expected)]


class _Flaky:
    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.calls = 0

    async def handle(self, topic: str, payload: bytes) -> IngestOutcome:
        self.calls += 1
        if self.calls <= self.failures:
            raise asyncpg.DeadlockDetectedError("deadlock detected")
        return IngestOutcome(OutcomeStatus.MATERIALIZED)


@pytest.mark.parametrize(("topic", "failures", "calls"),
                         [("a/b/sync/rows/batch", 2, 3), ("a/b/sync/schema/observe", 9, 5)])
async def test_transient_errors_are_retried_with_backoff(topic: str, failures: int,
                                                         calls: int) -> None:
    flaky = _Flaky(failures)
    ingest = MqttIngest(flaky, parse_broker_url("mqtt://127.0.0.1"),  # type: ignore[arg-type]
                        client_id="t")
    await ingest._handle(topic, b"{}")
    # Succeeds on the 3rd try; a message that is no batch gives up after 5 (a batch never
    # does: test_a_batch_waits_out_a_long_outage).
    assert flaky.calls == calls


@pytest.mark.parametrize("kind", ["rows", "telemetry"])
async def test_a_batch_waits_out_a_long_outage(kind: str, monkeypatch: pytest.MonkeyPatch
                                               ) -> None:
    # The device resolver meets the outage when its cache of the device has expired,
    # before the group writer (which waits out outages itself): never acknowledged then.
    monkeypatch.setattr(_consumer, "_RETRY", (0.001, 0.002))
    flaky = _Flaky(3 * _consumer._ATTEMPTS)
    ingest = MqttIngest(flaky, parse_broker_url("mqtt://127.0.0.1"),  # type: ignore[arg-type]
                        client_id="t")
    await ingest._handle(f"a/b/sync/{kind}/batch", b"{}")
    assert flaky.calls == 3 * _consumer._ATTEMPTS + 1  # handled once it came back


async def test_other_messages_give_up_after_a_few_attempts(caplog: pytest.LogCaptureFixture,
                                                           monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    monkeypatch.setattr(_consumer, "_RETRY", (0.001, 0.002))
    flaky = _Flaky(100)
    ingest = MqttIngest(flaky, parse_broker_url("mqtt://127.0.0.1"),  # type: ignore[arg-type]
                        client_id="t")
    await ingest._handle("a/b/sync/schema/observe", b"{}")
    assert flaky.calls == _consumer._ATTEMPTS
    assert "failed 5 times" in caplog.text
