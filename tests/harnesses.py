"""The harnesses of the conformance table (tests/test_conformance.py) that have no other tests
beside them: reviewed knowledge and the tools on each backend, a host's own knowledge source,
and the reference host's registry. The notebook stores' harnesses live with their backends'
other tests (tests/test_libsql_store.py, tests/test_postgres_store.py, tests/test_sealed_*.py,
tests/test_memory_backend.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg

from oh.core.canonical import sha256_hex
from oh.core.records import Record
from oh.core.reviewed import Decision, ReviewedRecord, Source
from oh.errors import NotFound
from oh.storage.base import KnowledgeSource, KnowledgeStore, MemoryStore
from oh.storage.memory import InMemoryDatabase, InMemoryHostRegistry
from oh.storage.postgres.host import PostgresHostRegistry
from oh.storage.postgres.knowledge import PostgresKnowledgeStore
from oh.storage.postgres.notebooks import PostgresMemoryStore
from oh.storage.sql.knowledge import SqlKnowledgeStore
from oh.storage.sqlite.host import SqliteHostRegistry
from oh.storage.sqlite.knowledge import SqliteKnowledgeStore
from oh.storage.sqlite.notebooks import Driver, SqliteMemoryStore, connect
from oh.testing.knowledge import (
    SOURCE,
    publish_by_review,
)
from oh.testing.postgres_cluster import Schema
from oh.testing.tampering import Edit

# -- reviewed knowledge and review on the embedded files, and a host's own knowledge source --------


class SqliteReviewHarness:
    def __init__(self, directory: Path, driver: Driver = "sqlite3") -> None:
        self.memory_path = directory / "memory.db"
        self.knowledge_path = directory / "knowledge.db"
        self.driver = driver

    def open_memory(self) -> MemoryStore:
        return SqliteMemoryStore(self.memory_path, driver=self.driver)

    def open_knowledge(self) -> KnowledgeStore:
        return SqliteKnowledgeStore(self.knowledge_path, driver=self.driver)

    def execute_knowledge(self, sql: str, params: tuple[Any, ...] = ()) -> None:
        conn = connect(self.knowledge_path, driver=self.driver)
        try:
            conn.execute(sql, params)
        finally:
            conn.close()


class PublishedByReview:
    """A knowledge-source harness over Oh's own knowledge store: the source is the store, and a
    record is published by proposing and accepting it through a memory store of the harness's
    own (``publish_by_review``). Mixed into a harness with ``open_memory`` and
    ``open_knowledge``."""

    open_memory: Callable[[], MemoryStore]
    open_knowledge: Callable[[], KnowledgeStore]

    def open(self) -> KnowledgeSource:
        return self.open_knowledge()

    def publish(self, source: KnowledgeSource, owner: str, record: dict[str, Any]) -> int:
        assert isinstance(source, SqlKnowledgeStore)
        memory = self.open_memory()
        try:
            return publish_by_review(source, memory, owner, record)
        finally:
            memory.close()


class SqliteSourceHarness(PublishedByReview, SqliteReviewHarness):
    pass


class HostKnowledge:
    """How a host plugs in reviewed knowledge it keeps elsewhere: three methods."""

    def __init__(self) -> None:
        self.versions: dict[str, list[ReviewedRecord]] = {}

    def latest_revision(self, owner: str) -> int:
        return len(self.versions.get(owner, []))

    def _check(self, owner: str, revision: int) -> None:
        if not 0 <= revision <= self.latest_revision(owner):
            raise NotFound(f"no revision {revision}")

    def records_at(self, owner: str, revision: int) -> list[ReviewedRecord]:
        self._check(owner, revision)
        current: dict[str, ReviewedRecord] = {}
        for version in self.versions.get(owner, [])[:revision]:
            current[version.name] = version
        return [current[name] for name in sorted(current)]

    def record_at(self, owner: str, name: str, revision: int) -> ReviewedRecord | None:
        return next((r for r in self.records_at(owner, revision) if r.name == name), None)


class HostSourceHarness:
    def __init__(self) -> None:
        self.source = HostKnowledge()

    def open(self) -> KnowledgeSource:
        return self.source

    def publish(self, source: KnowledgeSource, owner: str, record: dict[str, Any]) -> int:
        assert isinstance(source, HostKnowledge)
        parsed = Record.parse(record)
        revision = source.latest_revision(owner) + 1
        source.versions.setdefault(owner, []).append(
            ReviewedRecord(
                name=parsed.name,
                kind=parsed.kind,
                content=parsed.canonical(),
                digest=sha256_hex(parsed.canonical()),
                author="host:editor",
                written_at="2026-11-29T12:00:00.000000Z",
                revision=revision,
                source=Source.parse(SOURCE),
                decision=Decision("accept", "host:editor", "2026-11-29T12:00:00.000000Z", "ok"),
            )
        )
        return revision


# -- the tools on the embedded files ---------------------------------------------------------------


class SqliteToolsHarness(SqliteReviewHarness):
    """Both files of a data directory, as review's harness opens them; and raw SQL on the
    memory file."""

    def tamper_memory(self, edit: Edit) -> None:
        conn = connect(self.memory_path, driver=self.driver)
        try:
            conn.execute(*edit.sql())
        finally:
            conn.close()


# -- reviewed knowledge, review and the tools on PostgreSQL ----------------------------------------


def placeholders(sql: str) -> str:
    """The suites write ``?`` placeholders (SQLite style); psycopg takes ``%s``."""
    return sql.replace("%", "%%").replace("?", "%s")


class PostgresReviewHarness:
    def __init__(self, schema: Schema) -> None:
        self.schema = schema

    def open_memory(self) -> MemoryStore:
        return PostgresMemoryStore(self.schema.url(), max_size=2)

    def open_knowledge(self) -> KnowledgeStore:
        return PostgresKnowledgeStore(self.schema.url(), max_size=2)

    def execute_knowledge(self, sql: str, params: tuple[Any, ...] = ()) -> None:
        with psycopg.connect(self.schema.url(), autocommit=True) as conn:
            conn.execute(placeholders(sql) if params else sql, params or None)


class PostgresSourceHarness(PublishedByReview, PostgresReviewHarness):
    pass


class PostgresToolsHarness(PostgresReviewHarness):
    def tamper_memory(self, edit: Edit) -> None:
        sql, params = edit.sql()
        with psycopg.connect(self.schema.url(), autocommit=True) as conn:
            conn.execute(placeholders(sql), params or None)


# -- the reference host's registry on every backend ------------------------------------------------


class SqliteRegistryHarness:
    def __init__(self, path: Path, driver: Driver = "sqlite3") -> None:
        self.path = path
        self.driver = driver

    def open(self) -> SqliteHostRegistry:
        return SqliteHostRegistry(self.path, driver=self.driver)


class PostgresRegistryHarness:
    def __init__(self, schema: Schema) -> None:
        self.schema = schema

    def open(self) -> PostgresHostRegistry:
        return PostgresHostRegistry(self.schema.url(), max_size=2)


class InMemoryRegistryHarness:
    def __init__(self) -> None:
        self.database = InMemoryDatabase()

    def open(self) -> InMemoryHostRegistry:
        return InMemoryHostRegistry(self.database)
