"""A service's lifecycle as one state (the agent's ``AgentLifecycle``, the server's
``ServerLifecycle``): the error for an action found in a state it does not fit, naming
the state and what to do instead."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Generic, TypeVar

__all__ = ["OutOfOrder"]

S = TypeVar("S", bound=StrEnum)
E = TypeVar("E", bound=Exception)


@dataclass(frozen=True, slots=True)
class OutOfOrder(Generic[S, E]):
    """How one kind of service says it was used out of order."""

    subject: str  # "the agent"
    error: Callable[[str, str], E]  # (action, reason) → the exception
    fixes: Mapping[S, str]  # what to do instead, by the state an action found

    def misuse(self, state: S, action: str) -> E:
        """The error for ``action`` found in ``state``: what the state is, what to do."""
        return self.error(action, f"{self.subject} is {state.value}; {self.fixes[state]}")

    def require(self, state: S, action: str, *allowed: S) -> None:
        """Raise ``misuse(state, action)`` unless ``state`` is one of ``allowed``."""
        if state not in allowed:
            raise self.misuse(state, action)
