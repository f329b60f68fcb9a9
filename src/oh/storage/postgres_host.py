"""The reference host's registry on the PostgreSQL knowledge database (its own tables there)."""

from __future__ import annotations

from typing import Any

from oh.storage.postgres import PostgresDatabase
from oh.storage.postgres_knowledge import KNOWLEDGE_MIGRATIONS

__all__ = ["PostgresHostRegistry"]


class PostgresHostRegistry(PostgresDatabase):
    """``HostRegistry`` on PostgreSQL; shares the knowledge database and its migrations."""

    COMPONENT = "knowledge"
    MIGRATIONS = KNOWLEDGE_MIGRATIONS

    def __init__(self, url: str, **options: Any) -> None:
        super().__init__(url, **{"max_size": 4, **options})

    def add_owner_token(self, token_hash: str, owner: str, created_at: str) -> None:
        with self._transaction() as conn:
            conn.execute(
                "INSERT INTO owner_tokens (token_hash, owner, created_at) VALUES (%s, %s, %s)",
                (token_hash, owner, created_at),
            )

    def owner_of_token(self, token_hash: str) -> str | None:
        with self._transaction() as conn:
            row = conn.execute(
                "SELECT owner FROM owner_tokens WHERE token_hash = %s", (token_hash,)
            ).fetchone()
        return None if row is None else str(row[0])

    def register_document(self, document: str, owner: str, at: str) -> str:
        with self._transaction() as conn:
            conn.execute(
                "INSERT INTO documents (document, owner, registered_at) VALUES (%s, %s, %s)"
                " ON CONFLICT (document) DO NOTHING",
                (document, owner, at),
            )
            row = conn.execute(
                "SELECT owner FROM documents WHERE document = %s", (document,)
            ).fetchone()
        assert row is not None  # inserted or already there, in this transaction
        return str(row[0])

    def document_owner(self, document: str) -> str | None:
        with self._transaction() as conn:
            row = conn.execute(
                "SELECT owner FROM documents WHERE document = %s", (document,)
            ).fetchone()
        return None if row is None else str(row[0])

    def remove_document(self, document: str) -> None:
        with self._transaction() as conn:
            conn.execute("DELETE FROM documents WHERE document = %s", (document,))

    def setting(self, key: str, default: str) -> str:
        with self._transaction() as conn:
            conn.execute(
                "INSERT INTO host_settings (key, value) VALUES (%s, %s)"
                " ON CONFLICT (key) DO NOTHING",
                (key, default),
            )
            row = conn.execute("SELECT value FROM host_settings WHERE key = %s", (key,)).fetchone()
        assert row is not None  # inserted or already there, in this transaction
        return str(row[0])
