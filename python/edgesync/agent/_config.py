"""Agent configuration: the YAML file, its ``*_env`` indirections, and the resolved result.

Two layers:

* ``_File*`` dataclasses mirror the YAML exactly (unknown keys refused) and keep both the
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
import warnings
from collections.abc import Callable, Mapping
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path
from typing import Annotated, Any, get_type_hints

import platformdirs
from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from edgesync.errors import ConfigError
from edgesync.protocol import BrokerUrl, StrategyKind, TlsFiles, parse_broker_url

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


@dataclass(frozen=True, slots=True)
class TableStrategy:
    strategy: StrategyKind = StrategyKind.ROWS
    ts_column: str | None = None
    include_columns: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "strategy", StrategyKind(self.strategy))
        if self.include_columns is not None and not isinstance(self.include_columns, tuple):
            object.__setattr__(self, "include_columns", tuple(self.include_columns))


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

    @property
    def broker(self) -> BrokerUrl:
        return parse_broker_url(self.server_url, "connection.server_url")

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


# --------------------------------------------------------------------------- file shape
#
# Each ``_File*`` dataclass is one YAML mapping; each field one key, declared once as
# ``name: Annotated[type, check] = default``. ``_load`` reads a mapping into its dataclass:
# unknown keys, missing required keys and values a check refuses all become ``ConfigError``s
# whose field is the dotted YAML path. (No pydantic: it alone cost the agent ~18 MB of RSS.)

_Check = Callable[[object, str, list[ConfigError]], object]
_BAD = object()  # a value a check refused (its error already recorded)


@dataclass(frozen=True, slots=True)
class _YamlKey:
    """The YAML spelling of a key that is no Python name (``sqlite-replication``)."""

    key: str


def _scalar(convert: Callable[[object], object], *, nullable: bool = False) -> _Check:
    def check(value: object, path: str, errors: list[ConfigError]) -> object:
        if value is None and nullable:
            return None
        try:
            return convert(value)
        except ValueError as exc:
            errors.append(ConfigError(path, str(exc)))
            return _BAD
    return check


def _as_str(value: object) -> str:
    if not isinstance(value, str):
        raise ValueError("must be a string (quote the value in the YAML)")
    return value


_TRUE = frozenset({"true", "yes", "on", "y", "t", "1"})
_FALSE = frozenset({"false", "no", "off", "n", "f", "0"})


def _as_bool(value: object) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int | str) and str(value).strip().lower() in _TRUE | _FALSE:
        return str(value).strip().lower() in _TRUE
    raise ValueError(f"{value!r} is not a boolean; use true or false")


def _as_count(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str) or not str(value).isdigit():
        raise ValueError(f"{value!r} is not a whole number >= 0; use e.g. 50000 (0: never)")
    return int(value)


def _as_str_list(value: object) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError("must be a list of strings, e.g. [a, b]")
    return value


def _as_bool_map(value: object) -> dict[str, bool]:
    if not isinstance(value, dict):
        raise ValueError("must be a mapping of names to true or false")
    return {str(k): _as_bool(v) for k, v in value.items()}


def _choice(*allowed: str) -> Callable[[object], str]:
    spelled = ", ".join(repr(a) for a in allowed[:-1]) + (
        f" or {allowed[-1]!r}" if len(allowed) > 1 else repr(allowed[0]))

    def convert(value: object) -> str:
        if value not in allowed:
            raise ValueError(f"{value!r} is not allowed; use {spelled}")
        return str(value)
    return convert


_STR = _scalar(_as_str)
_OPT_STR = _scalar(_as_str, nullable=True)
_BOOL = _scalar(_as_bool)
_DURATION = _scalar(parse_duration)
_SIZE_CHECK = _scalar(parse_size)
_COUNT = _scalar(_as_count)
_STR_LIST = _scalar(_as_str_list)
_OPT_STR_LIST = _scalar(_as_str_list, nullable=True)
_BOOL_MAP = _scalar(_as_bool_map)


def _section(cls: type, *, nullable: bool = False, extra: bool = False) -> _Check:
    def check(value: object, path: str, errors: list[ConfigError]) -> object:
        if value is None and nullable:
            return None
        return _load(cls, value, path, errors, extra=extra)
    return check


def _mapping_of(cls: type) -> _Check:
    def check(value: object, path: str, errors: list[ConfigError]) -> object:
        if not isinstance(value, dict):
            errors.append(ConfigError(path, "must be a mapping of names to settings"))
            return _BAD
        out = {str(k): _load(cls, v, f"{path}.{k}", errors) for k, v in value.items()}
        return _BAD if any(v is _BAD for v in out.values()) else out
    return check


_SPECS: dict[type, list[tuple[str, str, _Check, bool]]] = {}


def _spec(cls: type) -> list[tuple[str, str, _Check, bool]]:
    """(attribute, YAML key, check, required) of each field of a ``_File*`` dataclass, read
    once from its ``Annotated[type, check]`` annotations."""
    if cls not in _SPECS:
        hints = get_type_hints(cls, include_extras=True)
        spec = []
        for f in fields(cls):
            extras = hints[f.name].__metadata__
            check = next(e for e in extras if callable(e) and not isinstance(e, _YamlKey))
            key = next((e.key for e in extras if isinstance(e, _YamlKey)), f.name)
            required = f.default is MISSING and f.default_factory is MISSING
            spec.append((f.name, key, check, required))
        _SPECS[cls] = spec
    return _SPECS[cls]


def _load(cls: type, data: object, path: str, errors: list[ConfigError], *,
          extra: bool = False) -> object:
    """``data`` (a YAML mapping) as ``cls``, or ``_BAD`` with every problem in ``errors``."""
    if not isinstance(data, dict):
        errors.append(ConfigError(path or "(top level)", "must be a mapping (key: value lines)"))
        return _BAD
    prefix = f"{path}." if path else ""
    values: dict[str, object] = {}
    bad = False
    spec = _spec(cls)
    for name, key, check, required in spec:
        if key not in data:
            if required:
                errors.append(ConfigError(prefix + key, "required section or key is missing"))
                bad = True
            continue
        got = check(data[key], prefix + key, errors)
        bad = bad or got is _BAD
        values[name] = got
    if not extra:
        known = {key for _, key, _, _ in spec}
        for key in data:
            if key not in known:
                errors.append(ConfigError(f"{prefix}{key}", "unknown key"))
                bad = True
    return _BAD if bad else cls(**values)


_OptStr = Annotated[str | None, _OPT_STR]
_Bool = Annotated[bool, _BOOL]
_Duration = Annotated[float, _DURATION]


@dataclass(slots=True)
class _FileTls:
    ca_cert_path: _OptStr = None
    ca_cert_path_env: _OptStr = None
    client_cert_path: _OptStr = None
    client_cert_path_env: _OptStr = None
    client_key_path: _OptStr = None
    client_key_path_env: _OptStr = None


@dataclass(slots=True)
class _FileMqtt:
    keep_alive: _Duration = 30.0
    clean_session: _Bool = False
    tls: Annotated[_FileTls | None, _section(_FileTls, nullable=True)] = None


@dataclass(slots=True)
class _FileConnection:
    transport: Annotated[str, _scalar(_choice("mqtt"))] = "mqtt"
    server_url: _OptStr = None
    server_url_env: _OptStr = None
    device_id: _OptStr = None
    device_id_env: _OptStr = None
    root_topic: _OptStr = None
    root_topic_env: _OptStr = None
    mqtt: Annotated[_FileMqtt, _section(_FileMqtt)] = field(default_factory=_FileMqtt)


@dataclass(slots=True)
class _FileSignedControl:
    enabled: _Bool = False


@dataclass(slots=True)
class _FileSecurity:
    auth_token_env: _OptStr = None
    signed_control: Annotated[_FileSignedControl, _section(_FileSignedControl)] = field(
        default_factory=_FileSignedControl)
    capabilities: Annotated[dict[str, bool], _BOOL_MAP] = field(default_factory=dict)


@dataclass(slots=True)
class _FileTable:
    strategy: Annotated[StrategyKind, _scalar(_choice(*(s.value for s in StrategyKind)))]
    ts_column: _OptStr = None
    include_columns: Annotated[list[str] | None, _OPT_STR_LIST] = None


@dataclass(slots=True)
class _FileReplication:
    source_db_path: _OptStr = None
    source_db_path_env: _OptStr = None
    state_db_path: _OptStr = None
    state_db_path_env: _OptStr = None
    flush_interval: _Duration = 5.0
    local_retention_bytes: Annotated[int, _SIZE_CHECK] = 256 * 1024 * 1024
    table_strategies: Annotated[dict[str, _FileTable], _mapping_of(_FileTable)] = field(
        default_factory=dict)
    snapshot_on_first_run: _Bool = False
    telemetry_lookback: _Duration = 30.0
    confirm_timeout: _Duration = 60.0
    upload_backlog_rows: Annotated[int, _COUNT] = 50_000
    remote_policy: _Bool = False


@dataclass(slots=True)
class _FileModules:
    required: Annotated[list[str], _STR_LIST] = field(default_factory=list)
    optional: Annotated[list[str], _STR_LIST] = field(default_factory=list)


@dataclass(slots=True, kw_only=True)
class _File:
    # Top-level keys of other modules (e.g. ``heartbeat:``) are tolerated and ignored.
    name: _OptStr = None
    platform: _OptStr = None
    modules: Annotated[_FileModules, _section(_FileModules)] = field(
        default_factory=_FileModules)
    connection: Annotated[_FileConnection, _section(_FileConnection)]
    security: Annotated[_FileSecurity, _section(_FileSecurity)] = field(
        default_factory=_FileSecurity)
    sqlite_replication: Annotated[_FileReplication, _section(_FileReplication),
                                  _YamlKey("sqlite-replication")]


# --------------------------------------------------------------------------- resolution


class _Resolver:
    """Resolves ``x`` / ``x_env`` pairs, collecting every error instead of stopping."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        self.environ = environ
        self.errors: list[ConfigError] = []

    def value(self, section: str, model: object, key: str, *,
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
            if ts.strategy != StrategyKind.IGNORE:
                errors.append(ConfigError(f"{at}.strategy", "internal tables cannot be replicated"))
            continue
        if ts.strategy == StrategyKind.TELEMETRY and not ts.ts_column:
            errors.append(ConfigError(f"{at}.ts_column", "required for strategy telemetry"))
        if ts.strategy != StrategyKind.TELEMETRY:
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
    """``table_strategies`` as the YAML (and a sync policy) spells them: unset keys left out,
    plain strings (YAML's safe dumper represents no enum)."""
    return {table: {k: list(v) if isinstance(v, tuple) else str(v) if k == "strategy" else v
                    for k, v in asdict(ts).items() if v is not None}
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
        loaded = _load(_FileTable, doc, f"{base}.{table}", errors)
        if isinstance(loaded, _FileTable):
            tables[str(table)] = loaded
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


def read_config(path: str | os.PathLike[str]) -> tuple[AgentConfig | None, list[ConfigError]]:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        return None, [ConfigError(str(p), f"cannot read file: {exc.strerror or exc}")]
    try:
        data: Any = _yaml_load(text)
    except YAMLError as exc:
        return None, [ConfigError(str(p), f"not valid YAML{_yaml_problem(exc)}")]
    return parse_config(data)


def _yaml_problem(exc: YAMLError) -> str:
    """The parser's complaint in one line, with where it is (its own text spans several
    lines and names the file ``<unicode string>``)."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    context, start = getattr(exc, "context", None), getattr(exc, "context_mark", None)
    hint = ": check the indentation" if context and "block" in context else ""
    after = f" ({context} from line {start.line + 1}{hint})" if context and start else ""
    return f"{where}: {problem}{after}"


def _yaml_load(text: str) -> Any:
    """The document as plain Python values, read as YAML 1.1 like PyYAML's ``safe_load``
    (``yes``/``on`` are booleans), by ruamel.yaml's pure-Python loader: a device needs no
    wheel of a YAML library for its architecture (PyYAML has none for armv7l) and no
    compiler. Unlike PyYAML, a key given twice is an error instead of the last one winning."""
    loader = YAML(typ="safe", pure=True)
    loader.version = (1, 1)
    with warnings.catch_warnings():
        # ``1e3`` (no dot) reads as a float with a warning of YAML 1.1 pedantry.
        warnings.simplefilter("ignore")
        return loader.load(text)


def parse_config(data: object, environ: Mapping[str, str] | None = None
                 ) -> tuple[AgentConfig | None, list[ConfigError]]:
    """Validate an already-parsed YAML document; returns the config or every error found."""
    if not isinstance(data, dict):
        return None, [ConfigError("(top level)", "the file must be a YAML mapping")]
    # An empty section (``security:`` with nothing under it) reads as None: treat as {}.
    data = {k: ({} if v is None and k in _SECTIONS else v) for k, v in data.items()}
    errors: list[ConfigError] = []
    raw = _load(_File, data, "", errors, extra=True)
    if not isinstance(raw, _File):
        return None, errors
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
