"""The reference host's registry (owner tokens, documents, settings) on every backend: the
embedded libSQL file, PostgreSQL (a throwaway cluster the tests start, one schema per test) and
the in-memory reference backend, each held to ``oh.testing.registry`` unchanged."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from oh.storage.libsql import Driver
from oh.storage.libsql_host import LibsqlHostRegistry
from oh.storage.memory import InMemoryDatabase, InMemoryHostRegistry
from oh.storage.postgres_host import PostgresHostRegistry
from oh.testing.postgres_cluster import Schema, fresh_schema, shared_cluster
from oh.testing.registry import HostRegistryConformance


class LibsqlRegistryHarness:
    def __init__(self, path: Path, driver: Driver = "sqlite3") -> None:
        self.path = path
        self.driver = driver

    def open(self) -> LibsqlHostRegistry:
        return LibsqlHostRegistry(self.path, driver=self.driver)


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


@pytest.fixture
def schema() -> Iterator[Schema]:
    with fresh_schema(shared_cluster()) as schema:
        yield schema


class TestLibsqlHostRegistry(HostRegistryConformance):
    @pytest.fixture
    def harness(self, tmp_path: Path) -> LibsqlRegistryHarness:
        return LibsqlRegistryHarness(tmp_path / "knowledge.db")


class TestPostgresHostRegistry(HostRegistryConformance):
    @pytest.fixture
    def harness(self, schema: Schema) -> PostgresRegistryHarness:
        return PostgresRegistryHarness(schema)


class TestInMemoryHostRegistry(HostRegistryConformance):
    @pytest.fixture
    def harness(self) -> InMemoryRegistryHarness:
        return InMemoryRegistryHarness()
