"""The fleet fan-in bench's machinery (benches/bench_fanin.py): a private Mosquitto, an
``edgesync serve`` subprocess, simulated devices publishing through a few connections,
and a watcher that sees batches commit by reading the batch ledger.

How a batch counts as committed: its ledger row (``edge_export_segments``, keyed by
``batch_id``) is visible to another connection. The ledger row and the batch's effect
commit in one transaction (an invariant of the worker), so a visible ledger row means a
committed effect. The watcher polls ``WHERE id > floor`` on the ledger's primary key (one
index range scan per poll, whatever the ledger's size). Ids that a still running (or
rolled-back) transaction took are holes below the highest id seen: it looks them up by id
on each poll for ``HOLE_WAIT`` seconds, then gives them up; a drain that stalls with
batches unseen looks those up by ``batch_id`` (``sweep``, counted in ``swept``: their
commit time is then the sweep's, so a non-zero ``swept`` means timings are coarse).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import aiomqtt
import asyncpg
import orjson
from bench_ingest import COLUMNS, T0, _loop, fields, uuid7

from edgesync import _core, governance
from edgesync.protocol import PublishingClient

EDGESYNC = shutil.which("edgesync", path=str(Path(sys.executable).parent)) or "edgesync"
MOSQUITTO = "/usr/sbin/mosquitto" if Path("/usr/sbin/mosquitto").exists() else (
    shutil.which("mosquitto") or "mosquitto")
STATE_TABLE = "fanin_state"
TELEMETRY_TABLE = "fanin_tele"
# Seconds the watcher keeps looking for a hole in the ledger ids before giving it up.
HOLE_WAIT = 10.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def until(probe: Any, limit: float, what: str) -> None:
    deadline = time.monotonic() + limit
    while not await probe():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not reached within {limit:.0f}s")
        await asyncio.sleep(0.1)


async def port_open(port: int) -> bool:
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        return False
    writer.close()
    await writer.wait_closed()
    return True


# ------------------------------------------------------------------ where the cores go

_TICK = os.sysconf("SC_CLK_TCK")


def cpu_by_kind(worker_pid: int | None) -> dict[str, float]:
    """CPU seconds (user + system) so far of every process on the machine, summed by
    kind: the worker, PostgreSQL, the broker, this bench, and everything else. Two
    readings around a window say which process took the 2 cores."""
    out: dict[str, float] = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            stat = (proc / "stat").read_text()
        except OSError:
            continue  # gone since the listing
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        fields_ = stat[stat.rindex(")") + 2:].split()
        seconds = (int(fields_[11]) + int(fields_[12])) / _TICK
        pid = int(proc.name)
        kind = ("worker" if pid == worker_pid else "bench" if pid == os.getpid()
                else "postgres" if comm.startswith("postgres") else
                "broker" if comm.startswith("mosquitto") else "other")
        out[kind] = out.get(kind, 0.0) + seconds
    return out


@contextlib.contextmanager
def bench_pauses() -> Iterator[list[float]]:
    """Milliseconds of each collection of this process's garbage collector meanwhile: a
    pause of the bench is a pause of its watcher, so it would count as latency."""
    pauses: list[float] = []
    started = [0.0]

    def timed(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started[0] = time.perf_counter()
        else:
            pauses.append(1000 * (time.perf_counter() - started[0]))

    gc.callbacks.append(timed)
    try:
        yield pauses
    finally:
        gc.callbacks.remove(timed)


def cpu_split(before: dict[str, float], after: dict[str, float],
              wall: float) -> dict[str, float]:
    """Cores used by each kind of process between two ``cpu_by_kind`` readings (a process
    that ended in between is left out: its seconds would count as negative)."""
    return {k: round(max(after.get(k, 0.0) - before.get(k, 0.0), 0.0) / wall, 2)
            for k in sorted(after) if wall > 0}


# ------------------------------------------------------------------ broker and worker

def spawn(argv: list[str], log: Path | None,
          env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """Start a server process, its output appended to ``log`` (or dropped)."""
    if log is None:
        return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with log.open("ab") as out:
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)


# The settings of docs/production.md, "PostgreSQL sizing", for a worker taking a fleet's
# batches: the working set of the targets and the ledger held in shared buffers (the
# distro default of 128 MB holds less than the state target of 10,000 devices), and
# checkpoints spaced by time, not forced by WAL volume every ~15 s (each checkpoint makes
# the next change of every page write a full page image to the WAL). Durability is
# unchanged: fsync and synchronous_commit stay on.
TUNED_SETTINGS = {"shared_buffers": "2GB", "max_wal_size": "16GB",
                  "checkpoint_timeout": "15min", "max_connections": "100",
                  # The bench vacuums between figures (Figures._vacuum), as on the shared
                  # server: autovacuum's workers would take the same 2 cores mid-window.
                  "autovacuum": "off"}
PG_BIN = sorted(Path("/usr/lib/postgresql").glob("*/bin"))[-1:]
_SNAKEOIL = (Path("/etc/ssl/certs/ssl-cert-snakeoil.pem"),
             Path("/etc/ssl/private/ssl-cert-snakeoil.key"))


class TunedPostgres:
    """A private PostgreSQL cluster (initdb, pg_ctl) with ``TUNED_SETTINGS``, as user
    ``postgres`` when we are root (PostgreSQL refuses to run as root). TLS is on when
    the distro's snakeoil certificate is there, as on the shared server, so that only
    the sizing differs between the two."""

    def __init__(self, work: Path, *, statements: bool = False,
                 settings: dict[str, str] | None = None) -> None:
        self.statements = statements
        # TUNED_SETTINGS with these in their place (EDGESYNC_FANIN_PG_SET).
        self.settings = TUNED_SETTINGS | (settings or {})
        if not PG_BIN:
            raise AssertionError("EDGESYNC_FANIN_PG=tuned needs PostgreSQL's server "
                                 "binaries under /usr/lib/postgresql/*/bin")
        self.bin = PG_BIN[0]
        self.root = work / "pg"
        self.root.mkdir()
        self.data = self.root / "data"
        self.port = free_port()
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        self._as: list[str] = []
        if os.geteuid() == 0:
            import pwd

            owner = pwd.getpwnam("postgres")
            os.chmod(work, 0o711)  # a temporary directory is 0700: postgres must pass
            os.chown(self.root, owner.pw_uid, owner.pw_gid)
            self._as = ["runuser", "-u", "postgres", "--"]

    def _run(self, *argv: str) -> None:
        with (self.root / "pg_ctl.log").open("ab") as out:
            subprocess.run([*self._as, *argv], stdout=out, stderr=subprocess.STDOUT,
                           check=True, timeout=120)

    def start(self) -> None:
        self._run(str(self.bin / "initdb"), "-D", str(self.data), "-U", "postgres",
                  "-A", "trust", "-E", "UTF8", "--no-sync")
        opts = [f"-p {self.port}", "-c listen_addresses=127.0.0.1", f"-k {self.root}"]
        opts += [f"-c {k}={v}" for k, v in self.settings.items()]
        opts.append("-c log_checkpoints=on")  # postgres.log says when each one ran
        if self.statements:  # each window's statements (bench_fanin, _statements)
            opts += ["-c shared_preload_libraries=pg_stat_statements",
                     "-c pg_stat_statements.track=all",
                     "-c pg_stat_statements.track_planning=on"]
        if all(p.exists() for p in _SNAKEOIL):
            opts += ["-c ssl=on", f"-c ssl_cert_file={_SNAKEOIL[0]}",
                     f"-c ssl_key_file={_SNAKEOIL[1]}"]
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-w", "-t", "60",
                  "-l", str(self.root / "postgres.log"), "-o", " ".join(opts), "start")

    def stop(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError):
            self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w",
                      "stop")

    def restart(self) -> None:
        """``pg_ctl restart -m fast``: clients are disconnected, a shutdown checkpoint is
        written, and the server comes back with the options of its start (bench_soak)."""
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w",
                  "-t", "120", "-l", str(self.root / "postgres.log"), "restart")

    def data_bytes(self) -> int:
        """Bytes of the data directory (tables, indexes, WAL): the cluster's disk."""
        total = 0
        for top, _, files in os.walk(self.data):
            for name in files:
                with contextlib.suppress(OSError):  # a file removed since the listing
                    total += os.lstat(os.path.join(top, name)).st_size
        return total


