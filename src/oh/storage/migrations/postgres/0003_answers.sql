-- Answers to the agent's questions, kept for paging and explain until they expire: working
-- memory like the rest, deleted with the notebook (as the embedded backend's 0003).
CREATE TABLE answers (
    notebook_id TEXT COLLATE "C" NOT NULL,
    answer_id   TEXT COLLATE "C" NOT NULL,
    caller      TEXT NOT NULL,
    question    TEXT NOT NULL,
    params      TEXT NOT NULL,
    version     BIGINT NOT NULL,
    revision    BIGINT,
    created_at  TEXT NOT NULL,
    expires_at  TEXT COLLATE "C" NOT NULL,
    rows        TEXT NOT NULL,
    PRIMARY KEY (notebook_id, answer_id)
);

CREATE TRIGGER answers_only_into_open_notebooks
BEFORE INSERT ON answers FOR EACH ROW EXECUTE FUNCTION oh_only_into_open_notebooks();

INSERT INTO content_tables (name, position) VALUES ('answers', 5);
