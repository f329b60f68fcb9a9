-- Notebooks whose values are kept as tokens (docs/keys.md, What is sealed). In a sealed
-- database a notebook's record names, kinds, digests, request ids, fingerprints, entry hashes
-- and kept answers' ids are kept sealed deterministically under its data key
-- (`NotebookCipher.token`): equal values still compare equal, so every lookup, join and unique
-- key works as before, but once the key is destroyed a backup tells nothing of them, and
-- confirms no guess either (an unkeyed digest of a short value such as "positive" would).
--
-- A row here says the notebook's values are tokens. A sealing store writes it when it creates
-- or imports a notebook, and converts each notebook written before, once, in the transaction
-- that writes its row (oh.storage.sql_memory, `_token_notebooks`). A store without keys never
-- writes one.
CREATE TABLE sealed_values (
    notebook_id TEXT PRIMARY KEY
);