class Broker:
    """A private Mosquitto on a free port: nothing queued or in flight is limited (its
    defaults of 1,000 queued and 20 in flight would drop or throttle), no persistence."""

    def __init__(self, work: Path) -> None:
        self.port = free_port()
        self.conf = work / "mosquitto.conf"
        self.log = work / "mosquitto.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"tcp://127.0.0.1:{self.port}"

    async def start(self) -> None:
        import getpass

        self.conf.write_text("\n".join([
            f"listener {self.port} 127.0.0.1", "allow_anonymous true",
            "max_queued_messages 0", "max_inflight_messages 0", "max_queued_bytes 0",
            "persistence false", "set_tcp_nodelay true", f"user {getpass.getuser()}",
            f"log_dest file {self.log}", "log_type error", "log_type warning", ""]))
        self.proc = spawn([MOSQUITTO, "-c", str(self.conf)], None)
        await until(lambda: port_open(self.port), 20, "mosquitto listening")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=30)

    async def restart(self) -> None:
        """Stopped and started on the same port (without persistence, what it held is
        gone: sessions, queued and in-flight messages)."""
        self.stop()
        await self.start()


class Worker:
    """``edgesync serve`` as a subprocess with a stable client id (its persistent session
    keeps what the broker queued for it while it is stopped)."""

    def __init__(self, work: Path, database_url: str, mqtt_url: str, *,
                 env: dict[str, str] | None = None) -> None:
        self.work, self.database_url, self.mqtt_url = work, database_url, mqtt_url
        self.env = env or {}  # more of serve's settings (e.g. EDGESYNC_TRACE_BATCHES)
        self.client_id = f"fanin-worker-{uuid.uuid4().hex[:8]}"
        self.log = work / "serve.log"
        self.proc: subprocess.Popen[bytes] | None = None

    async def start(self) -> None:
        offset = self.log.stat().st_size if self.log.exists() else 0
        env = {**os.environ, "EDGESYNC_LOG_LEVEL": "INFO", **self.env}
        self.proc = spawn([EDGESYNC, "serve", "--database-url", self.database_url,
                           "--mqtt-url", self.mqtt_url, "--client-id", self.client_id,
                           "--api-port", "0", "--data-dir", str(self.work / "data")],
                          self.log, env)

        async def subscribed() -> bool:
            assert self.proc is not None
            text = self.log.read_bytes()[offset:].decode(errors="replace")
            if self.proc.poll() is not None:
                raise AssertionError(f"edgesync serve exited:\n{text}")
            return "ingest subscribed" in text

        await until(subscribed, 120, "edgesync serve subscribed")

    def api_url(self) -> str | None:
        """The HTTP API's address, from the serve log (``--api-port 0`` picks a port)."""
        found = None
        for line in self.log.read_text(errors="replace").splitlines():
            if "HTTP API listening on " in line:
                found = line.split("HTTP API listening on ", 1)[1].split()[0]
        return found

    async def group_totals(self) -> dict[str, float]:
        """The group writer's totals so far, from ``/metrics``: groups, batches in them,
        seconds from each group's start to its commit."""
        url = self.api_url()
        if url is None:
            return {}

        def read() -> str:
            with urllib.request.urlopen(f"{url}/metrics", timeout=5) as resp:
                return str(resp.read().decode())

        out: dict[str, float] = {}
        names = {"edgesync_ingest_group_size_count": "groups",
                 "edgesync_ingest_group_size_sum": "batches",
                 "edgesync_ingest_group_commit_seconds_sum": "seconds"}
        for line in (await asyncio.to_thread(read)).splitlines():
            name, _, value = line.partition(" ")
            if name in names:
                out[names[name]] = float(value)
        return out

    def rss_bytes(self) -> int:
        assert self.proc is not None
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise AssertionError("no VmRSS")

    def open_fds(self) -> int:
        """File descriptors the worker holds (sockets, files, pipes)."""
        assert self.proc is not None
        return len(os.listdir(f"/proc/{self.proc.pid}/fd"))

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)

    async def subscribe_while_stopped(self, host: str, port: int) -> None:
        """Create the worker's persistent session (as serve would) so that the broker
        queues for it while no worker runs."""
        from edgesync.protocol import worker_subscriptions

        async with aiomqtt.Client(host, port, identifier=self.client_id,
                                  clean_session=False) as client:
            for f in worker_subscriptions(None):
                await client.subscribe(f, qos=1)

    async def forget_session(self, host: str, port: int) -> None:
        """Drop what the broker still queues for the (stopped) worker."""
        async with aiomqtt.Client(host, port, identifier=self.client_id, clean_session=True):
            pass


