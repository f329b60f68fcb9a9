-- The database itself refuses to bring a notebook back or to write into one that is not open,
-- whatever the code above it does (docs/design.md: a late write can never resurrect a notebook).
-- The messages start with 'oh: ' like the embedded backend's, so one translation maps both.
CREATE FUNCTION oh_notebooks_stay_purged() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'oh: a purged notebook stays purged';
END
$$;

CREATE TRIGGER notebooks_stay_purged
BEFORE UPDATE OF state ON notebooks
FOR EACH ROW
WHEN (OLD.state IN ('purged', 'empty') AND NEW.state IS DISTINCT FROM OLD.state)
EXECUTE FUNCTION oh_notebooks_stay_purged();

CREATE FUNCTION oh_only_into_open_notebooks() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF (SELECT state FROM notebooks WHERE id = NEW.notebook_id) IS DISTINCT FROM 'open' THEN
        RAISE EXCEPTION 'oh: notebook is not open';
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER log_only_into_open_notebooks
BEFORE INSERT ON log FOR EACH ROW EXECUTE FUNCTION oh_only_into_open_notebooks();

CREATE TRIGGER records_only_into_open_notebooks
BEFORE INSERT ON records FOR EACH ROW EXECUTE FUNCTION oh_only_into_open_notebooks();

-- log_changes needs no trigger of its own: each row needs its log entry (foreign key), the
-- trigger on `log` refuses an entry into a notebook that is not open, and forget and the purge
-- delete a notebook's log in the transaction that closes it (as the embedded backend's 0005).

CREATE INDEX notebooks_by_forget_time ON notebooks (state, forgets_at);
CREATE INDEX notebooks_opening ON notebooks (started_at) WHERE state = 'opening';

-- Every table holding a notebook's content, deleted in `position` order (children first).
-- Forget and the purge delete from exactly these; a later migration that adds a content table
-- (answers, vectors) inserts one row here.
CREATE TABLE content_tables (
    name     TEXT COLLATE "C" PRIMARY KEY,
    position INTEGER NOT NULL UNIQUE
);
INSERT INTO content_tables (name, position) VALUES ('log_changes', 10), ('records', 20), ('log', 30);

-- Delete every row of a notebook's content; return {table: rows removed}. Runs with the rights
-- of its caller: the application role for forget, the purge functions below for the purge.
CREATE FUNCTION oh_delete_content(notebook TEXT) RETURNS json LANGUAGE plpgsql AS $$
DECLARE
    tbl TEXT;
    removed BIGINT;
    counts TEXT[] := '{}';
BEGIN
    FOR tbl IN SELECT name FROM content_tables ORDER BY position LOOP
        EXECUTE format('DELETE FROM %I WHERE notebook_id = $1', tbl) USING notebook;
        GET DIAGNOSTICS removed = ROW_COUNT;
        counts := counts || ARRAY[tbl, removed::TEXT];
    END LOOP;
    RETURN (SELECT json_object_agg(counts[i], counts[i + 1]::BIGINT ORDER BY i)
            FROM generate_series(1, coalesce(array_length(counts, 1), 0), 2) AS i);
END
$$;

-- The purge worker's whole power (docs/design.md), as SECURITY DEFINER functions: its database role
-- holds no table privilege at all, only EXECUTE on these (granted by `oh postgres roles`).
-- Each re-checks its condition atomically, sees only ids and states, and returns only ids and
-- counts. search_path is pinned to this schema (then pg_temp) when the migration runs.
CREATE FUNCTION oh_expired_notebooks(now TEXT, max_rows INTEGER) RETURNS SETOF TEXT
LANGUAGE sql STABLE SECURITY DEFINER SET search_path FROM CURRENT AS $$
    SELECT id FROM notebooks
    WHERE state IN ('open', 'expired') AND forgets_at <= now
    ORDER BY forgets_at LIMIT max_rows
$$;

CREATE FUNCTION oh_stale_openings(cutoff TEXT, max_rows INTEGER) RETURNS SETOF TEXT
LANGUAGE sql STABLE SECURITY DEFINER SET search_path FROM CURRENT AS $$
    SELECT id FROM notebooks
    WHERE state = 'opening' AND started_at <= cutoff
    ORDER BY started_at LIMIT max_rows
$$;

-- Purge one notebook if it is (still) past its forget time: tombstone it and delete its
-- content in the caller's transaction. Returns the counts, or NULL if it was left alone.
CREATE FUNCTION oh_purge_notebook(notebook TEXT, now TEXT) RETURNS json
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
BEGIN
    UPDATE notebooks SET state = 'purged', purged_at = now
    WHERE id = notebook AND state IN ('open', 'expired') AND forgets_at <= now;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    RETURN oh_delete_content(notebook);
END
$$;

-- Mark `empty` one notebook still `opening` since before `cutoff`; true if it was marked.
CREATE FUNCTION oh_mark_empty(notebook TEXT, cutoff TEXT, now TEXT) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
BEGIN
    UPDATE notebooks SET state = 'empty', purged_at = now
    WHERE id = notebook AND state = 'opening' AND started_at <= cutoff;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    PERFORM oh_delete_content(notebook);
    RETURN true;
END
$$;

REVOKE ALL ON FUNCTION oh_expired_notebooks(TEXT, INTEGER) FROM PUBLIC;
REVOKE ALL ON FUNCTION oh_stale_openings(TEXT, INTEGER) FROM PUBLIC;
REVOKE ALL ON FUNCTION oh_purge_notebook(TEXT, TEXT) FROM PUBLIC;
REVOKE ALL ON FUNCTION oh_mark_empty(TEXT, TEXT, TEXT) FROM PUBLIC;
REVOKE ALL ON FUNCTION oh_delete_content(TEXT) FROM PUBLIC;
