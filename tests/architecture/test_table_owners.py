"""One module writes each cloud table: ``OWNERS`` maps every table the migrations create
to the one module allowed to INSERT, UPDATE, DELETE, COPY or TRUNCATE it (an upsert's
ON CONFLICT is its INSERT's), checked against the SQL text of every module of
``edgesync``. Other packages call the owner's functions (docs/architecture.md, Owners).

Tables whose names are made at run time (``edge_state_*``, ``edge_ts_*``, their
partitions and the per-connection staging temp tables) belong to ``materialize``.

``JOINT`` lists statements that write a second table next to their owner's on purpose
(one round trip on the ingest hot path), and ``NOT_YET`` the writes still outside their
owner: both may only shrink — a new stray write fails, and so does a listed one that is
gone (take it off the list).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from edgesync import errors

_PACKAGE = Path(errors.__file__).resolve().parent
_MIGRATIONS = _PACKAGE / "store" / "migrations"

# Device side: these write the device's SQLite files (the agent's state.db and journal,
# the demo's application database), never the cloud's PostgreSQL.
_DEVICE_SIDE = ("agent", "demo")

OWNERS: dict[str, str] = {
    # fleet
    "edge_projects": "fleet._devices",
    "edge_fleets": "fleet._devices",
    "edge_devices": "fleet._devices",
    # governance
    "edge_table_lineages": "governance._lineages",
    "edge_replay_intents": "governance._replay",
    "edge_events": "governance._events",
    "edge_schema_versions": "governance._versions",
    "edge_schema_reviews": "governance._review_queue",
    "edge_column_bindings": "governance._bindings",
    "edge_device_data_points": "governance._data_points",
    "edge_schema_registry": "governance._registry",
    "edge_registry_reviews": "governance._review_queue",
    "edge_retired_columns": "governance._retired",
    # ingest (the batch ledger and the device's reports)
    "edge_export_segments": "ingest._ledger",
    "edge_schema_observations": "ingest._reports",
    "edge_capture_gaps": "ingest._reports",
    # staging, quarantine, materialize
    "edge_staged_rows": "staging._staged",
    "edge_quarantined_rows": "quarantine._rows",
    "edge_data_point_values": "materialize._data_points",
    # control (the outbox of downlink controls, uploads)
    "edge_pending_controls": "control._outbox",
    "edge_uploads": "control._uploads",
    "edge_server_secrets": "control._uploads",
    # identity, credentials, api, store
    "edge_organizations": "identity._orgs",
    "edge_principals": "identity._principals",
    "edge_api_tokens": "identity._tokens",
    "edge_project_permissions": "identity._permissions",
    "edge_certificate_authorities": "credentials._authorities",
    "edge_bootstrap_certificates": "credentials._bootstrap",
    "edge_device_credentials": "credentials._device_credentials",
    "edge_broker_accounts": "credentials._broker_material",
    "edge_idempotency_keys": "api._idempotency",
    "edge_schema_migrations": "store._migrations",
    "edge_device_status": "observe._presence",
    "edge_lineage_freshness": "observe._presence",
    "edge_resnapshots": "control._resnapshot",
    "edge_verifications": "control._verify",
    "edge_sync_policies": "syncpolicy._policies",
    "edge_sync_policy_attachments": "syncpolicy._policies",
}

DYNAMIC = "(a table named at run time)"
DYNAMIC_OWNER = "materialize."  # any module of the package

JOINT: dict[tuple[str, str], str] = {
    ("ingest._ledger", "edge_table_lineages"):
        "settle_many: the ledger rows settle and the lineages count their materialized rows "
        "in one statement of the group writer (no extra round trip per group)",
    ("governance._bindings", "edge_schema_versions"):
        "load_state_target fills a version's first schema_columns in the statement that "
        "loads the target (live admission: no extra round trip)",
}

NOT_YET: dict[tuple[str, str], str] = {}

_WRITE = re.compile(
    r"(?<!\bDO )(?<!\bFOR )(?<!\bNO KEY )\b(?:INSERT\s+INTO|UPDATE|DELETE\s+FROM|COPY"
    r"|TRUNCATE(?:\s+TABLE)?)\s+(?:ONLY\s+)?(?P<table>\"?[\w{}.]+\"?)", re.IGNORECASE)
# asyncpg's COPY helpers name the table as an argument.
_COPY_CALLS = ("copy_records_to_table", "copy_to_table")


def _cloud_tables() -> set[str]:
    found = {"edge_schema_migrations"}
    for sql in _MIGRATIONS.glob("*.sql"):
        found.update(m.lower() for m in re.findall(
            r"CREATE\s+(?:UNLOGGED\s+)?TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?(\w+)",
            sql.read_text(), re.IGNORECASE))
    return found


def _text(node: ast.AST) -> str | None:
    """A string literal, an f-string or a ``+`` of strings, with ``{…}`` for what is not
    a literal."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(str(v.value) if isinstance(v, ast.Constant) else "{…}"
                       for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _text(node.left), _text(node.right)
        if left is not None or right is not None:
            return (left or "{…}") + (right or "{…}")
    return None


