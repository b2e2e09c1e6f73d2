"""``edgesync tui``: the operator console in the terminal (docs/tui.md)."""

from __future__ import annotations

import argparse
from typing import Any

from edgesync.cli._options import api_options

__all__ = ["add_tui_parser", "run"]


def add_tui_parser(sub: Any) -> None:
    tui = sub.add_parser(
        "tui", help="the operator console in the terminal (lineages, reviews, rows)",
        description="The operator console (docs/tui.md): lineages, their staged and written "
                    "rows, schema reviews with per-column approval. A client of the HTTP API "
                    "with the same settings as the other operator commands.")
    api_options(tui, output=False)


def run(args: argparse.Namespace) -> int:
    from edgesync.tui import run_tui

    return run_tui(args)
