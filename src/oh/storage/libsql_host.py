"""The reference host's registry on the embedded knowledge database (its own tables there)."""

from __future__ import annotations

from oh.storage.libsql import LibsqlDatabase, translated

__all__ = ["LibsqlHostRegistry"]


class LibsqlHostRegistry(LibsqlDatabase):
    """``HostRegistry`` on the knowledge database file (tables from its migrations)."""

    MIGRATIONS = "oh.storage.migrations.libsql_knowledge"

    def add_owner_token(self, token_hash: str, owner: str, created_at: str) -> None:
        with self._write() as conn:
            conn.execute(
                "INSERT INTO owner_tokens (token_hash, owner, created_at) VALUES (?, ?, ?)",
                (token_hash, owner, created_at),
            )

    def owner_of_token(self, token_hash: str) -> str | None:
        with self._lock, translated():
            row = self._conn.execute(
                "SELECT owner FROM owner_tokens WHERE token_hash = ?", (token_hash,)
            ).fetchone()
        return None if row is None else str(row[0])

    def register_document(self, document: str, owner: str, at: str) -> str:
        with self._write() as conn:
            conn.execute(
                "INSERT INTO documents (document, owner, registered_at) VALUES (?, ?, ?)"
                " ON CONFLICT (document) DO NOTHING",
                (document, owner, at),
            )
            row = conn.execute(
                "SELECT owner FROM documents WHERE document = ?", (document,)
            ).fetchone()
        return str(row[0])

    def document_owner(self, document: str) -> str | None:
        with self._lock, translated():
            row = self._conn.execute(
                "SELECT owner FROM documents WHERE document = ?", (document,)
            ).fetchone()
        return None if row is None else str(row[0])

    def remove_document(self, document: str) -> None:
        with self._write() as conn:
            conn.execute("DELETE FROM documents WHERE document = ?", (document,))

    def setting(self, key: str, default: str) -> str:
        with self._write() as conn:
            conn.execute(
                "INSERT INTO host_settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING",
                (key, default),
            )
            row = conn.execute("SELECT value FROM host_settings WHERE key = ?", (key,)).fetchone()
        return str(row[0])
