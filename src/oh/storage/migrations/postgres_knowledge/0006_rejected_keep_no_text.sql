-- A rejected proposal keeps its decision, not its text (docs/design.md, "Proposals"): rejecting
-- empties its content and digest in the deciding statement, and a proposal rejected before this
-- release is emptied once, when a store opens the schema. Emptying is the one change a decided
-- proposal may take; anything else is refused, as before.
DROP TRIGGER proposals_decided_once ON proposals;
CREATE TRIGGER proposals_decided_once
BEFORE UPDATE OF id, owner, proposed_by, proposed_at, notebook_id, note_name, note_author,
    note_version, name, content, digest, source, state, decision, revision ON proposals
FOR EACH ROW WHEN (OLD.state <> 'pending' AND NOT (
    OLD.state = 'rejected' AND NEW.state = 'rejected' AND NEW.content = '' AND NEW.digest = ''
    AND NEW.id = OLD.id AND NEW.owner = OLD.owner AND NEW.proposed_by = OLD.proposed_by
    AND NEW.proposed_at = OLD.proposed_at
    AND NEW.notebook_id IS NOT DISTINCT FROM OLD.notebook_id
    AND NEW.note_name IS NOT DISTINCT FROM OLD.note_name
    AND NEW.note_author IS NOT DISTINCT FROM OLD.note_author
    AND NEW.note_version IS NOT DISTINCT FROM OLD.note_version AND NEW.name = OLD.name
    AND NEW.source = OLD.source AND NEW.decision IS NOT DISTINCT FROM OLD.decision
    AND NEW.revision IS NOT DISTINCT FROM OLD.revision
))
EXECUTE FUNCTION oh_proposals_decided_once();
