-- The reference host's registry (docs/http.md): owners' credentials (hashes only) and which
-- owner each document belongs to. Durable host data, never agent memory.
CREATE TABLE owner_tokens (
    token_hash TEXT PRIMARY KEY,
    owner      TEXT NOT NULL,
    created_at TEXT NOT NULL
) WITHOUT ROWID;

CREATE TABLE documents (
    document      TEXT PRIMARY KEY,
    owner         TEXT NOT NULL,
    registered_at TEXT NOT NULL
) WITHOUT ROWID;

-- Settings every host process must share, e.g. the secret that signs agent credentials and
-- explain tokens (created once by whichever process starts first).
CREATE TABLE host_settings (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) WITHOUT ROWID;
