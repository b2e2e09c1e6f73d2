"""``edgesync serve`` mistakes end in one line naming the option and the fix (issue 12),
found before the embedded PostgreSQL starts, and Ctrl-C at any moment of start-up is a
clean exit with no traceback."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

EDGESYNC = shutil.which("edgesync", path=str(Path(sys.executable).parent)) or "edgesync"
PEM_HINT = "give the path of a PEM file"


def serve(data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": str(data.parent)}
    return subprocess.run([EDGESYNC, "serve", "--data-dir", str(data), *args],
                          capture_output=True, text=True, timeout=120, check=False, env=env)


def one_line_error(out: subprocess.CompletedProcess[str], data: Path) -> str:
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr
    lines = out.stderr.splitlines()
    assert len(lines) == 1, out.stderr
    assert not (data / "postgres").exists(), "the embedded PostgreSQL was started"
    return lines[0]


@pytest.fixture
def listening() -> Iterator[int]:
    """A port some other process holds."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        yield int(sock.getsockname()[1])


@pytest.fixture
def pem(tmp_path: Path) -> dict[str, Path]:
    key, cert, other = tmp_path / "k.pem", tmp_path / "c.pem", tmp_path / "other-k.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
                    str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=t"],
                   check=True, capture_output=True)
    subprocess.run(["openssl", "genrsa", "-out", str(other), "2048"], check=True,
                   capture_output=True)
    text = tmp_path / "not-pem.txt"
    text.write_text("hello\n")
    return {"key": key, "cert": cert, "other_key": other, "text": text}


URL_CASES = [
    (["--database-url", "notaurl"],
     "edgesync: error: --database-url: 'notaurl' is not a URL; use "
     "postgresql://user:password@host:5432/dbname"),
    (["--database-url", "mysql://root@localhost/app"],
     "edgesync: error: --database-url: scheme 'mysql' not supported: edgesync keeps its data "
     "in PostgreSQL; use postgresql://user:password@host:5432/dbname"),
    (["--database-url", "postgresql://h:99999/x"],
     "edgesync: error: --database-url: not a PostgreSQL URL: 'postgresql://h:99999/x' (Port "
     "out of range 0-65535); use postgresql://user:password@host:5432/dbname"),
    (["--mqtt-url", "http://broker"],
     "edgesync: error: --mqtt-url: scheme 'http' not supported; use tcp://, mqtt://, ssl:// "
     "or mqtts://"),
    (["--mqtt-url", "mqtt://127.0.0.1:1883, http://broker"],  # every node of a cluster
     "edgesync: error: --mqtt-url: scheme 'http' not supported; use tcp://, mqtt://, ssl:// "
     "or mqtts://"),
    (["--mqtt-url", "mqtt://127.0.0.1:1883", "--amqp-url", "amqp://127.0.0.1,mqtt://x"],
     "edgesync: error: --amqp-url: scheme 'mqtt' not supported; use "
     "amqp://user:password@host:5672/vhost or amqps://"),
    (["--mqtt-ca", "/missing.pem", "--mqtt-url", "mqtts://127.0.0.1:8883"],
     f"edgesync: error: --mqtt-ca: file '/missing.pem' does not exist; {PEM_HINT}"),
    (["--mqtt-cert", "/missing.pem", "--mqtt-key", "/missing-key.pem", "--mqtt-url",
      "mqtts://127.0.0.1"],
     f"edgesync: error: --mqtt-cert: file '/missing.pem' does not exist; {PEM_HINT}"),
    (["--api-port", "99999"],
     "edgesync: error: --api-port: 99999 is not a TCP port; give 1 to 65535 (0 picks a free "
     "one)"),
]


@pytest.mark.parametrize(("args", "message"), URL_CASES)
def test_bad_option_is_one_line_before_postgres(embedded_dir: Path, args: list[str],
                                                message: str) -> None:
    data = embedded_dir / "data"
    assert one_line_error(serve(data, *args), data) == message


