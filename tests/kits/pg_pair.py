"""A PostgreSQL primary and its streaming standby of the test's own (tests/failover):
initdb, ``pg_basebackup`` with a replication slot, ``pg_ctl stop -m immediate`` for the
primary's crash and ``pg_ctl promote`` for the failover; never the shared 5432.

Workers reach the pair through one multi-host URL (``url``) with
``target_session_attrs=read-write``: whichever of the two accepts writes.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pwd
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path

import asyncpg

from kits.e2e_kit import eventually
from kits.fault_kit import PG_BIN, free_port, run


class Node:
    """One PostgreSQL server of the pair (a data directory and a port)."""

    def __init__(self, root: Path, name: str, as_user: list[str]) -> None:
        self.name = name
        self.root = root
        self.data = root / name
        self.port = free_port()
        self._as = as_user
        self.options = f"-p {self.port} -c listen_addresses=127.0.0.1 -k {root}"

    async def ctl(self, *args: str) -> None:
        assert PG_BIN, "no PostgreSQL server binaries under /usr/lib/postgresql/*/bin"
        await run(*self._as, str(PG_BIN[0] / "pg_ctl"), "-D", str(self.data), "-w",
                  "-t", "60", "-l", str(self.root / f"{self.name}.log"), *args,
                  log=self.root / "pg_ctl.log")

    async def start(self, *settings: str) -> None:
        extra = "".join(f" -c {s}" for s in settings)
        await self.ctl("-o", self.options + extra, "start")

    async def crash(self) -> None:
        """The server dies without a checkpoint (as in a power loss of its host; the
        WAL it had written stays on disk but is never streamed any further)."""
        await self.ctl("-m", "immediate", "stop")


class PgPair:
    """``primary`` streams to ``standby`` (slot ``standby``); ``synchronous`` makes the
    primary wait for the standby's flush before a commit returns."""

    def __init__(self, root: Path, *, synchronous: bool) -> None:
        self.root = root
        self.synchronous = synchronous
        self._as: list[str] = []
        if os.geteuid() == 0:  # PostgreSQL refuses to run as root
            owner = pwd.getpwnam("postgres")
            os.chown(root, owner.pw_uid, owner.pw_gid)
            self._as = ["runuser", "-u", "postgres", "--"]
        self.primary = Node(root, "primary", self._as)
        self.standby = Node(root, "standby", self._as)
        self.nodes = [self.primary, self.standby]

    @property
    def url(self) -> str:
        hosts = ",".join(f"127.0.0.1:{n.port}" for n in (self.primary, self.standby))
        return f"postgresql://postgres@{hosts}/postgres?target_session_attrs=read-write"

    async def start(self) -> None:
        assert PG_BIN, "no PostgreSQL server binaries under /usr/lib/postgresql/*/bin"
        await run(*self._as, str(PG_BIN[0] / "initdb"), "-D", str(self.primary.data),
                  "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync",
                  log=self.root / "initdb.log")
        # On the primary's command line, not in postgresql.conf: pg_basebackup copies that
        # file, and a promoted standby waiting for a synchronous standby of its own would
        # hang every commit.
        settings = ["max_connections=80", "wal_keep_size=256MB"]
        if self.synchronous:
            settings.append("synchronous_standby_names=standby")
        await self.primary.start(*settings)
        await self.attach(self.standby, self.primary)
        await self.streaming(self.primary, "sync" if self.synchronous else "async")

    async def streaming(self, node: Node, state: str) -> None:
        """Wait until ``node`` has a standby streaming in ``state`` (sync or async) that
        reported a replayed position."""
        conn = await asyncpg.connect(self.direct(node))
        try:
            async def up() -> bool:
                return bool(await conn.fetchval(
                    "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming' "
                    "AND sync_state = $1 AND replay_lsn IS NOT NULL", state))

            await eventually(up, 30, f"a standby of {node.name} streaming ({state})")
        finally:
            await conn.close()

    async def attach(self, node: Node, upstream: Node) -> None:
        """A new standby ``node``: a base backup of ``upstream`` streaming from it through
        a replication slot named after it, its walreceiver known as ``node.name``."""
        assert PG_BIN
        await run(*self._as, str(PG_BIN[0] / "pg_basebackup"), "-h", "127.0.0.1",
                  "-p", str(upstream.port), "-U", "postgres", "-D", str(node.data),
                  "-X", "stream", "-R", "-C", "-S", node.name, "--no-sync", "--checkpoint=fast",
                  log=self.root / "basebackup.log")
        await node.start(f"cluster_name={node.name}", "max_connections=80")

    def add_node(self, name: str) -> Node:
        """A new (not yet started) server of the pair, e.g. a standby for the promoted
        primary; ``stop`` stops it too."""
        node = Node(self.root, name, self._as)
        self.nodes.append(node)
        return node

    async def fail_over(self, *, lag: float = 0.0,
                        before_crash: Callable[[], Awaitable[object]] | None = None) -> None:
        """The primary crashes; the standby is promoted (and waited for).

        ``lag`` seconds before the crash the primary's walsender is frozen (SIGSTOP): the
        primary goes on committing, asynchronously, what the standby never receives; at
        the crash it is killed (SIGKILL) instead of sending that WAL on its way out. So
        the commits of the last ``lag`` seconds surely die with the primary, as they may
        when a standby lags behind. ``before_crash`` runs just before the crash."""
        sender = None
        if lag:
            assert not self.synchronous, "a frozen walsender stops synchronous commits"
            conn = await asyncpg.connect(self.direct(self.primary))
            try:
                sender = int(await conn.fetchval("SELECT pid FROM pg_stat_replication"))
            finally:
                await conn.close()
            os.kill(sender, signal.SIGSTOP)
            await asyncio.sleep(lag)
        if before_crash is not None:
            await before_crash()
        crash = asyncio.create_task(self.primary.crash())
        if sender is not None:
            await asyncio.sleep(0.3)  # the postmaster's SIGQUIT is pending, never handled
            os.kill(sender, signal.SIGKILL)
        await crash
        await self.standby.ctl("promote")

    @staticmethod
    def direct(node: Node) -> str:
        """The URL of ``node`` alone."""
        return f"postgresql://postgres@127.0.0.1:{node.port}/postgres"

    async def stop(self) -> None:
        for node in self.nodes:
            if (node.data / "postmaster.pid").exists():
                with contextlib.suppress(AssertionError):
                    await node.ctl("-m", "immediate", "stop")
