-- ANALYZE samples column values into pg_statistic, which forget, the purge and VACUUM FULL of
-- the content tables never touch: forgotten text would stay in the catalog's files. No
-- statistics are gathered on columns that hold content (names, texts, request ids, answers);
-- the planner needs none of them (every lookup is by key).
ALTER TABLE log_changes ALTER COLUMN name SET STATISTICS 0;
ALTER TABLE log_changes ALTER COLUMN content SET STATISTICS 0;
ALTER TABLE log_changes ALTER COLUMN digest SET STATISTICS 0;
ALTER TABLE records ALTER COLUMN name SET STATISTICS 0;
ALTER TABLE records ALTER COLUMN kind SET STATISTICS 0;
ALTER TABLE records ALTER COLUMN content SET STATISTICS 0;
ALTER TABLE records ALTER COLUMN digest SET STATISTICS 0;
ALTER TABLE records ALTER COLUMN author SET STATISTICS 0;
ALTER TABLE log ALTER COLUMN request_id SET STATISTICS 0;
ALTER TABLE log ALTER COLUMN fingerprint SET STATISTICS 0;
ALTER TABLE log ALTER COLUMN author SET STATISTICS 0;
ALTER TABLE answers ALTER COLUMN rows SET STATISTICS 0;
ALTER TABLE answers ALTER COLUMN params SET STATISTICS 0;
ALTER TABLE answers ALTER COLUMN question SET STATISTICS 0;
