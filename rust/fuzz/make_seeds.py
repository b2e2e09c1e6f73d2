"""Writes the fuzz targets' seed corpus (rust/fuzz/seeds/<target>/) from the payloads the
test suite builds: the tests' batch factories (tests/conftest.py BatchFactory,
tests/kits/telemetry_payloads.py Telemetry), a few of their invalid variants, and the same
batches as zstd frames. Deterministic apart from batch ids; run it again when the payload
shapes change: ``.venv-test/bin/python rust/fuzz/make_seeds.py``."""

from __future__ import annotations

import hashlib
import sys
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "tests")]

from conftest import BatchFactory  # noqa: E402
from kits.telemetry_payloads import T0, Telemetry  # noqa: E402

from edgesync import _core  # noqa: E402

SEEDS = Path(__file__).resolve().parent / "seeds"


def write(target: str, data: bytes) -> None:
    folder = SEEDS / target
    folder.mkdir(parents=True, exist_ok=True)
    (folder / hashlib.sha1(data).hexdigest()[:16]).write_bytes(data)


def row_payloads() -> list[bytes]:
    f = BatchFactory()
    out = [
        f.payload(f.rows(("insert", {"id": 1, "mode": "heat", "setpoint": 20.5}),
                         ("update", {"id": 2, "mode": "cool", "setpoint": None}),
                         ("delete", {"id": 3, "mode": None, "setpoint": None}))),
        f.payload(f.rows(("insert", {"id": 4, "mode": "é\\n\"x\"", "setpoint": 1e300})),
                  with_schema=False),
        f.payload(f.rows(("insert", {"id": 5, "mode": "a", "setpoint": -0.0})),
                  first_seen_at_ms=1767225600123),
    ]
    wide = BatchFactory("fan_in", [("id", "INTEGER", 1, True)] + [
        (f"v{i}", t, 0, False) for i, t in enumerate(["TEXT", "REAL", "INTEGER", "BLOB"])])
    out.append(wide.payload(wide.rows(*[
        ("insert", {"id": i, "v0": f"t{i}", "v1": i / 3, "v2": i, "v3": "AAEC"})
        for i in range(5)])))
    return out


def telemetry_payloads() -> list[bytes]:
    t = Telemetry()
    return [t.samples(*[(T0 + timedelta(seconds=i), 20.0 + i) for i in range(4)]),
            t.samples((T0, None)),
            t.payload(t.rows((T0, 1.5)), row_count=2)]


def main() -> None:
    rows, telemetry = row_payloads(), telemetry_payloads()
    for p in rows:
        for pick in (0, 1, 2, 5):  # the first byte picks the columns' types
            write("decode_row_batch", bytes([pick]) + p)
    for p in telemetry:
        for pick in (0, 1, 2, 5):
            write("decode_telemetry_batch", bytes([pick]) + p)
    for p in rows + telemetry:
        write("parse_json", p)
        write("decompress_blob", _core.compress_blob(p, 3))
        write("inflate_batch", _core.compress_blob(p, 3))
    for doc in (b'{"a": [1, 2.5, "x", null, true, {"b": {}}]}', b"[]", b'"\\u00e9"'):
        write("parse_json", doc)
    for table, columns in (("device_state", [("id", "INTEGER", "1", "1"),
                                             ("mode", "TEXT", "0", "1")]),
                           ("temps", [("ts", "TEXT", "0", "1"), ("value_c", "REAL", "0", "0")])):
        write("schema_fingerprint", "\n".join(
            [table] + ["\t".join(c) for c in columns]).encode())
    print(f"seeds in {SEEDS}: " + ", ".join(
        f"{d.name} {len(list(d.iterdir()))}" for d in sorted(SEEDS.iterdir())))


if __name__ == "__main__":
    main()
