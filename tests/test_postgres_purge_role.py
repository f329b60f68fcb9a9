"""The purge worker's PostgreSQL role can do what SPEC §3 allows and nothing else (SPEC §10).

These tests connect as that role (``oh_purge``, set up by ``roles_sql``) and try everything it
must not do. The lifecycle conformance suite already holds its credential to the same denials
through ``PostgresPurgeAccess``; here the role itself is under test, with raw SQL.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from oh.core.clock import from_utc_text
from oh.core.notebook import new_notebook_id
from oh.services.notebooks import Notebooks, purge_expired
from oh.storage.base import OPENING_GRACE_FLOOR, PURGE_CLOCK_ALLOWANCE
from oh.storage.postgres.notebooks import PostgresMemoryStore, PostgresPurgeAccess, roles_sql
from oh.testing.lifecycle import FakeClock
from oh.testing.memory_store import T0, add, write
from oh.testing.postgres_cluster import APP_ROLE, PURGE_ROLE, Schema, fresh_schema, shared_cluster

DENIED = r"permission denied"
MARKER = "a note the purge role must never read"
CENTURY = timedelta(days=36525)  # unexpired by the database's clock whenever the suite runs
FAR = "9999-12-31T23:59:59.999999Z"  # a "now" the purge role might claim


@pytest.fixture
def schema() -> Iterator[Schema]:
    with fresh_schema(shared_cluster()) as schema:
        yield schema


@pytest.fixture
def store(schema: Schema) -> Iterator[PostgresMemoryStore]:
    store = PostgresMemoryStore(schema.url())
    yield store
    store.close()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def notebook(store: PostgresMemoryStore, clock: FakeClock) -> str:
    opened = Notebooks(store, clock=clock).open("ann", "doc", "run-1")
    write(store, opened.id, 0, "r-1", add("note:a", MARKER), now=clock())
    return opened.id


@pytest.fixture
def young(store: PostgresMemoryStore, clock: FakeClock) -> str:
    opened = Notebooks(store, clock=clock, lifetime=CENTURY).open("ann", "doc", "young")
    write(store, opened.id, 0, "r-1", add("note:a", MARKER), now=clock())
    return opened.id


@pytest.fixture
def opening(store: PostgresMemoryStore) -> str:
    """A notebook still opening, that the database's clock has not yet seen start."""
    notebook_id = new_notebook_id()
    store.create_notebook(
        notebook_id,
        owner="ann",
        document="doc",
        run="opening",
        started_at=T0 + CENTURY,
        forgets_at=T0 + CENTURY + timedelta(hours=24),
    )
    return notebook_id


def as_purge(schema: Schema, sql: str, params: tuple[Any, ...] = ()) -> Any:
    with psycopg.connect(schema.purge_url, autocommit=True) as conn:
        cursor = conn.execute(sql, params or None)
        return cursor.fetchall() if cursor.description else cursor.rowcount


@pytest.mark.parametrize(
    "sql",
    [
        # create a notebook, or write into one
        "INSERT INTO notebooks (id, owner, document, run, state, started_at, forgets_at,"
        " version, head_hash) VALUES ('nb_x', 'o', 'd', 'r', 'open', 'a', 'b', 0, 'h')",
        "INSERT INTO log (notebook_id, version, request_id, fingerprint, author, written_at,"
        " prev_hash, hash, changes, op, name, content, digest)"
        " VALUES (%s, 2, 'r', 'f', 'a', 'w', 'p', 'h', 1, 'add', 'note:x', '{}', 'd')",
        # update notes, or reopen / extend a notebook
        "UPDATE records SET content = '{}' WHERE notebook_id = %s",
        "UPDATE log SET content = '{}' WHERE notebook_id = %s",
        "UPDATE notebooks SET state = 'open' WHERE id = %s",
        "UPDATE notebooks SET forgets_at = '2999-01-01T00:00:00.000000Z' WHERE id = %s",
        # read note content, or anything else of a notebook
        "SELECT content FROM records WHERE notebook_id = %s",
        "SELECT content FROM log WHERE notebook_id = %s",
        "SELECT name, digest FROM records WHERE notebook_id = %s",
        "SELECT id, state FROM notebooks WHERE id = %s",
        "SELECT request_id FROM log WHERE notebook_id = %s",
        # delete outside the purge functions, or wipe tables
        "DELETE FROM records WHERE notebook_id = %s",
        "DELETE FROM notebooks WHERE id = %s",
        "TRUNCATE records",
        # the content deletion helper runs with the caller's rights: none
        "SELECT oh_delete_content(%s)",
        # no new objects, no borrowed identity
        "CREATE TABLE stash (content TEXT)",
        "CREATE FUNCTION peek() RETURNS SETOF TEXT LANGUAGE sql"
        " SECURITY DEFINER AS 'SELECT content FROM records'",
        f"SET ROLE {APP_ROLE}",
        "SELECT pg_switch_wal()",
        "CHECKPOINT",
    ],
)
def test_the_purge_role_is_denied(
    schema: Schema, store: PostgresMemoryStore, notebook: str, sql: str
) -> None:
    params = (notebook,) if "%s" in sql else ()
    with pytest.raises(psycopg.Error, match=r"(?i)permission denied|must be|only .* owner"):
        as_purge(schema, sql, params)
    assert store.notebook(notebook).state == "open"
    assert store.notebook(notebook).version == 1
    assert store.record(notebook, "note:a") is not None
    assert store.notebook_ids() == [notebook]


