"""edgesync._core: row batch decoding, rejection codes and COPY encoding."""

from __future__ import annotations

import copy
import hashlib
import json
import random
from collections.abc import Callable
from typing import Any

import pytest

from edgesync import _core
from edgesync.errors import BatchRejected, SchemaError

BATCH_ID = "019693e0-7c4a-7b2e-9a1d-3f5e6d7c8b9a"
EPOCH = "019693d0-0000-7000-8000-000000000001"
# Same table as tests/core/test_core_fingerprint.py.
SCHEMA_HASH = "fb11433b0f7b3151834b13e114332fb1ee31a2333f36376737b962f0c926bada"
SCHEMA_JSON = (
    '{"columns":['
    '{"decl_type_affinity":"INTEGER","name":"id","not_null":false,"pk_ordinal":1},'
    '{"decl_type_affinity":"TEXT","name":"mode","not_null":false,"pk_ordinal":0},'
    '{"decl_type_affinity":"REAL","name":"setpoint","not_null":true,"pk_ordinal":0}'
    '],"table_name":"device_state"}'
)
PK1_HASH = hashlib.sha256(b'{"id":1}').hexdigest()
PK2_HASH = hashlib.sha256(b'{"id":2}').hexdigest()


def valid() -> dict[str, Any]:
    return {
        "format_version": 1,
        "capture_strategy": "sqlite_row_batch_v1",
        "batch_id": BATCH_ID,
        "journal_epoch": EPOCH,
        "source_table": "device_state",
        "schema_hash": SCHEMA_HASH,
        "schema_columns": json.loads(SCHEMA_JSON),
        "first_commit_seq": 101,
        "last_commit_seq": 103,
        "rows": [
            {
                "commit_seq": 101,
                "op": "insert",
                "pk": {"id": 1},
                "row": {"id": 1, "mode": "cooling", "setpoint": 21},
            },
            {
                "commit_seq": 102,
                "op": "update",
                "pk": {"id": 2},
                "row": {"id": 2, "mode": "heating", "setpoint": 22.5, "note": None},
            },
            {"commit_seq": 103, "op": "delete", "pk": {"id": 1}, "row": None},
        ],
    }


def encode(payload: Any) -> bytes:
    return json.dumps(payload).encode()


def rejected(payload: bytes) -> BatchRejected:
    with pytest.raises(BatchRejected) as exc:
        _core.decode_row_batch(payload)
    return exc.value


def mutated(change: Callable[[dict[str, Any]], object]) -> bytes:
    p = valid()
    change(p)
    return encode(p)


def test_constants() -> None:
    assert _core.MAX_BATCH_ROWS == 4096
    assert _core.MAX_BATCH_BYTES == 512 * 1024
    assert _core.SUPPORTED_FORMAT_VERSION == 1
    assert isinstance(_core.__version__, str) and _core.__version__


def test_valid_batch_decodes_with_all_fields() -> None:
    payload = encode(valid())
    b = _core.decode_row_batch(payload)
    assert b.format_version == 1
    assert b.capture_strategy == "sqlite_row_batch_v1"
    assert b.batch_id == BATCH_ID
    assert b.journal_epoch == EPOCH
    assert b.source_table == "device_state"
    assert b.schema_hash == SCHEMA_HASH
    assert b.schema_columns_json == SCHEMA_JSON.encode()
    assert b.first_commit_seq == 101
    assert b.last_commit_seq == 103
    assert b.row_count == 3
    assert b.payload_size == len(payload)
    assert b.column_names() == ["id", "mode", "setpoint", "note"]
    assert "device_state" in repr(b)
    assert isinstance(b, _core.RowBatch)


def test_buffers_uppercase_uuids_and_optional_schema_columns() -> None:
    p = valid()
    p["batch_id"] = BATCH_ID.upper()
    p["journal_epoch"] = EPOCH.upper()
    del p["schema_columns"]
    del p["rows"][2]["row"]
    for arg in (encode(p), bytearray(encode(p)), memoryview(encode(p))):
        b = _core.decode_row_batch(arg)
        assert (b.batch_id, b.journal_epoch) == (BATCH_ID, EPOCH)
        assert b.schema_columns_json is None


