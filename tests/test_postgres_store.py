"""The PostgreSQL memory store runs the store and lifecycle conformance suites and the stateful
model test unchanged, plus what only a server database has: migrations shared by servers
starting at once, SQLSTATE translation, and compaction that really removes forgotten text.

Every test gets its own schema on one throwaway cluster (``oh.testing.postgres_cluster``),
set up by the same role SQL a deployment runs; the store connects as the application role,
the purge credential as the purge role, never as a superuser.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, settings

from oh.errors import (
    AlreadyExists,
    Forbidden,
    IntegrityError,
    InvalidArgument,
    Purged,
    StorageUnavailable,
)
from oh.storage.postgres.knowledge import KNOWLEDGE_MIGRATIONS, PostgresKnowledgeStore
from oh.storage.postgres.notebooks import (
    PostgresMemoryStore,
    PostgresPurgeAccess,
    migrate,
    roles_sql,
    translate,
)
from oh.testing.memory_store import T0, add, open_notebook, write
from oh.testing.postgres_cluster import PostgresCluster, Schema, fresh_schema, shared_cluster
from oh.testing.stateful import notebook_machine
from oh.testing.tampering import Edit


def placeholders(sql: str) -> str:
    """The suites write ``?`` placeholders (SQLite style); psycopg takes ``%s``."""
    return sql.replace("%", "%%").replace("?", "%s")


def run_sql(url: str, sql: str, params: tuple[Any, ...] = ()) -> Any:
    with psycopg.connect(url, autocommit=True) as conn:
        cursor = conn.execute(placeholders(sql) if params else sql, params or None)
        return cursor.fetchall() if cursor.description else cursor.rowcount


@pytest.fixture
def cluster() -> PostgresCluster:
    return shared_cluster()


@pytest.fixture
def schema(cluster: PostgresCluster) -> Iterator[Schema]:
    with fresh_schema(cluster) as schema:
        yield schema


class PostgresHarness:
    def __init__(self, schema: Schema) -> None:
        self.schema = schema

    def open(self) -> PostgresMemoryStore:
        return PostgresMemoryStore(self.schema.url(), max_size=4)

    change_table = "log"  # an entry keeps its changes (migration 0010)

    def execute(self, sql: str, params: tuple[Any, ...] = ()) -> None:
        run_sql(self.schema.url(), sql, params)

    def tamper(self, edit: Edit) -> None:
        self.execute(*edit.sql())


class PostgresLifecycleHarness(PostgresHarness):
    def purge_access(self) -> PostgresPurgeAccess:
        return PostgresPurgeAccess(self.schema.purge_url)

    def purge_execute(self, access: Any, sql: str, params: tuple[Any, ...] = ()) -> Any:
        """Raw SQL on the purge credential's own connection (as the purge role)."""
        with access._pool.connection() as conn:
            cursor = conn.execute(placeholders(sql) if params else sql, params or None)
            return cursor.fetchall() if cursor.description else cursor.rowcount

    def files(self) -> list[Path]:
        """Every file of the database (tables, indexes, TOAST, catalogs) and the WAL."""
        cluster = self.schema.cluster
        with psycopg.connect(cluster.url(), autocommit=True) as conn:
            row = conn.execute(
                "SELECT oid FROM pg_database WHERE datname = current_database()"
            ).fetchone()
        assert row is not None
        database = cluster.data / "base" / str(row[0])
        return sorted(p for p in database.iterdir() if p.is_file()) + cluster.wal_files()

    @contextmanager
    def reader(self) -> Iterator[None]:
        with psycopg.connect(self.schema.url()) as conn:
            conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
            conn.execute("SELECT count(*) FROM notebooks").fetchall()  # the snapshot starts here
            yield
            conn.rollback()


def test_the_store_matches_the_model_over_random_steps(schema: Schema) -> None:
    machine = notebook_machine(lambda: PostgresMemoryStore(schema.url(), max_size=2))
    machine.TestCase.settings = settings(
        max_examples=25,
        stateful_step_count=20,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    machine.TestCase().runTest()


# -- migrations --------------------------------------------------------------------------------


def shipped(package: str = "oh.storage.migrations.postgres") -> list[int]:
    return sorted(
        int(entry.name.split("_")[0])
        for entry in resources.files(package).iterdir()
        if entry.name.endswith(".sql")
    )


def test_migrations_run_once_and_are_recorded(schema: Schema) -> None:
    PostgresMemoryStore(schema.url()).close()
    PostgresMemoryStore(schema.url()).close()
    rows = run_sql(
        schema.url(), "SELECT component, version FROM schema_migrations ORDER BY version"
    )
    assert rows == [("memory", n) for n in shipped()]
    assert shipped() == list(range(1, len(shipped()) + 1))


def test_servers_starting_at_once_migrate_once(schema: Schema) -> None:
    """Eight 'servers' open the store on an empty schema at the same moment; the advisory lock
    makes one of them apply each step and the others find it done."""
    start = threading.Barrier(8)
    errors: list[BaseException] = []

    def server() -> None:
        try:
            start.wait()
            PostgresMemoryStore(schema.url(), max_size=1).close()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=server) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    rows = run_sql(schema.url(), "SELECT count(*) FROM schema_migrations")
    assert rows == [(len(shipped()),)]


