"""Agent YAML: env indirection, defaults, and errors that name the field."""

from __future__ import annotations

import datetime as dt
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from edgesync.agent import AgentConfig, load_config, validate_config
from edgesync.agent.config import default_state_db_path, parse_duration, parse_size
from edgesync.errors import ConfigError

EDGESYNC = shutil.which("edgesync", path=str(Path(sys.executable).parent)) or "edgesync"
EXAMPLE = Path(__file__).parents[2] / "agent" / "edgesync-agent.example.yaml"


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "agent.yaml"
    p.write_text(textwrap.dedent(text), encoding="utf-8")
    return p


MINIMAL = """
connection:
  transport: mqtt
  server_url: mqtt://broker.local:1883
  device_id: gw-7
sqlite-replication:
  source_db_path: /var/lib/app/data.db
"""


def write_pems(where: Path) -> None:
    """CA (a self-signed certificate), CERT and its KEY, as real PEM files."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "t")])
    now = dt.datetime.now(dt.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(1)
            .not_valid_before(now).not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    pem = cert.public_bytes(serialization.Encoding.PEM)
    (where / "CA").write_bytes(pem)
    (where / "CERT").write_bytes(pem)
    (where / "KEY").write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))


def error(tmp_path: Path, text: str) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, text))
    return info.value


def test_defaults(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, MINIMAL))
    assert isinstance(cfg, AgentConfig)
    c, r = cfg.connection, cfg.replication
    assert c.root_topic == "/gw-7"
    assert c.keep_alive_s == 30 and c.clean_session is False and c.tls_files is None
    assert c.broker.host == "broker.local" and c.broker.port == 1883
    assert r.state_db_path == default_state_db_path()
    assert r.state_db_path.parts[-2:] == ("sqlite-replication", "state.db")
    assert r.flush_interval_s == 5 and r.local_retention_bytes == 256 * 1024 * 1024
    assert r.strategy_for("anything").strategy == "rows"
    assert r.snapshot_on_first_run is False
    assert cfg.security.signed_control is False


def test_env_indirection(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for k, v in {"EDGESYNC_MQTT_URL": "ssl://mqtt.example.com:8883",
                 "EDGESYNC_DEVICE_ID": "gw-floor-2", "EDGESYNC_ROOT_TOPIC": "acme/gw-floor-2/",
                 "EDGESYNC_SOURCE_DB_PATH": str(tmp_path / "app.db"),
                 "EDGESYNC_STATE_DB_PATH": str(tmp_path / "state.db"),
                 "EDGESYNC_AUTH_TOKEN": "secret"}.items():
        monkeypatch.setenv(k, v)
    write_pems(tmp_path)
    for k in ("CA", "CERT", "KEY"):
        monkeypatch.setenv(f"EDGESYNC_TLS_{k}_PATH", str(tmp_path / k))
    cfg = load_config(EXAMPLE)
    c, r = cfg.connection, cfg.replication
    assert c.server_url == "ssl://mqtt.example.com:8883" and c.broker.tls
    assert c.device_id == "gw-floor-2" and c.root_topic == "acme/gw-floor-2"
    assert c.keep_alive_s == 30 and c.clean_session is False
    assert c.tls_ca_cert_path == tmp_path / "CA" and c.tls_client_key_path == tmp_path / "KEY"
    assert r.source_db_path == tmp_path / "app.db" and r.state_db_path == tmp_path / "state.db"
    assert cfg.security.auth_token == "secret" and cfg.security.signed_control
    assert cfg.security.capabilities["sqlite-replication"] is True
    assert cfg.modules == ("sqlite-replication",)
    assert r.strategy_for("scratch").strategy == "ignore"


def test_values(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, MINIMAL + """\
  flush_interval: 1m30s
  local_retention_bytes: 64MiB
  snapshot_on_first_run: true
  table_strategies:
    temps: {strategy: telemetry, ts_column: ts, include_columns: [ts, v]}
    cache: {strategy: ignore}