@contextlib.asynccontextmanager
async def scratch_database(base: str, prefix: str) -> AsyncIterator[str]:
    """A new database on the server of ``base`` (its URL yielded), dropped afterwards."""
    name = f"{prefix}_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    admin = await asyncpg.connect(base)
    await admin.execute(f'CREATE DATABASE "{name}"')
    await admin.close()
    head, _, query = base.partition("?")
    try:
        yield head.rsplit("/", 1)[0] + f"/{name}" + (f"?{query}" if query else "")
    finally:
        admin = await asyncpg.connect(base)
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


async def approve_registry(pool: asyncpg.Pool, project_id: uuid.UUID) -> int:
    """Claim and approve the project's queued registry reviews, every column mirrored;
    returns how many."""
    async with pool.acquire() as conn:
        queued = await governance.list_registry_reviews(conn, project_id, status="queued")
        for r in queued:
            claimed = await governance.claim_registry_review(
                conn, r.id, actor="bench", action_version=r.action_version)
            await governance.approve_registry_review(
                conn, r.id, actor="bench", action_version=claimed.action_version,
                column_actions=None)
    return len(queued)


# ------------------------------------------------------------------ the fleet

@dataclass
class Device:
    """One simulated device: a state table (row batches, half updates of the previous
    batch's keys) and a telemetry table, numbered as the agent numbers them."""

    id: uuid.UUID
    name: str
    slug: str
    epoch: str = field(default_factory=uuid7)
    state_batches: int = 0
    commit_seq: int = 0
    batch_seq: int = 0

    @property
    def row_prefix(self) -> str:
        """A UUID without its last 12 hex digits, unique to the device."""
        return str(self.id)[:24]

    @property
    def root(self) -> str:
        return f"{self.slug}/{self.name}"