def test_memory_and_knowledge_may_share_one_schema(schema: Schema) -> None:
    PostgresMemoryStore(schema.url()).close()
    PostgresKnowledgeStore(schema.url()).close()
    rows = run_sql(schema.url(), "SELECT component, version FROM schema_migrations ORDER BY 1, 2")
    assert rows == [("knowledge", n) for n in shipped(KNOWLEDGE_MIGRATIONS)] + [
        ("memory", n) for n in shipped()
    ]


def test_migrate_reports_the_version(schema: Schema) -> None:
    with psycopg.connect(schema.url()) as conn:
        assert migrate(conn, "memory", "oh.storage.migrations.postgres") == shipped()[-1]


def test_the_purge_functions_pin_their_search_path(schema: Schema) -> None:
    PostgresMemoryStore(schema.url()).close()
    rows = run_sql(
        schema.url(),
        "SELECT p.proname, p.proconfig FROM pg_proc p"
        " JOIN pg_namespace n ON n.oid = p.pronamespace"
        " WHERE n.nspname = current_schema() AND p.prosecdef ORDER BY 1",
    )
    assert [name for name, _ in rows] == [
        "oh_expired_notebooks",
        "oh_mark_empty",
        "oh_purge_notebook",
        "oh_stale_openings",
    ]
    for _, config in rows:
        assert config == [f"search_path={schema.name}, pg_temp"]


# -- durability, errors ------------------------------------------------------------------------


def test_durability_is_the_servers_setting_and_oh_never_weakens_it(schema: Schema) -> None:
    """An acknowledged write is durable when the server's synchronous_commit is on (its
    default) and fsync is on: Oh's connections carry the server's values unchanged. (The test
    cluster runs without fsync to keep the suite fast; the benchmark's runs with both on.)"""
    with psycopg.connect(schema.url()) as plain:
        row = plain.execute("SHOW synchronous_commit").fetchone()
    store = PostgresMemoryStore(schema.url())
    try:
        with store._pool.connection() as conn:
            assert conn.execute("SHOW synchronous_commit").fetchone() == row
    finally:
        store.close()


@pytest.mark.parametrize(
    ("sqlstate", "error"),
    [
        ("23505", AlreadyExists),
        ("42501", Forbidden),
        ("22003", InvalidArgument),
        ("XX001", IntegrityError),
        ("08006", StorageUnavailable),
        ("57P01", StorageUnavailable),
        ("40P01", StorageUnavailable),
        ("53300", StorageUnavailable),
        ("42P01", StorageUnavailable),
        ("XX000", StorageUnavailable),
    ],
)
def test_driver_errors_are_translated_in_one_place(sqlstate: str, error: type) -> None:
    exc = psycopg.errors.lookup(sqlstate)("boom")
    assert type(translate(exc)) is error


@pytest.mark.parametrize(
    ("message", "error"),
    [
        ("oh: a purged notebook stays purged", Purged),
        ("oh: notebook is not open", Purged),
        ("oh: proposal already decided", AlreadyExists),
        ("oh: reviewed knowledge is append-only", Forbidden),
    ],
)
def test_trigger_refusals_map_like_the_embedded_backend(message: str, error: type) -> None:
    exc = psycopg.errors.RaiseException(message)
    assert type(translate(exc)) is error


def test_an_unreachable_server_is_storage_unavailable(cluster: PostgresCluster) -> None:
    with pytest.raises(StorageUnavailable):
        PostgresMemoryStore(
            f"postgresql://oh_app@127.0.0.1:{cluster.port + 1}/postgres?connect_timeout=1",
            timeout=1.0,
        )


def test_a_missing_role_is_storage_unavailable(cluster: PostgresCluster) -> None:
    with pytest.raises(StorageUnavailable):
        PostgresMemoryStore(cluster.url("nobody"), timeout=1.0)


def test_a_write_the_trigger_refuses_is_a_typed_error(schema: Schema) -> None:
    """Even a store that skipped its own state check could not write into a tombstone."""
    store = PostgresMemoryStore(schema.url())
    try:
        notebook = open_notebook(store)
        store.forget(notebook, T0)
        with store._pool.connection() as conn, pytest.raises(psycopg.errors.RaiseException):
            conn.execute(
                "INSERT INTO records (notebook_id, name, kind, content, digest, author,"
                " written_at, version) VALUES (%s, 'note:x', 'note', '{}', 'd', 'a', 'w', 1)",
                (notebook,),
            )
        with pytest.raises(Purged):
            write(store, notebook, 0, "r-1", add("note:a"))
    finally:
        store.close()


def test_forget_removes_content_through_the_one_content_table_list(schema: Schema) -> None:
    store = PostgresMemoryStore(schema.url())
    try:
        notebook = open_notebook(store)
        write(store, notebook, 0, "r-1", add("note:a"), add("note:b"))
        removed = store.forget(notebook, T0)
        tables = run_sql(schema.url(), "SELECT name FROM content_tables ORDER BY position")
        assert list(removed) == [name for (name,) in tables]
        assert {t: n for t, n in removed.items() if n} == {"records": 2, "log": 1}
    finally:
        store.close()


def test_roles_sql_refuses_names_that_are_not_plain_identifiers() -> None:
    with pytest.raises(InvalidArgument):
        roles_sql(schema='oh"; DROP TABLE notebooks; --')
    assert 'CREATE SCHEMA IF NOT EXISTS "oh" AUTHORIZATION "oh_app";' in roles_sql()
