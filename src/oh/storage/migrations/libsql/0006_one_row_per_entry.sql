-- The log keeps each remember call in one row: the entry and its changes together. Before, an
-- entry was a `log` row plus one `log_changes` row per change, so every acknowledged call wrote
-- two more b-trees (the change rows and their key), and reading an entry back meant two
-- statements and a merge. Now a call writes one log row, its two keys and the current records.
--
-- The changes are the columns `op`, `name`, `content` and `digest`. `changes` counts them: with
-- one change (the usual call) each column holds that change's value as before; with several,
-- each holds a JSON array of the values in order (`content` and `digest` are null for a
-- remove), which SQLite's json_each and ->> and Python's json module read back exactly.
--
-- A rowid table with the two keys as unique indexes: rows hold whole notes (64 changes make a
-- row of ~25 KB), and a rowid table appends them where a WITHOUT ROWID b-tree would split
-- leaves around them. The entry hash covers every value here, so `verify` still finds any
-- alteration, of a count or an array included.
--
-- The arrays are aggregated over subqueries ordered by seq rather than with an ORDER BY inside
-- the aggregate, which SQLite accepts only from 3.44 on: the standard library's SQLite, one of
-- the two drivers of this file, may be older.
CREATE TABLE log_entries (
    notebook_id TEXT NOT NULL,
    version     INTEGER NOT NULL CHECK (version >= 1),
    request_id  TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    author      TEXT NOT NULL,
    written_at  TEXT NOT NULL,
    prev_hash   TEXT NOT NULL,
    hash        TEXT NOT NULL,
    changes     INTEGER NOT NULL CHECK (changes BETWEEN 1 AND 64),
    op          TEXT NOT NULL,
    name        TEXT NOT NULL,
    content     TEXT,
    digest      TEXT
);

INSERT INTO log_entries (notebook_id, version, request_id, fingerprint, author, written_at,
    prev_hash, hash, changes, op, name, content, digest)
SELECT l.notebook_id, l.version, l.request_id, l.fingerprint, l.author, l.written_at,
    l.prev_hash, l.hash, c.n,
    CASE WHEN c.n = 1 THEN c.op ELSE (SELECT json_group_array(s.op) FROM (SELECT op FROM log_changes
        WHERE notebook_id = l.notebook_id AND version = l.version ORDER BY seq) AS s) END,
    CASE WHEN c.n = 1 THEN c.name ELSE (SELECT json_group_array(s.name) FROM (SELECT name FROM
        log_changes WHERE notebook_id = l.notebook_id AND version = l.version ORDER BY seq) AS s)
        END,
    CASE WHEN c.n = 1 THEN c.content ELSE (SELECT json_group_array(s.content) FROM (SELECT content
        FROM log_changes WHERE notebook_id = l.notebook_id AND version = l.version ORDER BY seq)
        AS s) END,
    CASE WHEN c.n = 1 THEN c.digest ELSE (SELECT json_group_array(s.digest) FROM (SELECT digest
        FROM log_changes WHERE notebook_id = l.notebook_id AND version = l.version ORDER BY seq)
        AS s) END
FROM log AS l JOIN (
    SELECT notebook_id, version, count(*) AS n, min(op) AS op, min(name) AS name,
        min(content) AS content, min(digest) AS digest
    FROM log_changes
    GROUP BY notebook_id, version
) AS c ON c.notebook_id = l.notebook_id AND c.version = l.version
ORDER BY l.notebook_id, l.version;

DROP TABLE log_changes;
DROP TABLE log;
ALTER TABLE log_entries RENAME TO log;

CREATE UNIQUE INDEX log_by_version ON log (notebook_id, version);
CREATE UNIQUE INDEX log_by_request ON log (notebook_id, request_id);

CREATE TRIGGER log_only_into_open_notebooks
BEFORE INSERT ON log
WHEN (SELECT state FROM notebooks WHERE id = NEW.notebook_id) IS NOT 'open'
BEGIN
    SELECT RAISE(ABORT, 'oh: notebook is not open');
END;
