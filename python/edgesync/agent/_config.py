"""Agent configuration: the YAML file, its ``*_env`` indirections, and the resolved result.

Two layers:

* ``_File*`` models mirror the YAML exactly (unknown keys refused) and keep both the
  inline form (``server_url``) and the environment form (``server_url_env``) of a value.
* ``AgentConfig`` and its parts hold resolved values only; they are what the agent uses
  and what tests build directly.

Every problem becomes a ``ConfigError`` whose ``field`` is the dotted YAML path, e.g.
``sqlite-replication.table_strategies.temps.strategy`` or
``connection.server_url_env (OMEGA_MQTT_BROKER_URL)``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import platformdirs
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from edgesync.errors import ConfigError
from edgesync.protocol import BrokerUrl, TlsFiles, parse_broker_url

__all__ = [
    "AgentConfig",
    "ConnectionConfig",
    "ReplicationConfig",
    "SecurityConfig",
    "TableStrategy",
    "default_state_db_path",
    "load_config",
    "parse_duration",
    "parse_size",
    "parse_table_strategies",
    "read_config",
    "summarize_config",
    "table_strategies_doc",
]

Strategy = Literal["rows", "telemetry", "ignore"]

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?i?B?)\s*$", re.IGNORECASE)
_SIZE_UNITS = {
    "": 1, "b": 1,
    "k": 1000, "kb": 1000, "m": 1000**2, "mb": 1000**2, "g": 1000**3, "gb": 1000**3,
    "t": 1000**4, "tb": 1000**4,
    "ki": 1024, "kib": 1024, "mi": 1024**2, "mib": 1024**2, "gi": 1024**3, "gib": 1024**3,
    "ti": 1024**4, "tib": 1024**4,
}


def parse_duration(value: object) -> float:
    """Seconds from ``30s``, ``500ms``, ``1m30s``, ``2h`` or a plain number of seconds."""
    if isinstance(value, bool):
        raise ValueError("expected a duration such as 5s, 500ms or 1m")
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        text = value.strip()
        pos, seconds = 0, 0.0
        for m in _DURATION_PART.finditer(text):
            if m.start() != pos:
                break
            seconds += float(m.group(1)) * _DURATION_UNITS[m.group(2)]
            pos = m.end()
        if not text or pos != len(text):
            raise ValueError(f"{value!r} is not a duration; use e.g. 5s, 500ms, 1m30s")
    else:
        raise ValueError("expected a duration such as 5s, 500ms or 1m")
    if seconds <= 0:
        raise ValueError("must be greater than zero")
    return seconds


def parse_size(value: object) -> int:
    """Bytes from an integer or ``256MiB``, ``512KiB``, ``1GB`` (binary and decimal units)."""
    if isinstance(value, bool):
        raise ValueError("expected a size such as 256MiB")
    if isinstance(value, int):
        size = value
    elif isinstance(value, str):
        m = _SIZE.match(value)
        unit = m.group(2).lower() if m else ""
        if not m or unit not in _SIZE_UNITS:
            raise ValueError(f"{value!r} is not a size; use e.g. 268435456, 256MiB or 1GB")
        size = int(float(m.group(1)) * _SIZE_UNITS[unit])
    else:
        raise ValueError("expected a size such as 256MiB")
    if size <= 0:
        raise ValueError("must be greater than zero")
    return size


def default_state_db_path() -> Path:
    """``{dataDir}/sqlite-replication/state.db`` with dataDir = user_data_dir("edgesync")."""
    return Path(platformdirs.user_data_dir("edgesync")) / "sqlite-replication" / "state.db"


# --------------------------------------------------------------------------- resolved


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class TableStrategy(_Frozen):
    strategy: Strategy = "rows"
    ts_column: str | None = None
    include_columns: tuple[str, ...] | None = None


class ConnectionConfig(_Frozen):
    server_url: str
    device_id: str
    root_topic: str
    keep_alive_s: float = 30.0
    clean_session: bool = False
    tls_ca_cert_path: Path | None = None
    tls_client_cert_path: Path | None = None
    tls_client_key_path: Path | None = None

    @property
    def broker(self) -> BrokerUrl:
        return parse_broker_url(self.server_url, "connection.server_url")

    @property
    def tls_files(self) -> TlsFiles | None:
        if not (self.tls_ca_cert_path or self.tls_client_cert_path or self.tls_client_key_path):
            return None
        return TlsFiles(self.tls_ca_cert_path, self.tls_client_cert_path,
                        self.tls_client_key_path)


class SecurityConfig(_Frozen):
    auth_token: str | None = None
    signed_control: bool = False
    capabilities: Mapping[str, bool] = Field(default_factory=dict)


class ReplicationConfig(_Frozen):
    source_db_path: Path
    state_db_path: Path = Field(default_factory=default_state_db_path)
    flush_interval_s: float = 5.0
    local_retention_bytes: int = 256 * 1024 * 1024
    table_strategies: Mapping[str, TableStrategy] = Field(default_factory=dict)
    snapshot_on_first_run: bool = False
    telemetry_lookback_s: float = 30.0
    confirm_timeout_s: float = 60.0
    # An unsent journal backlog of a rows table above this many rows travels as one
    # payload_spill upload instead of MQTT batches (0: never).
    upload_backlog_rows: int = Field(default=50_000, ge=0)
    # A sync policy the cloud sends (a ``sync_policy`` control) replaces table_strategies
    # only when this is true; otherwise the YAML's own strategies stay (docs/agent.md).
    remote_policy: bool = False

    def strategy_for(self, table: str) -> TableStrategy:
        """The configured strategy of ``table``; unlisted tables replicate as ``rows``."""
        return self.table_strategies.get(table) or TableStrategy()


class AgentConfig(_Frozen):
    """Resolved agent configuration (no ``_env`` indirections left)."""

    connection: ConnectionConfig
    replication: ReplicationConfig
    security: SecurityConfig = Field(default_factory=SecurityConfig)
    name: str | None = None
    platform: str | None = None
    modules: tuple[str, ...] = ()


# --------------------------------------------------------------------------- file shape


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class _FileTls(_Section):
    ca_cert_path: str | None = None
    ca_cert_path_env: str | None = None
    client_cert_path: str | None = None
    client_cert_path_env: str | None = None
    client_key_path: str | None = None
    client_key_path_env: str | None = None


class _FileMqtt(_Section):
    keep_alive: float = 30.0
    clean_session: bool = False
    tls: _FileTls | None = None

    @field_validator("keep_alive", mode="before")
    @classmethod
    def _duration(cls, v: object) -> float:
        return parse_duration(v)


class _FileConnection(_Section):
    transport: Literal["mqtt"] = "mqtt"
    server_url: str | None = None
    server_url_env: str | None = None
    device_id: str | None = None
    device_id_env: str | None = None
    root_topic: str | None = None
    root_topic_env: str | None = None
    mqtt: _FileMqtt = Field(default_factory=_FileMqtt)


class _FileSignedControl(_Section):
    enabled: bool = False


class _FileSecurity(_Section):
    auth_token_env: str | None = None
    signed_control: _FileSignedControl = Field(default_factory=_FileSignedControl)
    capabilities: dict[str, bool] = Field(default_factory=dict)


class _FileTable(_Section):
    strategy: Strategy
    ts_column: str | None = None
    include_columns: list[str] | None = None


class _FileReplication(_Section):
    source_db_path: str | None = None
    source_db_path_env: str | None = None
    state_db_path: str | None = None
    state_db_path_env: str | None = None
    flush_interval: float = 5.0
    local_retention_bytes: int = 256 * 1024 * 1024
    table_strategies: dict[str, _FileTable] = Field(default_factory=dict)
    snapshot_on_first_run: bool = False
    telemetry_lookback: float = 30.0
    confirm_timeout: float = 60.0
    upload_backlog_rows: int = Field(default=50_000, ge=0)
    remote_policy: bool = False

    @field_validator("flush_interval", "telemetry_lookback", "confirm_timeout", mode="before")
    @classmethod
    def _duration(cls, v: object) -> float:
        return parse_duration(v)

    @field_validator("local_retention_bytes", mode="before")
    @classmethod
    def _size(cls, v: object) -> int:
        return parse_size(v)


class _FileModules(_Section):
    required: list[str] = Field(default_factory=list)
    optional: list[str] = Field(default_factory=list)


class _File(BaseModel):
    # Top-level keys of other modules (e.g. ``heartbeat:``) are tolerated and ignored.
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    name: str | None = None
    platform: str | None = None
    modules: _FileModules = Field(default_factory=_FileModules)
    connection: _FileConnection
    security: _FileSecurity = Field(default_factory=_FileSecurity)
    sqlite_replication: _FileReplication = Field(alias="sqlite-replication")


# --------------------------------------------------------------------------- resolution


class _Resolver:
    """Resolves ``x`` / ``x_env`` pairs, collecting every error instead of stopping."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        self.environ = environ
        self.errors: list[ConfigError] = []

    def value(self, section: str, model: BaseModel, key: str, *,
              required: bool = False) -> str | None:
        inline: str | None = getattr(model, key)
        env_name: str | None = getattr(model, f"{key}_env")
        if inline is not None and env_name is not None:
            self.errors.append(ConfigError(
                f"{section}.{key}", f"give either {key} or {key}_env, not both"))
            return None
        if env_name is not None:
            field = f"{section}.{key}_env ({env_name})"
            if not env_name.strip():
                self.errors.append(ConfigError(f"{section}.{key}_env",
                                               "names no environment variable"))
                return None
            got = self.environ.get(env_name)
            if got is None:
                self.errors.append(ConfigError(field, "environment variable is not set"))
                return None
            if not got.strip():
                self.errors.append(ConfigError(field, "environment variable is set but empty"))
                return None
            return got.strip()
        if inline is not None:
            if not inline.strip():
                self.errors.append(ConfigError(f"{section}.{key}", "must not be empty"))
                return None
            return inline.strip()
        if required:
            self.errors.append(ConfigError(f"{section}.{key}",
                                           f"required: set {key} or {key}_env"))
        return None

    def fail(self, field: str, reason: str) -> None:
        self.errors.append(ConfigError(field, reason))


