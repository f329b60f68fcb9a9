-- The memory database on PostgreSQL: notebooks, their append-only hash-chained logs, and the
-- derived current-record table. Same tables and columns as the embedded backend, so tools and
-- the conformance suites' tamper tests read both alike. Identifiers, names and UTC stamps use
-- the "C" collation: their order is byte order on every server, as on the embedded backend.
CREATE TABLE notebooks (
    id              TEXT COLLATE "C" PRIMARY KEY,
    owner           TEXT COLLATE "C" NOT NULL,
    document        TEXT COLLATE "C" NOT NULL,
    run             TEXT COLLATE "C" NOT NULL,
    state           TEXT COLLATE "C" NOT NULL
                    CHECK (state IN ('opening', 'open', 'expired', 'purged', 'empty')),
    started_at      TEXT COLLATE "C" NOT NULL,
    forgets_at      TEXT COLLATE "C" NOT NULL,
    version         BIGINT NOT NULL DEFAULT 0 CHECK (version >= 0),
    pinned_revision BIGINT,
    head_hash       TEXT COLLATE "C" NOT NULL,
    purged_at       TEXT COLLATE "C",
    UNIQUE (owner, document, run)
);

-- One row per applied remember call. (notebook_id, version) makes versions unique and
-- (notebook_id, request_id) makes request ids single-use: the database enforces both, across
-- every server process.
CREATE TABLE log (
    notebook_id TEXT COLLATE "C" NOT NULL REFERENCES notebooks (id),
    version     BIGINT NOT NULL CHECK (version >= 1),
    request_id  TEXT COLLATE "C" NOT NULL,
    fingerprint TEXT COLLATE "C" NOT NULL,
    author      TEXT COLLATE "C" NOT NULL,
    written_at  TEXT COLLATE "C" NOT NULL,
    prev_hash   TEXT COLLATE "C" NOT NULL,
    hash        TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY (notebook_id, version),
    UNIQUE (notebook_id, request_id)
);

-- The operations of each log entry, with the full canonical content written.
CREATE TABLE log_changes (
    notebook_id TEXT COLLATE "C" NOT NULL,
    version     BIGINT NOT NULL,
    seq         INTEGER NOT NULL,
    op          TEXT COLLATE "C" NOT NULL CHECK (op IN ('add', 'replace', 'remove')),
    name        TEXT COLLATE "C" NOT NULL,
    content     TEXT,
    digest      TEXT COLLATE "C",
    PRIMARY KEY (notebook_id, version, seq),
    FOREIGN KEY (notebook_id, version) REFERENCES log (notebook_id, version)
);

-- Derived: the fold of the log. `verify` recomputes it; `rebuild` replaces it.
CREATE TABLE records (
    notebook_id TEXT COLLATE "C" NOT NULL,
    name        TEXT COLLATE "C" NOT NULL,
    kind        TEXT COLLATE "C" NOT NULL,
    content     TEXT NOT NULL,
    digest      TEXT COLLATE "C" NOT NULL,
    author      TEXT COLLATE "C" NOT NULL,
    written_at  TEXT COLLATE "C" NOT NULL,
    version     BIGINT NOT NULL,
    PRIMARY KEY (notebook_id, name)
);
