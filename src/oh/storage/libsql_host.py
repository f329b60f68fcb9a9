"""The reference host's registry on the embedded knowledge database (its own tables there)."""

from __future__ import annotations

from oh.storage.libsql import LibsqlDatabase
from oh.storage.sql_host import SqlHostRegistry

__all__ = ["LibsqlHostRegistry"]


class LibsqlHostRegistry(LibsqlDatabase, SqlHostRegistry):
    """``HostRegistry`` on the knowledge database file (tables from its migrations)."""

    MIGRATIONS = "oh.storage.migrations.libsql_knowledge"
