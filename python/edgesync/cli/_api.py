"""The run of an operator command over the HTTP API: the context (client, project,
output), the family's runner, and how a refusal or a declined confirmation ends."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import IO

from edgesync.cli import (
    _data_points,
    _devices,
    _lineages,
    _policy,
    _registry,
    _reviews,
    _sync_policies,
)
from edgesync.cli._confirm import _Declined
from edgesync.cli._context import Ctx
from edgesync.cli._format import print_json
from edgesync.client import ApiClientError

__all__ = ["run_api_command"]

_RUNNERS: dict[str, Callable[[Ctx], None]] = {
    "lineages": _lineages.run_api, "reviews": _reviews.run_api, "policy": _policy.run_api,
    "devices": _devices.run_api, "registry": _registry.run_api,
    "data-points": _data_points.run_api, "sync-policies": _sync_policies.run_api}


def run_api_command(args: argparse.Namespace, out: IO[str] | None = None) -> int:
    """Run one operator command over the API; 0 on success, 1 when a confirmation was
    declined. API errors raise ``ApiClientError`` (after printing the error envelope on
    stdout with ``--output json``)."""
    out = out or sys.stdout
    if args.output is None:
        args.output = "table"
    ctx = Ctx(args, out)
    try:
        _RUNNERS[args.command](ctx)
    except _Declined:
        sys.stderr.write("edgesync: not deleted\n")
        return 1
    except ApiClientError as exc:
        if ctx.json:
            print_json({"error": {"code": exc.code, "message": exc.message,
                                  "field": exc.field, "status": exc.status,
                                  **({"refusals": list(exc.refusals)} if exc.refusals else {})}},
                       out)
        else:
            # A refused approval: every refused column with its fix, not only the first.
            for r in exc.refusals:
                sys.stderr.write(f"refused: {r['source_column_name'] or 'column_actions'}: "
                                 f"{r['code']}: {r['detail']}; fix: {r['fix']}\n")
        raise
    finally:
        ctx.client.close()
    return 0
