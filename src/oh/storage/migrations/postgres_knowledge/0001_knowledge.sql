-- The knowledge database on PostgreSQL: each owner's reviewed library, append-only with
-- revisions, and the proposals and decisions that fed it. Same tables and columns as the
-- embedded backend. Nothing here expires; nothing here is working memory.
CREATE TABLE knowledge_bases (
    owner     TEXT COLLATE "C" PRIMARY KEY,
    revision  BIGINT NOT NULL DEFAULT 0 CHECK (revision >= 0),
    head_hash TEXT COLLATE "C" NOT NULL
);

-- One row per revision: what made it (an accepted decision, later a pack install), hash-chained.
CREATE TABLE revisions (
    owner       TEXT COLLATE "C" NOT NULL REFERENCES knowledge_bases (owner),
    revision    BIGINT NOT NULL CHECK (revision >= 1),
    what        TEXT COLLATE "C" NOT NULL CHECK (what IN ('decision', 'pack')),
    proposal_id TEXT COLLATE "C",
    name        TEXT COLLATE "C",
    digest      TEXT COLLATE "C",
    made_by     TEXT COLLATE "C" NOT NULL,
    made_at     TEXT COLLATE "C" NOT NULL,
    prev_hash   TEXT COLLATE "C" NOT NULL,
    hash        TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY (owner, revision)
);

-- Every version of every reviewed record. The record in view at revision R is, per name, the
-- row with the largest revision <= R. Rows are never updated or deleted.
CREATE TABLE reviewed (
    owner       TEXT COLLATE "C" NOT NULL,
    name        TEXT COLLATE "C" NOT NULL,
    revision    BIGINT NOT NULL,
    kind        TEXT COLLATE "C" NOT NULL,
    content     TEXT NOT NULL,
    digest      TEXT COLLATE "C" NOT NULL,
    author      TEXT COLLATE "C" NOT NULL,
    written_at  TEXT COLLATE "C" NOT NULL,
    source      TEXT NOT NULL,
    decision    TEXT NOT NULL,
    proposal_id TEXT COLLATE "C",
    supersedes  BIGINT,
    PRIMARY KEY (owner, name, revision),
    FOREIGN KEY (owner, revision) REFERENCES revisions (owner, revision)
);

CREATE INDEX reviewed_by_revision ON reviewed (owner, revision);

CREATE TABLE proposals (
    id           TEXT COLLATE "C" PRIMARY KEY,
    owner        TEXT COLLATE "C" NOT NULL,
    proposed_by  TEXT COLLATE "C" NOT NULL,
    proposed_at  TEXT COLLATE "C" NOT NULL,
    notebook_id  TEXT COLLATE "C",
    note_name    TEXT COLLATE "C",
    note_author  TEXT COLLATE "C",
    note_version BIGINT,
    name         TEXT COLLATE "C" NOT NULL,
    content      TEXT NOT NULL,
    digest       TEXT COLLATE "C" NOT NULL,
    source       TEXT NOT NULL,
    state        TEXT COLLATE "C" NOT NULL CHECK (state IN ('pending', 'accepted', 'rejected')),
    decision     TEXT,
    revision     BIGINT,
    CHECK ((state = 'pending') = (decision IS NULL))
);

CREATE INDEX proposals_by_owner ON proposals (owner, state, proposed_at);

-- Append-only: reviewed versions and revisions are never changed or removed, not even by
-- TRUNCATE (which skips row triggers, so it gets its own).
CREATE FUNCTION oh_reviewed_is_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'oh: reviewed knowledge is append-only';
END
$$;

CREATE FUNCTION oh_revisions_are_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'oh: revisions are append-only';
END
$$;

CREATE TRIGGER reviewed_is_append_only BEFORE UPDATE OR DELETE ON reviewed
FOR EACH ROW EXECUTE FUNCTION oh_reviewed_is_append_only();
CREATE TRIGGER reviewed_is_append_only_truncate BEFORE TRUNCATE ON reviewed
FOR EACH STATEMENT EXECUTE FUNCTION oh_reviewed_is_append_only();
CREATE TRIGGER revisions_are_append_only BEFORE UPDATE OR DELETE ON revisions
FOR EACH ROW EXECUTE FUNCTION oh_revisions_are_append_only();
CREATE TRIGGER revisions_are_append_only_truncate BEFORE TRUNCATE ON revisions
FOR EACH STATEMENT EXECUTE FUNCTION oh_revisions_are_append_only();

-- A decision is recorded once: a decided proposal never changes again.
CREATE FUNCTION oh_proposals_decided_once() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'oh: proposal already decided';
END
$$;

CREATE TRIGGER proposals_decided_once BEFORE UPDATE ON proposals
FOR EACH ROW WHEN (OLD.state <> 'pending') EXECUTE FUNCTION oh_proposals_decided_once();
