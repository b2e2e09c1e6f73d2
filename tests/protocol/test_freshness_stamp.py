"""``first_seen_at_ms``, the optional freshness stamp of a batch (docs/protocol.md): the
decoders hand it over when it is an integer of milliseconds, and a batch without it, or
with a value that is not one, is decoded all the same (a hint never refuses data)."""

from __future__ import annotations

from typing import Any

import pytest

from edgesync import _core


@pytest.mark.parametrize("value, expected", [
    (1_767_225_600_000, 1_767_225_600_000), (0, 0), (None, None), ("soon", None),
    (-5, None), (1.5, None), (1 << 60, None), (True, None),
])
def test_the_row_decoder_reads_the_stamp(batches: Any, value: object,
                                         expected: int | None) -> None:
    f = batches("t")
    rows = f.rows(("insert", {"id": 1, "mode": "heat", "setpoint": 20.5}))
    extra = {} if value is None else {"first_seen_at_ms": value}
    batch = _core.decode_row_batch(f.payload(rows, **extra))
    assert batch.first_seen_at_ms == expected
