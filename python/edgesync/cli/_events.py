"""``edgesync events watch``: a project's governance events as JSON lines (SSE)."""

from __future__ import annotations

import argparse
import os
from typing import Any

from edgesync._defaults import DEFAULT_API_URL

__all__ = ["add_events_parser", "watch"]


def add_events_parser(sub: Any) -> None:
    events = sub.add_parser("events", help="follow governance events through the HTTP API",
                            description="Follow a project's governance events (SSE).")
    esub = events.add_subparsers(dest="events_command", required=True, metavar="ACTION")
    watch_ = esub.add_parser("watch", help="print each event as a JSON line",
                             description="Print a project's events as JSON lines until "
                                         "stopped.")
    watch_.add_argument("--project", required=True, help="project id (UUID)")
    watch_.add_argument("--api-url", default=os.environ.get("EDGESYNC_API_URL", DEFAULT_API_URL),
                        help="API base URL (env EDGESYNC_API_URL; default "
                             "http://127.0.0.1:8080)")
    watch_.add_argument("--token", default=os.environ.get("EDGESYNC_TOKEN"),
                        help="API token (env EDGESYNC_TOKEN)")
    watch_.add_argument("--org-id", default=os.environ.get("EDGESYNC_ORG_ID"),
                        help="organization id for the ORG-ID header (env EDGESYNC_ORG_ID)")
    watch_.add_argument("--after", type=int, default=None,
                        help="start after this event id (default: only new events)")
    watch_.add_argument("--max-events", type=int, default=None,
                        help="exit after printing this many events")


def watch(args: argparse.Namespace) -> int:
    from edgesync.api._watch import watch_events

    try:
        return watch_events(args.api_url, token=args.token, org_id=args.org_id,
                            project_id=args.project, after=args.after,
                            max_events=args.max_events)
    except KeyboardInterrupt:
        return 0
