-- state.db as the agent left it before the versioned migration list (main at 4322b96):
-- PRAGMA user_version 0, meta.format 3, the DDL copied verbatim from _state.py and from
-- the five stores that created their own tables (_telemetry_state, _writeback, _uploads,
-- _resnapshot, _verify), then one row or more in every table.

-- _state.py
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
;  -- today's code ran this text with its newline, which SQLite keeps in an index's sql

-- _telemetry_state.py
CREATE TABLE IF NOT EXISTS telemetry_rowid (
    source_table TEXT PRIMARY KEY,
    high_water   INTEGER          -- NULL: no rowid covered yet
);

-- _writeback.py
CREATE TABLE IF NOT EXISTS cloud_versions (
    source_table  TEXT NOT NULL,
    pk            TEXT NOT NULL,   -- key_text(): JSON list of the key values, pk order
    cloud_version INTEGER NOT NULL,
    PRIMARY KEY (source_table, pk)
) WITHOUT ROWID
;  -- the newline too (see the index above)

-- _uploads.py
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

-- _resnapshot.py
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

-- _verify.py
CREATE TABLE IF NOT EXISTS verifications (
    job_id        TEXT PRIMARY KEY,
    source_table  TEXT NOT NULL,
    control       TEXT NOT NULL,
    requested_at  REAL NOT NULL,
    report        TEXT,              -- the digest, once taken
    sent          INTEGER NOT NULL DEFAULT 0
);

-- what the stores had written
INSERT INTO meta VALUES ('format', '3');
INSERT INTO meta VALUES ('journal_id', '0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b');
INSERT INTO meta VALUES ('last_sig_seq', '14');
INSERT INTO meta VALUES ('remote_policy', '{"revision":3,"policy_id":"p-1","policy_name":"plant","policy_version":2,"table_strategies":{"readings":{"strategy":"telemetry","ts_column":"ts"}}}');
INSERT INTO tables VALUES ('device_state', '0190a1b2-0000-7000-8000-000000000001', 41,
    'aa', '{"table_name":"device_state"}', 1, 0, NULL, 'aa');
INSERT INTO tables VALUES ('alarms', '0190a1b2-0000-7000-8000-000000000002', 7,
    'bb', '{"table_name":"alarms"}', 1, 1, 5, NULL);
INSERT INTO pending_batches VALUES ('device_state', 'batch-pending',
    '0190a1b2-0000-7000-8000-000000000001', 42, 50, 'aa', NULL);
INSERT INTO published_batches VALUES ('batch-published', 'device_state',
    '0190a1b2-0000-7000-8000-000000000001', 30, 41, 1720000000.5);
INSERT INTO gaps (source_table, journal_epoch, first_commit_seq, last_commit_seq,
    recorded_at) VALUES ('alarms', '0190a1b2-0000-7000-8000-000000000002', 1, 6,
    '2024-07-03T10:00:00.000000Z');
INSERT INTO controls VALUES ('ctl-done', X'7B7D', '2024-07-03T10:00:01.000000Z', 1);
INSERT INTO controls VALUES ('ctl-unfinished',
    CAST('{"control_id":"ctl-unfinished","control_kind":"pause_lineage","source_table":"alarms"}' AS BLOB),
    '2024-07-03T10:00:02.000000Z', 0);
INSERT INTO telemetry VALUES ('readings', 9, 1720000000000000, '[1]', 'cc',
    '{"table_name":"readings"}', 1, 'cc', 0, NULL);
INSERT INTO telemetry_sent VALUES ('readings', '[1]', 1720000000000000);
INSERT INTO telemetry_outbox VALUES ('readings', 7, 'tbatch-7', X'7B7D', 12, 1, 1720000001.25);
INSERT INTO telemetry_outbox VALUES ('readings', 8, 'tbatch-8', X'5B5D', 3, 0, NULL);
INSERT INTO telemetry_rowid VALUES ('readings', 120);
INSERT INTO cloud_versions VALUES ('device_state', '[1]', 7);
INSERT INTO uploads (source_table, segment_kind, journal_epoch, first_commit_seq,
    last_commit_seq, status, batch_id, presigned_url, expires_at) VALUES
    ('device_state', 'payload_spill', '0190a1b2-0000-7000-8000-000000000001', 51, 51,
     'granted', 'upload-1', 'http://127.0.0.1:1/u', '2099-01-01T00:00:00Z');
INSERT INTO resnapshots (job_id, source_table, filter, status, reading, cursor,
    journal_epoch, first_commit_seq, last_commit_seq, rows, chunks) VALUES
    ('job-r', 'device_state', '{"terms":[]}', 'running', 1, '[10]',
     '0190a1b2-0000-7000-8000-000000000001', 60, 70, 10, 1);
INSERT INTO verifications (job_id, source_table, control, requested_at) VALUES
    ('job-v', 'device_state', '{"job_id":"job-v"}', 1720000002.0);
