"""``edgesync agent [run|validate|status]``: the device side, which must run on an install
without the server extra (nothing here imports a cloud module)."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

__all__ = ["add_agent_parser", "run_agent_command"]

_log = logging.getLogger("edgesync")


def add_agent_parser(sub: Any) -> None:
    agent = sub.add_parser(
        "agent", help="run the device agent (or validate its configuration, or show its status)",
        description="Run the device agent: journal SQLite changes with triggers and publish "
                    "them over MQTT. 'edgesync agent validate --config F' only checks F; "
                    "'edgesync agent status --config F' shows what its state.db says (running "
                    "or not, the last status report, per-table backlog).")
    agent.add_argument("action", nargs="?", choices=["run", "validate", "status"],
                       default="run",
                       help="run (default), validate the configuration without connecting, "
                            "or status")
    agent.add_argument("--config", type=Path, required=True, help="agent YAML file")
    agent.add_argument("--output", "-o", choices=["table", "json"], default="table",
                       help="status: table (default) or json")


def run_agent_command(args: argparse.Namespace) -> int:
    if args.action == "validate":
        return _validate(args.config)
    if args.action == "status":
        return _status(args.config, args.output)
    from edgesync._runtime import run_until_signal

    run_until_signal(_run(args.config))
    return 0


def _validate(path: Path) -> int:
    from edgesync.agent import validate_config

    problems = validate_config(path)
    for problem in problems:
        # A problem of the file itself names it already (not "f.yaml: f.yaml: …").
        print(problem if problem.startswith(f"{path}: ") else f"{path}: {problem}")
    if not problems:
        print(f"{path}: OK")
    return 1 if problems else 0


def _status(path: Path, output: str) -> int:
    """``edgesync agent status``: the device's own view, from its state.db."""
    import orjson

    from edgesync.agent import device_status, load_config, write_status

    status = device_status(load_config(path).replication.state_db_path)
    if output == "json":
        sys.stdout.write(orjson.dumps(status, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        write_status(status, sys.stdout)
    return 0


async def _run(path: Path) -> None:
    from edgesync._version import version
    from edgesync.agent import Agent, load_config

    config = load_config(path)
    # Logged once it opened: an agent refused at the start says only why (the CLI's
    # one-line error), not "starting" and "stopped" around it.
    async with Agent(config) as agent:
        _log.info("edgesync %s agent started: device %s, source %s, broker %s", version(),
                  config.connection.device_id, config.replication.source_db_path,
                  ", ".join(str(url) for url in config.connection.brokers))  # no password
        try:
            await agent.run()
        finally:
            _log.info("edgesync agent stopped")
