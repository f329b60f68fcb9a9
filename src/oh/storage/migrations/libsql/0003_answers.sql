-- Answers to the agent's questions, kept for paging and explain until they expire. Working
-- memory like the rest: notebook-scoped, deleted with the notebook. A rowid table: answers can
-- be large, and large rows belong in rowid tables.
CREATE TABLE answers (
    notebook_id TEXT NOT NULL,
    answer_id   TEXT NOT NULL,
    caller      TEXT NOT NULL,
    question    TEXT NOT NULL,
    params      TEXT NOT NULL,
    version     INTEGER NOT NULL,
    revision    INTEGER,
    created_at  TEXT NOT NULL,
    expires_at  TEXT NOT NULL,
    rows        TEXT NOT NULL
);

CREATE UNIQUE INDEX answers_by_id ON answers (notebook_id, answer_id);

CREATE TRIGGER answers_only_into_open_notebooks
BEFORE INSERT ON answers
WHEN (SELECT state FROM notebooks WHERE id = NEW.notebook_id) IS NOT 'open'
BEGIN
    SELECT RAISE(ABORT, 'oh: notebook is not open');
END;
