"""The console's screens by kind: a screen opens another by asking here for a new one,
not by importing it (fifteen screens importing one another inside functions made one
import circle).

Each screen module registers its screen class under its ``ScreenKind`` with
``@screen(kind)``; the console (``_app``) imports every screen module once, so all are
registered before the first screen opens.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from typing import Any, TypeVar

from textual.screen import Screen

__all__ = ["ScreenKind", "new_screen", "screen", "unregistered"]

S = TypeVar("S", bound=type[Screen[Any]])


class ScreenKind(StrEnum):
    LINEAGES = "lineages"
    LINEAGE_DETAIL = "lineage_detail"
    ROWS = "rows"
    QUARANTINE = "quarantine"
    REVIEWS = "reviews"
    REVIEW_DETAIL = "review_detail"
    APPROVE = "approve"
    EVENTS = "events"
    POLICY = "policy"
    REGISTRY = "registry"
    DEVICES = "devices"


_SCREENS: dict[ScreenKind, Callable[..., Screen[Any]]] = {}


def screen(kind: ScreenKind) -> Callable[[S], S]:
    """Register the decorated screen class as the screen of ``kind``."""
    def register(cls: S) -> S:
        assert kind not in _SCREENS, f"two screens of kind {kind}"
        _SCREENS[kind] = cls
        return cls
    return register


def new_screen(kind: ScreenKind, *args: Any, **kwargs: Any) -> Screen[Any]:
    """A new screen of ``kind``, built with the arguments its class takes."""
    return _SCREENS[kind](*args, **kwargs)


def unregistered() -> set[ScreenKind]:
    """The kinds no imported module registered a screen for (none, once ``_app`` is)."""
    return set(ScreenKind) - _SCREENS.keys()
