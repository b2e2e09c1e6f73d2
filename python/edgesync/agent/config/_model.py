"""The agent's resolved configuration: what the agent uses and what tests build directly.

Values here are resolved (no ``*_env`` indirections left); ``_validation`` builds them from
the YAML file and ``_summary`` describes them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import platformdirs

from edgesync.protocol import BrokerUrl, Compression, TableStrategy, TlsFiles, parse_broker_url

__all__ = ["AgentConfig", "ConnectionConfig", "ReplicationConfig", "SecurityConfig",
           "default_state_db_path"]

def default_state_db_path() -> Path:
    """``{dataDir}/sqlite-replication/state.db`` with dataDir = user_data_dir("edgesync")."""
    return Path(platformdirs.user_data_dir("edgesync")) / "sqlite-replication" / "state.db"


@dataclass(frozen=True, slots=True)
class ConnectionConfig:
    server_url: str
    device_id: str
    root_topic: str
    keep_alive_s: float = 30.0
    clean_session: bool = False
    tls_ca_cert_path: Path | None = None
    tls_client_cert_path: Path | None = None
    tls_client_key_path: Path | None = None
    # What the agent may publish (wire bytes; 0: unlimited): a token bucket, and a UTC
    # day's budget after which data waits (controls, acks and status reports still go).
    max_bytes_per_second: int = 0
    max_bytes_per_day: int = 0
    # Every node of a broker cluster (``connection.server_urls``; server_url is the first):
    # the link takes the next one each time it connects. Empty: server_url alone.
    server_urls: tuple[str, ...] = ()

    @property
    def broker(self) -> BrokerUrl:
        return parse_broker_url(self.server_url, "connection.server_url")

    @property
    def brokers(self) -> tuple[BrokerUrl, ...]:
        """The URLs the link tries in turn (server_url alone when no list is given)."""
        if not self.server_urls:
            return (self.broker,)
        return tuple(parse_broker_url(url, "connection.server_urls")
                     for url in self.server_urls)

    @property
    def tls_files(self) -> TlsFiles | None:
        if not (self.tls_ca_cert_path or self.tls_client_cert_path or self.tls_client_key_path):
            return None
        return TlsFiles(self.tls_ca_cert_path, self.tls_client_cert_path,
                        self.tls_client_key_path)


@dataclass(frozen=True, slots=True)
class SecurityConfig:
    auth_token: str | None = None
    signed_control: bool = False
    capabilities: Mapping[str, bool] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ReplicationConfig:
    source_db_path: Path
    state_db_path: Path = field(default_factory=default_state_db_path)
    flush_interval_s: float = 5.0
    local_retention_bytes: int = 256 * 1024 * 1024
    table_strategies: Mapping[str, TableStrategy] = field(default_factory=dict)
    snapshot_on_first_run: bool = False
    telemetry_lookback_s: float = 30.0
    confirm_timeout_s: float = 60.0
    # An unsent journal backlog of a rows table above this many rows travels as one
    # payload_spill upload instead of MQTT batches (0: never).
    upload_backlog_rows: int = 50_000
    # A sync policy the cloud sends (a ``sync_policy`` control) replaces table_strategies
    # only when this is true; otherwise the YAML's own strategies stay (docs/agent.md).
    remote_policy: bool = False
    # How row and telemetry batches go on the wire (docs/protocol.md "Compressed batches").
    compression: Compression = Compression.NONE

    def strategy_for(self, table: str) -> TableStrategy:
        """The configured strategy of ``table``; unlisted tables replicate as ``rows``."""
        return self.table_strategies.get(table) or TableStrategy()


@dataclass(frozen=True, slots=True)
class AgentConfig:
    """Resolved agent configuration (no ``_env`` indirections left)."""

    connection: ConnectionConfig
    replication: ReplicationConfig
    security: SecurityConfig = field(default_factory=SecurityConfig)
    name: str | None = None
    platform: str | None = None
    modules: tuple[str, ...] = ()