_STATE_SCHEMA = _core.schema_fingerprint(STATE_TABLE, COLUMNS)
_TELE_SCHEMA = _core.schema_fingerprint(TELEMETRY_TABLE, COLUMNS)
_STATE_COLUMNS = orjson.loads(_STATE_SCHEMA[1])
_TELE_COLUMNS = orjson.loads(_TELE_SCHEMA[1])


@dataclass(frozen=True, slots=True)
class Batch:
    device: Device
    topic: str
    batch_id: str
    payload: bytes
    rows: int
    # state: the keys this batch writes (for the expected row count)
    keys: range | None = None


# The simulator renders a payload once per shape and copies it for every device: devices
# of a fleet advance in step (batch k of every device has the same commit_seqs, batch_seq,
# timestamps and values), so only the batch_id, the journal epoch and the row-id prefix
# differ, and those are filled in with ``bytes.replace``. A simulated device then costs
# the 2 shared cores a few microseconds per batch, not the ~0.15 ms of encoding 50 rows.
_BATCH_ID = "BATCHIDXBATCHIDXBATCHIDXBATCHIDXBATC"  # 36 characters, as a UUID
_EPOCH = "EPOCHXXXEPOCHXXXEPOCHXXXEPOCHXXXEPOC"
_PREFIX = "PREFIXXXPREFIXXXPREFIXXX"  # 24, as Device.row_prefix (upper case: never hex)
_TEMPLATES: dict[tuple[str, int, int, int], bytes] = {}


def _template(key: tuple[str, int, int, int], render: Any) -> bytes:
    payload = _TEMPLATES.get(key)
    if payload is None:
        if len(_TEMPLATES) > 64:  # devices advance in step: a few shapes are live at once
            _TEMPLATES.clear()
        payload = _TEMPLATES[key] = orjson.dumps(render())
    return payload


def _schema_columns(first: bool, columns: Any) -> dict[str, Any]:
    """A device's first batch of a table carries its ``schema_columns``, the next ones
    not: as an agent sends them (until a batch with them was acknowledged)."""
    return {"schema_columns": columns} if first else {}


def state_batch(d: Device, rows: int) -> Batch:
    """Batch k of a device: updates the last half of batch k-1's keys, inserts as many new
    ones (the first batch inserts only)."""
    k = d.state_batches
    d.state_batches += 1
    base = k * rows // 2
    first_seq = d.commit_seq + 1
    d.commit_seq += rows

    def render() -> dict[str, Any]:
        ops = [{"commit_seq": first_seq + i,
                "op": "update" if k and i < rows // 2 else "insert",
                "pk": {"id": base + i}, "row": fields(base + i) | {"seq": first_seq + i}}
               for i in range(rows)]
        return {"format_version": 1, "capture_strategy": "sqlite_row_batch_v1",
                "batch_id": _BATCH_ID, "journal_epoch": _EPOCH, "source_table": STATE_TABLE,
                "schema_hash": _STATE_SCHEMA[0], **_schema_columns(k == 0, _STATE_COLUMNS),
                "first_commit_seq": first_seq, "last_commit_seq": d.commit_seq, "rows": ops}

    batch_id = uuid7()
    payload = _template(("state", k, first_seq, rows), render).replace(
        _BATCH_ID.encode(), batch_id.encode()).replace(_EPOCH.encode(), d.epoch.encode())
    return Batch(d, f"{d.root}/sync/rows/batch", batch_id, payload, rows,
                 range(base, base + rows))


