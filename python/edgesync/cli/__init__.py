"""The ``edgesync`` command line: one module per command family, each with its parser
and what its commands do (over the HTTP API, on the database directly, or on the device).

Building the parser loads only the standard library (``_options`` says why); each command
imports the packages it uses when it runs. Importing this package loads nothing more than
``sys``: the console script imports it before ``main`` can catch a Ctrl-C, so everything
else is imported inside ``main``."""

from __future__ import annotations

import sys
import typing

# Only modules and ``main`` are bound here (tests/architecture/test_public_names.py).
if typing.TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    try:
        from edgesync.cli._main import run

        return run(argv)
    except KeyboardInterrupt:
        # Ctrl-C before the command installed its own handler (imports, parsing, the
        # event loop starting): nothing was started, so a quiet stop is the whole story.
        sys.stderr.write("edgesync: interrupted\n")
        return 130


def _parser() -> argparse.ArgumentParser:
    """The parser of every command, for tests and tools that inspect the commands."""
    from edgesync.cli._main import parser

    return parser()