def test_tls_files_that_are_not_pem(embedded_dir: Path, pem: dict[str, Path]) -> None:
    data = embedded_dir / "data"
    tls = ["--mqtt-url", "mqtts://127.0.0.1:8883"]
    text, cert, key, other = pem["text"], pem["cert"], pem["key"], pem["other_key"]
    cases = [
        (["--mqtt-ca", str(text)],
         f"--mqtt-ca: '{text}' holds no PEM CA certificate (NO_CERTIFICATE_OR_CRL_FOUND)"),
        (["--mqtt-key", str(key)],
         "--mqtt-cert: required with --mqtt-key (mTLS needs the client certificate and its "
         "key)"),
        (["--mqtt-cert", str(cert), "--mqtt-key", str(other)],
         f"--mqtt-key: '{other}' is not the private key of the certificate '{cert}'"),
        (["--mqtt-cert", str(cert), "--mqtt-key", str(cert / "nope")],
         f"--mqtt-key: file '{cert / 'nope'}' does not exist; {PEM_HINT}"),
    ]
    for args, message in cases:
        line = one_line_error(serve(data, *tls, *args), data)
        assert line == f"edgesync: error: {message}"
    # A certificate without its key: the message says which option gives the key.
    line = one_line_error(serve(data, *tls, "--mqtt-cert", str(cert)), data)
    assert line.startswith(f"edgesync: error: --mqtt-cert: '{cert}' is not a PEM certificate "
                           "followed by its private key (")
    assert line.endswith("); give the key with --mqtt-key")


def test_api_port_in_use(embedded_dir: Path, listening: int) -> None:
    data = embedded_dir / "data"
    line = one_line_error(serve(data, "--embedded-mqtt-port", "0", "--api-port", str(listening)),
                          data)
    assert line == (f"edgesync: error: --api-port: 127.0.0.1:{listening} is already in use; "
                    "stop the other process (another edgesync serve?) or choose another "
                    "port with --api-port (0 picks a free one)")


def test_embedded_broker_port_in_use(embedded_dir: Path, listening: int) -> None:
    data = embedded_dir / "data"
    line = one_line_error(serve(data, "--api-port", "0", "--embedded-mqtt-port",
                                str(listening)), data)
    assert line == (f"edgesync: error: --embedded-mqtt-port: 127.0.0.1:{listening} is already "
                    "in use; give another port (0 picks a free one), or --mqtt-url for the "
                    "broker already listening there")


@pytest.mark.once
@pytest.mark.parametrize("delay", [0.3, 0.8, 1.5, 3.0])
def test_ctrl_c_during_start_up_is_a_clean_exit(embedded_dir: Path, delay: float) -> None:
    """SIGINT to the whole process group, as a terminal's Ctrl-C sends it: it reaches
    initdb/pg_ctl too. Whatever start-up was doing (imports, initdb, migrations, binding),
    the exit is quiet: no traceback, no dump of the embedded PostgreSQL's output."""
    data = embedded_dir / f"data-{delay}"
    env = {**os.environ, "HOME": str(embedded_dir), "EDGESYNC_LOG_LEVEL": "WARNING"}
    proc = subprocess.Popen([EDGESYNC, "serve", "--data-dir", str(data), "--api-port", "0",
                             "--embedded-mqtt-port", "0"], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=env,
                            start_new_session=True)
    try:
        time.sleep(delay)
        os.killpg(proc.pid, signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert "Traceback" not in out
    assert "ERROR" not in out, out
    # 130: stopped before the command had started; 0: stopped by the command's own handler.
    assert proc.returncode in (0, 130), out
    assert out in ("", "edgesync: interrupted\n"), out


@pytest.mark.parametrize(("env", "kind"), [
    ("EDGESYNC_AMQP_PREFETCH", "int"), ("EDGESYNC_INGEST_LANES", "int"),
    ("EDGESYNC_INGEST_GROUP_MAX", "int"), ("EDGESYNC_API_PORT", "int"),
    ("EDGESYNC_PROGRESS_INTERVAL", "float")])
def test_a_number_from_the_environment_that_is_no_number_is_a_usage_error(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], env: str,
        kind: str) -> None:
    from edgesync.cli._main import parser

    monkeypatch.setenv(env, "two")
    with pytest.raises(SystemExit) as exit_:
        parser().parse_args(["serve"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert f"invalid {kind} value: 'two'" in err.splitlines()[-1]
