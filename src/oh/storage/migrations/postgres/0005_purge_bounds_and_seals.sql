-- The purge role's functions (0002) took the caller's word for "now" and for the cutoff: with a
-- forged one the purge role could purge a notebook that had not expired, stamp any text as
-- `purged_at`, or mark empty a notebook still in the middle of opening. Now the database judges
-- by its own clock: the stamp is at most the transaction's start plus one minute (the allowance
-- of oh.storage.base.PURGE_CLOCK_ALLOWANCE, for a worker whose clock runs a little ahead), and
-- an opening is marked empty only if it started at least ten minutes before that stamp
-- (oh.storage.base.OPENING_GRACE_FLOOR). A worker whose clock runs ahead purges less; it never
-- fails. Signatures and grants are unchanged (CREATE OR REPLACE keeps both).

-- The latest stamp the purge may record: the database's clock plus the allowance, as
-- `oh.core.clock.utc_text` writes stamps.
CREATE FUNCTION oh_purge_bound() RETURNS TEXT LANGUAGE sql STABLE AS $$
    SELECT to_char(now() AT TIME ZONE 'UTC' + interval '1 minute',
                   'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') COLLATE "C"
$$;

-- The caller's "now" as the stamp to record: refused unless it is a well-formed UTC stamp, and
-- never later than the bound.
CREATE FUNCTION oh_purge_stamp(now TEXT) RETURNS TEXT LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF now IS NULL
        OR now !~ '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z$' THEN
        RAISE EXCEPTION 'oh: denied to the purge credential: not a time stamp';
    END IF;
    BEGIN
        PERFORM now::timestamptz;
    EXCEPTION WHEN datetime_field_overflow OR invalid_datetime_format THEN
        RAISE EXCEPTION 'oh: denied to the purge credential: not a time stamp';
    END;
    RETURN least(now COLLATE "C", oh_purge_bound());
END
$$;

-- The latest start of an opening that may be marked empty with this stamp.
CREATE FUNCTION oh_opening_floor(stamp TEXT) RETURNS TEXT LANGUAGE sql STABLE AS $$
    SELECT to_char((stamp::timestamptz AT TIME ZONE 'UTC') - interval '10 minutes',
                   'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') COLLATE "C"
$$;

CREATE OR REPLACE FUNCTION oh_expired_notebooks(now TEXT, max_rows INTEGER) RETURNS SETOF TEXT
LANGUAGE sql STABLE SECURITY DEFINER SET search_path FROM CURRENT AS $$
    SELECT id FROM notebooks
    WHERE state IN ('open', 'expired') AND forgets_at <= least(now COLLATE "C", oh_purge_bound())
    ORDER BY forgets_at LIMIT max_rows
$$;

CREATE OR REPLACE FUNCTION oh_stale_openings(cutoff TEXT, max_rows INTEGER) RETURNS SETOF TEXT
LANGUAGE sql STABLE SECURITY DEFINER SET search_path FROM CURRENT AS $$
    SELECT id FROM notebooks
    WHERE state = 'opening'
      AND started_at <= least(cutoff COLLATE "C", oh_opening_floor(oh_purge_bound()))
    ORDER BY started_at LIMIT max_rows
$$;

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

REVOKE ALL ON FUNCTION oh_purge_bound() FROM PUBLIC;
REVOKE ALL ON FUNCTION oh_purge_stamp(TEXT) FROM PUBLIC;
REVOKE ALL ON FUNCTION oh_opening_floor(TEXT) FROM PUBLIC;
