"""The reference host's registry on a SQL knowledge database (its own tables there, from the
knowledge migrations' 0003), written once for the embedded and PostgreSQL backends.

A first registration or setting is ``INSERT … ON CONFLICT DO NOTHING`` then a read, in one
write transaction: on libSQL no other writer runs in between; on PostgreSQL a racing insert
waits for the first one's commit, does nothing, and the read then sees the first one's row.
Either way every process reads the same owner or value.

An owner's documents are listed by name, in byte order on both backends (the column is
``COLLATE "C"`` on PostgreSQL, SQLite compares bytes).
"""

from __future__ import annotations

from oh.storage.base import RegisteredDocument
from oh.storage.sql import SqlDatabase

__all__ = ["SqlHostRegistry"]


class SqlHostRegistry(SqlDatabase):
    """``HostRegistry`` on a ``SqlDatabase`` (a backend's class names its database first)."""

    def add_owner_token(self, token_hash: str, owner: str, created_at: str) -> None:
        with self._write() as conn:
            conn.execute(
                "INSERT INTO owner_tokens (token_hash, owner, created_at) VALUES (?, ?, ?)",
                (token_hash, owner, created_at),
            )

    def owner_of_token(self, token_hash: str) -> str | None:
        with self._statement() as conn:
            row = conn.execute(
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
        assert row is not None  # inserted or already there, in this transaction
        return str(row[0])

    def document_owner(self, document: str) -> str | None:
        with self._statement() as conn:
            row = conn.execute(
                "SELECT owner FROM documents WHERE document = ?", (document,)
            ).fetchone()
        return None if row is None else str(row[0])

    def owner_documents(
        self, owner: str, *, after: str | None = None, limit: int
    ) -> list[RegisteredDocument]:
        where, values = "owner = ?", [owner]
        if after is not None:
            where += " AND document > ?"
            values.append(after)
        with self._statement() as conn:
            rows = conn.execute(
                f"SELECT document, owner, registered_at FROM documents WHERE {where}"
                " ORDER BY document LIMIT ?",
                (*values, limit),
            ).fetchall()
        return [RegisteredDocument(str(row[0]), str(row[1]), str(row[2])) for row in rows]

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
        assert row is not None  # inserted or already there, in this transaction
        return str(row[0])
