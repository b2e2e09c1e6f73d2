"""``_core.RowEncoder``: batch entries written from sqlite3 row tuples."""

from __future__ import annotations

import json
import math
import struct

import pytest

from edgesync import _core


def _enc(pk: list[str], cols: list[str], live: int | None = None) -> _core.RowEncoder:
    return _core.RowEncoder(pk, cols, 2 + len(pk) if live is None else live)


def test_values_and_layout() -> None:
    enc = _enc(["id"], ["id", "s", "r", "b", "n"])
    [row] = enc.encode_rows([(7, "insert", 1, 1, 'q"\\\n\x01ü', 0.1, b"\x00\xff", None)])
    assert row.commit_seq == 7
    assert row.encoded == (
        b'{"commit_seq":7,"op":"insert","pk":{"id":1},"row":{"id":1,'
        b'"s":"q\\"\\\\\\n\\u0001\xc3\xbc","r":0.1,"b":{"$blob":"00FF"},"n":null}}')


def test_delete_and_gone_rows() -> None:
    enc = _enc(["a", "b"], ["a", "b", "v"])
    rows = enc.encode_rows([
        (1, "delete", "x", 2, None, None, None),   # delete: row null
        (2, "update", "x", 2, None, None, None),   # row gone: no entry
        (3, "update", "x", 2, "x", 2, 5),
    ])
    assert [r.commit_seq for r in rows] == [1, 2, 3]
    assert json.loads(rows[0].encoded or b"") == {
        "commit_seq": 1, "op": "delete", "pk": {"a": "x", "b": 2}, "row": None}
    assert rows[1].encoded is None
    assert json.loads(rows[2].encoded or b"")["row"] == {"a": "x", "b": 2, "v": 5}


def test_reals_round_trip_and_infinity_is_null() -> None:
    enc = _enc(["id"], ["id", "r"])
    values = [0.1, 1 / 3, 1e20, 1e-7, 5e-324, 1.7976931348623157e308, -0.0, 3.0,
              2.0 ** 53 + 2, 123456789.123456789]
    rows = enc.encode_rows([(i, "insert", i, i, v) for i, v in enumerate(values)])
    for v, r in zip(values, rows, strict=True):
        got = json.loads(r.encoded or b"")["row"]["r"]
        assert isinstance(got, float)
        assert struct.pack("<d", got) == struct.pack("<d", v)
    inf = enc.encode_rows([(1, "insert", 1, 1, math.inf), (2, "insert", 2, 2, -math.inf)])
    assert [json.loads(r.encoded or b"")["row"]["r"] for r in inf] == [None, None]


def test_integer_range_and_names_escaped() -> None:
    enc = _enc(['k"ey'], ['k"ey', "\x7f"])
    [r] = enc.encode_rows([(1, "insert", -(2 ** 63), -(2 ** 63), 2 ** 63 - 1)])
    assert json.loads(r.encoded or b"") == {
        "commit_seq": 1, "op": "insert", "pk": {'k"ey': -(2 ** 63)},
        "row": {'k"ey': -(2 ** 63), "\x7f": 2 ** 63 - 1}}


def test_live_index_points_at_extra_flag() -> None:
    enc = _core.RowEncoder(["id"], ["id", "v"], 5)
    a, b = enc.encode_rows([(1, "insert", None, None, 1, 1), (2, "insert", None, None, 1, None)])
    assert json.loads(a.encoded or b"")["row"] == {"id": None, "v": 1}
    assert b.encoded is None


def test_bad_input() -> None:
    enc = _enc(["id"], ["id", "v"])
    with pytest.raises(ValueError, match="needs 5"):
        enc.encode_rows([(1, "insert", 1, 1)])
    with pytest.raises(TypeError):
        enc.encode_rows([(1, "insert", 1, 1, [1])])
    with pytest.raises(OverflowError):
        enc.encode_rows([(1, "insert", 1, 1, 2 ** 64)])
    with pytest.raises(ValueError):
        _core.RowEncoder(["id"], ["id"], 1)


def test_journal_row() -> None:
    r = _core.JournalRow(5, b"{}")
    assert (r.commit_seq, r.encoded) == (5, b"{}")
    assert _core.JournalRow(6, None).encoded is None
    assert "commit_seq=5" in repr(r)
