"""The commands that work on the database directly (``admin``, the credentials commands,
and ``devices``/``lineages``/``reviews`` given ``--database-url`` or ``--data-dir``):
which database, and the run of one command on it."""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgesync.errors import ConfigError

if TYPE_CHECKING:
    from edgesync.store import Conn

__all__ = ["print_table_of", "run_on_database"]


def _database(args: argparse.Namespace) -> tuple[str | None, Path]:
    """The database a database-direct command works on: --database-url, else the embedded
    PostgreSQL of --data-dir, else the one ``edgesync serve`` keeps in the default data
    directory. Never a new embedded server: a typo'd or forgotten option would otherwise
    start an empty database and issue credentials nobody's broker knows."""
    from edgesync.server import default_data_dir
    from edgesync.store import check_database_url

    if args.database_url:
        check_database_url(args.database_url, "--database-url")
    if args.database_url or args.data_dir:
        return args.database_url, args.data_dir or default_data_dir()
    data_dir = default_data_dir()
    if not (data_dir / "postgres").is_dir():
        raise ConfigError("--database-url", "no database to work on: give --database-url URL, "
                          "or --data-dir DIR where `edgesync serve` keeps its embedded "
                          f"PostgreSQL (there is none in the default {data_dir})")
    return None, data_dir


async def run_on_database(run: Callable[[Conn, argparse.Namespace], Awaitable[Any]],
                          args: argparse.Namespace) -> Any:
    """Open the command's database and run the command (``run``) on one connection."""
    from edgesync.store import open_database

    async with open_database(*_database(args)) as pool, pool.acquire() as conn:
        return await run(conn, args)


def print_table_of(result: Any) -> None:
    """``--output table`` for the database-direct commands."""
    import sys

    from edgesync.cli._format import print_fields, print_table

    if isinstance(result, list):
        keys = list(dict.fromkeys(k for r in result for k in r if k != "diff"))
        print_table(result, [(k, k) for k in keys], sys.stdout)
    else:
        print_fields(result, [k for k in result if k != "diff"], sys.stdout)