def _check_topic_part(r: _Resolver, field: str, value: str, *, allow_slash: bool) -> None:
    bad = set("+#\0") | (set() if allow_slash else {"/"})
    if any(c in bad for c in value):
        chars = "'+', '#'" + ("" if allow_slash else ", '/'")
        r.fail(field, f"{value!r} must not contain {chars}")


def _check_tables(tables: Mapping[str, _FileTable], base: str, errors: list[ConfigError]
                  ) -> dict[str, TableStrategy]:
    """The rules of ``table_strategies`` (the agent's YAML, a sync policy of the cloud and
    the ``sync_policy`` control share them); each problem is appended to ``errors``."""
    strategies: dict[str, TableStrategy] = {}
    for table, ts in tables.items():
        at = f"{base}.{table}"
        if not table.strip():
            errors.append(ConfigError(at, "a table name must not be empty"))
            continue
        if table.startswith(("sqlite_", "__edgesync_")):
            # Internal tables never replicate: "ignore" is harmless, anything else a mistake.
            if ts.strategy != "ignore":
                errors.append(ConfigError(f"{at}.strategy", "internal tables cannot be replicated"))
            continue
        if ts.strategy == "telemetry" and not ts.ts_column:
            errors.append(ConfigError(f"{at}.ts_column", "required for strategy telemetry"))
        if ts.strategy != "telemetry":
            for key in ("ts_column", "include_columns"):
                if getattr(ts, key) is not None:
                    errors.append(ConfigError(f"{at}.{key}", "only valid with strategy telemetry"))
        if ts.include_columns is not None and len(set(ts.include_columns)) != len(
                ts.include_columns):
            errors.append(ConfigError(f"{at}.include_columns", "names a column twice"))
        strategies[table] = TableStrategy(
            strategy=ts.strategy, ts_column=ts.ts_column,
            include_columns=tuple(ts.include_columns) if ts.include_columns is not None else None,
        )
    return strategies


