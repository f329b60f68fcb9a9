-- The log keeps each remember call in one row, as the embedded backend does since its 0006:
-- the entry and its changes together. Before, an entry was a `log` row plus one `log_changes`
-- row per change, so a remember wrote three rows (log, change, current record) and four index
-- entries, and `oh_remember` ran a statement more. Measured before this step, the function
-- took 0.25 ms of server time per single-change call, a one-row prototype 0.12 ms; the two
-- no-resurrection triggers 0.009 ms each, so they stay: they are the database's own guarantee.
--
-- The changes are the columns `op`, `name`, `content` and `digest`. `changes` counts them: with
-- one change (the usual call) each column holds that change's value; with several, each holds
-- a JSON array of the values in order (`content` and `digest` are null for a remove). Both
-- backends read the rows back with the same code. The entry hash covers every value, so
-- `verify` still finds any alteration, of a count or an array included.
--
-- Existing entries are converted in place, in this migration's transaction: a cluster written
-- by the previous release reads back the same log, chain and exports.
CREATE TABLE log_entries (
    notebook_id TEXT COLLATE "C" NOT NULL REFERENCES notebooks (id),
    version     BIGINT NOT NULL CHECK (version >= 1),
    request_id  TEXT COLLATE "C" NOT NULL,
    fingerprint TEXT COLLATE "C" NOT NULL,
    author      TEXT COLLATE "C" NOT NULL,
    written_at  TEXT COLLATE "C" NOT NULL,
    prev_hash   TEXT COLLATE "C" NOT NULL,
    hash        TEXT COLLATE "C" NOT NULL,
    changes     INTEGER NOT NULL CHECK (changes BETWEEN 1 AND 64),
    op          TEXT COLLATE "C" NOT NULL,
    name        TEXT COLLATE "C" NOT NULL,
    content     TEXT,
    digest      TEXT COLLATE "C"
);

INSERT INTO log_entries (notebook_id, version, request_id, fingerprint, author, written_at,
    prev_hash, hash, changes, op, name, content, digest)
SELECT l.notebook_id, l.version, l.request_id, l.fingerprint, l.author, l.written_at,
    l.prev_hash, l.hash, c.n,
    CASE WHEN c.n = 1 THEN c.ops[1] ELSE array_to_json(c.ops)::TEXT END,
    CASE WHEN c.n = 1 THEN c.names[1] ELSE array_to_json(c.names)::TEXT END,
    CASE WHEN c.n = 1 THEN c.contents[1] ELSE array_to_json(c.contents)::TEXT END,
    CASE WHEN c.n = 1 THEN c.digests[1] ELSE array_to_json(c.digests)::TEXT END
FROM log AS l JOIN (
    SELECT notebook_id, version, count(*) AS n,
        array_agg(op ORDER BY seq) AS ops, array_agg(name ORDER BY seq) AS names,
        array_agg(content ORDER BY seq) AS contents, array_agg(digest ORDER BY seq) AS digests
    FROM log_changes
    GROUP BY notebook_id, version
) AS c ON c.notebook_id = l.notebook_id AND c.version = l.version;

DROP TABLE log_changes;
DROP TABLE log;
ALTER TABLE log_entries RENAME TO log;
ALTER TABLE log ADD CONSTRAINT log_pkey PRIMARY KEY (notebook_id, version);
ALTER TABLE log ADD CONSTRAINT log_notebook_id_request_id_key UNIQUE (notebook_id, request_id);
DELETE FROM content_tables WHERE name = 'log_changes';

CREATE TRIGGER log_only_into_open_notebooks
BEFORE INSERT ON log FOR EACH ROW EXECUTE FUNCTION oh_only_into_open_notebooks();

-- No statistics on what tells of a note (0004).
ALTER TABLE log ALTER COLUMN request_id SET STATISTICS 0;
ALTER TABLE log ALTER COLUMN fingerprint SET STATISTICS 0;
ALTER TABLE log ALTER COLUMN author SET STATISTICS 0;
ALTER TABLE log ALTER COLUMN op SET STATISTICS 0;
ALTER TABLE log ALTER COLUMN name SET STATISTICS 0;
ALTER TABLE log ALTER COLUMN content SET STATISTICS 0;
ALTER TABLE log ALTER COLUMN digest SET STATISTICS 0;
ALTER TABLE log ALTER COLUMN prev_hash SET STATISTICS 0;
ALTER TABLE log ALTER COLUMN hash SET STATISTICS 0;

