"""What every operator command over the HTTP API works with: the parsed arguments, the
project's API, and the output (tables for people, or JSON); and what the device and the
registry review commands show and decide alike."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from typing import IO, Any

from edgesync.cli._format import print_fields, print_json, print_table
from edgesync.client._actions import column_actions, resolve_map_specs
from edgesync.client._client import ApiClient, ProjectApi
from edgesync.errors import ConfigError

__all__ = ["Ctx", "flagged_actions", "write_review_head", "write_suggestions"]

# The agent sends each column's affinity, not its declared type (docs/protocol.md).
_SCHEMA_COLUMNS = [("name", "name"), ("decl_type_affinity", "affinity"),
                   ("primary_key", "primary key"), ("not_null", "not null")]


class Ctx:
    def __init__(self, args: argparse.Namespace, out: IO[str]) -> None:
        self.args = args
        self.out = out
        self.json = args.output == "json"
        if not args.token:
            raise ConfigError("--token", "an API token is needed (or env EDGESYNC_TOKEN)")
        if not args.org_id:
            raise ConfigError("--org-id", "the organization id is needed "
                                          "(or env EDGESYNC_ORG_ID)")
        project = args.project or os.environ.get("EDGESYNC_PROJECT")
        if not project:
            raise ConfigError("--project", "the project's id, name or topic slug is needed "
                                           "(or env EDGESYNC_PROJECT)")
        self.client = ApiClient(args.api_url, token=args.token, org_id=args.org_id)
        try:
            self.api: ProjectApi = self.client.project(self.client.resolve_project(project))
        except BaseException:
            self.client.close()  # the caller never gets a Ctx to close
            raise

    def paging(self) -> dict[str, Any]:
        return {"page": self.args.page, "limit": self.args.limit}

    def page(self, doc: dict[str, Any], columns: list[tuple[str, str]]) -> None:
        if self.json:
            print_json(doc, self.out)
            return
        print_table(doc["data"], columns, self.out)
        meta = doc.get("meta") or {}
        if meta and meta.get("total", 0) > len(doc["data"]):
            self.out.write(f"(page {meta['page']}, {len(doc['data'])} of {meta['total']}; "
                           "--page/--limit for more)\n")

    def item(self, data: Any, fields: list[str], title: str | None = None) -> None:
        if self.json:
            print_json({"data": data}, self.out)
            return
        if title:
            self.out.write(title + "\n")
        print_fields(data, fields, self.out)

    def detail(self, data: dict[str, Any],
               write: Callable[[Ctx, dict[str, Any]], None]) -> None:
        """One object in several sections: JSON as the API sent it, else ``write``."""
        if self.json:
            print_json({"data": data}, self.out)
            return
        write(self, data)

    def section(self, title: str, rows: list[dict[str, Any]],
                columns: list[tuple[str, str]]) -> None:
        self.out.write(f"\n{title}\n")
        print_table(rows, columns, self.out)


def _schema_columns(review: dict[str, Any]) -> list[dict[str, Any]]:
    columns: list[dict[str, Any]] = (review.get("schema_columns") or {}).get("columns", [])
    return columns


def write_review_head(ctx: Ctx, review: dict[str, Any], fields: list[str]) -> None:
    """A schema review's fields and the columns of its schema."""
    print_fields(review, fields, ctx.out)
    ctx.section("columns", [{**c, "primary_key": "yes" if c.get("pk_ordinal") else "no",
                             "not_null": "yes" if c.get("not_null") else "no"}
                            for c in _schema_columns(review)], _SCHEMA_COLUMNS)


_SUGGESTION_COLUMNS = [("source_column_name", "column"), ("action", "action"),
                       ("mirror_column_name", "mirror column"), ("target_type", "type"),
                       ("suggestion", "suggested"), ("reason", "why")]


def write_suggestions(ctx: Ctx, review: dict[str, Any]) -> None:
    """The open review's suggested actions, column by column: carried from the last
    approval, new, or needing a decision."""
    if review.get("suggested_column_actions"):
        ctx.section("suggested column actions (reviews approve starts from these)",
                    [{**s, "suggestion": str(s["suggestion"]).replace("_", " ")}
                     for s in review["suggested_column_actions"]], _SUGGESTION_COLUMNS)


def flagged_actions(ctx: Ctx, review: dict[str, Any], defer: list[str]
                    ) -> list[dict[str, Any]] | None:
    """The column actions an approval's flags (``--actions``, ``--mirror``, ...) give the
    review's schema columns; a column they do not name gets the review's suggested action
    (unless ``--mirror-all``), and the table output says which came from where."""
    a = ctx.args
    suggested = None if a.mirror_all else review.get("suggested_column_actions")
    actions = column_actions([str(c["name"]) for c in _schema_columns(review)],
                             actions_file=a.actions, mirror=a.mirror, ignore=a.ignore,
                             defer=defer, map_=resolve_map_specs(ctx.api, a.map),
                             auto_map=a.auto_map, suggested=suggested)
    kinds = {str(s["source_column_name"]): s for s in suggested or []}
    # A first review mirrors every column as approving without actions does: nothing to say.
    plain = all(s["suggestion"] == "new" for s in kinds.values()) and actions == [
        {"source_column_name": str(c["name"]), "action": "mirror"}
        for c in _schema_columns(review)]
    if actions is not None and not ctx.json and not plain:
        rows = []
        for act in actions:
            s = kinds.get(str(act["source_column_name"]))
            same = s is not None and all(act.get(k) == s.get(k) for k in act)
            rows.append({**act, "suggestion": str(s["suggestion"]).replace("_", " ")
                         if same and s else "your choice",
                         "reason": s["reason"] if same and s else ""})
        ctx.section("column actions sent", rows, _SUGGESTION_COLUMNS)
        ctx.out.write("\n")
    return actions
