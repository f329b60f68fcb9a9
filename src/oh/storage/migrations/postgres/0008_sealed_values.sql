-- Notebooks whose values are kept as tokens, as the embedded backend's 0009: in a sealed
-- database a notebook's record names, kinds, digests, request ids, fingerprints, entry hashes
-- and kept answers' ids are sealed deterministically under its data key, so lookups and unique
-- keys work as before while a backup tells nothing of them once the key is destroyed. A sealing
-- store writes the row when it creates or imports a notebook, and converts each notebook
-- written before, once, in the transaction that writes its row (oh.storage.sql_memory,
-- `_token_notebooks`).
--
-- Owned by the application role, which migrates; the purge role gets no privilege on it.
CREATE TABLE sealed_values (
    notebook_id TEXT COLLATE "C" PRIMARY KEY
);

REVOKE ALL ON TABLE sealed_values FROM PUBLIC;
