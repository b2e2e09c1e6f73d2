"""The downlink control inbox in ``state.db``: accept, acknowledge, execute exactly once.

A control is first *accepted*: its id and document are stored (and, with signed
control, its ``sig_seq`` becomes the last accepted one) in one transaction. Only then
is it acknowledged on ``sync/ingest/ack`` and executed, and finally marked executed.
A crash before that transaction leaves the control unknown to the device and
unacknowledged, so the cloud sends it again; a crash after it leaves it accepted but not
executed, which the agent finishes at its next start. A redelivery of an accepted
control is acknowledged again and never executed twice.

Signed controls (``security.signed_control.enabled``) are checked with
``edgesync.protocol.verify_control`` before anything is stored; a failure is logged and
the control is neither acknowledged nor executed. A redelivery of an accepted control
carries a ``sig_seq`` that is no longer new: it is recognised by its id and its valid
signature (expiry aside) and re-acknowledged, not refused as a replay.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson

from edgesync.agent._state import StateStore
from edgesync.errors import ControlRejected
from edgesync.protocol import verify_control

__all__ = ["Accepted", "ControlInbox"]

log = logging.getLogger("edgesync.agent")

_SIG_SEQ_KEY = "last_sig_seq"
# Executed controls kept for recognising redeliveries; older ones are forgotten.
_KEEP_EXECUTED = 10_000


@dataclass(frozen=True, slots=True)
class Accepted:
    control_id: str
    doc: dict[str, Any]
    execute: bool  # False for a redelivery of a control already executed


class ControlInbox:
    def __init__(self, state: StateStore, signing_key: bytes | None) -> None:
        self._state = state
        self._key = signing_key

    @property
    def last_sig_seq(self) -> int:
        return self._state.meta_int(_SIG_SEQ_KEY, 0)

    def accept(self, payload: bytes, now: datetime | None = None) -> Accepted | None:
        """Check and durably record one control; None when it must be ignored."""
        try:
            doc = orjson.loads(payload)
        except orjson.JSONDecodeError:
            log.warning("ignoring a control message that is not JSON (%d bytes)", len(payload))
            return None
        control_id = doc.get("control_id") if isinstance(doc, dict) else None
        if not isinstance(control_id, str) or not control_id:
            log.warning("ignoring a control message without control_id")
            return None
        assert isinstance(doc, dict)
        db = self._state.db
        known = db.execute("SELECT executed FROM controls WHERE control_id=?",
                           (control_id,)).fetchone()
        if self._key is not None and not self._verified(doc, control_id, known is not None,
                                                        now):
            return None
        if known is not None:
            log.info("control %s delivered again; acknowledging it again", control_id)
            return Accepted(control_id, doc, execute=not known[0])
        with self._state.tx():
            db.execute("INSERT INTO controls (control_id, doc, received_at) VALUES (?, ?, ?)",
                       (control_id, payload, _now_text(now)))
            if self._key is not None:
                self._state.set_meta(_SIG_SEQ_KEY, str(doc["sig_seq"]))
        return Accepted(control_id, doc, execute=True)

    def _verified(self, doc: dict[str, Any], control_id: str, known: bool,
                  now: datetime | None) -> bool:
        assert self._key is not None
        try:
            if known:  # a redelivery: same signature, sig_seq already accepted
                verify_control(doc, self._key, last_seq=-(1 << 62), now=now)
            else:
                verify_control(doc, self._key, last_seq=self.last_sig_seq, now=now)
        except ControlRejected as exc:
            if known and exc.reason == "expired":
                return True
            log.warning("control %s refused (%s): %s; not acknowledged, not executed",
                        control_id, exc.reason, exc)
            return False
        return True

    def executed(self, control_id: str) -> None:
        with self._state.tx():
            self._state.db.execute("UPDATE controls SET executed=1 WHERE control_id=?",
                                   (control_id,))
            self._state.db.execute(
                "DELETE FROM controls WHERE executed=1 AND rowid <= "
                "(SELECT max(rowid) FROM controls) - ?", (_KEEP_EXECUTED,))

    def unfinished(self) -> list[Accepted]:
        """Controls accepted before a crash but never executed, oldest first."""
        rows = self._state.db.execute(
            "SELECT control_id, doc FROM controls WHERE executed=0 ORDER BY rowid").fetchall()
        return [Accepted(cid, orjson.loads(doc), execute=True) for cid, doc in rows]


def _now_text(now: datetime | None) -> str:
    return (now or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
