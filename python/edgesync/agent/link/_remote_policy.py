"""The ``sync_policy`` control: the cloud's sync policy for this device, applied without a
restart where the YAML opts in (``sqlite-replication.remote_policy: true``).

The rule (docs/agent.md, "Remote sync policy"):

* ``remote_policy: false`` (the default): the control is acknowledged and logged, nothing
  changes — the local YAML's ``table_strategies`` win.
* ``remote_policy: true``: the policy's ``table_strategies`` replace the YAML's as a
  whole (the YAML's stay the fallback: a control with ``table_strategies: null`` — the
  policy was detached or deleted — puts them back); its ``compression`` and bandwidth
  budget (``max_bytes_per_second``, ``max_bytes_per_day``), each when it gives one,
  replace the YAML's. A control applies only when its
  ``revision`` is above the last one applied, so a late redelivery never undoes a newer
  policy. The applied policy is kept in ``state.db`` and applied again at the next start,
  before anything is captured.

Strategies, compression and budgets are checked by the same rules as the YAML's
(``parse_table_strategies``, ``parse_compression``); a control that breaks them is
logged and changes nothing.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

import orjson

from edgesync.agent._state import StateStore
from edgesync.agent.config import AgentConfig
from edgesync.errors import ConfigError
from edgesync.protocol import (
    BUDGET_KEYS,
    Compression,
    parse_byte_budget,
    parse_compression,
    parse_table_strategies,
    table_strategies_doc,
)

__all__ = ["RemotePolicy"]

log = logging.getLogger("edgesync.agent")

_KEY = "remote_policy"


class RemotePolicy:
    """What the cloud's policy makes of the YAML's configuration."""

    def __init__(self, local: AgentConfig, state: StateStore) -> None:
        self._local = local
        self._state = state

    @property
    def enabled(self) -> bool:
        return self._local.replication.remote_policy

    def _stored(self) -> dict[str, Any] | None:
        raw = self._state.db.execute("SELECT value FROM meta WHERE key = ?",
                                     (_KEY,)).fetchone()
        doc = orjson.loads(raw[0]) if raw is not None else None
        return doc if isinstance(doc, dict) else None

    def config(self) -> AgentConfig:
        """The configuration to run: the YAML's, with the applied policy's strategies,
        compression and budgets."""
        stored = self._stored() if self.enabled else None
        if stored is None:
            return self._local
        rep, conn = self._local.replication, self._local.connection
        try:
            compression, budgets = self._wire(stored)
        except ConfigError as exc:  # stored only after the same check: edited by hand
            log.error("stored remote policy is invalid (%s); using the YAML's", exc)
            return self._local
        if compression is not None:
            rep = dataclasses.replace(rep, compression=compression)
        conn = dataclasses.replace(
            conn, max_bytes_per_second=budgets.get("max_bytes_per_second",
                                                   conn.max_bytes_per_second),
            max_bytes_per_day=budgets.get("max_bytes_per_day", conn.max_bytes_per_day))
        if stored.get("table_strategies") is not None:
            strategies, errors = parse_table_strategies(stored["table_strategies"])
            if errors:
                log.error("stored remote policy is invalid (%s); using the YAML's strategies",
                          errors[0])
                return self._local
            rep = dataclasses.replace(rep, table_strategies=strategies)
        return dataclasses.replace(self._local, replication=rep, connection=conn)

    @staticmethod
    def _wire(doc: dict[str, Any]) -> tuple[Compression | None, dict[str, int]]:
        """The policy's compression (None: the YAML's) and the budgets it gives."""
        raw = doc.get("compression")
        compression = None if raw is None else parse_compression(raw, "compression")
        return compression, {key: parse_byte_budget(doc[key], key) for key in BUDGET_KEYS
                             if doc.get(key) is not None}

    def receive(self, doc: dict[str, Any]) -> bool:
        """Record a ``sync_policy`` control; True when the configuration to run changed."""
        cid, revision = doc.get("control_id"), doc.get("revision")
        name = doc.get("policy_name")
        if not self.enabled:
            log.info("control %s: sync policy %r not applied: remote_policy is off in the "
                     "YAML, whose table_strategies stay in force", cid, name)
            return False
        if not isinstance(revision, int) or isinstance(revision, bool) or revision < 0:
            log.warning("control %s (sync_policy): revision must be a non-negative integer; "
                        "ignored", cid)
            return False
        stored = self._stored()
        if stored is not None and int(stored.get("revision", -1)) >= revision:
            log.info("control %s: sync policy revision %d is not newer than the applied %s; "
                     "ignored", cid, revision, stored.get("revision"))
            return False
        raw = doc.get("table_strategies")
        if raw is not None:
            strategies, errors = parse_table_strategies(raw)
            if errors:
                log.warning("control %s: sync policy %r refused: %s", cid, name, errors[0])
                return False
            raw = table_strategies_doc(strategies)
        try:
            compression, budgets = self._wire(doc)
        except ConfigError as exc:
            log.warning("control %s: sync policy %r refused: %s", cid, name, exc)
            return False
        before = self.config()
        record = {"revision": revision, "policy_id": doc.get("policy_id"),
                  "policy_name": name, "policy_version": doc.get("policy_version"),
                  "table_strategies": raw, "compression": compression, **budgets}
        self._state.set_meta(_KEY, orjson.dumps(record).decode())
        if raw is None:
            log.warning("sync policy detached (revision %d): back to the YAML's "
                        "table_strategies", revision)
        else:
            log.warning("sync policy %r version %s applied (revision %d): %s", name,
                        doc.get("policy_version"), revision,
                        ", ".join(f"{t}={s['strategy']}" for t, s in sorted(raw.items()))
                        or "no tables listed (every table as rows)")
        return self.config() != before
