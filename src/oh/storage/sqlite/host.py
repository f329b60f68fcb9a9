"""The reference host's registry on the embedded knowledge database (its own tables there)."""

from __future__ import annotations

from oh.storage.sql.host import SqlHostRegistry
from oh.storage.sqlite.notebooks import SqliteDatabase

__all__ = ["SqliteHostRegistry"]


class SqliteHostRegistry(SqliteDatabase, SqlHostRegistry):
    """``HostRegistry`` on the knowledge database file (tables from its migrations)."""

    MIGRATIONS = "oh.storage.migrations.libsql_knowledge"
