-- The key store on PostgreSQL (docs/keys.md, "A key store for many servers"): every notebook's
-- data key, wrapped by the master key, shared by every server of a deployment. It belongs in a
-- cluster of its own, never WAL-archived, whose base backups outlive no forget window: a copy
-- of a destroyed key would undo the forgetting it stands for.

CREATE TABLE data_keys (
    notebook_id TEXT COLLATE "C" PRIMARY KEY,
    master_id   TEXT NOT NULL,
    wrapped     BYTEA NOT NULL
) WITH (
    -- A destroyed key's row is vacuumed at autovacuum's next round, not after thousands more.
    autovacuum_vacuum_threshold = 0,
    autovacuum_vacuum_scale_factor = 0
);
-- Kept in the row itself: never compressed or moved to a TOAST table (a key is 60 bytes).
ALTER TABLE data_keys ALTER COLUMN wrapped SET STORAGE PLAIN;
-- ANALYZE would sample wrapped keys into pg_statistic, which no destroy or VACUUM touches.
ALTER TABLE data_keys ALTER COLUMN wrapped SET STATISTICS 0;

CREATE TABLE key_markers (
    name  TEXT COLLATE "C" PRIMARY KEY,
    value TEXT NOT NULL
);

-- The purge worker's whole power here, as on the memory database: its role holds no privilege
-- on either table, only EXECUTE on this function (granted by `oh postgres roles`). It deletes
-- the keys and leaves a fresh mark that the file needs compacting (a random value, so a
-- server clears only the mark it compacted for); it returns only how many it deleted.
CREATE FUNCTION oh_destroy_data_keys(ids TEXT[]) RETURNS INTEGER
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
    gone INTEGER;
BEGIN
    DELETE FROM data_keys WHERE notebook_id = ANY(ids);
    GET DIAGNOSTICS gone = ROW_COUNT;
    IF gone > 0 THEN
        INSERT INTO key_markers (name, value) VALUES ('compaction_due', gen_random_uuid()::TEXT)
        ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value;
    END IF;
    RETURN gone;
END
$$;

REVOKE ALL ON FUNCTION oh_destroy_data_keys(TEXT[]) FROM PUBLIC;