def test_the_purge_role_cannot_vacuum_either(schema: Schema, store: PostgresMemoryStore) -> None:
    """PostgreSQL skips a VACUUM by a role that does not own the table, with a warning."""
    notices: list[str] = []
    with psycopg.connect(schema.purge_url, autocommit=True) as conn:
        conn.add_notice_handler(lambda notice: notices.append(notice.message_primary))
        conn.execute("VACUUM FULL records")
    assert any("skipping" in notice for notice in notices), notices


def test_the_purge_role_holds_no_privilege_on_any_table(
    schema: Schema, store: PostgresMemoryStore
) -> None:
    rows = as_purge(
        schema,
        "SELECT c.relname, p.privilege FROM pg_class c"
        " JOIN pg_namespace n ON n.oid = c.relnamespace"
        " CROSS JOIN unnest(ARRAY['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'TRUNCATE',"
        " 'REFERENCES', 'TRIGGER']) AS p(privilege)"
        " WHERE n.nspname = current_schema() AND c.relkind = 'r'"
        " AND has_table_privilege(current_user, c.oid, p.privilege)",
    )
    assert rows == []
    attributes = as_purge(
        schema,
        "SELECT rolsuper, rolcreaterole, rolcreatedb, rolinherit, rolbypassrls"
        " FROM pg_roles WHERE rolname = current_user",
    )
    assert attributes == [(False, False, False, False, False)]
    assert as_purge(schema, "SELECT pg_has_role(current_user, %s, 'MEMBER')", (APP_ROLE,)) == [
        (False,)
    ]


def test_the_purge_role_sees_only_ids_of_expired_notebooks(
    schema: Schema, store: PostgresMemoryStore, notebook: str, clock: FakeClock
) -> None:
    now = "2026-11-30T12:00:00.000000Z"
    assert as_purge(schema, "SELECT * FROM oh_expired_notebooks(%s, 10)", (now,)) == [(notebook,)]
    early = "2026-11-29T13:00:00.000000Z"
    assert as_purge(schema, "SELECT * FROM oh_expired_notebooks(%s, 10)", (early,)) == []


def test_the_purge_function_leaves_a_notebook_that_is_not_expired_alone(
    schema: Schema, store: PostgresMemoryStore, notebook: str
) -> None:
    early = "2026-11-29T13:00:00.000000Z"
    assert as_purge(schema, "SELECT oh_purge_notebook(%s, %s)", (notebook, early)) == [(None,)]
    assert as_purge(schema, "SELECT oh_mark_empty(%s, %s, %s)", (notebook, early, early)) == [
        (False,)
    ]
    assert store.notebook(notebook).state == "open"
    assert store.record(notebook, "note:a") is not None


def test_the_purge_role_purges_and_leaves_a_tombstone(
    schema: Schema, store: PostgresMemoryStore, notebook: str, clock: FakeClock
) -> None:
    clock.advance(hours=24)
    access = PostgresPurgeAccess(schema.purge_url)
    try:
        report = purge_expired(access, clock(), opening_grace=timedelta(minutes=10))
    finally:
        access.close()
    assert report.purged == [notebook]
    assert report.compacted is False  # the purge role cannot VACUUM; autovacuum does
    tombstone = store.notebook(notebook)
    assert (tombstone.state, tombstone.purged_at) == ("purged", "2026-11-30T12:00:00.000000Z")
    assert store.records(notebook) == []
    assert list(store.log(notebook)) == []


