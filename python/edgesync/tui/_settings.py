"""Where the console connects: the operator CLI's settings (flags, else environment)."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass

from edgesync.client import DEFAULT_API_URL

__all__ = ["TuiSettings"]


@dataclass(frozen=True)
class TuiSettings:
    api_url: str = DEFAULT_API_URL
    token: str | None = None
    org_id: str | None = None
    project: str | None = None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> TuiSettings:
        return cls(api_url=args.api_url or DEFAULT_API_URL, token=args.token or None,
                   org_id=args.org_id or None,
                   project=args.project or os.environ.get("EDGESYNC_PROJECT") or None)

    def problems(self) -> list[str]:
        """What is missing, one line each naming the flag and the variable."""
        missing = []
        if not self.token:
            missing.append("--token / EDGESYNC_TOKEN: an API token (edgesync admin bootstrap "
                           "prints one)")
        if not self.org_id:
            missing.append("--org-id / EDGESYNC_ORG_ID: the organization id (org_id)")
        if not self.project:
            missing.append("--project / EDGESYNC_PROJECT: the project id (project_id)")
        return missing
