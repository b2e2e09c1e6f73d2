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
from edgesync.fleet import DeviceResolver
from edgesync.ingest import AmqpIngest, IngestPipeline, MqttIngest, ObjectIngester
from edgesync.observe import Check, database_checks, loop_checks
from edgesync.observe._event_log import EventLog
from edgesync.observe._gauges import ScrapeCollector
from edgesync.observe._summary import ThroughputLog
from edgesync.protocol import BrokerUrl, LoopStatus, TlsFiles, loop_state
from edgesync.server._checks import bind_api_socket, check_settings
from edgesync.staging import Replayer
from edgesync.store import create_pool, embedded_postgres, migrate

__all__ = ["Server", "ServerSettings", "default_data_dir"]

_log = logging.getLogger(__name__)


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
    # Ingest from this AMQP queue (RabbitMQ behind its MQTT plugin) instead of MQTT
    # subscriptions; controls and confirmations still go out over ``mqtt_url``.
    amqp_url: str | None = None
    amqp_queue: str = "edgesync.ingest"
    amqp_prefetch: int = 256
    # The directory ``edgesync broker-config`` wrote: the API rewrites it (and signals
    # the broker through its pid file) when credentials change (docs/security.md).
    broker_config_out: Path | None = None
    broker_pid_file: Path | None = None