REVOKE ALL ON TABLE log FROM PUBLIC;

-- The values of one column of a log row, in order: the value itself for one change, the JSON
-- array's items for several; no rows for an array that is not one (a damaged row, which
-- verify reports: it must not stop it).
CREATE FUNCTION oh_log_values(changes INTEGER, value TEXT) RETURNS TABLE (i BIGINT, v TEXT)
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF changes = 1 THEN
        RETURN QUERY SELECT 1::BIGINT, value;
        RETURN;
    END IF;
    BEGIN
        RETURN QUERY SELECT e.i, e.v FROM json_array_elements_text(value::json)
            WITH ORDINALITY AS e(v, i);
    EXCEPTION WHEN others THEN
        RETURN;
    END;
END
$$;

-- A remember call in one statement (0006), writing the one log row.
CREATE OR REPLACE FUNCTION oh_remember(
    p_notebook TEXT, p_based_on BIGINT, p_request_id TEXT, p_fingerprint TEXT, p_author TEXT,
    p_written_at TEXT, p_prev_hash TEXT, p_hash TEXT,
    p_ops TEXT[], p_names TEXT[], p_kinds TEXT[], p_contents TEXT[], p_digests TEXT[],
    OUT status TEXT, OUT version BIGINT, OUT head_hash TEXT, OUT names TEXT[],
    OUT digests TEXT[]
) LANGUAGE plpgsql AS $$
DECLARE
    n_state TEXT;
    n_forgets TEXT;
    n_version BIGINT;
    n_head TEXT;
    prior BIGINT;
    prior_fingerprint TEXT;
    prior_changes INTEGER;
    prior_names TEXT;
    prior_digests TEXT;
    single BOOLEAN := cardinality(p_ops) = 1;
