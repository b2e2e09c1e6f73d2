"""The README's "Your own database in 8 commands", run as a newcomer runs it: each command
read from README.md and run through the installed ``edgesync`` command, on the embedded
defaults (no --database-url / --mqtt-url), in a fresh HOME; step 2's ``eval "$(… --format
env)"`` runs in bash, the ids of steps 6 and 7 are copied out of what the listings print.
The only deviation from the README is the ports: the machine's Mosquitto holds 1883 and
8080 may be taken, so serve runs with ``EDGESYNC_EMBEDDED_MQTT_PORT=0 EDGESYNC_API_PORT=0``
and the walkthrough uses the ports serve's "ready" line names (in agent.yaml's server_url
and EDGESYNC_API_URL). Also checks that the README still opens with the two CI commands."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"
SECTION = "## Your own database in 8 commands"
ROWS = [(1, "boiler", 71.5), (2, "pump", 3.25), (3, "valve", None)]


def code_blocks(text: str) -> list[list[str]]:
    return [block.splitlines() for block in re.findall(r"```bash\n(.*?)```", text, re.S)]


def test_readme_opens_with_the_two_ci_commands() -> None:
    first = code_blocks(README.read_text())[0]
    commands = [shlex.split(line, comments=True) for line in first]
    assert [c for c in commands if c][:2] == [["./ci/demo.sh"], ["./ci/test.sh"]], first


@dataclass
class Step:
    number: int
    title: str
    lines: list[str] = field(default_factory=list)
    heredoc: dict[str, str] = field(default_factory=dict)  # file name -> its text


def readme_steps() -> dict[int, Step]:
    """The section's code block, split at its ``# N. title`` comments; a ``cat > F <<'EOF'``
    heredoc is kept as the file it writes."""
    text = README.read_text()
    assert SECTION in text, f"README.md has no {SECTION!r} section"
    block = code_blocks(text.split(SECTION, 1)[1])[0]
    steps: dict[int, Step] = {}
    lines = iter(block)
    for line in lines:
        if (m := re.match(r"# (\d+)\. (.*)", line)):
            steps[int(m[1])] = Step(int(m[1]), m[2])
            continue
        step = steps[max(steps)]
        if (m := re.match(r"cat > (\S+) <<'(\w+)'$", line)):
            body = []
            for inner in lines:
                if inner == m[2]:
                    break
                body.append(inner)
            step.heredoc[m[1]] = "\n".join(body) + "\n"
        else:
            step.lines.append(line)
    assert sorted(steps) == list(range(1, 9)), block
    return steps


def command(line: str) -> list[list[str]]:
    """The commands of one shell line (``a && b``), without its comment and a trailing ``&``."""
    words = shlex.split(line, comments=True)
    if words and words[-1] == "&":
        words = words[:-1]
    out: list[list[str]] = [[]]
    for w in words:
        if w == "&&":
            out.append([])
        else:
            out[-1].append(w)
    return out


def only(step: Step) -> str:
    assert len(step.lines) == 1, step
    return step.lines[0]


def parse_table(text: str) -> list[dict[str, str]]:
    """A table the CLI prints, read by its header's column positions (columns are two
    spaces apart; a header may have words: ROW WRITES)."""
    lines = [line for line in text.splitlines() if line.strip()]
    header = lines[0]
    found = list(re.finditer(r"\S+(?: \S+)*", header))
    starts = [m.start() for m in found]
    names = [m.group() for m in found]
    rows = []
    for line in lines[1:]:
        cells = [line[a:b].strip() for a, b in zip(starts, [*starts[1:], None], strict=True)]
        rows.append(dict(zip(names, cells, strict=True)))
    return rows


def free_of_lookalikes(env: dict[str, str]) -> dict[str, str]:
    """The user's shell: none of the test run's EDGESYNC_* / PG* settings, and no XDG_*
    directories outside the fresh HOME."""
    return {k: v for k, v in env.items() if not k.startswith(("EDGESYNC_", "PG", "XDG_"))}


class Shell:
    """A newcomer's terminal: a fresh HOME, a working directory, exported variables."""

    def __init__(self, home: Path, workdir: Path) -> None:
        self.workdir = workdir
        self.edgesync = Path(sys.executable).parent / "edgesync"
        assert self.edgesync.exists(), f"no installed edgesync command at {self.edgesync}"
        self.env = free_of_lookalikes(dict(os.environ))
        self.env.update(HOME=str(home), XDG_DATA_HOME=str(home / ".local" / "share"),
                        PATH=f"{self.edgesync.parent}{os.pathsep}{os.environ.get('PATH', '')}")
        self.background: list[tuple[subprocess.Popen[str], Path]] = []

    def argv(self, words: list[str]) -> list[str]:
        return [str(self.edgesync), *words[1:]] if words[0] == "edgesync" else words

    def run(self, words: list[str]) -> str:
        done = subprocess.run(self.argv(words), cwd=self.workdir, env=self.env, text=True,
                              capture_output=True, timeout=120, check=False)
        assert done.returncode == 0, (words, done.stdout, done.stderr)
        return done.stdout

    def start(self, words: list[str], log: str) -> Path:
        path = self.workdir / log
        with path.open("w") as out:
            proc = subprocess.Popen(self.argv(words), cwd=self.workdir, env=self.env, text=True,
                                    stdout=out, stderr=subprocess.STDOUT)
        self.background.append((proc, path))
        return path

    def wait_log(self, path: Path, pattern: str, limit: float = 180) -> re.Match[str]:
        deadline = time.monotonic() + limit
        while True:
            text = path.read_text()
            if (m := re.search(pattern, text)):
                return m
            for proc, log in self.background:
                assert proc.poll() is None, f"{proc.args!r} exited:\n{log.read_text()}"
            assert time.monotonic() < deadline, f"{pattern!r} not in {path.name}:\n{text}"
            time.sleep(0.5)

    def rerun_until(self, words: list[str], check: Any, limit: float = 120) -> str:
        """A user re-running a listing until it shows what they wait for."""
        deadline = time.monotonic() + limit
        while True:
            out = self.run(words)
            if check(out):
                return out
            assert time.monotonic() < deadline, (words, out)
            time.sleep(1)

    def stop_all(self) -> list[str]:
        """SIGTERM each background process, newest first (the agent before serve)."""
        problems = []
        for proc, log in reversed(self.background):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=90)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                problems.append(f"{proc.args!r} ignored SIGTERM:\n{log.read_text()}")
                continue
            if proc.returncode != 0:
                problems.append(f"{proc.args!r} exited {proc.returncode}:\n{log.read_text()}")
        return problems


