"""The agent's tools on PostgreSQL: the tool-flow conformance suite, unchanged."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from oh.storage.base import KnowledgeStore, MemoryStore
from oh.storage.postgres import PostgresMemoryStore
from oh.storage.postgres_knowledge import PostgresKnowledgeStore
from oh.testing.postgres_cluster import Schema, fresh_schema, shared_cluster
from oh.testing.tampering import Edit
from oh.testing.tools import ToolsConformance


@pytest.fixture
def schema() -> Iterator[Schema]:
    with fresh_schema(shared_cluster()) as schema:
        yield schema


class PostgresToolsHarness:
    def __init__(self, schema: Schema) -> None:
        self.schema = schema

    def open_memory(self) -> MemoryStore:
        return PostgresMemoryStore(self.schema.url(), max_size=2)

    def open_knowledge(self) -> KnowledgeStore:
        return PostgresKnowledgeStore(self.schema.url(), max_size=2)

    def tamper_memory(self, edit: Edit) -> None:
        sql, params = edit.sql()
        with psycopg.connect(self.schema.url(), autocommit=True) as conn:
            conn.execute(sql.replace("%", "%%").replace("?", "%s"), params or None)


class TestPostgresTools(ToolsConformance):
    @pytest.fixture
    def harness(self, schema: Schema) -> PostgresToolsHarness:
        return PostgresToolsHarness(schema)