def _stamp(second: int) -> str:
    day, rest = divmod(second, 86_400)
    date = (T0 + timedelta(days=day)).date().isoformat()
    return f"{date}T{rest // 3600:02d}:{rest // 60 % 60:02d}:{rest % 60:02d}Z"


def telemetry_batch(d: Device, rows: int) -> Batch:
    """Rows one second apart from T0; row ids are the device's UUID prefix and a row
    counter."""
    d.batch_seq += 1
    seq = d.batch_seq
    start = (seq - 1) * rows

    def render() -> dict[str, Any]:
        return {"format_version": 1, "capture_strategy": "sqlite_telemetry_batch_v1",
                "batch_id": _BATCH_ID, "batch_seq": seq, "source_table": TELEMETRY_TABLE,
                "schema_hash": _TELE_SCHEMA[0], **_schema_columns(seq == 1, _TELE_COLUMNS),
                "cursor_start_ts": _stamp(start), "cursor_end_ts": _stamp(start + rows - 1),
                "row_count": rows,
                "rows": [{"ts": _stamp(start + i), "row_id": f"{_PREFIX}{start + i:012x}",
                          "fields": fields(start + i)} for i in range(rows)]}

    batch_id = uuid7()
    payload = _template(("telemetry", seq, start, rows), render).replace(
        _BATCH_ID.encode(), batch_id.encode()).replace(_PREFIX.encode(),
                                                       d.row_prefix.encode())
    return Batch(d, f"{d.root}/sync/telemetry/batch", batch_id, payload, rows)


async def register_fleet(conn: asyncpg.Connection, project_id: uuid.UUID, slug: str,
                         count: int, prefix: str) -> list[Device]:
    """``count`` devices in one INSERT (add_device is a few round trips per device)."""
    rows = await conn.fetch(
        "INSERT INTO edge_devices (id, project_id, name) "
        "SELECT gen_random_uuid(), $1, $2 || lpad(g::text, 5, '0') "
        "FROM generate_series(0, $3 - 1) g RETURNING id, name", project_id, prefix, count)
    by_name = sorted(rows, key=lambda r: r["name"])
    return [Device(r["id"], r["name"], slug) for r in by_name]


# ------------------------------------------------------------------ publishing

class Publishers:
    """A few MQTT connections for the whole fleet. A device always publishes on the same
    connection (index of the device modulo the number of connections), so its batches
    reach the broker in the order it sent them, as a real device's would."""

    # edgesync's own publish-only QoS 1 client (the worker's downlink): paho and aiomqtt
    # cost ~0.1 ms of Python per publish, CPU that real devices never take from the
    # server's cores (bench_downlink.py); calls on one connection leave in call order.
    def __init__(self, host: str, port: int, count: int) -> None:
        self._clients = [PublishingClient(host, port,
                                          client_id=f"fanin-sim-{uuid.uuid4().hex[:8]}")
                         for _ in range(count)]
        self._slot: dict[uuid.UUID, int] = {}

    async def __aenter__(self) -> Publishers:
        for c in self._clients:
            await c.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        for c in self._clients:
            await c.__aexit__(None, None, None)

    def client_for(self, d: Device) -> PublishingClient:
        slot = self._slot.setdefault(d.id, len(self._slot) % len(self._clients))
        return self._clients[slot]

    async def publish(self, b: Batch) -> None:
        await self.client_for(b.device).publish_all([(b.topic, b.payload)])


# ------------------------------------------------------------------ seeing commits

@dataclass
class Tracked:
    """The batches of one figure: when each was published and when it was seen
    committed (monotonic seconds), and its ledger outcome."""

    published: dict[str, float] = field(default_factory=dict)
    seen: dict[str, float] = field(default_factory=dict)
    outcomes: dict[str, str] = field(default_factory=dict)
    rows: dict[str, int] = field(default_factory=dict)
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def outstanding(self) -> int:
        return len(self.published) - len(self.seen)

    def rate(self) -> tuple[float, int, float]:
        """Batches per second between the first and the last commit seen, the number of
        batches and that window (s)."""
        times = sorted(self.seen.values())
        if len(times) < 2 or times[-1] <= times[0]:
            return 0.0, len(times), 0.0
        return (len(times) - 1) / (times[-1] - times[0]), len(times), times[-1] - times[0]

    def recent_rate(self, now: float, span: float = 1.0) -> float:
        n = sum(1 for t in self.seen.values() if t >= now - span)
        return n / span


