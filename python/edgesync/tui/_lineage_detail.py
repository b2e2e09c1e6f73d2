"""One lineage: why it is paused, materialization errors and quarantined rows, the
recovery offered (a re-snapshot, a verification), schema versions, bindings and replay
progress; from here the staged and written rows, the quarantine, its review, the offered
recovery, reset and delete."""

from __future__ import annotations

from collections.abc import Iterable
from functools import partial
from typing import Any

from rich.text import Text
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widget import Widget
from textual.widgets import DataTable, ProgressBar, Static

from edgesync._vocabulary import LineageStatus, Pipeline, ReplayStatus
from edgesync.client import ApiClientError
from edgesync.errors import ApiErrorCode
from edgesync.tui._base import ApiScreen
from edgesync.tui._confirm import ConfirmScreen
from edgesync.tui._decisions import change_authority, replay_rejected
from edgesync.tui._format import cell, pause_words, short_time, text
from edgesync.tui._offers import recovery_text, take_offer
from edgesync.tui._screens import ScreenKind, new_screen, screen
from edgesync.tui._table import Table

__all__ = ["LineageDetailScreen", "freshness_line", "has_materialization_error",
           "replay_progress", "retired_text"]


def retired_text(lineage: dict[str, Any]) -> Text:
    """The target columns an approval stopped writing (docs/governance.md, "Retired
    columns"): kept with their last values, never written again."""
    retired = lineage.get("retired_columns") or []
    if not retired:
        return Text("none: every column of the target is written")
    out = Text()
    for c in retired:
        out.append(f"{c['name']}", style="bold yellow")
        out.append(f" {c['pg_type']} (from {c['source_column_name']}), retired by "
                   f"{c['retired_by_schema_hash'][:12]} at {short_time(c['retired_at'])}\n")
    out.append("kept with their last values: keep them, drop them by hand, or mirror a "
               "column to them again in a later review")
    return out


def has_materialization_error(lineage: dict[str, Any]) -> bool:
    m = lineage.get("materialization") or {}
    return bool(m.get("error_count") or m.get("failed_batches") or m.get("last_error"))


def replay_progress(lineage: dict[str, Any]) -> tuple[int, int, str]:
    """(rows done, rows in all, state) of the latest replay: done is what its intent has
    replayed, and what is still staged is what it has left to do."""
    replay = lineage.get("replay") or {}
    intents = replay.get("intents") or []
    staged = int(replay.get("staged_rows") or 0)
    if not intents:
        return 0, staged, "no replay yet"
    latest = intents[0]
    done = int(latest.get("rows_replayed") or 0)
    state = str(latest["status"])
    if latest.get("last_error"):
        state += f": {latest['last_error']}"
    return done, done + (staged if latest["status"] == ReplayStatus.PENDING else 0), state


