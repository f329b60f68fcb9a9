"""The libSQL backend runs the store conformance suite and the stateful model test unchanged,
plus the checks only an embedded file can have (durability settings, driver error mapping)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from oh.errors import AlreadyExists, IntegrityError, StorageUnavailable
from oh.storage.sqlite.notebooks import (
    Driver,
    SqliteMemoryStore,
    SqlitePurgeAccess,
    connect,
    translate,
)
from oh.testing.memory_store import T0
from oh.testing.stateful import notebook_machine
from oh.testing.tampering import Edit


class SqliteHarness:
    def __init__(self, path: Path, driver: Driver = "sqlite3") -> None:
        self.path = path
        self.driver = driver

    def open(self) -> SqliteMemoryStore:
        return SqliteMemoryStore(self.path, driver=self.driver)

    change_table = "log"

    def execute(self, sql: str, params: tuple[Any, ...] = ()) -> None:
        conn = connect(self.path, driver=self.driver)
        try:
            conn.execute(sql, params)
        finally:
            conn.close()

    def tamper(self, edit: Edit) -> None:
        self.execute(*edit.sql())


def test_the_embedded_store_is_durable_by_default(tmp_path: Path) -> None:
    store = SqliteMemoryStore(tmp_path / "memory.db")
    conn = store._conn
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    assert conn.execute("PRAGMA secure_delete").fetchone()[0] == 1
    store.close()


def test_durability_is_configurable(tmp_path: Path) -> None:
    store = SqliteMemoryStore(tmp_path / "memory.db", synchronous="NORMAL")
    assert store._conn.execute("PRAGMA synchronous").fetchone()[0] == 1
    store.close()


def test_migrations_run_once_and_are_recorded(tmp_path: Path) -> None:
    SqliteMemoryStore(tmp_path / "memory.db").close()
    store = SqliteMemoryStore(tmp_path / "memory.db")
    rows = store._conn.execute("SELECT version FROM schema_migrations").fetchall()
    shipped = sorted(
        int(entry.name.split("_")[0])
        for entry in resources.files("oh.storage.migrations.libsql").iterdir()
        if entry.name.endswith(".sql")
    )
    assert [row[0] for row in rows] == shipped
    assert shipped == list(range(1, len(shipped) + 1))
    store.close()


@pytest.mark.parametrize(
    ("message", "error"),
    [
        ("database is locked", StorageUnavailable),
        ("disk I/O error", StorageUnavailable),
        ("database or disk is full", StorageUnavailable),
        ("attempt to write a readonly database", StorageUnavailable),
        ("UNIQUE constraint failed: notebooks.id", AlreadyExists),
        ("database disk image is malformed", IntegrityError),
        ("something nobody expected", StorageUnavailable),
    ],
)
def test_driver_errors_are_translated_in_one_place(message: str, error: type) -> None:
    assert type(translate(ValueError(message))) is error


def test_a_locked_database_is_storage_unavailable(tmp_path: Path) -> None:
    store = SqliteMemoryStore(tmp_path / "memory.db", busy_wait=0.05)
    blocker = sqlite3.connect(str(tmp_path / "memory.db"), isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(StorageUnavailable):
            store.create_notebook(
                "nb_x",
                owner="a",
                document="d",
                run="r",
                started_at=T0,
                forgets_at=T0,
            )
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert store.notebook_ids() == []
    store.close()


def test_the_store_matches_the_model_over_random_steps(tmp_path: Path) -> None:
    machine = notebook_machine(
        lambda: SqliteMemoryStore(tmp_path / "memory.db", synchronous="NORMAL")
    )
    machine.TestCase.settings = settings(
        max_examples=25,
        stateful_step_count=20,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    machine.TestCase().runTest()


class SqliteLifecycleHarness(SqliteHarness):
    def purge_access(self) -> SqlitePurgeAccess:
        return SqlitePurgeAccess(self.path)

    def purge_execute(self, access: Any, sql: str, params: tuple[Any, ...] = ()) -> Any:
        return access._conn.execute(sql, params).fetchall()

    def files(self) -> list[Path]:
        return [self.path, Path(f"{self.path}-wal"), Path(f"{self.path}-shm")]

    @contextmanager
    def reader(self) -> Iterator[None]:
        conn = connect(self.path, driver=self.driver)
        try:
            conn.execute("BEGIN")
            conn.execute("SELECT count(*) FROM log").fetchall()  # the snapshot starts here
            yield
            conn.execute("ROLLBACK")
        finally:
            conn.close()
