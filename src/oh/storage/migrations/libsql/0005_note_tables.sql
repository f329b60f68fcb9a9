-- The two tables that hold note content, `log_changes` and `records`, become rowid tables (same
-- columns, same primary keys, now enforced by a unique index). A row here is a whole note (about
-- 400 bytes and up), and SQLite stores a WITHOUT ROWID table's rows in its key's b-tree, so
-- every insert between existing keys (any current name that sorts before another; any notebook
-- written beside another) split and rewrote full leaves: one remember call with 64 changes to
-- scattered names dirtied ~175 pages. A rowid table appends the row and only the small key
-- lands in the index (~78 pages for the same call; reads measured the same).
--
-- The trigger `log_changes_only_into_open_notebooks` is not recreated: a log_changes row needs
-- its log entry (foreign key to `log`), the trigger on `log` refuses an entry into a notebook
-- that is not open, and forget and the purge delete a notebook's log in the transaction that
-- closes it, so it refused nothing the foreign key did not, while costing every write (libsql
-- compiles a statement's triggers each time it runs one). The trigger on `records` is recreated.
CREATE TABLE log_changes_rows (
    notebook_id TEXT NOT NULL,
    version     INTEGER NOT NULL,
    seq         INTEGER NOT NULL,
    op          TEXT NOT NULL CHECK (op IN ('add', 'replace', 'remove')),
    name        TEXT NOT NULL,
    content     TEXT,
    digest      TEXT,
    PRIMARY KEY (notebook_id, version, seq),
    FOREIGN KEY (notebook_id, version) REFERENCES log (notebook_id, version)
);
INSERT INTO log_changes_rows (notebook_id, version, seq, op, name, content, digest)
SELECT notebook_id, version, seq, op, name, content, digest FROM log_changes
ORDER BY notebook_id, version, seq;
DROP TABLE log_changes;
ALTER TABLE log_changes_rows RENAME TO log_changes;

-- Derived: the fold of the log. `verify` recomputes it; `rebuild` replaces it.
CREATE TABLE records_rows (
    notebook_id TEXT NOT NULL,
    name        TEXT NOT NULL,
    kind        TEXT NOT NULL,
    content     TEXT NOT NULL,
    digest      TEXT NOT NULL,
    author      TEXT NOT NULL,
    written_at  TEXT NOT NULL,
    version     INTEGER NOT NULL,
    PRIMARY KEY (notebook_id, name)
);
INSERT INTO records_rows (notebook_id, name, kind, content, digest, author, written_at, version)
SELECT notebook_id, name, kind, content, digest, author, written_at, version FROM records
ORDER BY notebook_id, name;
DROP TABLE records;
ALTER TABLE records_rows RENAME TO records;

CREATE TRIGGER records_only_into_open_notebooks
BEFORE INSERT ON records
WHEN (SELECT state FROM notebooks WHERE id = NEW.notebook_id) IS NOT 'open'
BEGIN
    SELECT RAISE(ABORT, 'oh: notebook is not open');
END;
