"""The web console's vocabulary, written from the enums that own it.

The console is plain ES modules (nothing is built at install time), so the words it
compares with what the API answers (error codes, statuses) come from a committed module,
``console/js/vocabulary.js``, that this one writes: ``python -m edgesync.api._vocabulary``
after changing one of the enums below. ``tests/api/test_console_vocabulary.py`` fails while
the committed file differs from ``render()``.
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
    ReviewStatus,
    SchemaStatus,
    SyncAuthority,
)
from edgesync.protocol import Pipeline, StrategyKind
from edgesync.quarantine import QuarantineStatus

__all__ = ["VOCABULARY", "VOCABULARY_JS", "render"]

VOCABULARY_JS = ASSETS / "js" / "vocabulary.js"

# The enums the console uses, under the names it imports them by.
VOCABULARY: tuple[type[enum.StrEnum], ...] = (
    ApiErrorCode, Pipeline, LineageStatus, PauseReason, SyncAuthority, ReviewStatus, SchemaStatus,
    ColumnActionKind, StrategyKind, ResnapshotStatus, VerificationStatus, QuarantineStatus,
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


def _write(path: Path = VOCABULARY_JS) -> None:
    path.write_text(render())


if __name__ == "__main__":
    _write()
