"""edgesync._core: SQLite affinity, schema fingerprints and pk hashes."""

from __future__ import annotations

import hashlib
import json
import sqlite3

import pytest

from edgesync import _core
from edgesync.errors import BatchRejected, SchemaError

# device_state(id INTEGER PRIMARY KEY, mode TEXT, setpoint REAL NOT NULL);
# the same literals as the Rust unit test in rust/edgesync-core/src/fingerprint.rs.
DEVICE_STATE_JSON = (
    '{"columns":['
    '{"decl_type_affinity":"INTEGER","name":"id","not_null":false,"pk_ordinal":1},'
    '{"decl_type_affinity":"TEXT","name":"mode","not_null":false,"pk_ordinal":0},'
    '{"decl_type_affinity":"REAL","name":"setpoint","not_null":true,"pk_ordinal":0}'
    '],"table_name":"device_state"}'
)
DEVICE_STATE_HASH = "fb11433b0f7b3151834b13e114332fb1ee31a2333f36376737b962f0c926bada"
DEVICE_STATE_COLUMNS = [
    ("id", "INTEGER", 1, False),
    ("mode", "TEXT", 0, False),
    ("setpoint", "REAL", 0, True),
]


def table_info(conn: sqlite3.Connection, table: str) -> list[tuple[str, str, int, bool]]:
    rows = conn.execute(f"PRAGMA table_info({table})").fetchall()
    # (cid, name, type, notnull, dflt_value, pk)
    return [(r[1], r[2], int(r[5]), bool(r[3])) for r in rows]


def test_fixed_table_hash_and_json() -> None:
    schema_hash, canonical = _core.schema_fingerprint("device_state", DEVICE_STATE_COLUMNS)
    assert canonical == DEVICE_STATE_JSON
    assert schema_hash == DEVICE_STATE_HASH
    assert hashlib.sha256(canonical.encode()).hexdigest() == schema_hash


def test_canonical_json_matches_python_json_canonical_form() -> None:
    _, canonical = _core.schema_fingerprint("device_state", DEVICE_STATE_COLUMNS)
    obj = json.loads(canonical)
    assert json.dumps(obj, sort_keys=True, separators=(",", ":")) == canonical


def test_fingerprint_of_real_sqlite_table() -> None:
    conn = sqlite3.connect(":memory:")
    conn.execute(
        "CREATE TABLE device_state ("
        " setpoint DOUBLE PRECISION NOT NULL,"
        " mode VARCHAR(16),"
        " id INTEGER PRIMARY KEY)"
    )
    cols = table_info(conn, "device_state")
    assert _core.schema_fingerprint("device_state", cols) == (
        DEVICE_STATE_HASH,
        DEVICE_STATE_JSON,
    )


def test_fingerprint_of_composite_pk_sqlite_table() -> None:
    conn = sqlite3.connect(":memory:")
    conn.execute(
        "CREATE TABLE readings (site TEXT NOT NULL, ts INTEGER NOT NULL, "
        "value FLOATING POINT, raw, flag BOOLEAN, PRIMARY KEY (ts, site))"
    )
    schema_hash, canonical = _core.schema_fingerprint("readings", table_info(conn, "readings"))
    expected = {
        "table_name": "readings",
        "columns": [
            {"name": "flag", "decl_type_affinity": "NUMERIC", "pk_ordinal": 0, "not_null": False},
            {"name": "raw", "decl_type_affinity": "BLOB", "pk_ordinal": 0, "not_null": False},
            {"name": "site", "decl_type_affinity": "TEXT", "pk_ordinal": 2, "not_null": True},
            {"name": "ts", "decl_type_affinity": "INTEGER", "pk_ordinal": 1, "not_null": True},
            {"name": "value", "decl_type_affinity": "INTEGER", "pk_ordinal": 0, "not_null": False},
        ],
    }
    want = json.dumps(expected, sort_keys=True, separators=(",", ":"))
    assert canonical == want
    assert schema_hash == hashlib.sha256(want.encode()).hexdigest()


def test_column_order_does_not_change_hash() -> None:
    reordered = list(reversed(DEVICE_STATE_COLUMNS))
    assert _core.schema_fingerprint("device_state", reordered)[0] == DEVICE_STATE_HASH


def test_affinity_change_changes_hash() -> None:
    cols = [*DEVICE_STATE_COLUMNS[:2], ("setpoint", "NUMERIC", 0, True)]
    assert _core.schema_fingerprint("device_state", cols)[0] != DEVICE_STATE_HASH
    # ...but another spelling of the same affinity does not.
    cols = [*DEVICE_STATE_COLUMNS[:2], ("setpoint", "float", 0, True)]
    assert _core.schema_fingerprint("device_state", cols)[0] == DEVICE_STATE_HASH


@pytest.mark.parametrize(
    ("declared", "affinity"),
    [
        ("VARCHAR(10)", "TEXT"),
        ("DOUBLE PRECISION", "REAL"),
        ("FLOATING POINT", "INTEGER"),
        ("", "BLOB"),
        ("BOOLEAN", "NUMERIC"),
        ("DATE", "NUMERIC"),
        ("DECIMAL(10,5)", "NUMERIC"),
        ("CHARINT", "INTEGER"),
        ("STRING", "NUMERIC"),
        ("blob", "BLOB"),
        ("nvarchar(5)", "TEXT"),
        ("BLOB", "BLOB"),
        ("TEXT", "TEXT"),
        ("NUMERIC", "NUMERIC"),
        ("REAL", "REAL"),
        ("INTEGER", "INTEGER"),
    ],
)
def test_sqlite_affinity(declared: str, affinity: str) -> None:
    assert _core.sqlite_affinity(declared) == affinity


@pytest.mark.parametrize(
    ("table", "columns"),
    [
        ("", DEVICE_STATE_COLUMNS),
        ("t", []),
        ("t", [("", "TEXT", 0, False)]),
        ("t", [("a", "TEXT", 0, False), ("a", "INTEGER", 0, False)]),
        ("t", [("a", "TEXT", -1, False)]),
        ("t", [("a", "TEXT", 2, False)]),
        ("t", [("a", "TEXT", 1, False), ("b", "TEXT", 1, False)]),
    ],
)
def test_schema_errors(table: str, columns: list[tuple[str, str, int, bool]]) -> None:
    with pytest.raises(SchemaError):
        _core.schema_fingerprint(table, columns)


def test_pk_hash() -> None:
    expected = hashlib.sha256(b'{"id":7,"site":"x"}').hexdigest()
    assert _core.pk_hash(b'{"site": "x", "id": 7}') == expected
    assert _core.pk_hash(bytearray(b'{"id":7,"site":"x"}')) == expected
    assert _core.pk_hash(memoryview(b'{"id":7,"site":"x"}')) == expected
    assert _core.pk_hash(b'{"id":1}') == (
        "037c9214eef74cc3887f3a4f085b4e17d76280dafd273b0ee160c09c4ba1cfd4"
    )


@pytest.mark.parametrize(
    ("payload", "code"),
    [
        (b"{", "malformed_json"),
        (b"{}", "invalid_row"),
        (b"[1]", "invalid_row"),
        (b'{"id": NaN}', "invalid_number_encoding"),
    ],
)
def test_pk_hash_rejects(payload: bytes, code: str) -> None:
    with pytest.raises(BatchRejected) as exc:
        _core.pk_hash(payload)
    assert exc.value.code == code


def test_pk_hash_rejects_str() -> None:
    with pytest.raises(TypeError):
        _core.pk_hash('{"id": 1}')  # type: ignore[arg-type]
