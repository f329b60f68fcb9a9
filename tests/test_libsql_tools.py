"""The agent's tools on the embedded backend: the tool-flow conformance suite, unchanged."""

from __future__ import annotations

from pathlib import Path

import pytest

from oh.storage.base import KnowledgeStore, MemoryStore
from oh.storage.libsql import Driver, LibsqlMemoryStore, connect
from oh.storage.libsql_knowledge import LibsqlKnowledgeStore
from oh.testing.tampering import Edit
from oh.testing.tools import ToolsConformance


class LibsqlToolsHarness:
    def __init__(self, directory: Path, driver: Driver = "sqlite3") -> None:
        self.memory_path = directory / "memory.db"
        self.knowledge_path = directory / "knowledge.db"
        self.driver = driver

    def open_memory(self) -> MemoryStore:
        return LibsqlMemoryStore(self.memory_path, driver=self.driver)

    def open_knowledge(self) -> KnowledgeStore:
        return LibsqlKnowledgeStore(self.knowledge_path, driver=self.driver)

    def tamper_memory(self, edit: Edit) -> None:
        conn = connect(self.memory_path, driver=self.driver)
        try:
            conn.execute(*edit.sql())
        finally:
            conn.close()


class TestLibsqlTools(ToolsConformance):
    @pytest.fixture
    def harness(self, tmp_path: Path) -> LibsqlToolsHarness:
        return LibsqlToolsHarness(tmp_path)
