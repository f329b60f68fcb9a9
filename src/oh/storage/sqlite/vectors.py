"""The embedded backend's vector tables (docs/recall.md): ``oh.storage.sql.vectors`` over one
libSQL file.

This store opens its own connection to the memory database, so embedding catch-up in a
background thread never waits for the tool calls' connection lock (both still share SQLite's
single write lock, for the few milliseconds a batch of inserts takes).
"""

from __future__ import annotations

from pathlib import Path

from oh.storage.sql.vectors import VECTOR_TABLES, SqlVectorStore
from oh.storage.sqlite.notebooks import (
    BUSY_WAIT_SECONDS,
    Driver,
    SqliteDatabase,
    Synchronous,
    translated,
)

__all__ = ["VECTOR_TABLES", "SqliteVectorStore"]


class SqliteVectorStore(SqliteDatabase, SqlVectorStore):
    """Note and reviewed-record vectors in the memory database (one libSQL file).

    ``synchronous`` defaults to ``NORMAL`` on this connection only: vectors are derived data,
    so a power cut may lose the last few (they are embedded again) but never corrupts the file.
    """

    MIGRATIONS = "oh.storage.migrations.libsql"

    def __init__(
        self,
        path: str | Path,
        *,
        synchronous: Synchronous = "NORMAL",
        busy_wait: float = BUSY_WAIT_SECONDS,
        driver: Driver = "sqlite3",
    ) -> None:
        super().__init__(path, synchronous=synchronous, busy_wait=busy_wait, driver=driver)
        self._keyring = None
        with self._read() as conn:
            self._sealed = conn.execute("SELECT 1 FROM sealing").fetchone() is not None

    def _where(self) -> str:
        return str(self.path)

    def _scrub(self) -> None:
        """A checkpoint that truncates the WAL: with ``secure_delete`` the deleted rows were
        overwritten in the file, and no WAL frame keeps them."""
        with self._lock, translated():
            self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
