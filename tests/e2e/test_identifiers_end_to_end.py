"""Device-chosen names that are awkward in SQL: keywords, quotes, spaces, unicode, and names
past PostgreSQL's 63-byte limit, which must not collide after truncation."""

from __future__ import annotations

import pytest
from kits.review_helpers import queued_review

from edgesync import fleet, governance
from edgesync.errors import IdentifierError, InvalidRequestError
from edgesync.ingest import IngestPipeline, OutcomeStatus, Replayer
from edgesync.materialize import quote_ident, target_table_name

LONG = "a_rather_long_table_name_that_goes_on_and_on_past_the_postgres_limit"


def test_long_names_do_not_collide_after_truncation() -> None:
    one = target_table_name("edge_state_0123abcd_", LONG + "_one")
    two = target_table_name("edge_state_0123abcd_", LONG + "_two")
    assert one != two and len(one.encode()) <= 63 and len(two.encode()) <= 63
    assert target_table_name("edge_state_0123abcd_", "plain") == "edge_state_0123abcd_plain"
    assert quote_ident('we"ird') == '"we""ird"'
    with pytest.raises(IdentifierError):
        quote_ident("x" * 64)


async def test_odd_table_and_column_names_materialize(pool, batches, unique):
    async with pool.acquire() as conn:
        scope = await fleet.add_device(conn, project=f"id-{unique}", name=f"gw-{unique}",
                                       topic_slug=f"id-{unique}")
    columns = [("select", "INTEGER", 1, True), ('we"ird col', "TEXT", 0, False),
               ("naïve ☃", "REAL", 0, False), ("c" * 70, "TEXT", 0, False)]
    pipe = IngestPipeline(pool)
    f = batches(table="Order Items ☃ ❄", columns=columns)
    row = {"select": 1, 'we"ird col': "x'y\"z", "naïve ☃": 1.5, "c" * 70: "long"}
    out = await pipe.handle(f"{scope.root_topic}/sync/rows/batch",
                            f.payload(f.rows(("insert", row))))
    assert out.status is OutcomeStatus.STAGED
    review = await queued_review(pool, out.lineage_id)
    async with pool.acquire() as conn:
        c = await governance.claim_review(conn, review.id, actor="t", action_version=1)
        actions = [{"source_column_name": name, "action": "mirror"} for name, *_ in columns[:3]]
        too_long = [*actions, {"source_column_name": "c" * 70, "action": "mirror"}]
        with pytest.raises(InvalidRequestError, match="63 bytes"):
            await governance.approve_review(conn, review.id, actor="t",
                                            action_version=c.action_version,
                                            column_actions=too_long)
        actions.append({"source_column_name": "c" * 70, "action": "mirror",
                        "mirror_column_name": "long_c"})
        await governance.approve_review(conn, review.id, actor="t",
                                        action_version=c.action_version,
                                        column_actions=actions)
    await Replayer(pool).drain_pending(project_id=scope.project_id)
    table = await pool.fetchval("SELECT target_table FROM edge_table_lineages WHERE id = $1",
                                out.lineage_id)
    assert table.startswith(f"edge_state_{scope.device_id.hex[:8]}_order_items")
    got = await pool.fetchrow(f'SELECT "select", "we""ird col", "naïve ☃", long_c '
                              f"FROM {quote_ident(table)}")
    assert tuple(got) == (1, "x'y\"z", 1.5, "long")
