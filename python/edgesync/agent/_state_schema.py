"""Every table of ``state.db``, created by one versioned list of steps.

``MIGRATIONS[i]`` brings the file from version ``i`` to ``i + 1``; the version is
``PRAGMA user_version``. ``migrate`` runs the missing steps and sets the version in one
``BEGIN IMMEDIATE`` transaction, so a crash leaves the file at the old version with
nothing half done. A released step never changes: a new table or column is a new step
at the end. A file at a higher version than this agent knows (a newer agent wrote it)
is refused, not guessed at.

Files from before this list (``user_version`` 0) are adopted in place. Their tables
came from two places: ``_state`` created its own (``meta.format`` 1 to 3 said which
columns it had), and five stores created theirs when they were built. Steps 1 and 2 are
those two groups, written as those modules wrote them (the same text to the last
newline, which SQLite keeps in ``sqlite_master`` after an index or ``WITHOUT ROWID``: an
adopted file's schema is then a new file's) and with ``IF NOT EXISTS``, so a step adopts
what is there and creates what is missing. Later steps run on a file exactly once.

``meta.format`` stays ``3``: an agent from before this list checks it and runs with
this schema, so going back one release keeps working. A step that such an agent cannot
read must set it to ``4``, which that agent refuses with a clear error.

The journal (``__edgesync_journal``, ``__edgesync_meta``) is not here: it lives in the
application's database, written by its triggers, and ``_triggers`` creates it with them.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from edgesync.errors import DeviceStateError

__all__ = ["MIGRATIONS", "STATE_FORMAT", "Migration", "migrate", "schema_version"]

# The ``meta.format`` agents before this list check (see above).
STATE_FORMAT = "3"
_LEGACY_FORMATS = ("1", "2", "3")
# Columns formats 1 and 2 lacked (table, column, declaration).
_LEGACY_COLUMNS = (("tables", "observed_hash", "TEXT"),
                   ("telemetry_outbox", "published_at", "REAL"))

_STATE_TABLES = """
CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS tables (
    source_table              TEXT PRIMARY KEY,
    journal_epoch             TEXT NOT NULL,
    last_published_commit_seq INTEGER NOT NULL DEFAULT 0,
    schema_hash               TEXT,
    schema_json               TEXT,
    schema_sent               INTEGER NOT NULL DEFAULT 0,
    paused                    INTEGER NOT NULL DEFAULT 0,
    server_watermark          INTEGER,
    observed_hash             TEXT     -- schema_hash last published on sync/schema/observe
);
CREATE TABLE IF NOT EXISTS pending_batches (
    source_table        TEXT PRIMARY KEY,
    batch_id            TEXT NOT NULL,
    journal_epoch       TEXT NOT NULL,
    first_commit_seq    INTEGER NOT NULL,
    last_commit_seq     INTEGER NOT NULL,
    schema_hash         TEXT NOT NULL,
    schema_columns_json TEXT
);
CREATE TABLE IF NOT EXISTS gaps (
    gap_id           INTEGER PRIMARY KEY,
    source_table     TEXT NOT NULL,
    journal_epoch    TEXT NOT NULL,
    first_commit_seq INTEGER NOT NULL,
    last_commit_seq  INTEGER NOT NULL,
    recorded_at      TEXT NOT NULL,
    reported         INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS controls (
    control_id  TEXT PRIMARY KEY,
    doc         BLOB NOT NULL,
    received_at TEXT NOT NULL,
    executed    INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS telemetry (
    source_table     TEXT PRIMARY KEY,
    next_batch_seq   INTEGER NOT NULL DEFAULT 1,
    cursor_ts_us     INTEGER,
    cursor_key       TEXT,
    schema_hash      TEXT,
    schema_json      TEXT,
    schema_sent      INTEGER NOT NULL DEFAULT 0,
    observed_hash    TEXT,
    paused           INTEGER NOT NULL DEFAULT 0,
    server_watermark INTEGER
);
CREATE TABLE IF NOT EXISTS telemetry_sent (
    source_table TEXT NOT NULL,
    row_key      TEXT NOT NULL,
    ts_us        INTEGER NOT NULL,
    PRIMARY KEY (source_table, row_key)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS telemetry_outbox (
    source_table TEXT NOT NULL,
    batch_seq    INTEGER NOT NULL,
    batch_id     TEXT NOT NULL,
    payload      BLOB NOT NULL,
    row_count    INTEGER NOT NULL,
    published    INTEGER NOT NULL DEFAULT 0,
    published_at REAL,      -- wall clock of the last publish (for confirm_timeout)
    PRIMARY KEY (source_table, batch_seq)
);
CREATE TABLE IF NOT EXISTS published_batches (
    batch_id         TEXT PRIMARY KEY,  -- row batches the broker took, awaiting progress
    source_table     TEXT NOT NULL,
    journal_epoch    TEXT NOT NULL,
    first_commit_seq INTEGER NOT NULL,
    last_commit_seq  INTEGER NOT NULL,
    published_at     REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS published_batches_table
    ON published_batches (source_table, first_commit_seq)
"""

# The stores' own tables: the rowid high-water marks of telemetry tables
# (``_telemetry_state``), the cloud's row versions (``_writeback``), uploads
# (``_uploads``), re-snapshot jobs (``_resnapshot``) and verifications (``_verify``).
_STORE_TABLES = """
CREATE TABLE IF NOT EXISTS telemetry_rowid (
    source_table TEXT PRIMARY KEY,
    high_water   INTEGER          -- NULL: no rowid covered yet
);
CREATE TABLE IF NOT EXISTS cloud_versions (
    source_table  TEXT NOT NULL,
    pk            TEXT NOT NULL,   -- key_text(): JSON list of the key values, pk order
    cloud_version INTEGER NOT NULL,
    PRIMARY KEY (source_table, pk)
) WITHOUT ROWID
;
CREATE TABLE IF NOT EXISTS uploads (
    upload_key       INTEGER PRIMARY KEY,
    source_table     TEXT NOT NULL,
    segment_kind     TEXT NOT NULL,
    journal_epoch    TEXT NOT NULL,
    first_commit_seq INTEGER NOT NULL,   -- the reserved journal range
    last_commit_seq  INTEGER NOT NULL,
    status           TEXT NOT NULL DEFAULT 'wanted',
    batch_id         TEXT,               -- from the url_grant
    presigned_url    TEXT,
    expires_at       TEXT,
    gone_rows        INTEGER             -- journal rows of the range not in the object
);
CREATE TABLE IF NOT EXISTS resnapshots (
    job_id            TEXT PRIMARY KEY,
    source_table      TEXT NOT NULL,
    filter            TEXT NOT NULL,
    status            TEXT NOT NULL DEFAULT 'running',   -- running, completed, failed
    reading           INTEGER NOT NULL DEFAULT 1,        -- chunks still to read
    cursor            TEXT,                              -- the last key read (JSON)
    journal_epoch     TEXT,
    first_commit_seq  INTEGER,
    last_commit_seq   INTEGER,
    rows              INTEGER NOT NULL DEFAULT 0,
    chunks            INTEGER NOT NULL DEFAULT 0,
    error             TEXT,
    reported          TEXT                               -- the last report published
);
CREATE TABLE IF NOT EXISTS verifications (
    job_id        TEXT PRIMARY KEY,
    source_table  TEXT NOT NULL,
    control       TEXT NOT NULL,
    requested_at  REAL NOT NULL,
    report        TEXT,              -- the digest, once taken
    sent          INTEGER NOT NULL DEFAULT 0
)
"""


@dataclass(frozen=True, slots=True)
class Migration:
    """One step: its statements (``;``-separated), then ``fix`` when given (what SQL
    text cannot say, e.g. what depends on the columns a table already has)."""

    summary: str
    sql: str
    fix: Callable[[sqlite3.Connection, Path], None] | None = None

    def apply(self, db: sqlite3.Connection, path: Path) -> None:
        for stmt in self.sql.split(";"):
            if stmt.strip():
                db.execute(stmt)
        if self.fix is not None:
            self.fix(db, path)


def _adopt_format(db: sqlite3.Connection, path: Path) -> None:
    """A file from ``_state`` before this list: add the columns formats 1 and 2 lacked;
    a new file gets ``meta.format`` (see the module docstring)."""
    row = db.execute("SELECT value FROM meta WHERE key='format'").fetchone()
    if row is None:
        db.execute("INSERT INTO meta VALUES ('format', ?)", (STATE_FORMAT,))
        return
    if row[0] not in _LEGACY_FORMATS:
        raise DeviceStateError(f"state database {str(path)!r} has format {row[0]}, this "
                               f"agent understands {STATE_FORMAT}; use the agent that "
                               "wrote it, or give this one a new state_db_path")
    for table, column, decl in _LEGACY_COLUMNS:
        have = {r[1] for r in db.execute(f"PRAGMA table_info({table})")}
        if column not in have:
            db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {decl}")
    db.execute("UPDATE meta SET value=? WHERE key='format'", (STATE_FORMAT,))


MIGRATIONS: tuple[Migration, ...] = (
    Migration("state tables (formats 1 to 3 of _state adopted)", _STATE_TABLES,
              _adopt_format),
    Migration("the tables the stores created when built, adopted", _STORE_TABLES),
    Migration("wire bytes published per UTC day (the daily bandwidth budget)", """
CREATE TABLE wire_usage (
    day    TEXT PRIMARY KEY,          -- the UTC day, YYYY-MM-DD
    bytes  INTEGER NOT NULL DEFAULT 0 -- bytes published to the broker that day
)"""),
)


def schema_version(db: sqlite3.Connection) -> int:
    return int(db.execute("PRAGMA user_version").fetchone()[0])


def migrate(db: sqlite3.Connection, path: Path) -> int:
    """Bring ``db`` (an autocommit connection to ``path``) to the last version; returns
    the version it had."""
    latest = len(MIGRATIONS)
    try:
        db.execute("BEGIN IMMEDIATE")
        try:
            have = schema_version(db)
            if have > latest:
                raise DeviceStateError(
                    f"state database {str(path)!r} is at schema version {have}; this agent "
                    f"knows up to {latest} (a newer agent wrote it); upgrade the agent, or "
                    "give it a new state_db_path")
            for step in MIGRATIONS[have:]:
                step.apply(db, path)
            if have != latest:
                db.execute(f"PRAGMA user_version = {latest}")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")
    except sqlite3.Error as exc:
        raise DeviceStateError(
            f"cannot prepare state database {str(path)!r}: {exc}") from exc
    return have