def table_strategies_doc(strategies: Mapping[str, TableStrategy]) -> dict[str, dict[str, Any]]:
    """``table_strategies`` as the YAML (and a sync policy) spells them: unset keys left out."""
    return {table: ts.model_dump(exclude_none=True, mode="json")
            for table, ts in strategies.items()}


def parse_table_strategies(data: object, base: str = "table_strategies"
                           ) -> tuple[dict[str, TableStrategy], list[ConfigError]]:
    """``table_strategies`` from plain JSON/YAML data (a sync policy), checked by the same
    rules as the agent's YAML; every error names its dotted field under ``base``."""
    if not isinstance(data, dict):
        return {}, [ConfigError(base, "must be a mapping of table name to strategy")]
    tables: dict[str, _FileTable] = {}
    errors: list[ConfigError] = []
    for table, doc in data.items():
        if not isinstance(doc, dict):
            errors.append(ConfigError(f"{base}.{table}", "must be a mapping with a strategy "
                                                         "(rows, telemetry or ignore)"))
            continue
        try:
            tables[str(table)] = _FileTable.model_validate(doc)
        except ValidationError as exc:
            errors += [ConfigError(f"{base}.{table}.{e.field}" if e.field != "(top level)"
                                   else f"{base}.{table}", e.reason)
                       for e in _pydantic_errors(exc)]
    strategies = _check_tables(tables, base, errors)
    return ({}, errors) if errors else (strategies, [])


