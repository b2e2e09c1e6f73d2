"""A batch whose handling meets a database outage is retried for as long as it lasts and
never acknowledged uncommitted; other messages give up after a few attempts (their
senders repeat them)."""

from __future__ import annotations

import pytest

from edgesync.ingest import IngestOutcome, MqttIngest, OutcomeStatus, _consumer


class Flaky:
    """A pipeline whose first ``failures`` calls meet a lost connection (as the device
    resolver does when its cache expired during a PostgreSQL restart)."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.calls = 0

    async def handle(self, topic: str, payload: bytes) -> IngestOutcome:
        self.calls += 1
        if self.calls <= self.failures:
            raise ConnectionRefusedError("connection refused")
        return IngestOutcome(OutcomeStatus.MATERIALIZED)


@pytest.fixture(autouse=True)
def quick_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_consumer, "_RETRY", (0.001, 0.002))


@pytest.mark.parametrize("kind", ["rows", "telemetry"])
async def test_a_batch_waits_out_a_long_outage(kind: str) -> None:
    pipeline = Flaky(failures=3 * _consumer._ATTEMPTS)
    ingest = MqttIngest(pipeline, "mqtt://127.0.0.1:1", client_id="t")  # type: ignore[arg-type]
    await ingest._handle(f"p/dev-1/sync/{kind}/batch", b"{}")
    assert pipeline.calls == 3 * _consumer._ATTEMPTS + 1  # handled once it came back


async def test_other_messages_give_up_after_a_few_attempts(caplog) -> None:
    pipeline = Flaky(failures=100)
    ingest = MqttIngest(pipeline, "mqtt://127.0.0.1:1", client_id="t")  # type: ignore[arg-type]
    await ingest._handle("p/dev-1/sync/schema/observe", b"{}")
    assert pipeline.calls == _consumer._ATTEMPTS
    assert "failed 5 times" in caplog.text
