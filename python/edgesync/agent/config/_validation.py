"""The agent's YAML checked and resolved into an ``AgentConfig`` (``_model``).

Two layers:

* ``_File*`` dataclasses mirror the YAML exactly (unknown keys refused, by the ``_checks``
  engine) and keep both the inline form (``server_url``) and the environment form
  (``server_url_env``) of a value.
* ``_resolve`` turns them into resolved values only (``AgentConfig`` and its parts).

Every problem becomes a ``ConfigError`` whose ``field`` is the dotted YAML path, e.g.
``sqlite-replication.table_strategies.temps.strategy`` or
``connection.server_url_env (OMEGA_MQTT_BROKER_URL)``.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from edgesync.agent.config._checks import (
    BAD,
    BOOL,
    BOOL_MAP,
    COUNT,
    DURATION,
    OPT_STR,
    SIZE,
    STR_LIST,
    YamlKey,
    choice,
    load_mapping,
    parse_size,
    scalar,
    section,
)
from edgesync.agent.config._model import (
    AgentConfig,
    ConnectionConfig,
    ReplicationConfig,
    SecurityConfig,
    default_state_db_path,
)
from edgesync.errors import ConfigError
from edgesync.protocol import (
    Compression,
    TableStrategy,
    TlsFiles,
    check_table_strategies,
    parse_broker_url,
    parse_compression,
    read_table_strategy,
)

__all__ = ["load_config", "parse_config", "read_config"]


_OptStr = Annotated[str | None, OPT_STR]
_Bool = Annotated[bool, BOOL]
_Duration = Annotated[float, DURATION]


def _rate(value: object) -> int:
    """A byte budget: 0 (unlimited) or a size such as ``64KiB``."""
    if value == 0 and not isinstance(value, bool):
        return 0
    try:
        return parse_size(value)
    except ValueError:
        raise ValueError(f"{value!r} is not a budget; use 0 (unlimited) or a size such as "
                         "65536 or 64KiB") from None


def _compression(value: object, path: str, errors: list[ConfigError]) -> object:
    try:
        return parse_compression(value, path)
    except ConfigError as exc:
        errors.append(exc)
        return BAD


_Rate = Annotated[int, scalar(_rate)]


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
    tls: Annotated[_FileTls | None, section(_FileTls, nullable=True)] = None


@dataclass(slots=True)
class _FileConnection:
    transport: Annotated[str, scalar(choice("mqtt"))] = "mqtt"
    server_url: _OptStr = None
    server_url_env: _OptStr = None
    # The nodes of a broker cluster, tried in turn (instead of server_url).
    server_urls: Annotated[list[str], STR_LIST] = field(default_factory=list)
    device_id: _OptStr = None
    device_id_env: _OptStr = None
    root_topic: _OptStr = None
    root_topic_env: _OptStr = None
    max_bytes_per_second: _Rate = 0
    max_bytes_per_day: _Rate = 0
    mqtt: Annotated[_FileMqtt, section(_FileMqtt)] = field(default_factory=_FileMqtt)


@dataclass(slots=True)
class _FileSignedControl:
    enabled: _Bool = False


@dataclass(slots=True)
class _FileSecurity:
    auth_token_env: _OptStr = None
    signed_control: Annotated[_FileSignedControl, section(_FileSignedControl)] = field(
        default_factory=_FileSignedControl)
    capabilities: Annotated[dict[str, bool], BOOL_MAP] = field(default_factory=dict)


def _table_strategies(value: object, path: str, errors: list[ConfigError]) -> object:
    """``table_strategies`` read table by table (``protocol.read_table_strategy``); their
    rules are checked once the whole file is read."""
    if not isinstance(value, dict):
        errors.append(ConfigError(path, "must be a mapping of names to settings"))
        return BAD
    out: dict[str, object] = {}
    for table, doc in value.items():
        at = f"{path}.{table}"
        if not isinstance(doc, dict):
            errors.append(ConfigError(at, "must be a mapping (key: value lines)"))
            out[str(table)] = BAD
            continue
        out[str(table)] = read_table_strategy(doc, at, errors) or BAD
    return BAD if any(v is BAD for v in out.values()) else out


@dataclass(slots=True)
class _FileReplication:
    source_db_path: _OptStr = None
    source_db_path_env: _OptStr = None
    state_db_path: _OptStr = None
    state_db_path_env: _OptStr = None
    flush_interval: _Duration = 5.0
    local_retention_bytes: Annotated[int, SIZE] = 256 * 1024 * 1024
    table_strategies: Annotated[dict[str, TableStrategy], _table_strategies] = field(
        default_factory=dict)
    snapshot_on_first_run: _Bool = False
    telemetry_lookback: _Duration = 30.0
    confirm_timeout: _Duration = 60.0
    upload_backlog_rows: Annotated[int, COUNT] = 50_000
    remote_policy: _Bool = False
    compression: Annotated[Compression, _compression] = Compression.NONE


@dataclass(slots=True)
class _FileModules:
    required: Annotated[list[str], STR_LIST] = field(default_factory=list)
    optional: Annotated[list[str], STR_LIST] = field(default_factory=list)


@dataclass(slots=True, kw_only=True)
class _File:
    # Top-level keys of other modules (e.g. ``heartbeat:``) are tolerated and ignored.
    name: _OptStr = None
    platform: _OptStr = None
    modules: Annotated[_FileModules, section(_FileModules)] = field(
        default_factory=_FileModules)
    connection: Annotated[_FileConnection, section(_FileConnection)]
    security: Annotated[_FileSecurity, section(_FileSecurity)] = field(
        default_factory=_FileSecurity)
    sqlite_replication: Annotated[_FileReplication, section(_FileReplication),
                                  YamlKey("sqlite-replication")]


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


def _server_urls(r: _Resolver, conn: _FileConnection) -> tuple[str, ...]:
    """``connection.server_urls`` checked; () when it is not given (server_url then)."""
    if not conn.server_urls:
        return ()
    if conn.server_url is not None or conn.server_url_env is not None:
        r.fail("connection.server_urls", "give either server_urls (a list) or "
               "server_url / server_url_env (one URL), not both")
        return ()
    urls: list[str] = []
    for n, url in enumerate(conn.server_urls):
        try:
            parse_broker_url(url, f"connection.server_urls[{n}]")
        except ConfigError as exc:
            r.errors.append(exc)
        urls.append(url.strip())
    return tuple(urls)


def _resolve(raw: _File, environ: Mapping[str, str]) -> tuple[AgentConfig | None,
                                                                list[ConfigError]]:
    r = _Resolver(environ)
    conn = raw.connection
    server_urls = _server_urls(r, conn)
    if conn.server_urls:  # server_url is the list's first; both given: one error
        server_url = server_urls[0] if server_urls else None
    else:
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
    strategies = check_table_strategies(rep.table_strategies, "sqlite-replication.table_strategies",
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
            max_bytes_per_second=conn.max_bytes_per_second,
            max_bytes_per_day=conn.max_bytes_per_day,
            server_urls=server_urls,
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
            compression=rep.compression,
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
    raw = load_mapping(_File, data, "", errors, extra=True)
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
