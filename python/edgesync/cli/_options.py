"""The options the commands share, and ``command``: one sub-command declared in one call
(its arguments, then the shared groups it takes).

The CLI's modules import only the standard library (and ``edgesync._defaults``,
``edgesync.errors``) at their top: building the parser must not load the packages the
commands use, so that ``edgesync agent`` starts without the cloud side, on a full install
as on an agent-only one. Each command imports what it needs when it runs.
"""

from __future__ import annotations

import argparse
import os
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from edgesync._defaults import DEFAULT_API_URL
from edgesync._vocabulary import StagingReason, SyncAuthority

__all__ = ["ACTION_VERSION", "FLEET_ID", "LINEAGE_ID", "MODE_NOTE", "REVIEW_ID", "STAGING_REASONS",
           "SYNC_AUTHORITIES", "Arg", "api_options", "approval_options", "arg", "command",
           "database_options", "json_or_text", "paging", "server_db_options", "uses_database"]

# The server's words from its clients' copy (edgesync._vocabulary): building the parser
# loads no server package (tests/cli/test_operator_args.py checks they agree).
STAGING_REASONS = tuple(StagingReason)
SYNC_AUTHORITIES = tuple(SyncAuthority)

MODE_NOTE = (
    "Over the HTTP API by default (--api-url / EDGESYNC_API_URL, --token / EDGESYNC_TOKEN, "
    "--org-id / EDGESYNC_ORG_ID, --project / EDGESYNC_PROJECT, a project id). Actions that "
    "take --database-url or --data-dir work on that database directly instead when one of "
    "them is given on the command line (EDGESYNC_DATABASE_URL alone does not switch). "
    "Output: readable tables, or --output json.")
_FORMATTER = argparse.RawDescriptionHelpFormatter


@dataclass(frozen=True, slots=True)
class Arg:
    """One ``add_argument`` call, declared."""

    flags: tuple[str, ...]
    options: dict[str, Any] = field(default_factory=dict)

    def add_to(self, p: Any) -> None:
        p.add_argument(*self.flags, **self.options)


def arg(*flags: str, **options: Any) -> Arg:
    return Arg(flags, options)


LINEAGE_ID = arg("lineage_id", type=uuid.UUID)
REVIEW_ID = arg("review_id", type=uuid.UUID)
ACTION_VERSION = arg("--action-version", type=int, default=None,
                     help="the action_version you last saw (default: the current one)")
FLEET_ID = arg("--fleet-id", default=None,
                help="use the fleet-scoped routes of this fleet (/fleets/{id}/edge/...)")


def json_or_text(text: str) -> Any:
    """An option's VALUE: JSON (42, 1.5, "x", null, true), else the text as a string."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return text


def uses_database(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "database_url", None) or getattr(args, "data_dir", None))


def server_db_options(p: argparse.ArgumentParser) -> None:
    """The database of ``serve`` and of the commands beside it (admin, credentials)."""
    p.add_argument("--database-url", default=os.environ.get("EDGESYNC_DATABASE_URL"),
                   help="PostgreSQL URL (env EDGESYNC_DATABASE_URL); default: the embedded "
                        "PostgreSQL in --data-dir")
    # One setting for serve and the commands beside it (admin, credentials): with a
    # --data-dir of serve's own, `admin bootstrap` had to be given it again.
    p.add_argument("--data-dir", type=Path, default=os.environ.get("EDGESYNC_DATA_DIR"),
                   help="where the embedded PostgreSQL keeps its data (env "
                        "EDGESYNC_DATA_DIR; default: the user data directory, e.g. "
                        "~/.local/share/edgesync)")


def database_options(p: argparse.ArgumentParser) -> None:
    """An operator command's switch from the HTTP API to a database."""
    p.add_argument("--database-url", default=None,
                   help="work on this PostgreSQL directly instead of the HTTP API "
                        "(legacy JSON output)")
    p.add_argument("--data-dir", type=Path, default=None,
                   help="work on the embedded PostgreSQL in this directory directly")


def api_options(p: argparse.ArgumentParser, *, project: bool = True,
                output: bool = True) -> None:
    g = p.add_argument_group("HTTP API")
    g.add_argument("--api-url", default=os.environ.get("EDGESYNC_API_URL", DEFAULT_API_URL),
                   help=f"API base URL (env EDGESYNC_API_URL; default {DEFAULT_API_URL})")
    g.add_argument("--token", default=os.environ.get("EDGESYNC_TOKEN"),
                   help="API token (env EDGESYNC_TOKEN)")
    g.add_argument("--org-id", default=os.environ.get("EDGESYNC_ORG_ID"),
                   help="organization id for the ORG-ID header (env EDGESYNC_ORG_ID)")
    if project:
        g.add_argument("--project", default=None,
                       help="project id, name or topic slug (env EDGESYNC_PROJECT)")
    if output:
        g.add_argument("--output", "-o", choices=["table", "json"], default=None,
                       help="table (default over the API) or json (default with "
                            "--database-url)")


def approval_options(p: argparse.ArgumentParser) -> None:
    """--map, --auto-map and --mirror-all, of device and registry approvals."""
    p.add_argument("--map", action="append", default=[], metavar="COL=DATA_POINT",
                   help="send COL's values to a data point (its id, or its name over the API) "
                        "instead of a column; repeatable")
    p.add_argument("--auto-map", action="append", default=[], metavar="COL[:NAME]",
                   help="like --map, to a data point created (or reused) for it, named NAME "
                        "or COL; needs policy allow_auto_create_device_data_points; "
                        "repeatable")
    p.add_argument("--mirror-all", action="store_true",
                   help="ignore the review's suggested actions: a column no flag or file "
                        "names is mirrored under its own name (the API's default)")


def paging(p: argparse.ArgumentParser) -> None:
    p.add_argument("--page", type=int, default=None, help="1-based page (default 1)")
    p.add_argument("--limit", type=int, default=None, help="items per page (default 50)")


def command(parent: Any, name: str, help_: str, description: str, *args: Arg,
            fleet: bool = False, pages: bool = False, database: bool = False,
            api: bool = True) -> argparse.ArgumentParser:
    """An operator sub-command: its own arguments in order, then ``--fleet-id``, the page
    options, the database switch and the HTTP API options, each when asked for."""
    p: argparse.ArgumentParser = parent.add_parser(
        name, help=help_, description=description, epilog=MODE_NOTE, formatter_class=_FORMATTER)
    for a in args:
        a.add_to(p)
    if fleet:
        FLEET_ID.add_to(p)
    if pages:
        paging(p)
    if database:
        database_options(p)
    if api:
        api_options(p)
    return p
