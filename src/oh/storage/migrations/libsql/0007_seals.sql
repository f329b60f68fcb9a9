-- Seals for the stamped values verify cannot recompute from the log (oh.core.seals).
--
-- `notebooks.seal` binds a notebook's metadata (owner, document, run, started_at, forgets_at,
-- pinned_revision, the state it was sealed in; for a tombstone also its state and purged_at) so
-- that an edit such as forgets_at pushed to 2999 no longer matches. The store writes it when it
-- creates, opens and forgets a notebook; the purge worker chains it for the tombstones it makes.
--
-- `note_vectors.seal` and `reviewed_vectors.seal` bind each vector to its notebook (or owner),
-- model and digest: a zeroed, swapped or copied vector no longer matches.
--
-- Existing rows are sealed by a step in Python that runs right after these statements, in the
-- same transaction (oh.storage.libsql, `_seal_existing`): once, so that a seal missing later is
-- reported by verify instead of being filled in for whoever removed it.
ALTER TABLE notebooks ADD COLUMN seal TEXT;
ALTER TABLE note_vectors ADD COLUMN seal TEXT;
ALTER TABLE reviewed_vectors ADD COLUMN seal TEXT;
