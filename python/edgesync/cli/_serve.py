"""``edgesync serve`` (the cloud worker) and ``edgesync demo`` (the end-to-end story on the
embedded servers)."""

from __future__ import annotations

import argparse
import gc
import logging
import os
from pathlib import Path
from typing import Any

from edgesync.cli._options import server_db_options

__all__ = ["GC_THRESHOLDS", "add_demo_parser", "add_serve_parser", "run_demo", "serve"]

_log = logging.getLogger("edgesync")

# Generation 0 collected every 20,000 allocations (700 by default), each older generation
# after 50 and 100 collections of the one below.
GC_THRESHOLDS = (20_000, 50, 100)


def add_serve_parser(sub: Any) -> None:
    serve = sub.add_parser(
        "serve", help="run the cloud worker (ingest, governance, replay)",
        description="Run the cloud worker: consume device batches from MQTT, dedupe, govern "
                    "schemas, stage, replay and materialize into PostgreSQL. Without "
                    "--database-url an embedded PostgreSQL is used; without --mqtt-url an "
                    "embedded MQTT broker listens on 127.0.0.1.")
    server_db_options(serve)
    serve.add_argument("--mqtt-url", default=os.environ.get("EDGESYNC_MQTT_URL"),
                       help="broker URL: tcp:// or mqtt:// (plain), ssl:// or mqtts:// (TLS); "
                            "several, comma-separated, for the nodes of one broker cluster "
                            "(tried in turn when the connection is lost) "
                            "(env EDGESYNC_MQTT_URL)")
    serve.add_argument("--embedded-mqtt-port", type=int,
                       default=os.environ.get("EDGESYNC_EMBEDDED_MQTT_PORT", "1883"),
                       help="port of the embedded broker when no --mqtt-url is given (env "
                            "EDGESYNC_EMBEDDED_MQTT_PORT; default 1883; 0 picks a free port)")
    serve.add_argument("--mqtt-ca", type=Path, help="CA certificate for a TLS broker")
    serve.add_argument("--mqtt-cert", type=Path, help="client certificate for mTLS")
    serve.add_argument("--mqtt-key", type=Path, help="client key for mTLS")
    serve.add_argument("--client-id", default=os.environ.get("EDGESYNC_MQTT_CLIENT_ID"),
                       help="MQTT client id of this worker (env EDGESYNC_MQTT_CLIENT_ID; "
                            "default edgesync-worker-<hostname>). Keep it stable across "
                            "restarts (the broker keeps its session and queued messages) and "
                            "distinct per worker (a broker drops a client when another "
                            "connects with its id)")
    serve.add_argument("--shared-group", default=None,
                       help="consume through MQTT shared subscriptions of this group, so "
                            "several workers split the load")
    serve.add_argument("--amqp-url", default=os.environ.get("EDGESYNC_AMQP_URL"),
                       help="ingest from an AMQP queue instead of MQTT subscriptions: "
                            "amqp://user:password@host:5672/vhost or amqps://; several, "
                            "comma-separated, for the nodes of a RabbitMQ cluster (tried in "
                            "turn when the connection is lost) (env EDGESYNC_AMQP_URL); needs "
                            "--mqtt-url for the controls, e.g. RabbitMQ's MQTT plugin")
    serve.add_argument("--amqp-queue", default=os.environ.get("EDGESYNC_AMQP_QUEUE",
                                                              "edgesync.ingest"),
                       help="durable quorum queue every worker consumes, declared and "
                            "bound to amq.topic when missing (env EDGESYNC_AMQP_QUEUE; "
                            "default edgesync.ingest)")
    serve.add_argument("--amqp-prefetch", type=int,
                       default=os.environ.get("EDGESYNC_AMQP_PREFETCH", "256"),
                       help="messages handled at once, unacknowledged until committed "
                            "(env EDGESYNC_AMQP_PREFETCH; default 256)")
    serve.add_argument("--ingest-lanes", type=int,
                       default=os.environ.get("EDGESYNC_INGEST_LANES", "2"),
                       help="batch groups written at once, each in its own transaction "
                            "(env EDGESYNC_INGEST_LANES; default 2)")
    serve.add_argument("--ingest-group-max", type=int,
                       default=os.environ.get("EDGESYNC_INGEST_GROUP_MAX", "128"),
                       help="most batches one transaction writes (env "
                            "EDGESYNC_INGEST_GROUP_MAX; default 128)")
    serve.add_argument("--progress-interval", type=float, metavar="SECONDS",
                       default=os.environ.get("EDGESYNC_PROGRESS_INTERVAL", "1"),
                       help="seconds between rounds of progress confirmations to devices, "
                            "0.1 to 30 (env EDGESYNC_PROGRESS_INTERVAL; default 1)")
    serve.add_argument("--api-host", default=os.environ.get("EDGESYNC_API_HOST", "127.0.0.1"),
                       help="address of the HTTP API (env EDGESYNC_API_HOST; default 127.0.0.1)")
    serve.add_argument("--api-port", type=int,
                       default=os.environ.get("EDGESYNC_API_PORT", "8080"),
                       help="port of the HTTP API (env EDGESYNC_API_PORT; default 8080; "
                            "0 picks a free port)")
    serve.add_argument("--public-url", default=os.environ.get("EDGESYNC_PUBLIC_URL"),
                       help="URL devices use to reach this server's HTTP API, for presigned "
                            "uploads (env EDGESYNC_PUBLIC_URL; default: the API's address)")
    serve.add_argument("--broker-config-out", type=Path,
                       default=os.environ.get("EDGESYNC_BROKER_CONFIG_OUT"),
                       help="the directory `edgesync broker-config --out` wrote: credentials "
                            "issued or revoked through the API rewrite it (same options) "
                            "(env EDGESYNC_BROKER_CONFIG_OUT; default: not managed)")
    serve.add_argument("--confirm-after-replica", action="store_true",
                       default=os.environ.get("EDGESYNC_CONFIRM_AFTER_REPLICA") == "1",
                       help="confirm batches to devices only once a streaming standby has "
                            "replayed their commit (needs the pg_monitor role), so a failover "
                            "under asynchronous replication loses nothing; confirmations wait "
                            "while no standby keeps up (env EDGESYNC_CONFIRM_AFTER_REPLICA=1)")
    serve.add_argument("--trace-batches", type=Path, metavar="FILE",
                       default=os.environ.get("EDGESYNC_TRACE_BATCHES"),
                       help="diagnosis: append each batch's timings inside the worker "
                            "(received, grouped, written, committed, acknowledged) to FILE as "
                            "JSON lines (env EDGESYNC_TRACE_BATCHES; default: off)")
    serve.add_argument("--broker-pid-file", type=Path,
                       default=os.environ.get("EDGESYNC_BROKER_PID_FILE"),
                       help="Mosquitto's pid file: sent SIGHUP after a rewrite "
                            "(env EDGESYNC_BROKER_PID_FILE)")


