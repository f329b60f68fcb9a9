-- The database itself refuses to bring a notebook back or to write into one that is not open,
-- whatever the code above it does (docs/design.md: a late write can never resurrect a notebook).
CREATE TRIGGER notebooks_stay_purged
BEFORE UPDATE OF state ON notebooks
WHEN OLD.state IN ('purged', 'empty') AND NEW.state != OLD.state
BEGIN
    SELECT RAISE(ABORT, 'oh: a purged notebook stays purged');
END;

CREATE TRIGGER log_only_into_open_notebooks
BEFORE INSERT ON log
WHEN (SELECT state FROM notebooks WHERE id = NEW.notebook_id) IS NOT 'open'
BEGIN
    SELECT RAISE(ABORT, 'oh: notebook is not open');
END;

CREATE TRIGGER records_only_into_open_notebooks
BEFORE INSERT ON records
WHEN (SELECT state FROM notebooks WHERE id = NEW.notebook_id) IS NOT 'open'
BEGIN
    SELECT RAISE(ABORT, 'oh: notebook is not open');
END;

CREATE TRIGGER log_changes_only_into_open_notebooks
BEFORE INSERT ON log_changes
WHEN (SELECT state FROM notebooks WHERE id = NEW.notebook_id) IS NOT 'open'
BEGIN
    SELECT RAISE(ABORT, 'oh: notebook is not open');
END;

CREATE INDEX notebooks_by_forget_time ON notebooks (state, forgets_at);
