"""Progress controls: telling devices which batches the cloud has durably committed.

A broker's PUBACK does not prove the cloud has a batch (brokers acknowledge and then
drop), so the agent keeps journal rows until a batch is confirmed here. Every batch
accepted — or seen again as a duplicate — takes a new ``seen_seq`` in the ledger in
the same transaction that committed it; this reporter follows that sequence and sends
each device, per table and at most once per ``interval``, the batches it may forget.
Progress is idempotent and re-derivable from the ledger, so it does not go through
the outbox (see docs/protocol.md).
"""

from __future__ import annotations

import logging
import uuid
from collections import defaultdict
from datetime import timedelta
from typing import Any, NoReturn

import asyncpg
import orjson

from edgesync.control._sender import Publisher
from edgesync.control._signer import sign_for_device
from edgesync.errors import ConfigError
from edgesync.protocol import TopicKind, periodic_loop, topic_for

__all__ = ["ProgressReporter"]

_log = logging.getLogger(__name__)
_MAX_PER_CONTROL = 256
# On start, confirm again what was seen shortly before: a restart must not leave a
# device waiting for confirmations that were computed but never sent.
_REPLAY_WINDOW = 20_000


class ProgressReporter:
    def __init__(self, pool: asyncpg.Pool, publisher: Publisher, *, interval: float = 1.0,
                 signature_ttl: timedelta = timedelta(minutes=10)) -> None:
        self._pool = pool
        self._publisher = publisher
        self._interval = interval
        self._ttl = signature_ttl
        self._after: int | None = None

    async def run(self) -> NoReturn:
        await periodic_loop("progress reporter", self.report, interval=self._interval,
                            logger=_log)

    async def report(self) -> int:
        """Send one round of confirmations; returns how many controls went out."""
        async with self._pool.acquire() as conn:
            if self._after is None:
                top = await conn.fetchval("SELECT coalesce(max(seen_seq), 0) FROM "
                                          "edge_export_segments")
                self._after = max(0, int(top) - _REPLAY_WINDOW)
            seen = await conn.fetch(
                "SELECT s.seen_seq, s.device_id, s.batch_id, s.topic_kind, s.source_table, "
                "s.journal_epoch, s.first_commit_seq, s.last_commit_seq, s.batch_seq, "
                "d.name, p.topic_slug FROM edge_export_segments s "
                "JOIN edge_devices d ON d.id = s.device_id "
                "JOIN edge_projects p ON p.id = d.project_id "
                "WHERE s.seen_seq > $1 AND s.outcome <> 'rejected' "
                "ORDER BY s.seen_seq LIMIT 20000", self._after)
            if not seen:
                return 0
            groups: dict[tuple[Any, ...], list[asyncpg.Record]] = defaultdict(list)
            for rec in seen:
                groups[(rec["device_id"], rec["name"], rec["topic_slug"], rec["source_table"],
                        rec["journal_epoch"])].append(rec)
            sent = 0
            for (device_id, name, slug, table, epoch), recs in groups.items():
                for start in range(0, len(recs), _MAX_PER_CONTROL):
                    body = _progress_body(table, epoch, recs[start:start + _MAX_PER_CONTROL])
                    try:
                        # Published inside the signing transaction (see ControlSender):
                        # sig_seq reaches the device in the order it was assigned.
                        async with conn.transaction():
                            wire = await sign_for_device(conn, device_id, body, ttl=self._ttl)
                            await self._publisher.publish(
                                topic_for(f"{slug}/{name}", TopicKind.INGEST_CONTROL),
                                orjson.dumps(wire))
                    except ConfigError as exc:
                        _log.error("progress for %s not sent: %s", name, exc)
                        break
                    # A stop aiomqtt's wait_for dropped as the PUBACK came is raised by the
                    # next publish (inside its transaction, so before its sig_seq is sent)
                    # or by periodic_loop after the round.
                    sent += 1
            self._after = int(seen[-1]["seen_seq"])
            return sent


def _progress_body(table: str, epoch: uuid.UUID | None, recs: list[asyncpg.Record]
                   ) -> dict[str, Any]:
    committed: list[dict[str, Any]] = []
    for r in recs:
        if r["batch_seq"] is not None:
            committed.append({"batch_id": str(r["batch_id"]), "batch_seq": r["batch_seq"]})
        else:
            committed.append({"batch_id": str(r["batch_id"]),
                              "first_commit_seq": r["first_commit_seq"],
                              "last_commit_seq": r["last_commit_seq"]})
    body: dict[str, Any] = {"control_id": str(uuid.uuid4()), "control_kind": "progress",
                            "source_table": table, "committed": committed}
    if epoch is not None:
        body["journal_epoch"] = str(epoch)
    return body