def test_rowbatch_is_read_only_and_not_constructible() -> None:
    b = _core.decode_row_batch(encode(valid()))
    with pytest.raises(AttributeError):
        b.batch_id = "x"  # type: ignore[misc]
    with pytest.raises(TypeError):
        _core.RowBatch()


def test_payload_too_large() -> None:
    payload = encode(valid())
    assert len(_core.decode_row_batch(payload.ljust(512 * 1024)).batch_id) == 36
    exc = rejected(payload.ljust(512 * 1024 + 1))
    assert exc.code == "payload_too_large"


@pytest.mark.parametrize(
    "payload",
    [b"", b"\xff\xfe{}", b"{", b"[]", b"null", b'"x"', b"{'a': 1}", b"[" * 100_000],
)
def test_malformed_json(payload: bytes) -> None:
    assert rejected(payload).code == "malformed_json"


@pytest.mark.parametrize(
    "payload",
    [
        b'{"format_version": NaN}',
        b'{"x": Infinity}',
        b'{"x": [-Infinity]}',
        b'{"x": 1e999}',
        json.dumps({**valid(), "x": float("nan")}).encode(),
    ],
)
def test_invalid_number_encoding(payload: bytes) -> None:
    assert rejected(payload).code == "invalid_number_encoding"


@pytest.mark.parametrize("key", ["device_id", "org_id", "project_id", "fleet_id"])
def test_unstripped_tenant_fields(key: str) -> None:
    exc = rejected(mutated(lambda p: p.update({key: "abc"})))
    assert (exc.code, exc.field) == ("envelope_unstripped_tenant_fields", key)


