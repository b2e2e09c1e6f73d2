"""``sign_for_devices``: one statement signs a whole progress round, and each signed
device's controls take consecutive sig_seqs in the order given."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import asyncpg

from edgesync import fleet
from edgesync.control._signer import sign_for_device, sign_for_devices
from edgesync.errors import ConfigError
from edgesync.protocol import verify_control

_TTL = timedelta(minutes=5)


async def _device(conn: asyncpg.Connection, unique: str, name: str, *, signed: bool,
                  token: str | None) -> fleet.DeviceScope:
    scope = await fleet.add_device(conn, project=f"sig-{unique}", name=f"{name}-{unique}",
                                   topic_slug=f"sig-{unique}")
    await conn.execute("UPDATE edge_devices SET signed_control = $2, control_token = $3 "
                       "WHERE id = $1", scope.device_id, signed, token)
    return scope


def _body(n: int) -> dict[str, object]:
    return {"control_id": str(uuid.uuid4()), "control_kind": "progress", "n": n}


async def test_a_round_is_signed_in_order_per_device(pool: asyncpg.Pool, unique: str) -> None:
    async with pool.acquire() as conn:
        a = await _device(conn, unique, "a", signed=True, token="key-a")
        b = await _device(conn, unique, "b", signed=False, token=None)
        c = await _device(conn, unique, "c", signed=True, token=None)
        async with conn.transaction():  # a's sequence has moved before
            await sign_for_device(conn, a.device_id, _body(0), ttl=_TTL)
        async with conn.transaction():
            out = await sign_for_devices(conn, [
                (a.device_id, _body(1)), (b.device_id, _body(2)), (a.device_id, _body(3)),
                (c.device_id, _body(4)), (a.device_id, _body(5))], ttl=_TTL)
        seq = await conn.fetchval("SELECT control_seq FROM edge_devices WHERE id = $1",
                                  a.device_id)
    signed = [out[0], out[2], out[4]]
    assert all(isinstance(doc, dict) for doc in signed)
    now = datetime.now(UTC)
    seqs = [verify_control(doc, b"key-a", last_seq=0, now=now)  # type: ignore[arg-type]
            for doc in signed]
    assert [doc["n"] for doc in signed] == [1, 3, 5]  # type: ignore[index]
    assert seqs == [2, 3, 4] and seq == 4
    unsigned = out[1]
    assert isinstance(unsigned, dict) and unsigned["n"] == 2 and "sig_seq" not in unsigned
    assert isinstance(out[3], ConfigError)
