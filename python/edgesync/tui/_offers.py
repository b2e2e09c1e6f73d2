"""The lineage detail's **Recovery** section: what the API offers now
(``recovery_offers``: a re-snapshot after a capture gap, a verification after the
lineage was re-created; docs/recovery.md) with ``a`` to take the first one after a
confirmation, and the newest re-snapshot and verification."""

from __future__ import annotations

from datetime import UTC, datetime
from functools import partial
from typing import TYPE_CHECKING, Any

from rich.text import Text

from edgesync.tui._confirm import ConfirmScreen
from edgesync.tui._format import short_time

if TYPE_CHECKING:
    from edgesync.tui._lineage_detail import LineageDetailScreen

__all__ = ["recovery_text", "take_offer"]

# The console is an HTTP client: the API's vocabulary (control.RecoveryAction,
# control.OfferReason) spelled out, as the CLI does.
_ACTION_WORDS = {"resnapshot": "re-snapshot the whole table", "verify": "verify the table"}
_REASON_WORDS = {"capture_gap": "capture gap",
                 "recreated_after_delete": "re-created after a delete"}


def _since(ms: int) -> str:
    return short_time(datetime.fromtimestamp(ms / 1000, UTC).isoformat())


def recovery_text(lineage: dict[str, Any]) -> Text:
    out = Text()
    offers = lineage.get("recovery_offers") or []
    for i, o in enumerate(offers):
        gap = f" {o['gap_id']}" if o.get("gap_id") is not None else ""
        out.append(f"offered: {_ACTION_WORDS.get(o['action'], o['action'])}",
                   style="bold yellow")
        out.append(f" — {_REASON_WORDS.get(o['reason'], o['reason'])}{gap}, since "
                   f"{_since(o['since_ms'])}\n", style="yellow")
        out.append(f"{o['detail']}\n")
        if i == 0:
            out.append("a takes it\n", style="italic")
    if not offers:
        out.append("nothing offered\n", style="green")
    recovery = lineage.get("recovery") or {}
    res, ver = recovery.get("resnapshot"), recovery.get("verification")
    out.append("last re-snapshot: " + (
        f"{res['status']} · rows {res['rows_sent']} · chunks {res['chunks']} · requested "
        f"{short_time(res['created_at'])}" if res else "none") + "\n")
    out.append("last verification: " + (
        f"{ver['status']} · device rows {ver['device_rows']} · cloud rows "
        f"{ver['cloud_rows']} · requested {short_time(ver['created_at'])}" if ver else "none"))
    return out


def take_offer(screen: LineageDetailScreen, lineage: dict[str, Any]) -> None:
    """Ask, then take the first offer (``POST …/resnapshot`` whole table, or
    ``…/verify``)."""
    offers = lineage.get("recovery_offers") or []
    if not offers:
        screen.say("nothing is offered for this lineage", error=True)
        return
    offer = offers[0]
    name = f"{lineage['device_name']} / {lineage['source_table']}"
    question = (f"{_ACTION_WORDS.get(offer['action'], offer['action']).capitalize()} of "
                f"{name} now?\n\n{offer['detail']}")

    def answered(yes: bool | None) -> None:
        if yes:
            screen.spawn(partial(_take, screen, str(offer["action"])))
        else:
            screen.say("cancelled")

    screen.app.push_screen(ConfirmScreen(question), answered)


async def _take(screen: LineageDetailScreen, action: str) -> None:
    lid = screen.lineage_id
    if action == "resnapshot":
        job = await screen.call(screen.api.resnapshot, lid)
        what = "re-snapshot"
    else:
        job = await screen.call(screen.api.verify, lid)
        what = "verification"
    if job is not None:
        screen.say(f"{what} requested ({job['id']}); the offer is back if it does not succeed")
        await screen.reload()
