"""The agent's lifecycle: one state (``Agent.lifecycle``), not attributes that stay
None until something has been opened.

    NEW ──async with──▶ OPENING ──▶ OPEN ──run()──▶ RUNNING
                           │          ▲               │ (run() cancelled)
                           │          └───────────────┘
                           │ (opening failed)    │ leaving the block
                           ▼                     ▼
                        CLOSED ◀──────────── STOPPING

An ``Agent`` is opened once (like an httpx client): entering it again, or calling
``flush()`` or ``run()`` outside its ``async with`` block, or ``run()`` while another
``run()`` is going, raises ``AgentLifecycleError`` saying what to do instead.
"""

from __future__ import annotations

from enum import StrEnum

from edgesync._lifecycle import OutOfOrder
from edgesync.errors import AgentLifecycleError

__all__ = ["AgentLifecycle", "misuse", "require"]


class AgentLifecycle(StrEnum):
    NEW = "new"              # built; nothing opened
    OPENING = "opening"      # entering: the lock, the databases, the MQTT link
    OPEN = "open"            # inside ``async with``: flush() works
    RUNNING = "running"      # run() is flushing every flush_interval
    STOPPING = "stopping"    # leaving: the last status report, the link stopped
    CLOSED = "closed"        # databases closed, locks released; not opened again


# What to do instead, by the state an action found.
_RULES = OutOfOrder("the agent", AgentLifecycleError, {
    AgentLifecycle.NEW: "use it inside `async with Agent(config) as agent:`",
    AgentLifecycle.OPENING: "wait until `async with Agent(config)` has entered",
    AgentLifecycle.OPEN: "it is open already; enter an Agent once",
    AgentLifecycle.RUNNING: "its run() is going; one `async with` and one run() per agent "
                            "(cancel run() before starting another)",
    AgentLifecycle.STOPPING: "the agent is leaving its `async with` block; make a new "
                             "Agent(config)",
    AgentLifecycle.CLOSED: "an Agent is opened once; make a new Agent(config)",
})
misuse = _RULES.misuse
require = _RULES.require
