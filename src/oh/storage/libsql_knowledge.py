"""The embedded knowledge database: one libSQL file, separate from the memory database. Its
statements are ``oh.storage.sql_knowledge``'s; its tables, triggers and indexes are its
migrations'."""

from __future__ import annotations

from oh.storage.libsql import LibsqlDatabase
from oh.storage.sql_knowledge import SqlKnowledgeStore

__all__ = ["LibsqlKnowledgeStore"]


class LibsqlKnowledgeStore(LibsqlDatabase, SqlKnowledgeStore):
    """``KnowledgeStore`` on one libSQL file."""

    MIGRATIONS = "oh.storage.migrations.libsql_knowledge"
