"""One schema review: its columns and the diff against the approved schema; claim,
approve (with per-column actions, _approve.py) and reject. Approve approves a queued
review directly (the API claims it in the same transaction), so a refused approval leaves
it as it was. After any 409 — someone decided meanwhile (``ACTION_VERSION_CONFLICT``), or
the approval was refused (``CONFLICT``) — the review is reloaded and the status line says
why."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import partial
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widget import Widget
from textual.widgets import DataTable, Static

from edgesync.client import ApiClientError
from edgesync.errors import ApiErrorCode
from edgesync.tui._base import ApiScreen
from edgesync.tui._confirm import AskScreen
from edgesync.tui._format import cell, short_time, text
from edgesync.tui._screens import ScreenKind, new_screen, screen
from edgesync.tui._table import Table

if TYPE_CHECKING:
    from edgesync.tui._approve import Approval

__all__ = ["ReviewDetailScreen", "column_changes"]

# The 409 codes of a decision: the review changed meanwhile, or the state or the target
# does not allow it.
_CONFLICT = frozenset({ApiErrorCode.ACTION_VERSION_CONFLICT, ApiErrorCode.CONFLICT})
_CHANGE_WORDS = {"added": "added", "dropped": "dropped", "type_changed": "type changed",
                 "pk_changed": "primary key changed",
                 "nullability_changed": "nullability changed"}


def schema_columns(review: dict[str, Any]) -> list[dict[str, Any]]:
    columns: list[dict[str, Any]] = (review.get("schema_columns") or {}).get("columns") or []
    return columns


def column_changes(review: dict[str, Any]) -> list[tuple[str, str]]:
    """(column, what changed) for every column of the review's schema and every dropped
    one: the column diff against the lineage's approved schema."""
    if "diff" not in review:  # a registry review: a schema of the scope, no device diff
        return [(str(c["name"]), "-") for c in schema_columns(review)]
    diff = review.get("diff") or {}
    before = {str(c["name"]): c for c in review.get("approved_schema_columns") or []}
    now = {str(c["name"]): c for c in schema_columns(review)}
    changes: dict[str, list[str]] = {}
    for kind, cols in diff.items():
        for c in cols or []:
            word = _CHANGE_WORDS.get(kind, kind)
            if kind == "type_changed" and str(c) in before and str(c) in now:
                word += (f" ({before[str(c)]['decl_type_affinity']} → "
                         f"{now[str(c)]['decl_type_affinity']})")
            changes.setdefault(str(c), []).append(word)
    names = [str(c["name"]) for c in schema_columns(review)]
    names += [c for c in changes if c not in names]
    return [(n, ", ".join(changes.get(n, [])) or "unchanged") for n in names]


