-- The memory database: notebooks, their append-only hash-chained logs, and the derived
-- current-record table. Nothing here is knowledge; reviewed records live elsewhere.
CREATE TABLE notebooks (
    id              TEXT PRIMARY KEY,
    owner           TEXT NOT NULL,
    document        TEXT NOT NULL,
    run             TEXT NOT NULL,
    state           TEXT NOT NULL CHECK (state IN ('opening', 'open', 'expired', 'purged', 'empty')),
    started_at      TEXT NOT NULL,
    forgets_at      TEXT NOT NULL,
    version         INTEGER NOT NULL DEFAULT 0 CHECK (version >= 0),
    pinned_revision INTEGER,
    head_hash       TEXT NOT NULL,
    purged_at       TEXT,
    UNIQUE (owner, document, run)
) WITHOUT ROWID;

-- One row per applied remember call. (notebook_id, version) makes versions unique and
-- (notebook_id, request_id) makes request ids single-use: the database enforces both.
CREATE TABLE log (
    notebook_id TEXT NOT NULL REFERENCES notebooks (id),
    version     INTEGER NOT NULL CHECK (version >= 1),
    request_id  TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    author      TEXT NOT NULL,
    written_at  TEXT NOT NULL,
    prev_hash   TEXT NOT NULL,
    hash        TEXT NOT NULL,
    PRIMARY KEY (notebook_id, version),
    UNIQUE (notebook_id, request_id)
) WITHOUT ROWID;

-- The operations of each log entry, with the full canonical content written.
CREATE TABLE log_changes (
    notebook_id TEXT NOT NULL,
    version     INTEGER NOT NULL,
    seq         INTEGER NOT NULL,
    op          TEXT NOT NULL CHECK (op IN ('add', 'replace', 'remove')),
    name        TEXT NOT NULL,
    content     TEXT,
    digest      TEXT,
    PRIMARY KEY (notebook_id, version, seq),
    FOREIGN KEY (notebook_id, version) REFERENCES log (notebook_id, version)
) WITHOUT ROWID;

-- Derived: the fold of the log. `verify` recomputes it; `rebuild` replaces it.
CREATE TABLE records (
    notebook_id TEXT NOT NULL,
    name        TEXT NOT NULL,
    kind        TEXT NOT NULL,
    content     TEXT NOT NULL,
    digest      TEXT NOT NULL,
    author      TEXT NOT NULL,
    written_at  TEXT NOT NULL,
    version     INTEGER NOT NULL,
    PRIMARY KEY (notebook_id, name)
) WITHOUT ROWID;