@pytest.fixture
def shell(embedded_dir: Path) -> Iterator[Shell]:
    # embedded_dir, not tmp_path: the embedded PostgreSQL (its own system user under root)
    # must reach its data directory, and pytest keeps tmp_path private.
    home = embedded_dir / "home"
    workdir = home / "plant-app"
    workdir.mkdir(parents=True)
    sh = Shell(home, workdir)
    yield sh
    sh.stop_all()


async def edge_state_tables(url: str) -> list[str]:
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        rows = await conn.fetch("SELECT tablename FROM pg_tables "
                                "WHERE tablename LIKE 'edge\\_state\\_%'")
        return [r["tablename"] for r in rows]
    finally:
        await conn.close()


@pytest.mark.e2e
@pytest.mark.once
@pytest.mark.timeout(900)
def test_your_own_database_in_8_commands(shell: Shell) -> None:
    steps = readme_steps()
    home = Path(shell.env["HOME"])
    with sqlite3.connect(shell.workdir / "app.db") as db:
        db.execute("CREATE TABLE machines (id INTEGER PRIMARY KEY, name TEXT NOT NULL, "
                   "temperature REAL)")
        db.executemany("INSERT INTO machines VALUES (?, ?, ?)", ROWS)
    db.close()

    # 1. serve on the embedded defaults; the ports are the one deviation.
    [serve] = command(only(steps[1]))
    assert serve == ["edgesync", "serve"], steps[1]
    shell.env.update(EDGESYNC_EMBEDDED_MQTT_PORT="0", EDGESYNC_API_PORT="0")
    log = shell.start(serve, "serve.log")
    ready = shell.wait_log(log, r"edgesync serve ready: devices connect to "
                                r"mqtt://127\.0\.0\.1:(\d+); operator commands: "
                                r"EDGESYNC_API_URL=(http://127\.0\.0\.1:\d+); "
                                r"web console: (\S+)")
    broker_port, api_url, console = ready[1], ready[2], ready[3]
    assert not api_url.endswith(":0") and broker_port != "0"
    assert console == f"{api_url}/console"
    # The log prints the psql command of the embedded PostgreSQL, in the user's data dir.
    psql_url = shell.wait_log(log, r"connect with: psql '([^']+)'")[1]
    assert f"host={home}/.local/share/edgesync/" in psql_url, psql_url
    shell.env["EDGESYNC_API_URL"] = api_url

    # 2. bootstrap, its export lines eval'd by the user's shell: the variables after it.
    eval_line = only(steps[2])
    assert eval_line.startswith('eval "$(edgesync admin bootstrap ') and eval_line.endswith(
        '--format env)"'), eval_line
    printed = shell.run(["bash", "-c", f"{eval_line} && env"])
    exported = dict(line.split("=", 1) for line in printed.splitlines() if "=" in line)
    for name in ("EDGESYNC_TOKEN", "EDGESYNC_ORG_ID", "EDGESYNC_PROJECT"):
        assert exported.get(name), (name, printed[-500:])
        shell.env[name] = exported[name]

    # 3. the device; its output shows the root_topic the README's comment promises.
    device_line = only(steps[3])
    [add] = command(device_line)
    promised = re.search(r"# prints (.*)$", device_line)
    assert promised is not None, device_line
    added = shell.run(add)
    assert promised[1] in added, (promised[1], added)
    root_topic = re.search(r"^root_topic:\s+(\S+)$", added, re.M)
    assert root_topic is not None, added

    # 4. agent.yaml as written, with the broker's port.
    [(config_name, config)] = steps[4].heredoc.items()
    assert "mqtt://127.0.0.1:1883 " in config, config
    assert f"root_topic: {root_topic[1]} " in config, (root_topic[1], config)
    (shell.workdir / config_name).write_text(
        config.replace("mqtt://127.0.0.1:1883", f"mqtt://127.0.0.1:{broker_port}"))

    # 5. the agent, from the directory of app.db (source_db_path: ./app.db).
    [agent] = command(only(steps[5]))
    agent_log = shell.start(agent, "agent.log")
    shell.wait_log(agent_log, r"connected to mqtt://")

    # 6. the review of machines' schema, approved by the id the listing shows.
    list_reviews, approve = command(only(steps[6]))
    assert approve[-1] == "REVIEW_ID", steps[6]
    listed = shell.rerun_until(list_reviews, lambda out: any(
        r.get("TABLE") == "machines" for r in parse_table(out)))
    [review] = [r for r in parse_table(listed) if r["TABLE"] == "machines"]
    assert review["STATUS"] == "queued", listed
    approved = shell.run([*approve[:-1], review["ID"]])
    assert approved.startswith("approved"), approved

    # 7. the lineage, once its rows are materialized, and its mirror rows.
    list_lineages, mirror = command(only(steps[7]))
    assert mirror[-1] == "LINEAGE_ID", steps[7]
    lineages = shell.rerun_until(list_lineages, lambda out: any(
        r.get("TABLE") == "machines" and r.get("ROW WRITES") == str(len(ROWS))
        for r in parse_table(out)))
    [lineage] = [r for r in parse_table(lineages) if r["TABLE"] == "machines"]
    assert lineage["STATUS"] == "active" and lineage["STAGED"] == "0", lineages
    shown = parse_table(shell.run([*mirror[:-1], lineage["ID"]]))
    assert [(r["ID"], r["NAME"], r["TEMPERATURE"]) for r in shown] == [
        (str(i), name, "-" if t is None else str(t)) for i, name, t in ROWS], shown
    as_json = json.loads(shell.run([*mirror[:-1], lineage["ID"], "--output", "json"]))
    assert [(r["id"], r["name"], r["temperature"]) for r in as_json["data"]] == ROWS

    # 8. psql with the URL serve logged, the README's form with the host filled in.
    [psql] = command(only(steps[8]))
    assert psql[0] == "psql" and psql[1].endswith("?host=…"), steps[8]
    assert psql[2:] == ["-c", "\\dt edge_*"], steps[8]  # edge_ts_* too, not edge_state_* alone
    assert psql_url.startswith(psql[1].removesuffix("…")), (psql_url, psql[1])
    table = re.compile(r"\bedge_state_\w*_machines\b")
    if shutil.which("psql", path=shell.env["PATH"]):
        out = shell.run([psql[0], psql_url, *psql[2:]])
        assert table.search(out), out
    else:
        tables = asyncio.run(edge_state_tables(psql_url))
        assert any(table.fullmatch(t) for t in tables), tables

    assert shell.stop_all() == []
    # serve stopped its embedded PostgreSQL: no postmaster left in the data dir.
    data = home / ".local" / "share" / "edgesync"
    assert not (data / "postgres" / "postmaster.pid").exists()

