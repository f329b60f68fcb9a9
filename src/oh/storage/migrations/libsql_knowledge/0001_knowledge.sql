-- The knowledge database: each owner's reviewed library, append-only with revisions, and the
-- proposals and decisions that fed it. Nothing here expires; nothing here is working memory.
CREATE TABLE knowledge_bases (
    owner     TEXT PRIMARY KEY,
    revision  INTEGER NOT NULL DEFAULT 0 CHECK (revision >= 0),
    head_hash TEXT NOT NULL
) WITHOUT ROWID;

-- One row per revision: what made it (an accepted decision, later a pack install), hash-chained.
CREATE TABLE revisions (
    owner       TEXT NOT NULL REFERENCES knowledge_bases (owner),
    revision    INTEGER NOT NULL CHECK (revision >= 1),
    what        TEXT NOT NULL CHECK (what IN ('decision', 'pack')),
    proposal_id TEXT,
    name        TEXT,
    digest      TEXT,
    made_by     TEXT NOT NULL,
    made_at     TEXT NOT NULL,
    prev_hash   TEXT NOT NULL,
    hash        TEXT NOT NULL,
    PRIMARY KEY (owner, revision)
) WITHOUT ROWID;

-- Every version of every reviewed record. The record in view at revision R is, per name, the
-- row with the largest revision <= R. Rows are never updated or deleted.
CREATE TABLE reviewed (
    owner       TEXT NOT NULL,
    name        TEXT NOT NULL,
    revision    INTEGER NOT NULL,
    kind        TEXT NOT NULL,
    content     TEXT NOT NULL,
    digest      TEXT NOT NULL,
    author      TEXT NOT NULL,
    written_at  TEXT NOT NULL,
    source      TEXT NOT NULL,
    decision    TEXT NOT NULL,
    proposal_id TEXT,
    supersedes  INTEGER,
    PRIMARY KEY (owner, name, revision),
    FOREIGN KEY (owner, revision) REFERENCES revisions (owner, revision)
) WITHOUT ROWID;

CREATE INDEX reviewed_by_revision ON reviewed (owner, revision);

CREATE TABLE proposals (
    id          TEXT PRIMARY KEY,
    owner       TEXT NOT NULL,
    proposed_by TEXT NOT NULL,
    proposed_at TEXT NOT NULL,
    notebook_id TEXT,
    note_name   TEXT,
    note_author TEXT,
    note_version INTEGER,
    name        TEXT NOT NULL,
    content     TEXT NOT NULL,
    digest      TEXT NOT NULL,
    source      TEXT NOT NULL,
    state       TEXT NOT NULL CHECK (state IN ('pending', 'accepted', 'rejected')),
    decision    TEXT,
    revision    INTEGER,
    CHECK ((state = 'pending') = (decision IS NULL))
) WITHOUT ROWID;

CREATE INDEX proposals_by_owner ON proposals (owner, state, proposed_at);

-- Append-only: reviewed versions and revisions are never changed or removed.
CREATE TRIGGER reviewed_is_append_only_update BEFORE UPDATE ON reviewed
BEGIN
    SELECT RAISE(ABORT, 'oh: reviewed knowledge is append-only');
END;

CREATE TRIGGER reviewed_is_append_only_delete BEFORE DELETE ON reviewed
BEGIN
    SELECT RAISE(ABORT, 'oh: reviewed knowledge is append-only');
END;

CREATE TRIGGER revisions_are_append_only_update BEFORE UPDATE ON revisions
BEGIN
    SELECT RAISE(ABORT, 'oh: revisions are append-only');
END;

CREATE TRIGGER revisions_are_append_only_delete BEFORE DELETE ON revisions
BEGIN
    SELECT RAISE(ABORT, 'oh: revisions are append-only');
END;

-- A decision is recorded once: a decided proposal never changes again.
CREATE TRIGGER proposals_decided_once BEFORE UPDATE ON proposals
WHEN OLD.state != 'pending'
BEGIN
    SELECT RAISE(ABORT, 'oh: proposal already decided');
END;
