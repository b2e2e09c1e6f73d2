"""The vocabulary of the API's clients, written from the enums that own it.

The console is plain ES modules (nothing is built at install time), so the words it
compares with what the API answers (error codes, statuses) come from a committed module,
``console/js/vocabulary.js``, that this one writes. The TUI and the CLI load no server
package (the TUI's boundary; the CLI runs on an agent-only install), so their words come
the same way from ``edgesync/_vocabulary.py``, a module of the same enums that imports
nothing. ``python -m edgesync.api._vocabulary`` writes both after one of the enums below
changes; ``tests/api/test_console_vocabulary.py`` fails while a committed file differs from
``render()`` / ``render_python()``.
"""

from __future__ import annotations

import enum
from pathlib import Path

from edgesync.api._console import ASSETS
from edgesync.control import ResnapshotStatus, VerificationStatus
from edgesync.errors import ApiErrorCode
from edgesync.governance import (
    ColumnActionKind,
    LineageStatus,
    PauseReason,
    ReplayStatus,
    ReviewStatus,
    SchemaStatus,
    StagingReason,
    SyncAuthority,
)
from edgesync.protocol import Pipeline, StrategyKind
from edgesync.quarantine import QuarantineStatus

__all__ = ["CLIENT_VOCABULARY", "VOCABULARY", "VOCABULARY_JS", "VOCABULARY_PY", "render",
           "render_python"]

VOCABULARY_JS = ASSETS / "js" / "vocabulary.js"
VOCABULARY_PY = Path(__file__).resolve().parents[1] / "_vocabulary.py"

# The enums the console uses, under the names it imports them by.
VOCABULARY: tuple[type[enum.StrEnum], ...] = (
    ApiErrorCode, Pipeline, LineageStatus, PauseReason, SyncAuthority, ReviewStatus, SchemaStatus,
    ColumnActionKind, StrategyKind, ResnapshotStatus, VerificationStatus, QuarantineStatus,
    ReplayStatus,
)


def render() -> str:
    """The text of ``vocabulary.js``: one frozen object per enum, member name → value."""
    parts = ["// Written by `python -m edgesync.api._vocabulary` from the Python enums that own",
             "// these words (edgesync.api._vocabulary names them): do not edit by hand."]
    for vocabulary in VOCABULARY:
        parts.append("")
        parts.append(f"export const {vocabulary.__name__} = Object.freeze({{")
        parts += [f'  {m.name}: "{m.value}",' for m in vocabulary]
        parts.append("});")
    return "\n".join(parts) + "\n"


# The server's words the TUI and the CLI compare with (ApiErrorCode is in errors already).
CLIENT_VOCABULARY: tuple[type[enum.StrEnum], ...] = (
    Pipeline, LineageStatus, PauseReason, SyncAuthority, ReviewStatus, SchemaStatus,
    ColumnActionKind, QuarantineStatus, StagingReason, ReplayStatus,
)


def render_python() -> str:
    """The text of ``edgesync/_vocabulary.py``: the same enums, by member, importing nothing
    but ``enum``."""
    names = sorted(v.__name__ for v in CLIENT_VOCABULARY)
    parts = ['"""The server\'s words the TUI and the CLI compare with what the API answers.',
             "",
             "Written by ``python -m edgesync.api._vocabulary`` from the enums that own them",
             "(edgesync.api._vocabulary names them): do not edit by hand. It imports nothing,",
             'so the TUI and an agent-only install\'s CLI can load it."""',
             "", "from __future__ import annotations", "", "import enum", "",
             "__all__ = [", *(f'    "{n}",' for n in names), "]"]
    for vocabulary in CLIENT_VOCABULARY:
        parts += ["", "", f"class {vocabulary.__name__}(enum.StrEnum):"]
        parts += [f'    {m.name} = "{m.value}"' for m in vocabulary]
    return "\n".join(parts) + "\n"


def _write() -> None:
    VOCABULARY_JS.write_text(render())
    VOCABULARY_PY.write_text(render_python())


if __name__ == "__main__":
    _write()