@screen(ScreenKind.LINEAGE_DETAIL)
class LineageDetailScreen(ApiScreen):
    TITLE = "Lineage"
    BINDINGS = [
        Binding("d", "rows('staged')", "staged"),
        Binding("w", "rows('written')", "written"),
        Binding("v", "review", "its review"),
        Binding("x", "reset", "reset materialization"),
        Binding("D", "delete", "delete"),
        # Q, not q: q quits on every screen.
        Binding("Q", "quarantine", "quarantined rows"),
        Binding("o", "authority", "sync authority…"),
        Binding("R", "replay_rejected", "replay rejected versions' rows…"),
        Binding("a", "take_offer", "take the offered recovery…"),
    ]

    def __init__(self, lineage_id: str) -> None:
        super().__init__()
        self.lineage_id = lineage_id
        self.lineage: dict[str, Any] | None = None
        self._reread_on_resume = False

    def body(self) -> Iterable[Widget]:
        with VerticalScroll():
            yield Static("loading…", id="summary", classes="block", markup=False)
            yield Static("Retired columns", classes="section")
            yield Static("", id="retired", classes="block", markup=False)
            yield Static("Materialization", classes="section")
            yield Static("", id="materialization", classes="block", markup=False)
            yield Static("Recovery", classes="section")
            yield Static("", id="recovery", classes="block", markup=False)
            yield Static("Replay", classes="section")
            yield ProgressBar(id="replay-bar", show_eta=False)
            yield Static("", id="replay", classes="block", markup=False)
            yield Static("Schema versions", classes="section")
            versions = Table(id="versions", cursor_type="row")
            versions.add_columns("first seen", "schema hash", "classification", "status",
                                 "columns", "diff")
            yield versions
            yield Static("Bindings", classes="section")
            bindings = Table(id="bindings", cursor_type="row")
            bindings.add_columns("schema hash", "source column", "action", "target column",
                                 "target type", "data point")
            yield bindings

    def _fetch(self) -> dict[str, Any]:
        """The lineage, and the coalesced mirror its target is when it shares one."""
        lineage: dict[str, Any] = self.api.lineage(self.lineage_id)
        lineage["coalesced_mirror"] = None
        if lineage.get("target_table"):
            try:
                lineage["coalesced_mirror"] = self.api.coalesced_mirror(lineage["target_table"])
            except ApiClientError as exc:
                if exc.code != ApiErrorCode.COALESCED_MIRROR_NOT_FOUND:
                    raise
        return lineage

    async def reload(self) -> None:
        lineage = await self.call(self._fetch)
        if lineage is None:
            return
        self.lineage = lineage
        self.sub_title = f"{lineage['device_name']} / {lineage['source_table']}"
        self.query_one("#summary", Static).update(_summary(lineage))
        self.query_one("#retired", Static).update(retired_text(lineage))
        self.query_one("#materialization", Static).update(_materialization(lineage))
        self.query_one("#recovery", Static).update(recovery_text(lineage))
        done, total, state = replay_progress(lineage)
        self.query_one("#replay-bar", ProgressBar).update(total=max(total, 1),
                                                          progress=done if total else 1)
        replay = lineage["replay"]
        self.query_one("#replay", Static).update(
            f"latest replay: {state} · rows {done}/{total} · pending intents "
            f"{replay['pending_intents']} · staged batches {replay['staged_batches']}")
        versions = self.query_one("#versions", DataTable)
        versions.clear()
        for v in lineage["schema_versions"]:
            cols = (v.get("schema_columns") or {}).get("columns") or []
            versions.add_row(cell(short_time(v["first_seen_at"])), cell(v["schema_hash"][:16]),
                             cell(v["classification"]), cell(v["status"]),
                             cell(", ".join(str(c["name"]) for c in cols)),
                             cell(_diff_words(v.get("diff") or {})))
        bindings = self.query_one("#bindings", DataTable)
        bindings.clear()
        for b in lineage["bindings"]:
            bindings.add_row(cell(b["schema_hash"][:16]), cell(b["source_column_name"]),
                             cell(b["action"]), cell(b["mirror_column_name"]),
                             cell(b["target_type"]), cell(b["device_data_point_id"]))
        self.refresh_bindings()

    def feed_event(self, event: dict[str, Any]) -> None:
        # (a capture gap names its lineage as the subject only)
        if self.lineage_id in (str((event.get("body") or {}).get("lineage_id")),
                               str(event.get("subject_id"))):
            self.action_refresh()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        lineage = self.lineage
        if action == "reset":  # only a materialization error can be reset
            return lineage is not None and has_materialization_error(lineage)
        if action == "authority":  # an approved state table
            return lineage is not None and lineage["pipeline"] == Pipeline.ROWS \
                and lineage.get("approved_schema_hash") is not None
        if action == "take_offer":
            return lineage is not None and bool(lineage.get("recovery_offers"))
        if action == "replay_rejected":
            return lineage is not None and lineage.get("approved_schema_hash") is not None \
                and any(v["status"] == "rejected" for v in lineage["schema_versions"])
        return True

    def action_authority(self) -> None:
        if self.lineage is not None and self.check_action("authority", ()):
            change_authority(self, self.lineage)
        else:
            self.say("only an approved state table's sync authority can change", error=True)

    def action_replay_rejected(self) -> None:
        if self.lineage is not None and self.check_action("replay_rejected", ()):
            self.spawn(partial(replay_rejected, self, self.lineage))
        else:
            self.say("no rejected schema version (or nothing approved to replay under)",
                     error=True)

    def action_take_offer(self) -> None:
        if self.lineage is not None:
            take_offer(self, self.lineage)

    def action_rows(self, mode: str) -> None:
        if self.lineage is not None:
            self.app.push_screen(new_screen(ScreenKind.ROWS, self.lineage, mode))

    def action_quarantine(self) -> None:
        if self.lineage is not None:
            self._reread_on_resume = True
            self.app.push_screen(new_screen(ScreenKind.QUARANTINE, self.lineage))

    def on_screen_resume(self) -> None:
        # Back from the quarantine: its count may have moved. Not after every modal (a
        # confirmed delete pops this screen while a re-read would still be running).
        if self._reread_on_resume:
            self._reread_on_resume = False
            self.action_refresh()

    def action_review(self) -> None:
        self.spawn(self._open_review)

    async def _open_review(self) -> None:
        doc = await self.call(self.api.reviews, lineage_id=self.lineage_id, limit=500)
        if doc is None:
            return
        if not doc["data"]:
            self.say("this lineage has no schema review (a registry review may decide it)",
                     error=True)
            return
        open_ = [r for r in doc["data"] if r["status"] in ("queued", "in_review")]
        review = (open_ or doc["data"])[-1]
        self.app.push_screen(new_screen(ScreenKind.REVIEW_DETAIL, review["id"]))

    def action_reset(self) -> None:
        if self.lineage is None or not has_materialization_error(self.lineage):
            self.say("no materialization error: nothing to reset", error=True)
            return
        self.spawn(self._reset)

    async def _reset(self) -> None:
        result = await self.call(self.api.reset_materialization, self.lineage_id)
        if result is not None:
            self.say(f"materialization reset: {result['requeued_batches']} batches requeued, "
                     "replay scheduled")
            await self.reload()

    def action_delete(self) -> None:
        if self.lineage is None:
            return
        name = f"{self.lineage['device_name']} / {self.lineage['source_table']}"
        self.app.push_screen(
            ConfirmScreen(f"Delete lineage {name}?\n\nThis removes its cloud sync state: "
                          "schema versions, reviews, bindings, staged rows and pending "
                          "controls. Its edge_state_* table and rows stay."),
            self._confirmed_delete)

    def _confirmed_delete(self, yes: bool | None) -> None:
        if yes:
            self.spawn(self._delete)
        else:
            self.say("delete cancelled")

    async def _delete(self) -> None:
        if await self.call(self.api.delete_lineage, self.lineage_id) is not None:
            self.app.pop_screen()
            self.app.notify("lineage deleted")
            screen = self.app.screen
            if isinstance(screen, ApiScreen):
                screen.say(f"lineage {self.lineage_id} deleted")


