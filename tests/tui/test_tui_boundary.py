"""The console is a client of the HTTP API only: every screen loads without the server's
code (no database driver, no web framework, no MQTT, no governance or store modules)."""

from __future__ import annotations

import json
import subprocess
import sys

SCREENS = ("_app", "_lineages", "_lineage_detail", "_rows", "_reviews", "_review_detail",
           "_approve", "_registry", "_policy", "_events", "_quarantine", "_devices")


def test_every_screen_loads_without_server_code() -> None:
    code = ("import json, sys\n"
            + "".join(f"import edgesync.tui.{m}\n" for m in SCREENS)
            + "print(json.dumps(sorted(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True)
    loaded = set(json.loads(out.stdout.splitlines()[-1]))
    ours = {m for m in loaded if m.startswith("edgesync.")
            and not m.startswith(("edgesync.tui", "edgesync.client"))}
    # _vocabulary: the server's words, written from its enums, importing nothing.
    assert ours <= {"edgesync._defaults", "edgesync.errors", "edgesync._vocabulary"}, ours
    assert not loaded & {"asyncpg", "fastapi", "uvicorn", "aiomqtt", "psycopg"}
