-- Packs installed into each owner's knowledge base (docs/packs.md), as on the embedded backend. Each
-- install is one revision (`revisions.what = 'pack'`, hash-chained like a decision) and one row
-- here holding the pack's canonical content (RFC 8785, without its digest) and digest. The pack
-- in force per name at revision R is the row with the largest revision <= R. Rows are never
-- updated or deleted.
CREATE TABLE packs (
    owner        TEXT COLLATE "C" NOT NULL,
    name         TEXT COLLATE "C" NOT NULL,
    revision     BIGINT NOT NULL,
    version      TEXT COLLATE "C" NOT NULL,
    digest       TEXT COLLATE "C" NOT NULL,
    content      TEXT NOT NULL,
    installed_by TEXT COLLATE "C" NOT NULL,
    installed_at TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY (owner, name, revision),
    UNIQUE (owner, revision),
    FOREIGN KEY (owner, revision) REFERENCES revisions (owner, revision)
);

CREATE FUNCTION oh_packs_are_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'oh: installed packs are append-only';
END
$$;

CREATE TRIGGER packs_are_append_only BEFORE UPDATE OR DELETE ON packs
FOR EACH ROW EXECUTE FUNCTION oh_packs_are_append_only();
CREATE TRIGGER packs_are_append_only_truncate BEFORE TRUNCATE ON packs
FOR EACH STATEMENT EXECUTE FUNCTION oh_packs_are_append_only();
