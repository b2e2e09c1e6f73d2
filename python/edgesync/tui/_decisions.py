"""Decisions an operator revisits on a lineage after its approval (docs/recovery.md):
its ``sync_authority``, and the rows of rejected schema versions replayed under the
approved one when compatible. Both ask first, saying what will happen."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

from edgesync._vocabulary import SyncAuthority
from edgesync.client import ApiClientError
from edgesync.errors import ApiErrorCode
from edgesync.tui._confirm import ConfirmScreen

if TYPE_CHECKING:
    from edgesync.tui._lineage_detail import LineageDetailScreen

__all__ = ["change_authority", "replay_rejected", "replay_words"]

_PENDING = frozenset({ApiErrorCode.CONFLICT})
_WHAT = {
    "cloud_authoritative": "the cloud may write rows back (w, then e or +); rows written so "
                           "far carry no cloud version, so the device's changes still win "
                           "until the cloud writes a key",
    "device_authoritative": "write-back is refused from now on and the cloud forgets its "
                            "row versions: the device's changes win by newer-wins alone",
}


def change_authority(screen: LineageDetailScreen, lineage: dict[str, Any]) -> None:
    new = (SyncAuthority.DEVICE
           if lineage["sync_authority"] == SyncAuthority.CLOUD
           else SyncAuthority.CLOUD)

    def answered(yes: bool | None) -> None:
        if yes:
            screen.spawn(partial(_set_authority, screen, new, False))
        else:
            screen.say("sync authority unchanged")

    screen.app.push_screen(ConfirmScreen(f"Make {lineage['source_table']} {new}?\n\n"
                                         f"{_WHAT[new]}."), answered)


async def _set_authority(screen: LineageDetailScreen, new: str, force: bool) -> None:
    try:
        out = await screen.call(screen.api.set_sync_authority, screen.lineage_id, new,
                                force=force, raise_codes=_PENDING)
    except ApiClientError as exc:
        if force or "force" not in exc.message:
            screen.say(f"{exc.code}: {exc.message}", error=True)
            return

        def forced(yes: bool | None) -> None:
            if yes:
                screen.spawn(partial(_set_authority, screen, new, True))
            else:
                screen.say("sync authority unchanged: state_write controls are pending")

        screen.app.push_screen(ConfirmScreen(f"{exc.message}\n\nSwitch anyway?"), forced)
        return
    if out is None:
        return
    await screen.reload()
    screen.say(f"sync authority: {out['sync_authority']} (was {out['previous']}; "
               f"{out['cloud_versions_cleared']} cloud row versions forgotten)")


def replay_words(result: dict[str, Any]) -> list[str]:
    """One line per rejected version: compatible or why not, and its staged rows."""
    lines = []
    for v in result["versions"]:
        head = f"{v['schema_hash'][:12]}… {v['staged_rows']} rows in {v['staged_batches']} " \
               "batches: "
        lines.append(head + ("replayable" if v["compatible"]
                             else "not compatible — " + "; ".join(v["reasons"])))
    return lines


async def replay_rejected(screen: LineageDetailScreen, lineage: dict[str, Any]) -> None:
    check = await screen.call(screen.api.replay_rejected, screen.lineage_id, dry_run=True)
    if check is None:
        return
    lines = replay_words(check)
    if not any(v["compatible"] for v in check["versions"]):
        screen.say("no rejected version fits the approved one: discard their rows "
                   "(lineages discard-staged --schema-hash)", error=True)
        return

    def answered(yes: bool | None) -> None:
        if yes:
            screen.spawn(partial(_replay, screen))
        else:
            screen.say("replay cancelled")

    screen.app.push_screen(ConfirmScreen(
        f"Replay the rows of {lineage['source_table']}'s rejected versions under the "
        "approved one?\n\n" + "\n".join(lines)
        + "\n\nOnly the replayable ones replay; the others stay staged to be discarded."),
        answered)


async def _replay(screen: LineageDetailScreen) -> None:
    out = await screen.call(screen.api.replay_rejected, screen.lineage_id)
    if out is not None:
        await screen.reload()
        screen.say(f"rejected versions' rows replaying: {out['rebound_batches']} batches, "
                   f"{out['rebound_rows']} rows")
