-- At most one pending proposal per owner and record name: proposing a name that already waits
-- for review answers that proposal (same content and source) or is refused (anything else).
-- The code checks first; this index is what decides when two processes propose at once.
CREATE UNIQUE INDEX proposals_one_pending_per_name ON proposals (owner, name)
WHERE state = 'pending';
