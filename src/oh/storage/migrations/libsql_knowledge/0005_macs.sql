-- Authenticated reviewed knowledge (docs/keys.md): each reviewed version, proposal, revision
-- entry and pack install carries a MAC under the host's knowledge MAC key, over every other
-- column of its row (oh.knowledge_macs). NULL until written by a store opened with keys; rows
-- written before keys are MACed once, when a store first opens with them.
ALTER TABLE reviewed ADD COLUMN mac TEXT;
ALTER TABLE revisions ADD COLUMN mac TEXT;
ALTER TABLE proposals ADD COLUMN mac TEXT;
ALTER TABLE packs ADD COLUMN mac TEXT;

-- Append-only still, but for the MAC: an update naming any other column is refused (MACing
-- existing rows, and MACing them again under a new master key, sets only the MAC). A column
-- added later joins these lists.
DROP TRIGGER reviewed_is_append_only_update;
CREATE TRIGGER reviewed_is_append_only_update
BEFORE UPDATE OF owner, name, revision, kind, content, digest, author, written_at, source,
    decision, proposal_id, supersedes ON reviewed
BEGIN
    SELECT RAISE(ABORT, 'oh: reviewed knowledge is append-only');
END;

DROP TRIGGER revisions_are_append_only_update;
CREATE TRIGGER revisions_are_append_only_update
BEFORE UPDATE OF owner, revision, what, proposal_id, name, digest, made_by, made_at, prev_hash,
    hash ON revisions
BEGIN
    SELECT RAISE(ABORT, 'oh: revisions are append-only');
END;

DROP TRIGGER packs_are_append_only_update;
CREATE TRIGGER packs_are_append_only_update
BEFORE UPDATE OF owner, name, revision, version, digest, content, installed_by, installed_at
    ON packs
BEGIN
    SELECT RAISE(ABORT, 'oh: installed packs are append-only');
END;

-- A decision is recorded once; deciding sets the decided row's MAC in the same statement.
DROP TRIGGER proposals_decided_once;
CREATE TRIGGER proposals_decided_once
BEFORE UPDATE OF id, owner, proposed_by, proposed_at, notebook_id, note_name, note_author,
    note_version, name, content, digest, source, state, decision, revision ON proposals
WHEN OLD.state != 'pending'
BEGIN
    SELECT RAISE(ABORT, 'oh: proposal already decided');
END;
