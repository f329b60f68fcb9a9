"""The embedded knowledge database: one libSQL file, separate from the memory database. Its
statements are ``oh.storage.sql.knowledge``'s; its tables, triggers and indexes are its
migrations'."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from oh.keys.macs import KnowledgeMacs
from oh.storage.sql.knowledge import SqlKnowledgeStore
from oh.storage.sqlite.notebooks import SqliteDatabase, translated

__all__ = ["SqliteKnowledgeStore"]


class SqliteKnowledgeStore(SqliteDatabase, SqlKnowledgeStore):
    """``KnowledgeStore`` on one libSQL file."""

    MIGRATIONS = "oh.storage.migrations.libsql_knowledge"

    def __init__(
        self, path: str | Path, *, macs: KnowledgeMacs | None = None, **options: Any
    ) -> None:
        """``options`` as for ``SqliteDatabase``; ``macs`` to write and check the MAC of every
        row (``oh.keys.macs``), None for neither."""
        super().__init__(path, **options)
        try:
            self._use_macs(macs)
        except BaseException:
            self.close()
            raise

    def _compact_discarded(self) -> None:
        # secure_delete overwrote the text in the pages; the WAL's older frames go too.
        with self._lock, translated():
            self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