def test_no_other_role_may_run_the_purge_functions(schema: Schema, store: Any) -> None:
    cluster = schema.cluster
    cluster.execute(
        "DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'reporting')"
        " THEN CREATE ROLE reporting LOGIN; END IF; END $$"
    )
    cluster.execute(f'GRANT USAGE ON SCHEMA "{schema.name}" TO reporting')
    with (
        psycopg.connect(cluster.url("reporting", search_path=schema.name)) as conn,
        pytest.raises(psycopg.errors.InsufficientPrivilege),
    ):
        conn.execute("SELECT * FROM oh_expired_notebooks('9999', 10)")


def test_the_role_sql_is_idempotent(schema: Schema) -> None:
    sql = roles_sql(schema=schema.name, app_role=APP_ROLE, purge_role=PURGE_ROLE)
    schema.cluster.execute(sql)
    schema.cluster.execute(sql)


def test_granted_before_or_after_the_first_start_the_purge_works(schema: Schema) -> None:
    """``oh postgres roles`` may run before the first server starts (default privileges) or
    after it migrated (explicit grants): either way the purge role can run the purge."""
    store = PostgresMemoryStore(schema.url())
    store.close()
    schema.cluster.execute(roles_sql(schema=schema.name, app_role=APP_ROLE, purge_role=PURGE_ROLE))
    assert as_purge(schema, "SELECT * FROM oh_stale_openings('9999', 10)") == []


# -- the purge functions check values, judged by the database's own clock ----------------------


def test_a_forged_now_cannot_purge_a_notebook_that_has_not_expired(
    schema: Schema, store: PostgresMemoryStore, young: str
) -> None:
    assert as_purge(schema, "SELECT * FROM oh_expired_notebooks(%s, 10)", (FAR,)) == []
    assert as_purge(schema, "SELECT oh_purge_notebook(%s, %s)", (young, FAR)) == [(None,)]
    assert store.notebook(young).state == "open"
    assert store.record(young, "note:a") is not None


def test_a_forged_cutoff_cannot_empty_an_opening_in_progress(
    schema: Schema, store: PostgresMemoryStore, opening: str
) -> None:
    assert as_purge(schema, "SELECT * FROM oh_stale_openings(%s, 10)", (FAR,)) == []
    assert as_purge(schema, "SELECT oh_mark_empty(%s, %s, %s)", (opening, FAR, FAR)) == [(False,)]
    assert store.notebook(opening).state == "opening"


@pytest.mark.parametrize(
    "stamp",
    ["", "soon", "2026-11-30 13:00:00", "2026-11-30T13:00:00Z", "2026-13-45T25:61:61.000000Z"],
)
def test_the_purge_functions_take_only_a_real_stamp(
    schema: Schema, store: PostgresMemoryStore, notebook: str, stamp: str
) -> None:
    """``notebook`` forgot a day after T0: expired by the database's clock."""
    with pytest.raises(psycopg.Error, match="not a time stamp"):
        as_purge(schema, "SELECT oh_purge_notebook(%s, %s)", (notebook, stamp))
    assert store.notebook(notebook).state == "open"
    assert store.record(notebook, "note:a") is not None


def test_a_forged_now_stamps_the_tombstone_no_later_than_the_databases_clock(
    schema: Schema, store: PostgresMemoryStore, notebook: str
) -> None:
    [(counts,)] = as_purge(schema, "SELECT oh_purge_notebook(%s, %s)", (notebook, FAR))
    assert counts is not None
    tombstone = store.notebook(notebook)
    assert tombstone.state == "purged"
    assert tombstone.purged_at is not None
    assert tombstone.forgets_at <= tombstone.purged_at < FAR


def test_the_databases_bounds_are_the_librarys(schema: Schema, store: PostgresMemoryStore) -> None:
    """Migration 0005 writes the allowance and the grace floor as SQL; they must be these."""
    with psycopg.connect(schema.url()) as conn:
        bound, clock, floor = conn.execute(
            "SELECT oh_purge_bound(), to_char(now() AT TIME ZONE 'UTC',"
            ' \'YYYY-MM-DD"T"HH24:MI:SS.US"Z"\'), oh_opening_floor(%s)',
            ("2026-11-30T13:00:00.000000Z",),
        ).fetchone()
    assert from_utc_text(bound) - from_utc_text(clock) == PURGE_CLOCK_ALLOWANCE
    assert from_utc_text("2026-11-30T13:00:00.000000Z") - from_utc_text(floor) == (
        OPENING_GRACE_FLOOR
    )
