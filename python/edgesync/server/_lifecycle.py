"""The server's lifecycle: one state (``Server.lifecycle``), as the agent's, not a dozen
attributes that stay None until the server has been entered.

    NEW ──async with──▶ OPENING ──▶ OPEN ──run()──▶ RUNNING
                           │          ▲               │ (run() ended or cancelled)
                           │          └───────────────┘
                           │ (opening failed)    │ leaving the block
                           ▼                     ▼
                        CLOSED ◀──────────── STOPPING

What an open server is made of (its pool, pipeline, broker sessions, API…) is one
``_Parts`` built whole at the end of entering; reading a part before then raises
``ServerLifecycleError`` saying what to do instead.
"""

from __future__ import annotations

from enum import StrEnum

from edgesync._lifecycle import OutOfOrder
from edgesync.errors import ServerLifecycleError

__all__ = ["ServerLifecycle", "misuse", "require"]


class ServerLifecycle(StrEnum):
    NEW = "new"              # built; nothing opened
    OPENING = "opening"      # entering: the database, the broker, the API socket
    OPEN = "open"            # inside ``async with``: its parts can be read
    RUNNING = "running"      # run() is running the background loops
    STOPPING = "stopping"    # leaving: closing what entering opened
    CLOSED = "closed"        # everything closed; not entered again


# What to do instead, by the state an action found.
_RULES = OutOfOrder("the server", ServerLifecycleError, {
    ServerLifecycle.NEW: "use it inside `async with Server(settings) as server:`",
    ServerLifecycle.OPENING: "wait until `async with Server(settings)` has entered",
    ServerLifecycle.OPEN: "it is open already; enter a Server once",
    ServerLifecycle.RUNNING: "its run() is going; one run() per server",
    ServerLifecycle.STOPPING: "the server is leaving its `async with` block; make a new "
                              "Server(settings)",
    ServerLifecycle.CLOSED: "a Server is entered once; make a new Server(settings)",
})
misuse = _RULES.misuse
require = _RULES.require
