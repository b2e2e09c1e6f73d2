"""The question a destructive command asks before it acts (unless ``--yes``)."""

from __future__ import annotations

import sys

__all__ = ["confirm"]


class _Declined(Exception):
    """The operator answered no: the command stops, having changed nothing. Not an error
    of ``edgesync.errors``: nothing went wrong; ``_api.run_api_command``, the one place
    that catches it, says so in its own words. Private to the CLI's package."""


def confirm(question: str) -> None:
    """Ask ``question [y/N]`` on standard error; raise ``_Declined`` unless the answer is
    y or yes."""
    sys.stderr.write(f"{question} [y/N] ")
    sys.stderr.flush()
    if sys.stdin.readline().strip().lower() not in ("y", "yes"):
        raise _Declined()