@screen(ScreenKind.REVIEW_DETAIL)
class ReviewDetailScreen(ApiScreen):
    TITLE = "Schema review"
    BINDINGS = [
        Binding("c", "claim", "claim"),
        Binding("a", "approve", "approve…"),
        Binding("x", "reject", "reject…"),
        Binding("d", "rows('staged')", "staged"),
        Binding("w", "rows('written')", "written"),
    ]

    def __init__(self, review_id: str) -> None:
        super().__init__()
        self.review_id = review_id
        self.review: dict[str, Any] | None = None

    def body(self) -> Iterable[Widget]:
        with VerticalScroll():
            yield Static("loading…", id="summary", classes="block", markup=False)
            yield Static("Columns and diff against the approved schema", classes="section")
            columns = Table(id="columns", cursor_type="row")
            columns.add_columns("column", "affinity", "pk", "not null", "change",
                                "decided action")
            yield columns

    # The routes of this kind of review (a registry review overrides them, _registry.py).
    def fetch(self, review_id: str) -> Any:
        return self.api.review(review_id)

    def claim_call(self, review_id: str, version: int) -> Any:
        return self.api.claim(review_id, version)

    def approve_call(self, review_id: str, version: int, actions: list[dict[str, Any]],
                     sync_authority: str | None) -> Any:
        return self.api.approve(review_id, version, actions, sync_authority)

    def reject_call(self, review_id: str, version: int, reason: str | None) -> Any:
        return self.api.reject(review_id, version, reason)

    def approve_form(self, review: dict[str, Any]) -> Any:
        return new_screen(ScreenKind.APPROVE, review)

    async def reload(self) -> None:
        review = await self.call(self.fetch, self.review_id)
        if review is None:
            return
        self.review = review
        self.sub_title = f"{review['source_table']} · {review['status']}"
        self.query_one("#summary", Static).update(_summary(review))
        by_name = {str(c["name"]): c for c in schema_columns(review)}
        decided = {a["source_column_name"]: a for a in review.get("column_actions") or []}
        table = self.query_one("#columns", DataTable)
        table.clear()
        for name, change in column_changes(review):
            c = by_name.get(name, {})
            table.add_row(cell(name), cell(c.get("decl_type_affinity")),
                          cell(("yes" if c.get("pk_ordinal") else "no") if c else "-"),
                          cell(("yes" if c.get("not_null") else "no") if c else "-"),
                          Text(change, style="" if change == "unchanged" else "yellow"),
                          cell(_action_words(decided.get(name))))
        self.refresh_bindings()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        status = self.review["status"] if self.review else None
        if action == "claim":
            return status == "queued"
        if action in ("approve", "reject"):
            return status in ("queued", "in_review")
        return True

    # ------------------------------------------------------------------ decisions

    async def decide(self, fn: Callable[..., Any], *args: Any, done: str,
                     **kwargs: Any) -> bool:
        """One decision at the action_version shown; after a 409 the review is reloaded."""
        assert self.review is not None
        try:
            result = await self.call(fn, self.review_id, self.review["action_version"], *args,
                                     raise_codes=_CONFLICT, **kwargs)
        except ApiClientError as exc:
            why = ("someone acted on this review since you loaded it (your action_version "
                   f"{self.review['action_version']} is stale)"
                   if exc.code == ApiErrorCode.ACTION_VERSION_CONFLICT
                   else "refused, nothing changed")
            await self.reload()
            now = (f"reloaded: the review is {self.review['status']} at action_version "
                   f"{self.review['action_version']}")
            self.say(f"{exc.code}: {exc.message}\n{why}; {now}", error=True)
            return False
        if result is None:
            return False
        self.review = result
        self.say(done)
        await self.reload()
        return True

    def action_claim(self) -> None:
        self.spawn(partial(self.decide, self.claim_call, done="claimed: now in review"),
                        group="action")

    def action_approve(self) -> None:
        if self.review is None:
            return

        def chosen(approval: Approval | None) -> None:
            if approval is not None:
                self.spawn(partial(self._approve, approval))

        self.app.push_screen(self.approve_form(self.review), chosen)

    async def _approve(self, approval: Any) -> None:
        # A queued review is claimed and approved in one transaction by the API.
        await self.decide(self.approve_call, approval.column_actions, approval.sync_authority,
                          done="approved: the lineage's rows replay into the target")

    def action_reject(self) -> None:
        def reason(text_: str | None) -> None:
            if text_ is not None:
                self.spawn(partial(self.decide, self.reject_call, text_ or None,
                                        done="rejected"))

        self.app.push_screen(AskScreen("Reject this schema? The lineage stays paused and its "
                                       "rows stay staged. Reason:"), reason)

    def action_rows(self, mode: str) -> None:
        self.spawn(partial(self._rows, mode))

    async def _rows(self, mode: str) -> None:
        if self.review is None or "lineage_id" not in self.review:
            self.say("a registry review has no lineage of its own: open a device's lineage "
                     "from the Lineages screen", error=True)
            return
        lineage = await self.call(self.api.lineage, self.review["lineage_id"])
        if lineage is not None:
            self.app.push_screen(new_screen(ScreenKind.ROWS, lineage, mode))


def _summary(review: dict[str, Any]) -> Text:
    out = Text()
    out.append(f"{review['source_table']}  ", style="bold")
    out.append(review["status"], style="bold")
    out.append(f"  (action_version {review['action_version']})\n")
    for label, key in (("classification", "classification"), ("schema hash", "schema_hash"),
                       ("claimed by", "claimed_by"), ("decided by", "decided_by"),
                       ("reason", "decision_reason"), ("lineage", "lineage_id")):
        out.append(f"{label}: {text(review.get(key))}\n")
    # The device by its name (its id alone said little), the id after it.
    name, device_id = review.get("device_name"), review.get("device_id")
    out.append(f"device: {text(name or device_id)}"
               + (f" ({device_id})" if name and device_id else "") + "\n")
    out.append(f"created: {short_time(review['created_at'])} · updated: "
               f"{short_time(review['updated_at'])}")
    return out


def _action_words(action: dict[str, Any] | None) -> str:
    if action is None:
        return "-"
    words = str(action["action"])
    if action.get("mirror_column_name"):
        words += f" as {action['mirror_column_name']}"
    if action.get("target_type"):
        words += f" ({action['target_type']})"
    if action.get("device_data_point_id"):
        words += f" → {action['device_data_point_id']}"
    return words
