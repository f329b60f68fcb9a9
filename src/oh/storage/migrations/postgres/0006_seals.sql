-- Seals for the stamped values verify cannot recompute from the log (oh.core.seals), as the
-- embedded backend's 0007: `notebooks.seal` binds a notebook's metadata (owner, document, run,
-- started_at, forgets_at, pinned_revision, the state it was sealed in; for a tombstone also its
-- state and purged_at), so that an edit such as forgets_at pushed to 2999 no longer matches.
-- The store writes it when it creates, opens and forgets a notebook. Existing rows are sealed
-- by a step in Python right after these statements, in the same transaction (oh.storage.postgres,
-- `_seal_existing`): once, so a seal missing later is reported instead of filled in.
ALTER TABLE notebooks ADD COLUMN seal TEXT COLLATE "C";

-- A tombstone's seal, chained from the seal of the notebook it closes: the purge functions
-- need only the seal, never owner, document or run. The text is oh.core.seals.closed_seal's.
CREATE FUNCTION oh_closed_seal(seal TEXT, state TEXT, at TEXT) RETURNS TEXT
LANGUAGE sql IMMUTABLE STRICT AS $$
    SELECT encode(sha256(convert_to(
        'oh/notebook/closed' || chr(10) || seal || chr(10) || state || chr(10) || at, 'UTF8'
    )), 'hex')
$$;

-- The purge functions as 0005 bounds them by the database's clock, now also sealing the
-- tombstone they leave.
CREATE OR REPLACE FUNCTION oh_purge_notebook(notebook TEXT, now TEXT) RETURNS json
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
    stamp TEXT := oh_purge_stamp(now);
BEGIN
    UPDATE notebooks SET state = 'purged', purged_at = stamp,
        seal = oh_closed_seal(seal, 'purged', stamp)
    WHERE id = notebook AND state IN ('open', 'expired') AND forgets_at <= stamp;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    RETURN oh_delete_content(notebook);
END
$$;

CREATE OR REPLACE FUNCTION oh_mark_empty(notebook TEXT, cutoff TEXT, now TEXT) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
    stamp TEXT := oh_purge_stamp(now);
BEGIN
    UPDATE notebooks SET state = 'empty', purged_at = stamp,
        seal = oh_closed_seal(seal, 'empty', stamp)
    WHERE id = notebook AND state = 'opening'
      AND started_at <= least(cutoff COLLATE "C", oh_opening_floor(stamp));
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    PERFORM oh_delete_content(notebook);
    RETURN true;
END
$$;
