"""Every conformance suite on every backend, with keys and without: one table.

Each suite (``oh.testing``) is one class here, and its ``harness`` fixture runs once per row of
``TABLE[suite]``: a backend (the in-memory reference, the embedded SQLite file on the standard
library's driver and on ``libsql``, PostgreSQL, a host's own knowledge source) with or without
keys (notes sealed, knowledge MACed). The harnesses live beside the backend's other tests (or in
tests/harnesses.py when it has none); a harness declares in ``cannot`` what its database does not
offer a test (``oh.testing.declared``), and the run ends with the table of what ran where
(``tests/conftest.py``).

Adding a backend is a row per suite here; adding a suite is a class and its rows.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import test_sealed_notebooks as sealed_sqlite
import test_sealed_postgres as sealed_postgres
from harnesses import (
    HostSourceHarness,
    InMemoryRegistryHarness,
    PostgresRegistryHarness,
    PostgresReviewHarness,
    PostgresSourceHarness,
    PostgresToolsHarness,
    SqliteRegistryHarness,
    SqliteReviewHarness,
    SqliteSourceHarness,
    SqliteToolsHarness,
)
from oh.testing.knowledge import KnowledgeSourceConformance, ReviewConformance
from oh.testing.lifecycle import NotebookLifecycleConformance
from oh.testing.memory_store import MemoryStoreConformance
from oh.testing.postgres_cluster import Schema, fresh_schema, shared_cluster
from oh.testing.registry import HostRegistryConformance
from oh.testing.tools import ToolsConformance
from test_knowledge_macs import BACKENDS, MacedHarness, opened_backend
from test_libsql_store import SqliteHarness, SqliteLifecycleHarness
from test_memory_backend import InMemoryHarness, InMemorySourceHarness
from test_postgres_store import PostgresHarness, PostgresLifecycleHarness


class Place:
    """What a row's harness is built in: a fresh directory, and a fresh PostgreSQL schema
    started only for a row that asks for one."""

    def __init__(self, request: pytest.FixtureRequest) -> None:
        self._request = request

    @property
    def directory(self) -> Path:
        path: Path = self._request.getfixturevalue("tmp_path")
        return path

    @property
    def schema(self) -> Schema:
        schema: Schema = self._request.getfixturevalue("pg_schema")
        return schema

    def maced(self, kind: str) -> MacedHarness:
        """The knowledge database of ``kind`` with MACs on, closed when the test ends."""
        stack = contextlib.ExitStack()
        self._request.addfinalizer(stack.close)
        backend = stack.enter_context(opened_backend(kind, self.directory))
        return MacedHarness(backend, self.directory)


Row = tuple[str, Callable[[Place], Any]]  # (the row's id, its harness made in a place)

# The rows' ids join with a test's own parameters by "-" in its id, so they use "_".
SQLITE, LIBSQL, POSTGRES = "sqlite", "sqlite_libsql_driver", "postgres"

TABLE: dict[str, list[Row]] = {
    "memory store": [
        ("memory", lambda _: InMemoryHarness()),
        (SQLITE, lambda at: SqliteHarness(at.directory / "memory.db")),
        (LIBSQL, lambda at: SqliteHarness(at.directory / "memory.db", driver="libsql")),
        (POSTGRES, lambda at: PostgresHarness(at.schema)),
        (f"{SQLITE}_sealed", lambda at: sealed_sqlite.SealedHarness(at.directory / "memory.db")),
        (
            f"{LIBSQL}_sealed",
            lambda at: sealed_sqlite.SealedHarness(at.directory / "memory.db", driver="libsql"),
        ),
        (f"{POSTGRES}_sealed", lambda at: sealed_postgres.SealedHarness(at.schema, at.directory)),
    ],
    "lifecycle": [
        ("memory", lambda _: InMemoryHarness()),
        (SQLITE, lambda at: SqliteLifecycleHarness(at.directory / "memory.db")),
        (LIBSQL, lambda at: SqliteLifecycleHarness(at.directory / "memory.db", driver="libsql")),
        (POSTGRES, lambda at: PostgresLifecycleHarness(at.schema)),
        (
            f"{SQLITE}_sealed",
            lambda at: sealed_sqlite.SealedLifecycleHarness(at.directory / "memory.db"),
        ),
        (
            f"{LIBSQL}_sealed",
            lambda at: sealed_sqlite.SealedLifecycleHarness(
                at.directory / "memory.db", driver="libsql"
            ),
        ),
        (
            f"{POSTGRES}_sealed",
            lambda at: sealed_postgres.SealedLifecycleHarness(at.schema, at.directory),
        ),
    ],
    "tools": [
        ("memory", lambda _: InMemoryHarness()),
        (SQLITE, lambda at: SqliteToolsHarness(at.directory)),
        (LIBSQL, lambda at: SqliteToolsHarness(at.directory, driver="libsql")),
        (POSTGRES, lambda at: PostgresToolsHarness(at.schema)),
        (f"{SQLITE}_sealed", lambda at: sealed_sqlite.SealedToolsHarness(at.directory)),
        (
            f"{LIBSQL}_sealed",
            lambda at: sealed_sqlite.SealedToolsHarness(at.directory, driver="libsql"),
        ),
        (
            f"{POSTGRES}_sealed",
            lambda at: sealed_postgres.SealedToolsHarness(at.schema, at.directory),
        ),
    ],
    "knowledge source": [
        ("memory", lambda _: InMemorySourceHarness()),
        (SQLITE, lambda at: SqliteSourceHarness(at.directory)),
        (LIBSQL, lambda at: SqliteSourceHarness(at.directory, driver="libsql")),
        (POSTGRES, lambda at: PostgresSourceHarness(at.schema)),
        ("host", lambda _: HostSourceHarness()),  # a host's own source: three methods
        *((f"{kind}_macs", lambda at, kind=kind: at.maced(kind)) for kind in BACKENDS),
    ],
    "review": [
        ("memory", lambda _: InMemoryHarness()),
        (SQLITE, lambda at: SqliteReviewHarness(at.directory)),
        (LIBSQL, lambda at: SqliteReviewHarness(at.directory, driver="libsql")),
        (POSTGRES, lambda at: PostgresReviewHarness(at.schema)),
        *((f"{kind}_macs", lambda at, kind=kind: at.maced(kind)) for kind in BACKENDS),
    ],
    "host registry": [
        ("memory", lambda _: InMemoryRegistryHarness()),
        (SQLITE, lambda at: SqliteRegistryHarness(at.directory / "knowledge.db")),
        (LIBSQL, lambda at: SqliteRegistryHarness(at.directory / "knowledge.db", driver="libsql")),
        (POSTGRES, lambda at: PostgresRegistryHarness(at.schema)),
    ],
}


@pytest.fixture
def pg_schema() -> Iterator[Schema]:
    with fresh_schema(shared_cluster()) as schema:
        yield schema


def rows(suite: str) -> Any:
    """The ``harness`` fixture of ``suite``: one harness per row of its table."""
    table = TABLE[suite]

    @pytest.fixture(params=[make for _, make in table], ids=[name for name, _ in table])
    def harness(self: Any, request: pytest.FixtureRequest) -> Any:
        return request.param(Place(request))

    return harness


class TestMemoryStore(MemoryStoreConformance):
    harness = rows("memory store")


class TestNotebookLifecycle(NotebookLifecycleConformance):
    harness = rows("lifecycle")


class TestTools(ToolsConformance):
    harness = rows("tools")


class TestKnowledgeSource(KnowledgeSourceConformance):
    harness = rows("knowledge source")


class TestReview(ReviewConformance):
    harness = rows("review")


class TestHostRegistry(HostRegistryConformance):
    harness = rows("host registry")


def test_every_row_names_one_backend_once() -> None:
    """No suite runs a backend twice, and every suite runs on every store backend with and
    without keys (the table's shape, which the end-of-run report then confirms by what ran)."""
    for suite, table in TABLE.items():
        names = [name for name, _ in table]
        assert len(set(names)) == len(names), suite
        assert {"memory", SQLITE, LIBSQL, POSTGRES} <= set(names), suite
    for suite in ("memory store", "lifecycle", "tools"):
        assert {f"{b}_sealed" for b in (SQLITE, LIBSQL, POSTGRES)} <= {n for n, _ in TABLE[suite]}
    for suite in ("knowledge source", "review"):
        assert {f"{kind}_macs" for kind in BACKENDS} <= {n for n, _ in TABLE[suite]}