BEGIN
    SELECT n.state, n.forgets_at, n.version, n.head_hash
    INTO n_state, n_forgets, n_version, n_head
    FROM notebooks AS n WHERE n.id = p_notebook FOR UPDATE;
    IF NOT FOUND OR n_state <> 'open' OR p_written_at COLLATE "C" >= n_forgets THEN
        status := 'decide';
        RETURN;
    END IF;
    SELECT l.version, l.fingerprint, l.changes, l.name, l.digest
    INTO prior, prior_fingerprint, prior_changes, prior_names, prior_digests
    FROM log AS l WHERE l.notebook_id = p_notebook AND l.request_id = p_request_id;
    IF FOUND THEN
        IF prior_fingerprint IS DISTINCT FROM p_fingerprint THEN
            status := 'decide';
            RETURN;
        END IF;
        status := 'reused';
        version := prior;
        names := ARRAY(SELECT v FROM oh_log_values(prior_changes, prior_names) ORDER BY i);
        digests := ARRAY(SELECT v FROM oh_log_values(prior_changes, prior_digests) ORDER BY i);
        RETURN;
    END IF;
    IF p_based_on <> n_version THEN
        status := 'stale';
        version := n_version;
        head_hash := n_head;
        RETURN;
    END IF;
    -- An add must name a missing record, a replace or a remove an existing one.
    IF single THEN
        IF (p_ops[1] = 'add') = EXISTS (
            SELECT FROM records AS r WHERE r.notebook_id = p_notebook AND r.name = p_names[1]
        ) THEN
            status := 'decide';
            RETURN;
        END IF;
    ELSIF EXISTS (
        SELECT FROM unnest(p_ops, p_names) AS c(op, name)
        WHERE (c.op = 'add') = EXISTS (
            SELECT FROM records AS r WHERE r.notebook_id = p_notebook AND r.name = c.name
        )
    ) THEN
        status := 'decide';
        RETURN;
    END IF;
    IF p_prev_hash IS DISTINCT FROM n_head OR p_hash IS NULL THEN
        status := 'head';
        version := n_version;
        head_hash := n_head;
        RETURN;
    END IF;
    IF single THEN
        INSERT INTO log (notebook_id, version, request_id, fingerprint, author, written_at,
                         prev_hash, hash, changes, op, name, content, digest)
        VALUES (p_notebook, n_version + 1, p_request_id, p_fingerprint, p_author, p_written_at,
                p_prev_hash, p_hash, 1, p_ops[1], p_names[1], p_contents[1], p_digests[1]);
        IF p_ops[1] = 'remove' THEN
            DELETE FROM records AS r WHERE r.notebook_id = p_notebook AND r.name = p_names[1];
        ELSE
            INSERT INTO records AS r (notebook_id, name, kind, content, digest, author,
                                      written_at, version)
            VALUES (p_notebook, p_names[1], p_kinds[1], p_contents[1], p_digests[1], p_author,
                    p_written_at, n_version + 1)
            ON CONFLICT (notebook_id, name) DO UPDATE SET kind = EXCLUDED.kind,
                content = EXCLUDED.content, digest = EXCLUDED.digest, author = EXCLUDED.author,
                written_at = EXCLUDED.written_at, version = EXCLUDED.version;
        END IF;
    ELSE
        INSERT INTO log (notebook_id, version, request_id, fingerprint, author, written_at,
                         prev_hash, hash, changes, op, name, content, digest)
        VALUES (p_notebook, n_version + 1, p_request_id, p_fingerprint, p_author, p_written_at,
                p_prev_hash, p_hash, cardinality(p_ops), array_to_json(p_ops)::TEXT,
                array_to_json(p_names)::TEXT, array_to_json(p_contents)::TEXT,
                array_to_json(p_digests)::TEXT);
        -- Removes, then upserts, as the full path applies them; each by its key.
        IF 'remove' = ANY (p_ops) THEN
            DELETE FROM records AS r USING unnest(p_ops, p_names) AS c(op, name)
            WHERE c.op = 'remove' AND r.notebook_id = p_notebook AND r.name = c.name;
        END IF;
        INSERT INTO records AS r (notebook_id, name, kind, content, digest, author, written_at,
                                  version)
        SELECT p_notebook, c.name, c.kind, c.content, c.digest, p_author, p_written_at,
               n_version + 1
        FROM unnest(p_ops, p_names, p_kinds, p_contents, p_digests)
             AS c(op, name, kind, content, digest)
        WHERE c.op <> 'remove'
        ON CONFLICT (notebook_id, name) DO UPDATE SET kind = EXCLUDED.kind,
            content = EXCLUDED.content, digest = EXCLUDED.digest, author = EXCLUDED.author,
            written_at = EXCLUDED.written_at, version = EXCLUDED.version;
    END IF;
    UPDATE notebooks SET version = n_version + 1, head_hash = p_hash WHERE id = p_notebook;
    status := 'applied';
    version := n_version + 1;
    head_hash := p_hash;
END
$$;

-- A single-change call (the usual one) with its change as five plain values: the client then
-- adapts no array (measured: adapting the five arrays cost the client more than the server
-- spends on the whole call). The same function does the work.
CREATE FUNCTION oh_remember_one(
    p_notebook TEXT, p_based_on BIGINT, p_request_id TEXT, p_fingerprint TEXT, p_author TEXT,
    p_written_at TEXT, p_prev_hash TEXT, p_hash TEXT,
    p_op TEXT, p_name TEXT, p_kind TEXT, p_content TEXT, p_digest TEXT,
    OUT status TEXT, OUT version BIGINT, OUT head_hash TEXT, OUT names TEXT[],
    OUT digests TEXT[]
) LANGUAGE sql AS $$
    SELECT * FROM oh_remember(p_notebook, p_based_on, p_request_id, p_fingerprint, p_author,
        p_written_at, p_prev_hash, p_hash, ARRAY[p_op], ARRAY[p_name], ARRAY[p_kind],
        ARRAY[p_content], ARRAY[p_digest])
$$;

REVOKE ALL ON FUNCTION oh_remember_one(TEXT, BIGINT, TEXT, TEXT, TEXT, TEXT, TEXT, TEXT, TEXT,
    TEXT, TEXT, TEXT, TEXT) FROM PUBLIC;
