-- The reference host's registry (as the embedded backend's 0003): owners' credentials (hashes
-- only), which owner each document belongs to, and settings every host process shares.
CREATE TABLE owner_tokens (
    token_hash TEXT COLLATE "C" PRIMARY KEY,
    owner      TEXT NOT NULL,
    created_at TEXT NOT NULL
);

CREATE TABLE documents (
    document      TEXT COLLATE "C" PRIMARY KEY,
    owner         TEXT NOT NULL,
    registered_at TEXT NOT NULL
);

CREATE TABLE host_settings (
    key   TEXT COLLATE "C" PRIMARY KEY,
    value TEXT NOT NULL
);
