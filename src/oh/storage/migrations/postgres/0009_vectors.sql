-- Similarity recall on PostgreSQL (docs/recall.md), as the embedded backend's 0004 and 0007:
-- derived vectors, never text. Every row can be dropped and rebuilt from the notes and the
-- reviewed knowledge; each server keeps its own in-memory index built from these rows.

-- Working memory: one row per (notebook, model, digest). In a sealed database `vector` is the
-- vector sealed under the notebook's data key, and `digest` the digest's token. `seal` binds
-- each vector to its notebook (or owner), model and digest, for `oh verify`.
CREATE TABLE note_vectors (
    notebook_id TEXT COLLATE "C" NOT NULL,
    model_id    TEXT COLLATE "C" NOT NULL,
    digest      TEXT COLLATE "C" NOT NULL,
    vector      BYTEA NOT NULL,
    seal        TEXT,
    PRIMARY KEY (notebook_id, model_id, digest)
);

-- A vector computed outside the write transaction can arrive after the notebook was forgotten:
-- the database refuses it, like every other insert into a notebook that is not open.
CREATE TRIGGER note_vectors_only_into_open_notebooks
BEFORE INSERT ON note_vectors FOR EACH ROW EXECUTE FUNCTION oh_only_into_open_notebooks();

-- Forget and the purge delete a notebook's vectors with the rest of its content.
INSERT INTO content_tables (name, position) VALUES ('note_vectors', 6);

-- Reviewed knowledge is append-only and shared by every notebook of its owner: its vectors are
-- cached per (owner, model, digest). No notebook content lives here.
CREATE TABLE reviewed_vectors (
    owner    TEXT COLLATE "C" NOT NULL,
    model_id TEXT COLLATE "C" NOT NULL,
    digest   TEXT COLLATE "C" NOT NULL,
    vector   BYTEA NOT NULL,
    seal     TEXT,
    PRIMARY KEY (owner, model_id, digest)
);

-- No statistics on what tells of a note (0004): ANALYZE would copy it into pg_statistic.
ALTER TABLE note_vectors ALTER COLUMN digest SET STATISTICS 0;
ALTER TABLE note_vectors ALTER COLUMN vector SET STATISTICS 0;
ALTER TABLE note_vectors ALTER COLUMN seal SET STATISTICS 0;
ALTER TABLE reviewed_vectors ALTER COLUMN digest SET STATISTICS 0;
ALTER TABLE reviewed_vectors ALTER COLUMN vector SET STATISTICS 0;
ALTER TABLE reviewed_vectors ALTER COLUMN seal SET STATISTICS 0;

REVOKE ALL ON TABLE note_vectors FROM PUBLIC;
REVOKE ALL ON TABLE reviewed_vectors FROM PUBLIC;
