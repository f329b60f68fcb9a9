"""The reference host's registry on the PostgreSQL knowledge database (its own tables there)."""

from __future__ import annotations

from typing import Any

from oh.storage.postgres.knowledge import KNOWLEDGE_MIGRATIONS
from oh.storage.postgres.notebooks import PostgresDatabase
from oh.storage.sql.host import SqlHostRegistry

__all__ = ["PostgresHostRegistry"]


class PostgresHostRegistry(PostgresDatabase, SqlHostRegistry):
    """``HostRegistry`` on PostgreSQL; shares the knowledge database and its migrations."""

    COMPONENT = "knowledge"
    MIGRATIONS = KNOWLEDGE_MIGRATIONS

    def __init__(self, url: str, **options: Any) -> None:
        super().__init__(url, **{"max_size": 4, **options})
