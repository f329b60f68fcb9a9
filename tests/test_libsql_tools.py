"""The agent's tools on the embedded backend: the tool-flow conformance suite, unchanged."""

from __future__ import annotations

from pathlib import Path

import libsql
import pytest

from oh.storage.base import KnowledgeStore, MemoryStore
from oh.storage.libsql import LibsqlMemoryStore
from oh.storage.libsql_knowledge import LibsqlKnowledgeStore
from oh.testing.tampering import Edit
from oh.testing.tools import ToolsConformance


class LibsqlToolsHarness:
    def __init__(self, directory: Path) -> None:
        self.memory_path = directory / "memory.db"
        self.knowledge_path = directory / "knowledge.db"

    def open_memory(self) -> MemoryStore:
        return LibsqlMemoryStore(self.memory_path)

    def open_knowledge(self) -> KnowledgeStore:
        return LibsqlKnowledgeStore(self.knowledge_path)

    def tamper_memory(self, edit: Edit) -> None:
        conn = libsql.connect(str(self.memory_path), isolation_level=None)
        try:
            conn.execute(*edit.sql())
        finally:
            conn.close()


class TestLibsqlTools(ToolsConformance):
    @pytest.fixture
    def harness(self, tmp_path: Path) -> LibsqlToolsHarness:
        return LibsqlToolsHarness(tmp_path)