class Watcher:
    """Polls the ledger for new rows and marks the tracked batches committed."""

    def __init__(self, conn: asyncpg.Connection, interval: float = 0.02) -> None:
        self.conn = conn
        self.interval = interval
        self.top = 0  # highest ledger id seen
        self._holes: dict[int, float] = {}  # ids below ``top`` not seen yet: since when
        self._by_batch: dict[str, Tracked] = {}
        self.polls = 0
        self.swept = 0  # batches found by ``sweep`` rather than by a poll
        self._lock = asyncio.Lock()  # one connection: the poll loop and sweeps take turns

    def track(self, tracked: Tracked, batch_id: str, rows: int) -> None:
        tracked.published[batch_id] = time.monotonic()
        tracked.rows[batch_id] = rows
        self._by_batch[batch_id] = tracked

    async def start(self) -> None:
        self.top = await self.conn.fetchval(
            "SELECT coalesce(max(id), 0) FROM edge_export_segments")

    def _seen(self, batch_id: str | None, outcome: str, now: float) -> bool:
        tracked = self._by_batch.pop(batch_id, None) if batch_id else None
        if tracked is None or batch_id is None:
            return False
        tracked.seen[batch_id] = now
        tracked.outcomes[batch_id] = outcome
        tracked.changed.set()
        return True

    async def poll(self) -> None:
        """New ids above ``top``, and the holes below it (ids of transactions that were
        still running at the last poll, or rolled back), which are given up after
        ``HOLE_WAIT`` seconds."""
        async with self._lock:
            # Two index scans: written with OR, the planner may scan the whole ledger
            # (seen at 10,000 devices: ~430 buffers a poll, more PostgreSQL time per batch
            # than the worker's own ledger insert, taken from the worker's cores).
            rows = await self.conn.fetch(
                "SELECT id, batch_id::text, outcome FROM edge_export_segments WHERE id > $1 "
                "UNION ALL SELECT id, batch_id::text, outcome FROM edge_export_segments "
                "WHERE id = ANY($2::bigint[]) AND id <= $1 ORDER BY id", self.top,
                list(self._holes))
        now = time.monotonic()
        self.polls += 1
        for r in rows:
            self._holes.pop(r["id"], None)
            if r["id"] > self.top:
                self._holes.update(dict.fromkeys(range(self.top + 1, r["id"]), now))
                self.top = r["id"]
            self._seen(r["batch_id"], r["outcome"], now)
        for hole in [h for h, since in self._holes.items() if now - since > HOLE_WAIT]:
            del self._holes[hole]

    async def sweep(self, tracked: Tracked) -> None:
        """Look the tracked batches not seen yet up by ``batch_id`` (a seq scan: only when
        a drain stalls, e.g. a transaction committed after its hole was given up)."""
        waiting = [b for b in tracked.published if b not in tracked.seen]
        if not waiting:
            return
        async with self._lock:
            rows = await self.conn.fetch(
                "SELECT batch_id::text, outcome FROM edge_export_segments "
                "WHERE batch_id = ANY($1::uuid[]) AND outcome <> 'rejected'", waiting)
        now = time.monotonic()
        for r in rows:
            self.swept += self._seen(r["batch_id"], r["outcome"], now)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[Watcher]:
        await self.start()

        async def loop() -> None:
            while True:
                await self.poll()
                await asyncio.sleep(self.interval)

        task = asyncio.create_task(loop())
        try:
            yield self
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


def run_once(benchmark: Any, tag: str,
             main: Callable[[Callable[[str], None]], Awaitable[dict[str, Any]]]
             ) -> dict[str, Any]:
    """One round of a fleet bench: ``main(log)`` on a fresh event loop (uvloop when the
    suite runs on it), timed by pytest-benchmark; its figures returned. ``log`` prints a
    line stamped with ``tag`` and the time."""
    results: dict[str, Any] = {}

    def log(line: str) -> None:
        print(f"[{tag} {time.strftime('%H:%M:%S')}] {line}", flush=True)

    def once() -> None:
        with asyncio.Runner(loop_factory=_loop) as runner:
            results.update(runner.run(main(log)))

    benchmark.pedantic(once, rounds=1, iterations=1)
    return results