# (mutation, code, field): one minimal trigger per rejection code.
CASES: list[tuple[str, Callable[[dict[str, Any]], object], str, str | None]] = [
    ("fv missing", lambda p: p.pop("format_version"), "invalid_format_version", "format_version"),
    ("fv zero", lambda p: p.update(format_version=0), "invalid_format_version", "format_version"),
    ("fv str", lambda p: p.update(format_version="1"), "invalid_format_version", "format_version"),
    (
        "fv float",
        lambda p: p.update(format_version=1.0),
        "invalid_format_version",
        "format_version",
    ),
    ("fv 2", lambda p: p.update(format_version=2), "unsupported_format_version", "format_version"),
    (
        "strategy",
        lambda p: p.update(capture_strategy="sqlite_telemetry_batch_v1"),
        "unsupported_capture_strategy",
        "capture_strategy",
    ),
    (
        "batch_id v4",
        lambda p: p.update(batch_id="019693e0-7c4a-4b2e-9a1d-3f5e6d7c8b9a"),
        "invalid_batch_id",
        "batch_id",
    ),
    (
        "batch_id variant",
        lambda p: p.update(batch_id="019693e0-7c4a-7b2e-ca1d-3f5e6d7c8b9a"),
        "invalid_batch_id",
        "batch_id",
    ),
    (
        "batch_id no hyphens",
        lambda p: p.update(batch_id=BATCH_ID.replace("-", "")),
        "invalid_batch_id",
        "batch_id",
    ),
    (
        "journal_epoch",
        lambda p: p.update(journal_epoch="not-a-uuid"),
        "invalid_journal_epoch",
        "journal_epoch",
    ),
    ("table empty", lambda p: p.update(source_table=""), "invalid_source_table", "source_table"),
    (
        "table long",
        lambda p: p.update(source_table="t" * 256),
        "invalid_source_table",
        "source_table",
    ),
    ("table nul", lambda p: p.update(source_table="a\0b"), "invalid_source_table", "source_table"),
    (
        "hash upper",
        lambda p: p.update(schema_hash=SCHEMA_HASH.upper()),
        "invalid_schema_hash",
        "schema_hash",
    ),
    ("hash short", lambda p: p.update(schema_hash="abc"), "invalid_schema_hash", "schema_hash"),
    ("rows object", lambda p: p.update(rows={}), "invalid_rows", "rows"),
    ("rows empty", lambda p: p.update(rows=[]), "invalid_rows", "rows"),
    (
        "too many rows",
        lambda p: p.update(
            rows=[{"commit_seq": i, "op": "delete", "pk": {"id": i}} for i in range(1, 4098)]
        ),
        "batch_too_many_rows",
        "rows",
    ),
    ("row not object", lambda p: p["rows"].__setitem__(1, []), "invalid_row", "rows[1]"),
    ("seq zero", lambda p: p["rows"][0].update(commit_seq=0), "invalid_row", "rows[0].commit_seq"),
    (
        "seq float",
        lambda p: p["rows"][1].update(commit_seq=102.0),
        "invalid_row",
        "rows[1].commit_seq",
    ),
    (
        "seq not increasing",
        lambda p: p["rows"][2].update(commit_seq=102),
        "invalid_row",
        "rows[2].commit_seq",
    ),
    ("op", lambda p: p["rows"][1].update(op="upsert"), "invalid_row", "rows[1].op"),
    ("pk empty", lambda p: p["rows"][0].update(pk={}), "invalid_row", "rows[0].pk"),
    ("pk missing", lambda p: p["rows"][0].pop("pk"), "invalid_row", "rows[0].pk"),
    ("row null insert", lambda p: p["rows"][0].update(row=None), "invalid_row", "rows[0].row"),
    ("row on delete", lambda p: p["rows"][2].update(row={"id": 1}), "invalid_row", "rows[2].row"),
    (
        "first seq",
        lambda p: p.update(first_commit_seq=100),
        "commit_seq_mismatch",
        "first_commit_seq",
    ),
    ("last seq", lambda p: p.pop("last_commit_seq"), "commit_seq_mismatch", "last_commit_seq"),
    (
        "schema_columns table",
        lambda p: p["schema_columns"].update(table_name="other"),
        "invalid_schema_columns",
        "schema_columns.table_name",
    ),
    (
        "schema_columns affinity",
        lambda p: p["schema_columns"]["columns"][0].update(decl_type_affinity="int"),
        "invalid_schema_columns",
        "schema_columns.columns[0].decl_type_affinity",
    ),
    (
        "schema_columns dup",
        lambda p: p["schema_columns"]["columns"][1].update(name="id"),
        "invalid_schema_columns",
        "schema_columns.columns",
    ),
    (
        "schema hash mismatch",
        lambda p: p["schema_columns"]["columns"][2].update(not_null=False),
        "schema_hash_mismatch",
        "schema_hash",
    ),
]


