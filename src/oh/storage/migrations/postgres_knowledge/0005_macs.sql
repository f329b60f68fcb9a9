-- Authenticated reviewed knowledge (docs/keys.md), as on the embedded backend (its 0005): each
-- reviewed version, proposal, revision entry and pack install carries a MAC under the host's
-- knowledge MAC key, over every other column of its row (oh.knowledge_macs). NULL until written
-- by a store opened with keys; rows written before keys are MACed once, when a store first opens
-- with them. No role gains a privilege: the columns belong to the application role's tables,
-- and no function is created (the triggers below run the existing ones).
ALTER TABLE reviewed ADD COLUMN mac TEXT COLLATE "C";
ALTER TABLE revisions ADD COLUMN mac TEXT COLLATE "C";
ALTER TABLE proposals ADD COLUMN mac TEXT COLLATE "C";
ALTER TABLE packs ADD COLUMN mac TEXT COLLATE "C";

-- Append-only still, but for the MAC: a delete is refused, and so is an update naming any other
-- column (MACing existing rows, and MACing them again under a new master key, sets only the
-- MAC). A column added later joins these lists.
DROP TRIGGER reviewed_is_append_only ON reviewed;
CREATE TRIGGER reviewed_is_append_only BEFORE DELETE ON reviewed
FOR EACH ROW EXECUTE FUNCTION oh_reviewed_is_append_only();
CREATE TRIGGER reviewed_is_append_only_update
BEFORE UPDATE OF owner, name, revision, kind, content, digest, author, written_at, source,
    decision, proposal_id, supersedes ON reviewed
FOR EACH ROW EXECUTE FUNCTION oh_reviewed_is_append_only();

DROP TRIGGER revisions_are_append_only ON revisions;
CREATE TRIGGER revisions_are_append_only BEFORE DELETE ON revisions
FOR EACH ROW EXECUTE FUNCTION oh_revisions_are_append_only();
CREATE TRIGGER revisions_are_append_only_update
BEFORE UPDATE OF owner, revision, what, proposal_id, name, digest, made_by, made_at, prev_hash,
    hash ON revisions
FOR EACH ROW EXECUTE FUNCTION oh_revisions_are_append_only();

DROP TRIGGER packs_are_append_only ON packs;
CREATE TRIGGER packs_are_append_only BEFORE DELETE ON packs
FOR EACH ROW EXECUTE FUNCTION oh_packs_are_append_only();
CREATE TRIGGER packs_are_append_only_update
BEFORE UPDATE OF owner, name, revision, version, digest, content, installed_by, installed_at
    ON packs
FOR EACH ROW EXECUTE FUNCTION oh_packs_are_append_only();

-- A decision is recorded once; deciding sets the decided row's MAC in the same statement.
DROP TRIGGER proposals_decided_once ON proposals;
CREATE TRIGGER proposals_decided_once
BEFORE UPDATE OF id, owner, proposed_by, proposed_at, notebook_id, note_name, note_author,
    note_version, name, content, digest, source, state, decision, revision ON proposals
FOR EACH ROW WHEN (OLD.state <> 'pending') EXECUTE FUNCTION oh_proposals_decided_once();