"""))
    r = cfg.replication
    assert r.flush_interval_s == 90 and r.local_retention_bytes == 64 << 20
    assert r.snapshot_on_first_run
    assert r.strategy_for("temps").include_columns == ("ts", "v")
    assert parse_duration("500ms") == 0.5 and parse_duration(2) == 2
    assert parse_size(1000) == 1000 and parse_size("1GB") == 10**9


@pytest.mark.parametrize(("env", "reason"), [
    (None, "environment variable is not set"),
    ("", "environment variable is set but empty"),
    ("  ", "environment variable is set but empty"),
])
def test_env_missing_or_empty_names_field_and_variable(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, env: str | None, reason: str) -> None:
    monkeypatch.delenv("OMEGA_MQTT_BROKER_URL", raising=False)
    if env is not None:
        monkeypatch.setenv("OMEGA_MQTT_BROKER_URL", env)
    err = error(tmp_path, MINIMAL.replace("server_url: mqtt://broker.local:1883",
                                          "server_url_env: OMEGA_MQTT_BROKER_URL"))
    assert err.field == "connection.server_url_env (OMEGA_MQTT_BROKER_URL)"
    assert err.reason == reason


@pytest.mark.parametrize(("change", "field", "reason"), [
    (("  transport: mqtt", "  transport: amqp"), "connection.transport", "mqtt"),
    (("  device_id: gw-7", ""), "connection.device_id", "required"),
    (("  device_id: gw-7", "  device_id: gw/7"), "connection.device_id", "must not contain"),
    (("mqtt://broker.local:1883", "quic://b:1"), "connection.server_url", "quic"),
    (("mqtt://broker.local:1883", "http://b"), "connection.server_url", "scheme"),
    (("  source_db_path: /var/lib/app/data.db", ""), "sqlite-replication.source_db_path",
     "required"),
    (("  device_id: gw-7", "  device_id: gw-7\n  mqtt: {keep_alive: soon}"),
     "connection.mqtt.keep_alive", "not a duration"),
    (("  device_id: gw-7", "  device_id: gw-7\n  mqtt: {tls: {ca_cert_path: /nope.pem}}"),
     "connection.mqtt.tls.ca_cert_path", "does not exist"),
    (("  device_id: gw-7", "  device_id: gw-7\n  device_id_env: X"),
     "connection.device_id", "not both"),
    (("  device_id: gw-7", "  device_id: gw-7\n  colour: blue"), "connection.colour",
     "unknown key"),
])
def test_errors_name_the_field(tmp_path: Path, change: tuple[str, str], field: str,
                               reason: str) -> None:
    err = error(tmp_path, MINIMAL.replace(*change))
    assert err.field == field
    assert reason in err.reason


@pytest.mark.parametrize(("extra", "field", "reason"), [
    ("flush_interval: 0s", "sqlite-replication.flush_interval", "greater than zero"),
    ("local_retention_bytes: lots", "sqlite-replication.local_retention_bytes", "not a size"),
    ("table_strategies: {temps: {strategy: fast}}",
     "sqlite-replication.table_strategies.temps.strategy", "'rows', 'telemetry' or 'ignore'"),
    ("table_strategies: {temps: {strategy: telemetry}}",
     "sqlite-replication.table_strategies.temps.ts_column", "required"),
    ("table_strategies: {temps: {strategy: rows, ts_column: ts}}",
     "sqlite-replication.table_strategies.temps.ts_column", "only valid"),
    ("table_strategies: {temps: {strategy: rows, colour: red}}",
     "sqlite-replication.table_strategies.temps.colour", "unknown key"),
    ("snapshot_on_first_run: maybe", "sqlite-replication.snapshot_on_first_run", "bool"),
    ("typo_key: 1", "sqlite-replication.typo_key", "unknown key"),
])
def test_replication_errors(tmp_path: Path, extra: str, field: str, reason: str) -> None:
    err = error(tmp_path, MINIMAL + "  " + extra + "\n")
    assert err.field == field
    assert reason in err.reason


def test_security_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    err = error(tmp_path, MINIMAL + "security: {signed_control: {enabled: true}}\n")
    assert err.field == "security.auth_token_env" and "signed_control" in err.reason
    monkeypatch.delenv("TOKEN_X", raising=False)
    err = error(tmp_path, MINIMAL + "security: {auth_token_env: TOKEN_X}\n")
    assert err.field == "security.auth_token_env (TOKEN_X)"
    err = error(tmp_path, MINIMAL + "security: {capabilities: {sqlite-replication: false}}\n")
    assert err.field == "security.capabilities.sqlite-replication"


def test_missing_sections_and_bad_files(tmp_path: Path) -> None:
    assert error(tmp_path, "connection: {device_id: x}\n").field == "sqlite-replication"
    assert "mapping" in error(tmp_path, "- a\n").reason
    assert "YAML" in error(tmp_path, "a: [\n").reason
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.yaml")


def test_yaml_is_read_as_yaml_1_1_and_a_repeated_key_is_an_error(tmp_path: Path) -> None:
    """PyYAML's reading (YAML 1.1 booleans), which agent.yaml files were written for, kept
    by the pure-Python loader that replaced it; a key given twice is refused."""
    cfg = load_config(write(tmp_path, MINIMAL + "  snapshot_on_first_run: yes\n"))
    assert cfg.replication.snapshot_on_first_run is True
    assert "YAML" in error(tmp_path, MINIMAL + "connection: {device_id: x}\n").reason


def test_unknown_top_level_keys_are_ignored(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, MINIMAL + "heartbeat: {interval: 10s}\n"))
    assert cfg.connection.device_id == "gw-7"


def test_validate_reports_every_problem(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                        ) -> None:
    monkeypatch.delenv("NOPE_URL", raising=False)
    text = MINIMAL.replace("server_url: mqtt://broker.local:1883", "server_url_env: NOPE_URL")
    text = text.replace("device_id: gw-7", "device_id: ''")
    problems = validate_config(write(tmp_path, text))
    assert problems == [
        "connection.server_url_env (NOPE_URL): environment variable is not set",
        "connection.device_id: must not be empty",
    ]
    ok = write(tmp_path, MINIMAL.replace("/var/lib/app/data.db", str(tmp_path / "app.db")))
    assert validate_config(ok) == [
        f"sqlite-replication.source_db_path: file {str(tmp_path / 'app.db')!r} does not exist"]
    (tmp_path / "app.db").touch()
    assert validate_config(ok) == []


def test_yaml_that_does_not_parse_is_one_line_with_where(tmp_path: Path) -> None:
    """The parser's own text spanned lines and named the file "<unicode string>"; validate
    printed the file's name twice (issue 27)."""
    bad = tmp_path / "bad-indent.yaml"
    bad.write_text("connection:\n  server_url: mqtt://x:1\n device_id: a\n")
    assert validate_config(bad) == [
        f"{bad}: not valid YAML at line 3, column 2: expected <block end>, but found "
        "'<block mapping start>' (while parsing a block mapping from line 1: check the "
        "indentation)"]
    out = subprocess.run([EDGESYNC, "agent", "validate", "--config", str(bad)],
                         capture_output=True, text=True, timeout=60, check=False)
    assert out.stdout.splitlines() == validate_config(bad), out
