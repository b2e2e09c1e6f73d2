"""The realistic data set of the wire benchmark (bench_wire.py), generated once and
committed as ``benches/data/wire_realistic.json`` so every run measures the same bytes.

What a gateway next to someone's application holds, unlike the fan-in rows (whose values
repeat with small periods): an asset table keyed by random UUIDs, with free-text notes,
readings with sensor noise at full float precision, timestamps with milliseconds,
coordinates, versions and counters, changed by inserts, updates of a few columns and some
deletes; and a telemetry table of 24 sensors sampled with noise, a quality flag and units.

Regenerate (deterministic: the same seed gives the same file):
``.venv-test/bin/python benches/wire_data.py``.
"""

from __future__ import annotations

import json
import math
import random
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

PATH = Path(__file__).resolve().parent / "data" / "wire_realistic.json"
SEED = 20261206
STATE_OPS = 1000
SAMPLES = 2000

STATE_DDL = ("CREATE TABLE assets (id TEXT PRIMARY KEY, site TEXT NOT NULL, kind TEXT, "
             "status TEXT, temperature_c REAL, vibration_rms REAL, battery_mv INTEGER, "
             "firmware TEXT, note TEXT, last_seen TEXT, lat REAL, lon REAL, "
             "error_count INTEGER)")
TELEMETRY_DDL = ("CREATE TABLE readings (ts TEXT NOT NULL, sensor TEXT NOT NULL, "
                 "value REAL, quality INTEGER, unit TEXT)")

_WORDS = (
    "bearing", "replaced", "checked", "filter", "pump", "inlet", "pressure", "low", "high",
    "nominal", "drift", "alarm", "cleared", "operator", "shift", "night", "morning",
    "maintenance", "scheduled", "vibration", "noticed", "seal", "leak", "minor", "none",
    "valve", "calibrated", "sensor", "reading", "unstable", "restart", "firmware",
    "updated", "belt", "tension", "adjusted", "conveyor", "line", "motor", "overheated",
    "cooled", "fan", "blocked", "dust", "removed", "ticket", "awaiting", "parts",
    "approved", "rejected", "north", "south", "east", "west", "bay", "dock", "loading",
    "forklift", "battery", "swapped"
)
_KINDS = ("pump", "compressor", "conveyor", "chiller", "boiler", "fan", "valve", "press")
_STATUS = ("running", "idle", "maintenance", "fault", "offline")
_UNITS = ("C", "bar", "rpm", "A", "V", "%")


def _note(rng: random.Random) -> str | None:
    if rng.random() < 0.25:
        return None
    words = [rng.choice(_WORDS) for _ in range(rng.randint(2, 24))]
    if rng.random() < 0.4:
        words.insert(rng.randrange(len(words)), f"WO-{rng.randint(10000, 99999)}")
    return " ".join(words).capitalize() + "."


def _stamp(t: datetime) -> str:
    return t.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _asset(rng: random.Random, t: datetime) -> dict[str, Any]:
    return {"id": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
            "site": f"plant-{rng.randint(1, 12):02d}", "kind": rng.choice(_KINDS),
            "status": rng.choice(_STATUS),
            "temperature_c": rng.gauss(48.0, 9.0), "vibration_rms": abs(rng.gauss(2.2, 0.9)),
            "battery_mv": rng.randint(3300, 4200),
            "firmware": f"{rng.randint(1, 5)}.{rng.randint(0, 12)}.{rng.randint(0, 40)}",
            "note": _note(rng), "last_seen": _stamp(t),
            "lat": 48.1 + rng.random() * 0.2, "lon": 11.5 + rng.random() * 0.3,
            "error_count": rng.choice((0, 0, 0, 1, 2, rng.randint(3, 300)))}


def generate() -> dict[str, Any]:
    rng = random.Random(SEED)
    t = datetime(2026, 11, 2, 6, 0, tzinfo=UTC)
    live: dict[str, dict[str, Any]] = {}
    ops: list[list[Any]] = []
    for _ in range(STATE_OPS):
        t += timedelta(milliseconds=rng.randint(50, 4000))
        roll = rng.random()
        if not live or roll < 0.35:
            row = _asset(rng, t)
            live[row["id"]] = row
            ops.append(["insert", row])
        elif roll < 0.97:
            row = dict(live[rng.choice(list(live))])
            row["temperature_c"] = row["temperature_c"] + rng.gauss(0, 0.8)
            row["vibration_rms"] = abs(row["vibration_rms"] + rng.gauss(0, 0.2))
            row["last_seen"] = _stamp(t)
            if rng.random() < 0.2:
                row["status"] = rng.choice(_STATUS)
            if rng.random() < 0.1:
                row["note"] = _note(rng)
            if rng.random() < 0.1:
                row["error_count"] += 1
            live[row["id"]] = row
            ops.append(["update", row])
        else:
            key = rng.choice(list(live))
            del live[key]
            ops.append(["delete", {"id": key}])
    sensors = [(f"{rng.choice(_KINDS)}-{i:02d}/{rng.choice(('temp', 'flow', 'load'))}",
                rng.choice(_UNITS), rng.uniform(1, 900)) for i in range(24)]
    samples: list[list[Any]] = []
    t = datetime(2026, 11, 2, 6, 0, tzinfo=UTC)
    for i in range(SAMPLES):
        name, unit, base = sensors[i % len(sensors)]
        if i % len(sensors) == 0:
            t += timedelta(seconds=1, microseconds=rng.randint(0, 999) * 1000)
        value = base * (1 + 0.05 * math.sin(i / 150)) + rng.gauss(0, base * 0.01)
        samples.append([_stamp(t), name, value, rng.choice((192, 192, 192, 0, 64)), unit])
    return {"seed": SEED, "state_ddl": STATE_DDL, "telemetry_ddl": TELEMETRY_DDL,
            "state_ops": ops, "samples": samples}


if __name__ == "__main__":
    PATH.parent.mkdir(exist_ok=True)
    PATH.write_text(json.dumps(generate(), separators=(",", ":")) + "\n")
    print(f"wrote {PATH} ({PATH.stat().st_size:,} bytes)")
