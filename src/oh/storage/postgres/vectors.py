"""Recall's vector tables on PostgreSQL (docs/recall.md): ``oh.storage.sql.vectors`` over the
memory database's cluster (migration 0009).

Every server keeps its own similarity index in memory, built from these rows and rebuilt from
them at will: the rows are shared, the indexes are not. No server extension is needed.
"""

from __future__ import annotations

from typing import Any

from oh.storage.postgres.notebooks import MEMORY_MIGRATIONS, PostgresDatabase
from oh.storage.sql.vectors import VECTOR_TABLES, SqlVectorStore

__all__ = ["PostgresVectorStore"]


class PostgresVectorStore(PostgresDatabase, SqlVectorStore):
    """Note and reviewed-record vectors in the PostgreSQL memory database, a pool of its own (so
    catch-up in a background thread never waits for the tool calls' connections)."""

    COMPONENT = "memory"
    MIGRATIONS = MEMORY_MIGRATIONS

    def __init__(self, url: str, **options: Any) -> None:
        options.setdefault("max_size", 4)
        options.setdefault("application_name", "oh-recall")
        super().__init__(url, **options)
        self._keyring = None
        with self._read() as conn:
            self._sealed = conn.execute("SELECT 1 FROM sealing").fetchone() is not None

    def _scrub(self) -> None:
        """``VACUUM FULL`` of the vector table, a WAL switch and a checkpoint
        (``PostgresDatabase._vacuum``)."""
        self._vacuum(list(VECTOR_TABLES), full=True)
