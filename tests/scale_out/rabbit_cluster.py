"""A 3-node RabbitMQ cluster of one test: its own node names, ports, data directories and
Erlang cookie (never the suite's broker on 5672/1884), the MQTT plugin on every node, built
with ``rabbitmqctl join_cluster``. Nodes are killed with SIGKILL (their beam process) and
started again with the same data directory, so they rejoin as themselves."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BIN = Path("/usr/lib/rabbitmq/bin")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _port_open(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
        return True
    return False


@dataclass
class Node:
    name: str  # short, e.g. es1-<unique>
    root: Path
    amqp_port: int
    mqtt_port: int
    dist_port: int
    ctl_port: int  # rabbitmqctl's own distribution port (run one at a time)
    home: Path
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def node(self) -> str:
        return f"{self.name}@localhost"

    @property
    def amqp_url(self) -> str:
        return f"amqp://guest:guest@127.0.0.1:{self.amqp_port}/"

    @property
    def mqtt_url(self) -> str:
        return f"mqtt://127.0.0.1:{self.mqtt_port}"

    def env(self) -> dict[str, str]:
        return {**os.environ, "HOME": str(self.home),
                "RABBITMQ_CONF_ENV_FILE": str(self.root / "rabbitmq-env.conf"),
                "RABBITMQ_NODENAME": self.node, "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
                "RABBITMQ_NODE_PORT": str(self.amqp_port),
                "RABBITMQ_DIST_PORT": str(self.dist_port),
                "RABBITMQ_CTL_DIST_PORT_MIN": str(self.ctl_port),
                "RABBITMQ_CTL_DIST_PORT_MAX": str(self.ctl_port),
                "RABBITMQ_MNESIA_BASE": str(self.root / "mnesia"),
                "RABBITMQ_LOG_BASE": str(self.root / "log"),
                "RABBITMQ_PID_FILE": str(self.root / "pid"),
                "RABBITMQ_CONFIG_FILE": str(self.root / "rabbitmq.conf"),
                "RABBITMQ_ENABLED_PLUGINS_FILE": str(self.root / "enabled_plugins"),
                "ERL_EPMD_ADDRESS": "127.0.0.1"}

    def write_files(self) -> None:
        (self.root / "log").mkdir(parents=True, exist_ok=True)
        (self.root / "rabbitmq-env.conf").write_text("")
        (self.root / "enabled_plugins").write_text("[rabbitmq_mqtt].\n")
        (self.root / "rabbitmq.conf").write_text(
            f"listeners.tcp.default = 127.0.0.1:{self.amqp_port}\n"
            f"mqtt.listeners.tcp.default = 127.0.0.1:{self.mqtt_port}\n"
            "loopback_users = none\n"
            # a client on a killed node is seen gone within seconds, not minutes
            "heartbeat = 5\n")

    def start(self) -> None:
        with (self.root / "server.out").open("ab") as out:
            self.proc = subprocess.Popen([str(BIN / "rabbitmq-server")], env=self.env(),
                                         stdout=out, stderr=out, start_new_session=True)

    def ctl(self, *args: str, timeout: float = 60, tool: str = "rabbitmqctl") -> str:
        done = subprocess.run([str(BIN / tool), "-n", self.node, *args],
                              env=self.env(), capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0:
            raise RuntimeError(f"{tool} {' '.join(args)} on {self.node}: "
                               f"{done.stdout}{done.stderr}")
        return done.stdout

    def quorum_status(self, queue: str) -> list[dict[str, Any]]:
        """The members of a quorum queue as this node sees them: ``Node Name``,
        ``Raft State``, ``Log Index``, ``Commit Index``…"""
        out = self.ctl("--formatter", "json", "quorum_status", queue, tool="rabbitmq-queues")
        members: list[dict[str, Any]] = json.loads(out)
        return members

    def wait_up(self, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while True:  # await_startup fails at once while the node is not registered yet
            try:
                self.ctl("await_startup", "--timeout", str(int(timeout)), timeout=timeout + 10)
                break
            except RuntimeError:
                if time.monotonic() > deadline:
                    raise
                assert self.proc is None or self.proc.poll() is None, \
                    (self.root / "server.out").read_text(errors="replace")[-3000:]
                time.sleep(0.5)
        while not (_port_open(self.amqp_port) and _port_open(self.mqtt_port)):
            assert time.monotonic() < deadline, f"{self.node}: listeners not up"
            time.sleep(0.1)

    def kill9(self) -> None:
        """SIGKILL of the node's beam process (the Erlang VM), nothing else."""
        pid = int((self.root / "pid").read_text().strip())
        os.kill(pid, signal.SIGKILL)
        if self.proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(30)
        deadline = time.monotonic() + 30
        while _port_open(self.amqp_port) or _port_open(self.mqtt_port):
            assert time.monotonic() < deadline, f"{self.node}: still listening after kill -9"
            time.sleep(0.1)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        with contextlib.suppress(Exception):
            self.ctl("stop", timeout=30)
        with contextlib.suppress(OSError, ValueError):
            os.kill(int((self.root / "pid").read_text().strip()), signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(30)


@contextlib.contextmanager
def rabbit_cluster(root: Path, unique: str, size: int = 3) -> Iterator[list[Node]]:
    """``size`` nodes clustered with the first, every one up with its MQTT listener."""
    if not (BIN / "rabbitmq-server").exists():
        raise RuntimeError(f"RabbitMQ is not installed ({BIN}/rabbitmq-server is missing; "
                           "ci/services.sh installs it)")
    home = root / "home"
    home.mkdir(parents=True)
    cookie = home / ".erlang.cookie"
    cookie.write_text(secrets.token_hex(16))
    cookie.chmod(0o400)
    nodes = [Node(f"es{n}-{unique}", root / f"node{n}", free_port(), free_port(),
                  free_port(), free_port(), home) for n in range(1, size + 1)]
    try:
        for node in nodes:
            node.write_files()
            node.start()
        for node in nodes:
            node.wait_up()
        for node in nodes[1:]:
            node.ctl("stop_app")
            node.ctl("join_cluster", nodes[0].node)
            node.ctl("start_app")
            node.wait_up()
        running = nodes[0].ctl("cluster_status", "--formatter", "json")
        assert all(n.node in running for n in nodes), running
        yield nodes
    finally:
        for node in nodes:
            node.stop()
