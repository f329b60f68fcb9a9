-- Similarity recall (docs/recall.md): derived vectors, never text. Every row here can be dropped and
-- rebuilt from the notes and the reviewed knowledge. A vector is the little-endian float32
-- array of one model's embedding of the rendered record (`kind name: text`), L2-normalised.
-- Rowid tables (not WITHOUT ROWID): a 384-dimension vector is 1.5 KB, too wide for a B-tree key.

-- Working memory: one row per (notebook, model, digest). A note whose content is unchanged keeps
-- its digest and so its vector; a replaced note gets a new digest and a new vector; catch-up
-- deletes the vectors of digests no longer current. The cache never reaches across notebooks,
-- so forget and purge (which delete by notebook_id) leave no vector of a note behind.
CREATE TABLE note_vectors (
    notebook_id TEXT NOT NULL,
    model_id    TEXT NOT NULL,
    digest      TEXT NOT NULL,
    vector      BLOB NOT NULL,
    PRIMARY KEY (notebook_id, model_id, digest)
);

-- A vector computed outside the write transaction can arrive after the notebook was forgotten:
-- the database refuses it, like every other insert into a notebook that is not open.
CREATE TRIGGER note_vectors_only_into_open_notebooks
BEFORE INSERT ON note_vectors
WHEN (SELECT state FROM notebooks WHERE id = NEW.notebook_id) IS NOT 'open'
BEGIN
    SELECT RAISE(ABORT, 'oh: notebook is not open');
END;

-- Reviewed knowledge is append-only and shared by every notebook of its owner, so its vectors
-- are cached per (owner, model, digest): each reviewed version is embedded once, whichever
-- revision a notebook pins. No notebook content lives here.
CREATE TABLE reviewed_vectors (
    owner    TEXT NOT NULL,
    model_id TEXT NOT NULL,
    digest   TEXT NOT NULL,
    vector   BLOB NOT NULL,
    PRIMARY KEY (owner, model_id, digest)
);
