"""Canonical JSON interop: a third-party agent hashing ``json.dumps`` output with its
default ``ensure_ascii=True`` (``\\u`` escapes) and the edgesync agent (UTF-8) both get
their batches of a non-ASCII table accepted; the cloud keeps one (UTF-8) spelling of
the columns and the device's hash."""

from __future__ import annotations

import hashlib
import json

import asyncpg
import pytest

from edgesync import _core, fleet
from edgesync.ingest import IngestPipeline, OutcomeStatus
from edgesync.protocol import uuid7

TABLE = "météo"
COLUMNS = [("id", "INTEGER", 1, True), ("température", "REAL", 0, False),
           ("温度", "TEXT", 0, False)]


def python_hash(spelling_ascii: bool) -> tuple[str, dict[str, object]]:
    """What a Python agent written from the reference computes: canonical JSON with
    json.dumps (sorted keys, no whitespace, columns sorted by name)."""
    doc = {"table_name": TABLE, "columns": sorted(
        ({"name": n, "decl_type_affinity": t, "pk_ordinal": pk, "not_null": nn}
         for n, t, pk, nn in COLUMNS), key=lambda c: str(c["name"]).encode())}
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=spelling_ascii)
    return hashlib.sha256(text.encode()).hexdigest(), doc


def batch(schema_hash: str, schema_columns: dict[str, object]) -> bytes:
    return json.dumps({
        "format_version": 1, "capture_strategy": "sqlite_row_batch_v1", "batch_id": uuid7(),
        "journal_epoch": uuid7(), "source_table": TABLE, "schema_hash": schema_hash,
        "schema_columns": schema_columns, "first_commit_seq": 1, "last_commit_seq": 1,
        "rows": [{"commit_seq": 1, "op": "insert", "pk": {"id": 1},
                  "row": {"id": 1, "température": 21.5, "温度": "chaud"}}]}).encode()


@pytest.mark.parametrize("ascii_escaped", [True, False])
async def test_either_spelling_of_non_ascii_names_is_accepted(pool: asyncpg.Pool, unique: str,
                                                              ascii_escaped: bool) -> None:
    async with pool.acquire() as conn:
        device = await fleet.add_device(conn, project=f"p-{unique}", name=f"gw-{unique}",
                                        topic_slug=f"s-{unique}")
    schema_hash, columns = python_hash(ascii_escaped)
    utf8_hash, canonical = _core.schema_fingerprint(TABLE, COLUMNS)
    assert (schema_hash == utf8_hash) is (not ascii_escaped)
    out = await IngestPipeline(pool).handle(f"{device.root_topic}/sync/rows/batch",
                                            batch(schema_hash, columns))
    assert (out.status, out.code) == (OutcomeStatus.STAGED, "schema_review"), out
    version = await pool.fetchrow(
        "SELECT schema_hash, schema_columns FROM edge_schema_versions WHERE lineage_id = $1",
        out.lineage_id)
    assert version["schema_hash"] == schema_hash
    assert version["schema_columns"]["columns"] == json.loads(canonical)["columns"]


async def test_a_wrong_hash_names_both_spellings(pool: asyncpg.Pool, unique: str) -> None:
    async with pool.acquire() as conn:
        device = await fleet.add_device(conn, project=f"p-{unique}", name=f"gw-{unique}",
                                        topic_slug=f"s-{unique}")
    _, columns = python_hash(True)
    out = await IngestPipeline(pool).handle(f"{device.root_topic}/sync/rows/batch",
                                            batch("0" * 64, columns))
    assert out.code == "schema_hash_mismatch"
    assert python_hash(False)[0] in (out.detail or "")
    assert python_hash(True)[0] in (out.detail or "")
    assert "ASCII-escaped" in (out.detail or "")
