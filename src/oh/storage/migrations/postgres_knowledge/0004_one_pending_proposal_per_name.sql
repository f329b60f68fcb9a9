-- At most one pending proposal per owner and record name, as on the embedded backend: proposing
-- a name that already waits for review answers that proposal (same content and source) or is
-- refused (anything else). The index is what decides when two servers propose at once.
CREATE UNIQUE INDEX proposals_one_pending_per_name ON proposals (owner, name)
WHERE state = 'pending';
