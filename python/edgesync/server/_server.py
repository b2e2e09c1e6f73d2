"""``edgesync serve``: the cloud worker as one ``async with`` service.

With no database URL it runs the embedded PostgreSQL, and with no broker URL the
embedded broker, so a newcomer needs nothing installed. Background loops (MQTT
ingest, replay, controls, progress, sweeps, uploads, the API) run as named tasks in one
TaskGroup. Each outlives database and broker outages by itself (``edgesync.protocol``'s
loop helpers log, back off and retry any failure), so the group ends only when ``run``
is cancelled.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import socket
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Generic, TypeVar, cast, overload

import asyncpg
import platformdirs
from prometheus_client.core import GaugeMetricFamily, InfoMetricFamily
from prometheus_client.metrics_core import Metric

from edgesync._version import version
from edgesync.api import ApiServer, create_app
from edgesync.api.routes.jitr import make_jitr_router
from edgesync.api.routes.uploads import upload_router
from edgesync.broker import embedded_broker
from edgesync.control import (
    BackpressureSweeper,
    ControlSender,
    MqttPublisher,
    ObjectStore,
    ProgressReporter,
    VerificationScheduler,
)
from edgesync.credentials import BrokerRefresh
from edgesync.errors import ConfigError
from edgesync.fleet import DeviceResolver
from edgesync.ingest import (
    AmqpIngest,
    BatchTrace,
    GroupWriter,
    IngestPipeline,
    MqttIngest,
    ObjectIngester,
    Replayer,
)
from edgesync.observe import Check, database_checks, loop_checks
from edgesync.observe._event_log import EventLog
from edgesync.observe._gauges import ScrapeCollector
from edgesync.observe._summary import ThroughputLog
from edgesync.protocol import (
    BrokerRotation,
    BrokerUrl,
    LoopStatus,
    TlsFiles,
    loop_state,
    parse_broker_urls,
    split_urls,
)
from edgesync.server._checks import bind_api_socket, check_settings
from edgesync.server._heap import heap_trim_loop, pin_mmap_threshold, purge_rust_heap_at_once
from edgesync.server._lifecycle import ServerLifecycle, misuse, require
from edgesync.store import check_replica_visibility, create_pool, embedded_postgres, migrate

__all__ = ["Server", "ServerSettings", "default_data_dir"]

_log = logging.getLogger(__name__)
T = TypeVar("T")


async def _close_pool(pool: asyncpg.Pool) -> None:
    """Close gracefully, but never hang a stop on a connection something still holds."""
    try:
        async with asyncio.timeout(10):
            await pool.close()  # on cancellation asyncpg terminates the connections
    except TimeoutError:
        _log.warning("database connections still in use after 10 s; closed them")


def _forget_all(resolvers: list[DeviceResolver]) -> None:
    for resolver in resolvers:
        resolver.forget()


def default_data_dir() -> Path:
    return Path(platformdirs.user_data_dir("edgesync"))


@dataclass(slots=True)
class ServerSettings:
    database_url: str | None = None
    mqtt_url: str | None = None
    data_dir: Path = field(default_factory=default_data_dir)
    embedded_mqtt_port: int | None = 1883
    client_id: str = field(default_factory=lambda: f"edgesync-worker-{socket.gethostname()}")
    shared_group: str | None = None
    tls: TlsFiles | None = None
    api_host: str = "127.0.0.1"
    api_port: int | None = None
    # The URL devices use to reach the API (for presigned uploads); default: the API's own.
    public_url: str | None = None
    """Port of the HTTP API (0: any free port); ``None`` serves no API."""
    # ``mqtt_url`` and ``amqp_url`` may name several URLs, comma-separated: the nodes of
    # one broker cluster, tried in turn when the connection is lost (docs/production.md).
    # Ingest from this AMQP queue (RabbitMQ behind its MQTT plugin) instead of MQTT
    # subscriptions; controls and confirmations still go out over ``mqtt_url``.
    amqp_url: str | None = None
    amqp_queue: str = "edgesync.ingest"
    amqp_prefetch: int = 256
    # The group writer (``ingest.GroupWriter``): transactions written at once, and the
    # most batches in one.
    ingest_lanes: int = 2
    ingest_group_max: int = 128
    # Seconds between rounds of progress confirmations (``control.ProgressReporter``):
    # longer rounds cost the worker less per batch, devices keep their journal longer.
    progress_interval: float = 1.0
    # The directory ``edgesync broker-config`` wrote: the API rewrites it (and signals
    # the broker through its pid file) when credentials change (docs/security.md).
    broker_config_out: Path | None = None
    broker_pid_file: Path | None = None
    # Confirm to devices only batches a streaming standby has replayed, so an
    # asynchronous-replication failover cannot lose rows a device already forgot
    # (docs/production.md, "PostgreSQL failover").
    confirm_after_replica: bool = False
    # Append each batch's timings inside the worker to this file (diagnosis: see
    # ``edgesync.ingest.BatchTrace``).
    trace_batches: Path | None = None


@dataclass(slots=True)
class _Parts:
    """What an open server is made of, built whole at the end of entering it."""

    database_url: str
    broker: BrokerUrl
    pool: asyncpg.Pool
    pipeline: IngestPipeline
    ingest: MqttIngest | AmqpIngest
    replayer: Replayer
    objects: ObjectIngester
    api: ApiServer | None  # None: no API port asked for
    publisher: MqttPublisher
    controls: ControlSender
    progress: ProgressReporter
    sweeper: BackpressureSweeper
    verifier: VerificationScheduler


class _Part(Generic[T]):
    """``server.pool`` and its siblings: a field of the open server's ``_Parts``.
    Settable, so a test can swap a loop for a faster one before ``run()``."""

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = name

    @overload
    def __get__(self, server: None, owner: type) -> _Part[T]: ...
    @overload
    def __get__(self, server: Server, owner: type) -> T: ...
    def __get__(self, server: Server | None, owner: type) -> _Part[T] | T:
        if server is None:
            return self
        return cast(T, getattr(server.parts(f"Server.{self._name}"), self._name))

    def __set__(self, server: Server, value: T) -> None:
        setattr(server.parts(f"Server.{self._name}"), self._name, value)


class Server:
    database_url: _Part[str] = _Part()
    broker: _Part[BrokerUrl] = _Part()
    pool: _Part[asyncpg.Pool] = _Part()
    pipeline: _Part[IngestPipeline] = _Part()
    ingest: _Part[MqttIngest | AmqpIngest] = _Part()
    replayer: _Part[Replayer] = _Part()
    objects: _Part[ObjectIngester] = _Part()
    api: _Part[ApiServer | None] = _Part()
    publisher: _Part[MqttPublisher] = _Part()
    controls: _Part[ControlSender] = _Part()
    progress: _Part[ProgressReporter] = _Part()
    sweeper: _Part[BackpressureSweeper] = _Part()
    verifier: _Part[VerificationScheduler] = _Part()

    def __init__(self, settings: ServerSettings) -> None:
        self.settings = settings
        self.lifecycle = ServerLifecycle.NEW
        self._stack = contextlib.AsyncExitStack()
        self._parts: _Parts | None = None
        # The background tasks of ``run`` by name (readiness and metrics read them).
        self.tasks: dict[str, asyncio.Task[object]] = {}

    def parts(self, action: str = "Server.parts()") -> _Parts:
        """What the open server is made of; ``ServerLifecycleError`` before it is."""
        if self._parts is None:
            raise misuse(self.lifecycle, action)
        return self._parts

    async def __aenter__(self) -> Server:
        require(self.lifecycle, "async with Server", ServerLifecycle.NEW)
        self.lifecycle = ServerLifecycle.OPENING
        s = self.settings
        try:
            broker = check_settings(s)
            sock = None
            if s.api_port is not None:
                # Bound first: a port in use is a one-line error before PostgreSQL starts.
                sock = bind_api_socket(s.api_host, s.api_port)
                self._stack.callback(sock.close)
            if s.database_url:
                database_url = s.database_url
            else:
                database_url = await self._stack.enter_async_context(
                    embedded_postgres(s.data_dir))
            pool = await create_pool(database_url)
            self._stack.push_async_callback(_close_pool, pool)
            async with pool.acquire() as conn:
                ran = await migrate(conn)
                if s.confirm_after_replica:
                    await check_replica_visibility(conn)
            _log.info("database ready (%d migration(s) applied)", ran)
            if broker is None:
                broker = await self._stack.enter_async_context(
                    embedded_broker(port=s.embedded_mqtt_port))
            # Every node of a broker cluster (--mqtt-url a,b,c), tried in turn.
            brokers = (BrokerRotation(parse_broker_urls(s.mqtt_url, "--mqtt-url"))
                       if s.mqtt_url else BrokerRotation([broker]))
            # The API's revocations clear these caches: this worker refuses at once.
            resolvers = [DeviceResolver(pool), DeviceResolver(pool)]
            pipeline = IngestPipeline(pool, resolvers[0], writer=GroupWriter(
                pool, lanes=s.ingest_lanes, max_group=s.ingest_group_max))
            trace = None
            if s.trace_batches is not None:
                try:
                    trace = BatchTrace(s.trace_batches)
                except OSError as exc:
                    raise ConfigError("--trace-batches", f"cannot append to "
                                      f"{s.trace_batches}: {exc.strerror}") from exc
                self._stack.callback(trace.close)
            ingest: MqttIngest | AmqpIngest
            if s.amqp_url:
                ingest = AmqpIngest(pipeline, s.amqp_url, devices=resolvers[1],
                                    queue=s.amqp_queue, prefetch=s.amqp_prefetch,
                                    name=s.client_id, trace=trace)
            else:
                ingest = MqttIngest(pipeline, brokers, client_id=s.client_id,
                                    tls=s.tls, shared_group=s.shared_group, trace=trace)
            store = ObjectStore(s.data_dir / "objects")
            api = None
            if sock is not None:
                routers = [upload_router(lambda: pool, store),
                           make_jitr_router(  # devices are told one node
                               mqtt_broker_url=split_urls(s.mqtt_url)[0] if s.mqtt_url
                               else None)]
                registry = pipeline.metrics.registry
                registry.register(ScrapeCollector(self._gauges))
                refresh = (BrokerRefresh.from_dir(s.broker_config_out, s.broker_pid_file)
                           if s.broker_config_out is not None else None)
                api = ApiServer(create_app(pool, routers=routers,
                                           readiness=self.readiness, metrics=registry,
                                           broker_refresh=refresh,
                                           device_revoked=functools.partial(
                                               _forget_all, resolvers)),
                                sock)
                pipeline.upload_base_url = s.public_url or api.url
                _log.info("HTTP API listening on %s", api.url)
            publisher = MqttPublisher(brokers, client_id=f"{s.client_id}-control", tls=s.tls)
            self._parts = _Parts(
                database_url=database_url, broker=broker, pool=pool, pipeline=pipeline,
                ingest=ingest, replayer=Replayer(pool),
                objects=ObjectIngester(pool, pipeline, store), api=api, publisher=publisher,
                controls=ControlSender(pool, publisher),
                progress=ProgressReporter(pool, publisher, interval=s.progress_interval,
                                          after_replica=s.confirm_after_replica),
                sweeper=BackpressureSweeper(pool), verifier=VerificationScheduler(pool))
        except BaseException:
            self.lifecycle = ServerLifecycle.CLOSED
            await self._stack.aclose()
            raise
        self.lifecycle = ServerLifecycle.OPEN
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        self.lifecycle = ServerLifecycle.STOPPING
        try:
            await self._stack.aclose()
        finally:
            self.lifecycle = ServerLifecycle.CLOSED

    async def run(self) -> None:
        """Run until cancelled."""
        require(self.lifecycle, "Server.run()", ServerLifecycle.OPEN)
        p = self.parts("Server.run()")
        pool, presence = p.pool, p.pipeline.presence
        jobs = {"edgesync.ingest": p.ingest.run, "edgesync.replay": p.replayer.run,
                "edgesync.control.publisher": p.publisher.run,
                "edgesync.control.outbox": p.controls.run,
                "edgesync.control.progress": p.progress.run,
                "edgesync.control.backpressure": p.sweeper.run,
                "edgesync.control.verify_schedule": p.verifier.run}
        if p.api is not None:
            jobs["edgesync.api"] = p.api.run
        jobs["edgesync.uploads"] = p.objects.run
        jobs["edgesync.presence"] = lambda: presence.run(pool)
        # Operator log lines (not readiness: see readiness()).
        jobs["edgesync.log.events"] = EventLog(pool).run
        jobs["edgesync.log.throughput"] = ThroughputLog(p.pipeline.metrics).run
        # Process hygiene (``_heap``): large buffers mapped apart, not carved from the C
        # heap; the heap's free pages back to the system, the Rust heap's at once.
        pin_mmap_threshold()
        purge_rust_heap_at_once()
        jobs["edgesync.heap_trim"] = heap_trim_loop
        _log.info("edgesync %s serving", version())
        self.lifecycle = ServerLifecycle.RUNNING
        try:
            async with asyncio.TaskGroup() as tg:
                for name, job in jobs.items():
                    self.tasks[name] = tg.create_task(job(), name=name)
        finally:
            if self.lifecycle is ServerLifecycle.RUNNING:
                self.lifecycle = ServerLifecycle.OPEN
            _log.info("edgesync stopped")

    async def readiness(self) -> list[Check]:
        """``/readyz``: the database answers at the schema this build knows, the ingest
        and control broker sessions are up, and every background loop (the API's own
        aside: it answers) is alive and succeeded last time."""
        p = self._parts
        checks = await database_checks(p.pool if p is not None else None)
        if p is not None:
            up = p.ingest.connected.is_set()
            source = p.ingest if isinstance(p.ingest, AmqpIngest) else p.broker
            checks.append(Check("broker:ingest", up,
                                None if up else f"ingest not subscribed on {source}"))
            up = p.publisher.connected.is_set()
            checks.append(Check("broker:control", up,
                                None if up else f"control publisher not connected to "
                                                f"{p.broker}"))
        if not self.tasks:
            checks.append(Check("loops", False, "the server is not running yet"))
        checks += loop_checks(t for n, t in self.tasks.items()
                              if n != "edgesync.api" and not n.startswith("edgesync.log."))
        return checks

    def _gauges(self) -> list[Metric]:
        """This process's own figures, computed at each scrape."""
        up = GaugeMetricFamily("edgesync_loop_up", "1 when the background loop is alive and "
                               "its last round or session succeeded", labels=["loop"])
        for name, task in self.tasks.items():
            state = loop_state(task)
            ok = not task.done() and state is not None and state.status is LoopStatus.UP
            up.add_metric([name.removeprefix("edgesync.")], 1 if ok else 0)
        out: list[Metric] = [up, InfoMetricFamily("edgesync_build", "edgesync version",
                                                  value={"version": version()})]
        p = self._parts
        if p is not None:
            out.append(GaugeMetricFamily("edgesync_ingest_group_queue", "Batch messages "
                                         "waiting for a group transaction",
                                         value=p.pipeline.writer.queued))
        if p is not None and isinstance(p.ingest, MqttIngest):
            out.append(GaugeMetricFamily("edgesync_ingest_in_flight_max", "Most MQTT messages "
                                         "in flight at once since start (the window bounds it)",
                                         value=p.ingest.max_in_flight))
        return out

    async def wait_ready(self, limit: float = 30.0) -> None:
        ingest = self.parts("Server.wait_ready()").ingest
        async with asyncio.timeout(limit):
            await ingest.connected.wait()