def _resolve(raw: _File, environ: Mapping[str, str]) -> tuple[AgentConfig | None,
                                                                list[ConfigError]]:
    r = _Resolver(environ)
    conn = raw.connection
    server_url = r.value("connection", conn, "server_url", required=True)
    if server_url is not None:
        try:
            parse_broker_url(server_url, "connection.server_url")
        except ConfigError as exc:
            r.errors.append(exc)
    device_id = r.value("connection", conn, "device_id", required=True)
    if device_id is not None:
        _check_topic_part(r, "connection.device_id", device_id, allow_slash=False)
    root_topic = r.value("connection", conn, "root_topic")
    if root_topic is not None:
        _check_topic_part(r, "connection.root_topic", root_topic, allow_slash=True)
        root_topic = root_topic.rstrip("/") or None
        if root_topic is None:
            r.fail("connection.root_topic", "must name at least one topic level")
    tls_paths: dict[str, Path | None] = {}
    tls = conn.mqtt.tls or _FileTls()
    for key in ("ca_cert_path", "client_cert_path", "client_key_path"):
        got = r.value("connection.mqtt.tls", tls, key)
        path = Path(got).expanduser() if got else None
        if path is not None and not path.is_file():
            r.fail(f"connection.mqtt.tls.{key}", f"file {str(path)!r} does not exist")
        tls_paths[key] = path
    if tls_paths["client_key_path"] and not tls_paths["client_cert_path"]:
        r.fail("connection.mqtt.tls.client_cert_path",
               "required when client_key_path is set (mTLS needs both)")
    if tls_paths["client_cert_path"] and not tls_paths["client_key_path"]:
        r.fail("connection.mqtt.tls.client_key_path",
               "required when client_cert_path is set (mTLS needs both)")
    tls_fields = {"ca": "connection.mqtt.tls.ca_cert_path",
                  "cert": "connection.mqtt.tls.client_cert_path",
                  "key": "connection.mqtt.tls.client_key_path"}
    if any(tls_paths.values()) and not any(e.field.startswith("connection.mqtt.tls")
                                           for e in r.errors):
        try:  # PEM contents now: a bad file would otherwise fail every reconnect
            TlsFiles(tls_paths["ca_cert_path"], tls_paths["client_cert_path"],
                     tls_paths["client_key_path"]).check(tls_fields)
        except ConfigError as exc:
            r.errors.append(exc)

    sec = raw.security
    auth_token: str | None = None
    if sec.auth_token_env is not None:
        if not sec.auth_token_env.strip():
            r.fail("security.auth_token_env", "names no environment variable")
        else:
            got = environ.get(sec.auth_token_env)
            field = f"security.auth_token_env ({sec.auth_token_env})"
            if got is None:
                r.fail(field, "environment variable is not set")
            elif not got.strip():
                r.fail(field, "environment variable is set but empty")
            else:
                auth_token = got.strip()
    elif sec.signed_control.enabled:
        r.fail("security.auth_token_env", "required when security.signed_control.enabled is true")
    if sec.capabilities.get("sqlite-replication") is False:
        r.fail("security.capabilities.sqlite-replication",
               "is false, but replication is the agent's only job")

    rep = raw.sqlite_replication
    source = r.value("sqlite-replication", rep, "source_db_path", required=True)
    state = r.value("sqlite-replication", rep, "state_db_path")
    strategies = _check_tables(rep.table_strategies, "sqlite-replication.table_strategies",
                               r.errors)

    if r.errors:
        return None, r.errors
    assert server_url is not None and device_id is not None and source is not None
    cfg = AgentConfig(
        name=raw.name,
        platform=raw.platform,
        modules=tuple(raw.modules.required),
        connection=ConnectionConfig(
            server_url=server_url,
            device_id=device_id,
            root_topic=root_topic or f"/{device_id}",
            keep_alive_s=conn.mqtt.keep_alive,
            clean_session=conn.mqtt.clean_session,
            tls_ca_cert_path=tls_paths["ca_cert_path"],
            tls_client_cert_path=tls_paths["client_cert_path"],
            tls_client_key_path=tls_paths["client_key_path"],
        ),
        security=SecurityConfig(
            auth_token=auth_token,
            signed_control=sec.signed_control.enabled,
            capabilities=dict(sec.capabilities),
        ),
        replication=ReplicationConfig(
            source_db_path=Path(source).expanduser(),
            state_db_path=Path(state).expanduser() if state else default_state_db_path(),
            flush_interval_s=rep.flush_interval,
            local_retention_bytes=rep.local_retention_bytes,
            table_strategies=strategies,
            snapshot_on_first_run=rep.snapshot_on_first_run,
            telemetry_lookback_s=rep.telemetry_lookback,
            confirm_timeout_s=rep.confirm_timeout,
            upload_backlog_rows=rep.upload_backlog_rows,
            remote_policy=rep.remote_policy,
        ),
    )
    return cfg, []