def _writes() -> dict[tuple[str, str], list[int]]:
    """``(module, table) → lines`` of every write in the package's SQL text; ``table`` is
    ``DYNAMIC`` for a name interpolated at run time."""
    tables = _cloud_tables()
    out: dict[tuple[str, str], list[int]] = {}
    for path in sorted(_PACKAGE.rglob("*.py")):
        rel = path.relative_to(_PACKAGE).with_suffix("")
        if rel.parts[0] in _DEVICE_SIDE:
            continue
        module = ".".join(p for p in rel.parts if p != "__init__")
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names: list[str] = []
            if (text := _text(node)) is not None:
                names = [m["table"] for m in _WRITE.finditer(text)]
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                  and node.func.attr in _COPY_CALLS):
                given = [*node.args[:1], *(k.value for k in node.keywords
                                           if k.arg == "table_name")]
                names = [(_text(given[0]) if given else None) or "{…}"]
            for name in names:
                name = name.strip('"').lower()
                if "{" in name:
                    table = DYNAMIC
                elif name in tables:
                    table = name
                else:
                    continue  # prose in a docstring, or not a table of ours
                out.setdefault((module, table), []).append(getattr(node, "lineno", 0))
    return out


def _owner(table: str) -> str:
    return DYNAMIC_OWNER if table == DYNAMIC else OWNERS[table]


def _owned(module: str, table: str) -> bool:
    owner = _owner(table)
    return module.startswith(owner) if owner.endswith(".") else module == owner


def test_every_cloud_table_has_one_owner() -> None:
    assert set(OWNERS) == _cloud_tables()
    for table, owner in OWNERS.items():
        assert (_PACKAGE / Path(*owner.split("."))).with_suffix(".py").is_file(), (table, owner)


def test_the_scan_finds_writes() -> None:
    """The scanner sees the owners' writes (a broken regex would pass everything)."""
    writes = _writes()
    assert ("governance._lineages", "edge_table_lineages") in writes
    assert ("ingest._ledger", "edge_export_segments") in writes
    assert any(m.startswith("materialize.") and t == DYNAMIC for m, t in writes)


def test_only_the_owner_writes_each_table() -> None:
    stray = {key: lines for key, lines in _writes().items() if not _owned(*key)}
    unexpected = {f"{m}:{lines} writes {t} (owner {_owner(t)})"
                  for (m, t), lines in stray.items() if (m, t) not in JOINT | NOT_YET}
    assert unexpected == set(), "call the owner's function instead"
    gone = set(JOINT | NOT_YET) - set(stray)
    assert gone == set(), "no longer written there: take these off JOINT / NOT_YET"


def test_lineage_state_moves_only_through_pause_and_resume() -> None:
    """``status`` / ``pause_reason`` / ``paused_by_control`` change in ``pause_lineage``
    and ``resume_lineage`` only (they emit the events)."""
    source = (_PACKAGE / "governance" / "_lineages.py").read_text()
    tree = ast.parse(source)
    setters = set()
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.AsyncFunctionDef):
            continue
        for node in ast.walk(fn):
            text = _text(node)
            if text and re.search(r"UPDATE edge_table_lineages.*\b(status|pause_reason|"
                                  r"paused_by_control)\s*=", text, re.IGNORECASE | re.DOTALL):
                setters.add(fn.name)
    assert setters == {"pause_lineage", "resume_lineage"}


def test_the_replay_channel_is_spelled_once() -> None:
    spelled = [str(p.relative_to(_PACKAGE)) for p in sorted(_PACKAGE.rglob("*.py"))
               if "'edge_replay'" in p.read_text() or '"edge_replay"' in p.read_text()]
    assert spelled == ["governance/_replay.py"]
