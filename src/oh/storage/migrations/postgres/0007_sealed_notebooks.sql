-- Sealed notebooks (docs/keys.md), as the embedded backend's 0008. A row here says the
-- database's notebook content is sealed with per-notebook data keys kept in a key store apart
-- from it (an embedded file, never a table of this cluster: its base backups and WAL archive
-- would keep every destroyed key): a store opened without the master key refuses such a
-- database instead of writing plain content beside sealed content. The store writes the row
-- when it first opens the database with a keyring, after sealing every notebook written before
-- (oh.storage.postgres, `_seal_notebooks`).
--
-- Owned by the application role, which migrates, so it reads and inserts here; the purge role
-- gets no privilege on it (`oh postgres roles` grants it none on any table): it never needs to
-- know whether content is sealed, only to run the purge functions.
CREATE TABLE sealing (
    id    INTEGER PRIMARY KEY CHECK (id = 1),
    since TEXT COLLATE "C" NOT NULL
);

REVOKE ALL ON TABLE sealing FROM PUBLIC;
