-- Packs installed into each owner's knowledge base (docs/packs.md). Each install is one revision
-- (`revisions.what = 'pack'`, hash-chained like a decision) and one row here holding the pack's
-- canonical content (RFC 8785, without its digest) and digest (sha256 hex of that content).
-- The pack in force per name at revision R is the row with the largest revision <= R, so the
-- installed profiles can be read at any revision. Rows are never updated or deleted.
CREATE TABLE packs (
    owner        TEXT NOT NULL,
    name         TEXT NOT NULL,
    revision     INTEGER NOT NULL,
    version      TEXT NOT NULL,
    digest       TEXT NOT NULL,
    content      TEXT NOT NULL,
    installed_by TEXT NOT NULL,
    installed_at TEXT NOT NULL,
    PRIMARY KEY (owner, name, revision),
    UNIQUE (owner, revision),
    FOREIGN KEY (owner, revision) REFERENCES revisions (owner, revision)
) WITHOUT ROWID;

CREATE TRIGGER packs_are_append_only_update BEFORE UPDATE ON packs
BEGIN
    SELECT RAISE(ABORT, 'oh: installed packs are append-only');
END;

CREATE TRIGGER packs_are_append_only_delete BEFORE DELETE ON packs
BEGIN
    SELECT RAISE(ABORT, 'oh: installed packs are append-only');
END;