def _summary(lineage: dict[str, Any]) -> Text:
    out = Text()
    paused = lineage["status"] == LineageStatus.PAUSED
    out.append(f"{lineage['device_name']} / {lineage['source_table']}\n", style="bold")
    out.append("status: ")
    out.append(lineage["status"], style="bold yellow" if paused else "bold green")
    if paused:
        out.append(f" — {pause_words(lineage['pause_reason'])}", style="yellow")
    out.append("\n")
    for label, key in (("pipeline", "pipeline"), ("sync authority", "sync_authority"),
                       ("target table", "target_table"), ("staged rows", "staged_rows"),
                       ("staged bytes", "staged_bytes"),
                       # Writes, not rows: an updated row counts again.
                       ("row writes", "materialized_rows"),
                       ("rows in the target now", "target_rows"),
                       ("rejected batches", "rejected_batches"),
                       ("current schema", "current_schema_hash"),
                       ("approved schema", "approved_schema_hash")):
        out.append(f"{label}: {text(lineage.get(key))}\n")
    mirror = lineage.get("coalesced_mirror")
    if mirror:
        out.append(f"coalesced mirror: shared by {mirror['device_count']} devices of the "
                   f"{mirror['scope']} ({len(mirror['schema_hashes'])} schema hashes)\n",
                   style="cyan")
    out.append(freshness_line(lineage) + "\n")
    out.append(f"last batch: {short_time(lineage.get('last_batch_at'))} · "
               f"updated: {short_time(lineage.get('updated_at'))} · id {lineage['id']}")
    return out


def freshness_line(lineage: dict[str, Any]) -> str:
    """Device-seen time, cloud commit time and lag of the lineage's latest batch."""
    lag = lineage.get("freshness_seconds")
    return (f"freshness: {'-' if lag is None else f'{lag:.1f}s'} · device saw: "
            f"{short_time(lineage.get('last_device_seen_at'))} · committed: "
            f"{short_time(lineage.get('last_committed_at'))}")


def _materialization(lineage: dict[str, Any]) -> Text:
    m = lineage["materialization"]
    out = Text()
    quarantined = int(m.get("quarantined_rows") or 0)
    if quarantined:
        out.append(f"quarantined rows: {quarantined} open", style="bold yellow")
        out.append(" — Q lists them (reason, retry, discard)\n", style="italic")
    else:
        out.append("quarantined rows: 0\n")
    if not has_materialization_error(lineage):
        out.append("no errors", style="green")
        return out
    out.append(f"errors since reset: {m['error_count']} · failed batches "
               f"{m['failed_batches']} ({m['failed_rows']} rows)\n", style="bold red")
    out.append(f"last error: {text(m['last_error'])}\n")
    out.append("x resets the breaker and replays the failed rows", style="italic")
    return out


def _diff_words(diff: dict[str, Any]) -> str:
    parts = [f"{kind.replace('_', ' ')}: {', '.join(cols)}" for kind, cols in diff.items()
             if cols]
    return "; ".join(parts) or "-"
