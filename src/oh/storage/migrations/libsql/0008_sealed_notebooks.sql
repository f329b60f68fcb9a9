-- Sealed notebooks (docs/keys.md). A row here says the database's notebook content is sealed
-- with per-notebook data keys kept in a key store apart from it: a store opened without the
-- master key refuses such a database instead of writing plain content beside sealed content.
-- The store writes the row when it first opens the database with a keyring, after sealing every
-- notebook that was written before (oh.storage.libsql, `_seal_notebooks`).
CREATE TABLE sealing (
    id    INTEGER PRIMARY KEY CHECK (id = 1),
    since TEXT NOT NULL
);
