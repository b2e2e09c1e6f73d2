"""Progress controls: telling devices which batches the cloud has durably committed.

A broker's PUBACK does not prove the cloud has a batch (brokers acknowledge and then
drop), so the agent keeps journal rows until a batch is confirmed here. Every batch
accepted — or seen again as a duplicate — takes a new ``seen_seq`` in the ledger in
the same transaction that committed it; this reporter follows that sequence and sends
each device, per table and at most once per ``interval``, the batches it may forget.
Progress is idempotent and re-derivable from the ledger, so it does not go through
the outbox (see docs/protocol.md). With ``--confirm-after-replica`` a round goes out only
once a streaming standby has replayed the commits it saw (``ReplicaGate``), else it is
held and its batches come again next round (docs/production.md, PostgreSQL failover).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from datetime import timedelta
from typing import Any, NoReturn

import asyncpg
import orjson

from edgesync.control._sender import Publisher
from edgesync.control._signer import sign_for_devices
from edgesync.errors import ConfigError
from edgesync.protocol import ControlKind, TopicKind, periodic_loop, topic_for
from edgesync.store import ReplicaGate

__all__ = ["ProgressReporter"]

_log = logging.getLogger(__name__)
_MAX_PER_CONTROL = 256
# Ledger rows a round reads at most (a reporter behind, after a backlog, catches up over
# several rounds).
_ROUND_ROWS = 20_000
# Controls signed in one statement and published together, in one transaction. Small,
# so that building and signing one chunk holds the event loop for a few milliseconds,
# not the ~25 ms a round of 1,000 devices took in one piece (py-spy): ingest waited.
_CONTROLS_PER_TRANSACTION = 64
# The share of the interval a round's chunks are spread over.
_SPREAD = 0.5
# On start, confirm again what was seen shortly before: a restart must not leave a
# device waiting for confirmations that were computed but never sent.
_REPLAY_WINDOW = 20_000


# A round: the next ledger rows, one row per control of at most $2 batches (device, table,
# epoch, part), in the order the rows were seen, each with its batches as JSON text.
# Grouped by the database: a round of 20,000 rows held the event loop 70 ms and took
# 14 MB of Python objects (a record per row) when grouped here; the texts are parsed a
# chunk at a time, just before it is sent. ``top``: the last row read.
_ROUND = """
SELECT g.device_id, d.name, p.topic_slug, g.source_table, g.journal_epoch, g.committed,
       max(g.last_seen) OVER () AS top
FROM (SELECT s.device_id, s.source_table, s.journal_epoch,
             json_agg(CASE WHEN s.batch_seq IS NULL
                           THEN json_build_object('batch_id', s.batch_id,
                                                  'first_commit_seq', s.first_commit_seq,
                                                  'last_commit_seq', s.last_commit_seq)
                           ELSE json_build_object('batch_id', s.batch_id,
                                                  'batch_seq', s.batch_seq) END
                      ORDER BY s.seen_seq)::text AS committed,
             min(s.seen_seq) AS first_seen, max(s.seen_seq) AS last_seen
      FROM (SELECT r.*, (row_number() OVER (PARTITION BY r.device_id, r.source_table,
                                                         r.journal_epoch
                                            ORDER BY r.seen_seq) - 1) / $2 AS part
            FROM (SELECT seen_seq, device_id, batch_id, source_table, journal_epoch,
                         first_commit_seq, last_commit_seq, batch_seq
                  FROM edge_export_segments WHERE seen_seq > $1 AND outcome <> 'rejected'
                  ORDER BY seen_seq LIMIT $3) r) s
      GROUP BY s.device_id, s.source_table, s.journal_epoch, s.part) g
JOIN edge_devices d ON d.id = g.device_id
JOIN edge_projects p ON p.id = d.project_id
ORDER BY g.first_seen
"""


class ProgressReporter:
    def __init__(self, pool: asyncpg.Pool, publisher: Publisher, *, interval: float = 1.0,
                 signature_ttl: timedelta = timedelta(minutes=10),
                 after_replica: bool = False) -> None:
        self._pool = pool
        self._replica = ReplicaGate(within=interval) if after_replica else None
        self._publisher = publisher
        self.interval = interval  # seconds between rounds (serve --progress-interval)
        self._ttl = signature_ttl
        self._after: int | None = None

    async def run(self) -> NoReturn:
        await periodic_loop("progress reporter", self.report, interval=self.interval,
                            logger=_log)

    async def report(self) -> int:
        """Send one round of confirmations; returns how many controls went out."""
        async with self._pool.acquire() as conn:
            if self._after is None:
                top = await conn.fetchval("SELECT coalesce(max(seen_seq), 0) FROM "
                                          "edge_export_segments")
                self._after = max(0, int(top) - _REPLAY_WINDOW)
            controls = await conn.fetch(_ROUND, self._after, _MAX_PER_CONTROL, _ROUND_ROWS)
            if not controls:
                return 0
            if self._replica is not None and not await self._replica.passed(conn):
                return 0  # held: the same rows (and newer ones) next round
        chunks = [controls[at:at + _CONTROLS_PER_TRANSACTION]
                  for at in range(0, len(controls), _CONTROLS_PER_TRANSACTION)]
        # A fleet's round at once is a burst of about one control a device, on the broker
        # and in this loop (on a slow machine, longer intervals cut the paced p99 of
        # ingest: docs/benchmarks.md), so the chunks are spread over part of the interval
        # (the next round starts an interval after this one ends: rounds never overlap).
        gap = self.interval * _SPREAD / len(chunks)
        sent = 0
        for i, chunk in enumerate(chunks):
            if i:
                await asyncio.sleep(gap)
            sent += await self._send([
                (c["device_id"], topic_for(f"{c['topic_slug']}/{c['name']}",
                                           TopicKind.INGEST_CONTROL), _progress_body(c))
                for c in chunk])
        self._after = int(controls[0]["top"])
        return sent

    async def _send(self, controls: list[tuple[uuid.UUID, str, dict[str, Any]]]) -> int:
        """Sign ``controls`` in one statement and publish them all at once, inside the
        signing transaction (see ControlSender: sig_seq reaches each device in the order
        it was assigned; publishes on one connection go out in call order). The sig_seqs
        commit even when a publish failed — a device that got its control must never
        see that sig_seq again — and the failure is raised after: the round is sent
        again (progress is idempotent)."""
        failure: Exception | None = None
        async with self._pool.acquire() as conn, conn.transaction():
            wires = await sign_for_devices(conn, [(d, body) for d, _, body in controls],
                                           ttl=self._ttl)
            messages = []
            for (_, topic, _), wire in zip(controls, wires, strict=True):
                if isinstance(wire, ConfigError):
                    _log.error("progress on %s not sent: %s", topic, wire)
                    continue
                messages.append((topic, orjson.dumps(wire)))
            try:
                await self._publisher.publish_all(messages)
            except Exception as exc:  # after the commit (a stop is raised at once)
                failure = exc
        if failure is not None:
            raise failure
        return len(messages)


def _progress_body(control: asyncpg.Record) -> dict[str, Any]:
    body: dict[str, Any] = {"control_id": str(uuid.uuid4()), "control_kind": ControlKind.PROGRESS,
                            "source_table": control["source_table"],
                            "committed": orjson.loads(control["committed"])}
    if control["journal_epoch"] is not None:
        body["journal_epoch"] = str(control["journal_epoch"])
    return body
