"""Reviewed knowledge on the embedded backend, and a host's own knowledge source, both held to
the same conformance suites."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from oh.core.canonical import sha256_hex
from oh.core.records import Record
from oh.core.reviewed import Decision, ReviewedRecord, Source
from oh.errors import NotFound
from oh.storage.base import KnowledgeSource, KnowledgeStore, MemoryStore
from oh.storage.libsql import Driver, LibsqlMemoryStore, connect
from oh.storage.libsql_knowledge import LibsqlKnowledgeStore
from oh.testing.knowledge import (
    SOURCE,
    KnowledgeSourceConformance,
    ReviewConformance,
    publish_by_review,
)


class LibsqlReviewHarness:
    def __init__(self, directory: Path, driver: Driver = "sqlite3") -> None:
        self.memory_path = directory / "memory.db"
        self.knowledge_path = directory / "knowledge.db"
        self.driver = driver

    def open_memory(self) -> MemoryStore:
        return LibsqlMemoryStore(self.memory_path, driver=self.driver)

    def open_knowledge(self) -> KnowledgeStore:
        return LibsqlKnowledgeStore(self.knowledge_path, driver=self.driver)

    def execute_knowledge(self, sql: str, params: tuple[Any, ...] = ()) -> None:
        conn = connect(self.knowledge_path, driver=self.driver)
        try:
            conn.execute(sql, params)
        finally:
            conn.close()


class LibsqlSourceHarness(LibsqlReviewHarness):
    def open(self) -> KnowledgeSource:
        return self.open_knowledge()

    def publish(self, source: KnowledgeSource, owner: str, record: dict[str, Any]) -> int:
        assert isinstance(source, LibsqlKnowledgeStore)
        memory = self.open_memory()
        try:
            return publish_by_review(source, memory, owner, record)
        finally:
            memory.close()


class TestLibsqlKnowledgeSource(KnowledgeSourceConformance):
    @pytest.fixture
    def harness(self, tmp_path: Path) -> LibsqlSourceHarness:
        return LibsqlSourceHarness(tmp_path)


class TestLibsqlReview(ReviewConformance):
    @pytest.fixture
    def harness(self, tmp_path: Path) -> LibsqlReviewHarness:
        return LibsqlReviewHarness(tmp_path)


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


class TestHostKnowledgeSource(KnowledgeSourceConformance):
    @pytest.fixture
    def harness(self) -> HostSourceHarness:
        return HostSourceHarness()
