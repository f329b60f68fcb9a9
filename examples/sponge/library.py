"""Sponge's own data: its users, its documents and who owns each one.

This is the host's side of the line, and it knows nothing of Oh: a small sqlite file of
Sponge's own (``sponge.db``), apart from Oh's databases. Oh never sees it; Sponge asks it, on
every tool call, whether the user an agent works for still owns the document.
"""

from __future__ import annotations

import secrets
import sqlite3
from pathlib import Path

__all__ = ["Library"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS users (id TEXT PRIMARY KEY, name TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS documents (
    id TEXT PRIMARY KEY,
    title TEXT NOT NULL,
    owner TEXT NOT NULL REFERENCES users (id)
);
CREATE TABLE IF NOT EXISTS settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""


class Library:
    """Users, documents and ownership, in one sqlite file."""

    def __init__(self, path: Path) -> None:
        self._db = sqlite3.connect(path, isolation_level=None)  # autocommit: one statement each
        self._db.execute("PRAGMA foreign_keys = ON")
        self._db.executescript(_SCHEMA)

    def close(self) -> None:
        self._db.close()

    def add_user(self, user: str, name: str) -> None:
        self._db.execute("INSERT INTO users (id, name) VALUES (?, ?)", (user, name))

    def add_document(self, document: str, title: str, owner: str) -> None:
        self._db.execute(
            "INSERT INTO documents (id, title, owner) VALUES (?, ?, ?)", (document, title, owner)
        )

    def owner_of(self, document: str) -> str | None:
        row = self._db.execute("SELECT owner FROM documents WHERE id = ?", (document,)).fetchone()
        return None if row is None else str(row[0])

    def title_of(self, document: str) -> str:
        row = self._db.execute("SELECT title FROM documents WHERE id = ?", (document,)).fetchone()
        return document if row is None else str(row[0])

    def transfer(self, document: str, to_user: str) -> None:
        """Give a document to another user (say, its author left the team)."""
        self._db.execute("UPDATE documents SET owner = ? WHERE id = ?", (to_user, document))

    def secret(self) -> bytes:
        """Sponge's signing secret for Oh's query tokens, made once and kept here."""
        self._db.execute(
            "INSERT OR IGNORE INTO settings (key, value) VALUES ('oh_secret', ?)",
            (secrets.token_hex(32),),
        )
        row = self._db.execute("SELECT value FROM settings WHERE key = 'oh_secret'").fetchone()
        return bytes.fromhex(row[0])