@pytest.mark.parametrize(
    ("change", "code", "field"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_rejection_codes(
    change: Callable[[dict[str, Any]], object], code: str, field: str | None
) -> None:
    exc = rejected(mutated(change))
    assert exc.code == code
    assert exc.field == field
    assert exc.detail
    assert code in str(exc)


def copy_batch() -> _core.RowBatch:
    p = valid()
    del p["schema_columns"]
    p["rows"] = [
        {
            "commit_seq": 101,
            "op": "insert",
            "pk": {"id": 1},
            "row": {
                "id": 1,
                "mode": "tab\there\\ new\nline\rcr",
                "setpoint": 21.5,
                "amount": "12.340",
                "photo": {"$blob": "DEADbeef"},
                "meta": {"k": "v\n", "n": [1, 2.5, None]},
                "on": 1,
            },
        },
        {
            "commit_seq": 102,
            "op": "update",
            "pk": {"id": 2},
            "row": {"id": 2, "mode": "Grüße ☃ 😀", "setpoint": None, "amount": 7, "on": False},
        },
        {"commit_seq": 103, "op": "delete", "pk": {"id": 1}, "row": None},
    ]
    return _core.decode_row_batch(encode(p))


COPY_COLUMNS = [
    ("id", "bigint"),
    ("mode", "text"),
    ("setpoint", "double precision"),
    ("amount", "numeric"),
    ("photo", "bytea"),
    ("meta", "jsonb"),
    ("on", "boolean"),
]


def test_encode_state_copy_byte_for_byte() -> None:
    out = copy_batch().encode_state_copy(COPY_COLUMNS)
    expected = (
        f"{PK1_HASH}\t{EPOCH}\t101\tf\t1\ttab\\there\\\\ new\\nline\\rcr\t21.5\t12.340"
        '\t\\\\xdeadbeef\t{"k":"v\\\\n","n":[1,2.5,null]}\tt\n'
        f"{PK2_HASH}\t{EPOCH}\t102\tf\t2\tGrüße ☃ 😀\t\\N\t7\t\\N\t\\N\tf\n"
        f"{PK1_HASH}\t{EPOCH}\t103\tt\t1\t\\N\t\\N\t\\N\t\\N\t\\N\t\\N\n"
    ).encode()
    assert out == expected


def test_encode_state_copy_no_columns_and_column_names() -> None:
    b = copy_batch()
    assert (
        b.encode_state_copy([])
        == (
            f"{PK1_HASH}\t{EPOCH}\t101\tf\n"
            f"{PK2_HASH}\t{EPOCH}\t102\tf\n"
            f"{PK1_HASH}\t{EPOCH}\t103\tt\n"
        ).encode()
    )
    assert b.column_names() == ["id", "mode", "setpoint", "amount", "photo", "meta", "on"]


@pytest.mark.parametrize(
    ("value", "pg_type"),
    [
        ("12", "bigint"),
        (1.5, "bigint"),
        (True, "bigint"),
        ("1.5", "double precision"),
        ("NaN", "numeric"),
        ({"$blob": "00"}, "numeric"),
        ({"$blob": "00"}, "text"),
        ([1], "text"),
        ("a\0b", "text"),
        ({"$blob": "xyz"}, "bytea"),
        (5, "bytea"),
        (2, "boolean"),
        ("true", "boolean"),
    ],
)
def test_value_type_mismatch(value: object, pg_type: str) -> None:
    p = valid()
    p["rows"][1]["row"]["x"] = value
    b = _core.decode_row_batch(encode(p))
    with pytest.raises(BatchRejected) as exc:
        b.encode_state_copy([("x", pg_type)])
    assert exc.value.code == "value_type_mismatch"
    assert exc.value.field == "rows[1].row.x"
    assert "102" in exc.value.detail
    assert pg_type in exc.value.detail


def test_delete_value_mismatch_names_pk() -> None:
    p = valid()
    p["rows"][2]["pk"] = {"id": "one"}
    b = _core.decode_row_batch(encode(p))
    with pytest.raises(BatchRejected) as exc:
        b.encode_state_copy([("id", "bigint")])
    assert exc.value.field == "rows[2].pk.id"


def test_unknown_pg_type() -> None:
    b = _core.decode_row_batch(encode(valid()))
    with pytest.raises(SchemaError):
        b.encode_state_copy([("id", "int4")])


def test_fuzz_only_batch_rejected() -> None:
    rng = random.Random(20260428)
    good = encode(valid())
    inputs: list[bytes] = [good[:i] for i in range(len(good))]
    alphabet = b'{}[]":,0123456789.eE+-tfnulNaIy \\\x00\xff'
    for _ in range(2000):
        data = bytearray(good)
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(len(data))
            action = rng.randrange(3)
            if action == 0:
                data[i] = rng.choice(alphabet)
            elif action == 1:
                del data[i]
            else:
                data.insert(i, rng.choice(alphabet))
        inputs.append(bytes(data))
    inputs += [rng.randbytes(rng.randrange(300)) for _ in range(1000)]
    # Structurally valid JSON with wrong types everywhere.
    for _ in range(500):
        p = copy.deepcopy(valid())
        key = rng.choice(list(p))
        p[key] = rng.choice([None, 0, -1, 2**70, "", "x", [], {}, [None], {"a": 1}, 1.5])
        inputs.append(encode(p))
    decoded = 0
    for payload in inputs:
        try:
            b = _core.decode_row_batch(payload)
        except BatchRejected as exc:
            assert exc.code
            continue
        decoded += 1
        try:
            b.encode_state_copy(COPY_COLUMNS)
        except BatchRejected as exc:
            assert exc.code == "value_type_mismatch"
    assert decoded > 0