def add_demo_parser(sub: Any) -> None:
    demo = sub.add_parser(
        "demo", help="run the end-to-end story on the embedded PostgreSQL and broker",
        description="Create a sample SQLite database, run a device agent and the cloud worker "
                    "in-process on the embedded PostgreSQL and MQTT broker, approve the schema "
                    "review, and compare the cloud rows with the SQLite rows.")
    demo.add_argument("--workdir", type=Path, default=None,
                      help="where the demo keeps its files (default: a new temporary directory)")
    demo.add_argument("--database-url", default=None,
                      help="use this PostgreSQL instead of the embedded one")
    demo.add_argument("--mqtt-url", default=None,
                      help="use this broker instead of the embedded one")


async def serve(args: argparse.Namespace) -> None:
    from edgesync.protocol import TlsFiles
    from edgesync.server import Server, ServerSettings, default_data_dir

    tls = None
    if args.mqtt_ca or args.mqtt_cert or args.mqtt_key:
        tls = TlsFiles(args.mqtt_ca, args.mqtt_cert, args.mqtt_key)
    settings = ServerSettings(
        database_url=args.database_url, mqtt_url=args.mqtt_url,
        data_dir=args.data_dir or default_data_dir(),
        embedded_mqtt_port=args.embedded_mqtt_port or None,
        shared_group=args.shared_group, tls=tls, api_host=args.api_host,
        api_port=args.api_port, public_url=args.public_url, amqp_url=args.amqp_url,
        amqp_queue=args.amqp_queue, amqp_prefetch=args.amqp_prefetch,
        ingest_lanes=args.ingest_lanes, ingest_group_max=args.ingest_group_max,
        progress_interval=args.progress_interval,
        broker_config_out=args.broker_config_out, broker_pid_file=args.broker_pid_file,
        confirm_after_replica=args.confirm_after_replica, trace_batches=args.trace_batches)
    if args.client_id:
        settings.client_id = args.client_id
    async with Server(settings) as server:
        _log.info("serving: broker %s as %s%s", server.broker, settings.client_id,
                  f"; ingest from AMQP {server.ingest}" if settings.amqp_url else "")
        if server.api is not None:  # where to point agents, the CLI and a browser
            _log.info("edgesync serve ready: devices connect to %s; operator commands: "
                      "EDGESYNC_API_URL=%s; web console: %s/console", server.broker,
                      server.api.url, server.api.url)
        # What start-up built (modules, the app, pools) lives as long as the process: out
        # of the collector's sight, a full collection no longer walks it (a pause of tens
        # of milliseconds in every batch committed meanwhile).
        gc.freeze()
        # A group of batches allocates thousands of short-lived containers, nearly none
        # in a cycle (a fleet run: ~5,000 objects found by the collector in 50,000
        # batches), so collecting every 700 allocations bought nothing: 10% of the
        # worker's CPU under load went to the collector (perf), 0.1% with these.
        gc.set_threshold(*GC_THRESHOLDS)
        await server.run()


def run_demo(args: argparse.Namespace) -> int:
    from edgesync._runtime import run_until_signal
    from edgesync.demo import run_demo as story

    ok = run_until_signal(story(workdir=args.workdir, database_url=args.database_url,
                                mqtt_url=args.mqtt_url))
    return 0 if ok else 1