_SECTIONS = frozenset({"connection", "security", "modules", "sqlite-replication"})


def _pydantic_errors(exc: ValidationError) -> list[ConfigError]:
    out: list[ConfigError] = []
    for err in exc.errors():
        loc = [str(p) for p in err["loc"]]
        if err["type"] == "extra_forbidden":
            out.append(ConfigError(".".join(loc), "unknown key"))
            continue
        msg = err["msg"]
        if err["type"] == "value_error":
            msg = msg.removeprefix("Value error, ")
        elif err["type"] == "missing":
            msg = "required section or key is missing"
        out.append(ConfigError(".".join(loc) or "(top level)", msg))
    return out


def read_config(path: str | os.PathLike[str]) -> tuple[AgentConfig | None, list[ConfigError]]:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        return None, [ConfigError(str(p), f"cannot read file: {exc.strerror or exc}")]
    try:
        data: Any = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        return None, [ConfigError(str(p), f"not valid YAML: {exc}")]
    return parse_config(data)


def parse_config(data: object, environ: Mapping[str, str] | None = None
                 ) -> tuple[AgentConfig | None, list[ConfigError]]:
    """Validate an already-parsed YAML document; returns the config or every error found."""
    if not isinstance(data, dict):
        return None, [ConfigError("(top level)", "the file must be a YAML mapping")]
    # An empty section (``security:`` with nothing under it) reads as None: treat as {}.
    data = {k: ({} if v is None and k in _SECTIONS else v) for k, v in data.items()}
    try:
        raw = _File.model_validate(data)
    except ValidationError as exc:
        return None, _pydantic_errors(exc)
    return _resolve(raw, os.environ if environ is None else environ)


def load_config(path: str | os.PathLike[str]) -> AgentConfig:
    """Read, validate and resolve the agent YAML; raises the first ConfigError found."""
    cfg, errors = read_config(path)
    if errors:
        raise errors[0]
    assert cfg is not None
    return cfg


def summarize_config(cfg: AgentConfig) -> list[str]:
    """Human-readable lines describing a resolved config (secrets left out)."""
    c, rep = cfg.connection, cfg.replication
    lines = [
        f"broker: {c.broker} (device {c.device_id}, root topic {c.root_topic}, "
        f"keep-alive {c.keep_alive_s:g}s, clean_session {str(c.clean_session).lower()})",
        f"tls: ca={c.tls_ca_cert_path or '-'} cert={c.tls_client_cert_path or '-'} "
        f"key={c.tls_client_key_path or '-'}",
        f"source db: {rep.source_db_path}",
        f"state db: {rep.state_db_path}",
        f"flush every {rep.flush_interval_s:g}s; local retention {rep.local_retention_bytes} bytes"
        f"; telemetry look-back {rep.telemetry_lookback_s:g}s"
        f"; re-send unconfirmed batches after {rep.confirm_timeout_s:g}s"
        + (f"; backlogs over {rep.upload_backlog_rows} rows go by upload"
           if rep.upload_backlog_rows else ""),
        f"signed control: {'on' if cfg.security.signed_control else 'off'}",
        f"remote sync policy: {'applied' if rep.remote_policy else 'ignored (local YAML wins)'}",
    ]
    for table, ts in sorted(rep.table_strategies.items()):
        lines.append(f"table {table}: {ts.strategy}"
                     + (f" (ts_column {ts.ts_column})" if ts.ts_column else ""))
    lines.append("other tables: rows")
    return lines