class Server:
    def __init__(self, settings: ServerSettings) -> None:
        self.settings = settings
        self._stack = contextlib.AsyncExitStack()
        self.database_url = ""
        self.broker: BrokerUrl | None = None
        self.pool: asyncpg.Pool | None = None
        self.pipeline: IngestPipeline | None = None
        self.ingest: MqttIngest | AmqpIngest | None = None
        self.replayer: Replayer | None = None
        self.api: ApiServer | None = None
        self.publisher: MqttPublisher | None = None
        self.controls: ControlSender | None = None
        self.progress: ProgressReporter | None = None
        self.sweeper: BackpressureSweeper | None = None
        self.verifier: VerificationScheduler | None = None
        self.objects: ObjectIngester | None = None
        # The background tasks of ``run`` by name (readiness and metrics read them).
        self.tasks: dict[str, asyncio.Task[object]] = {}

    async def __aenter__(self) -> Server:
        s = self.settings
        broker = check_settings(s)
        try:
            sock = None
            if s.api_port is not None:
                # Bound first: a port in use is a one-line error before PostgreSQL starts.
                sock = bind_api_socket(s.api_host, s.api_port)
                self._stack.callback(sock.close)
            if s.database_url:
                self.database_url = s.database_url
            else:
                self.database_url = await self._stack.enter_async_context(
                    embedded_postgres(s.data_dir))
            self.pool = await create_pool(self.database_url)
            self._stack.push_async_callback(_close_pool, self.pool)
            async with self.pool.acquire() as conn:
                ran = await migrate(conn)
            _log.info("database ready (%d migration(s) applied)", ran)
            if broker is not None:
                self.broker = broker
            else:
                self.broker = await self._stack.enter_async_context(
                    embedded_broker(port=s.embedded_mqtt_port))
            # The API's revocations clear these caches: this worker refuses at once.
            resolvers = [DeviceResolver(self.pool), DeviceResolver(self.pool)]
            self.pipeline = IngestPipeline(self.pool, resolvers[0])
            if s.amqp_url:
                self.ingest = AmqpIngest(self.pipeline, s.amqp_url,
                                         devices=resolvers[1],
                                         queue=s.amqp_queue, prefetch=s.amqp_prefetch,
                                         name=s.client_id)
            else:
                self.ingest = MqttIngest(self.pipeline, self.broker, client_id=s.client_id,
                                         tls=s.tls, shared_group=s.shared_group)
            self.replayer = Replayer(self.pool)
            store = ObjectStore(s.data_dir / "objects")
            self.objects = ObjectIngester(self.pool, self.pipeline, store)
            if sock is not None:
                pool = self.pool
                routers = [upload_router(lambda: pool, store),
                           make_jitr_router(mqtt_broker_url=s.mqtt_url)]
                registry = self.pipeline.metrics.registry
                registry.register(ScrapeCollector(self._gauges))
                refresh = (BrokerRefresh.from_dir(s.broker_config_out, s.broker_pid_file)
                           if s.broker_config_out is not None else None)
                self.api = ApiServer(create_app(self.pool, routers=routers,
                                                readiness=self.readiness, metrics=registry,
                                                broker_refresh=refresh,
                                                device_revoked=functools.partial(
                                                    _forget_all, resolvers)),
                                     sock)
                self.pipeline.upload_base_url = s.public_url or self.api.url
                _log.info("HTTP API listening on %s", self.api.url)
            self.publisher = MqttPublisher(self.broker, client_id=f"{s.client_id}-control",
                                           tls=s.tls)
            self.controls = ControlSender(self.pool, self.publisher)
            self.progress = ProgressReporter(self.pool, self.publisher)
            self.sweeper = BackpressureSweeper(self.pool)
            self.verifier = VerificationScheduler(self.pool)
        except BaseException:
            await self._stack.aclose()
            raise
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self._stack.aclose()

    async def run(self) -> None:
        """Run until cancelled."""
        assert self.ingest and self.replayer and self.publisher and self.controls
        assert self.progress and self.sweeper
        jobs = {"edgesync.ingest": self.ingest.run, "edgesync.replay": self.replayer.run,
                "edgesync.control.publisher": self.publisher.run,
                "edgesync.control.outbox": self.controls.run,
                "edgesync.control.progress": self.progress.run,
                "edgesync.control.backpressure": self.sweeper.run}
        if self.verifier is not None:
            jobs["edgesync.control.verify_schedule"] = self.verifier.run
        if self.api is not None:
            jobs["edgesync.api"] = self.api.run
        if self.objects is not None:
            jobs["edgesync.uploads"] = self.objects.run
        assert self.pool is not None and self.pipeline is not None
        pool, presence = self.pool, self.pipeline.presence
        jobs["edgesync.presence"] = lambda: presence.run(pool)
        # Operator log lines (not readiness: see readiness()).
        jobs["edgesync.log.events"] = EventLog(self.pool).run
        jobs["edgesync.log.throughput"] = ThroughputLog(self.pipeline.metrics).run
        _log.info("edgesync %s serving", version())
        try:
            async with asyncio.TaskGroup() as tg:
                for name, job in jobs.items():
                    self.tasks[name] = tg.create_task(job(), name=name)
        finally:
            _log.info("edgesync stopped")

    async def readiness(self) -> list[Check]:
        """``/readyz``: the database answers at the schema this build knows, the ingest
        and control broker sessions are up, and every background loop (the API's own
        aside: it answers) is alive and succeeded last time."""
        checks = await database_checks(self.pool)
        if self.ingest is not None:
            up = self.ingest.connected.is_set()
            source = self.ingest if isinstance(self.ingest, AmqpIngest) else self.broker
            checks.append(Check("broker:ingest", up,
                                None if up else f"ingest not subscribed on {source}"))
        if self.publisher is not None:
            up = self.publisher.connected.is_set()
            checks.append(Check("broker:control", up,
                                None if up else f"control publisher not connected to "
                                                f"{self.broker}"))
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
        if self.pipeline is not None:
            out.append(GaugeMetricFamily("edgesync_ingest_group_queue", "Batch messages "
                                         "waiting for a group transaction",
                                         value=self.pipeline.writer.queued))
        if isinstance(self.ingest, MqttIngest):
            out.append(GaugeMetricFamily("edgesync_ingest_in_flight_max", "Most MQTT messages "
                                         "in flight at once since start (the window bounds it)",
                                         value=self.ingest.max_in_flight))
        return out

    async def wait_ready(self, limit: float = 30.0) -> None:
        assert self.ingest
        async with asyncio.timeout(limit):
            await self.ingest.connected.wait()


