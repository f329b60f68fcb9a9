"""The embedded purge credential can only purge (SPEC §3), whatever SQL is run on its connection.

``oh purge`` holds a standard-library SQLite connection on the memory file with an authorizer and
TEMP triggers. Here an attacker runs arbitrary SQL on that very connection (``access._conn``)
against a real database file: every PRAGMA, schema change, ATTACH, read of content and forged
value is refused and changes nothing; deleting an expired notebook and marking a stuck opening
empty still work. The lifecycle conformance suite holds both backends to the value checks
through ``purge_execute``; what only SQLite offers (PRAGMA, ATTACH, TEMP objects) is tried here.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from oh.core.notebook import new_notebook_id
from oh.services.notebooks import Notebooks
from oh.storage.sqlite.notebooks import SqliteMemoryStore, SqlitePurgeAccess, purge_authorizer
from oh.testing.lifecycle import FakeClock
from oh.testing.memory_store import T0, add, write

DENIED = r"(?i)not authorized|prohibited|denied"
MARKER = "a note the purge credential must never read"
CENTURY = timedelta(days=36525)  # unexpired by the database's clock whenever the suite runs
LATER = "2026-11-30T13:00:00.000000Z"  # T0 + 25 hours, when `old` is past its forget time
FAR = "9999-12-31T23:59:59.999999Z"


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "memory.db"


@pytest.fixture
def ids(path: Path) -> dict[str, str]:
    """Notebooks in each situation, written and closed before the purge credential opens (so
    a journal-mode switch would not merely find the file busy)."""
    clock = FakeClock()
    store = SqliteMemoryStore(path)
    young = Notebooks(store, clock=clock, lifetime=CENTURY).open("ann", "doc", "young")
    old = Notebooks(store, clock=clock).open("ann", "doc", "old")
    for notebook in (young, old):
        write(store, notebook.id, 0, "r-1", add("note:a", MARKER), now=clock())
    found = {"young": young.id, "old": old.id}
    for name, started in (("stuck", T0), ("opening", T0 + CENTURY)):
        found[name] = new_notebook_id()
        store.create_notebook(
            found[name],
            owner="ann",
            document="doc",
            run=name,
            started_at=started,
            forgets_at=started + timedelta(hours=24),
        )
    store.close()
    return found


@pytest.fixture
def access(path: Path, ids: dict[str, str]) -> Iterator[SqlitePurgeAccess]:
    access = SqlitePurgeAccess(path)
    yield access
    access.close()


def attack(access: SqlitePurgeAccess, sql: str, params: tuple[Any, ...] = ()) -> Any:
    return access._conn.execute(sql, params).fetchall()


def unguarded(access: SqlitePurgeAccess, sql: str) -> Any:
    """Look at the purge connection's own settings, the authorizer lifted for the test."""
    conn = access._conn
    conn.set_authorizer(None)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.set_authorizer(purge_authorizer)


def snapshot(path: Path) -> Any:
    """Every row of every table, and the file's journal mode and header fields, read apart."""
    conn = sqlite3.connect(str(path), isolation_level=None)
    try:
        tables = [
            row[0]
            for row in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
            ).fetchall()
        ]
        rows = {t: sorted(map(repr, conn.execute(f"SELECT * FROM {t}").fetchall())) for t in tables}
        schema = conn.execute("SELECT type, name, sql FROM sqlite_master ORDER BY name").fetchall()
        header = [
            conn.execute(f"PRAGMA {p}").fetchone()[0]
            for p in ("journal_mode", "user_version", "application_id", "auto_vacuum")
        ]
        return rows, schema, header
    finally:
        conn.close()


@pytest.mark.parametrize(
    "sql",
    [
        "PRAGMA journal_mode=DELETE",
        "PRAGMA journal_mode=MEMORY",
        "PRAGMA main.journal_mode=OFF",
        "PRAGMA secure_delete=OFF",
        "PRAGMA main.secure_delete=0",
        "PRAGMA synchronous=OFF",
        "PRAGMA foreign_keys=ON",
        "PRAGMA recursive_triggers=ON",
        "PRAGMA writable_schema=ON",
        "PRAGMA query_only=ON",
        "PRAGMA temp_store=FILE",
        "PRAGMA cell_size_check=OFF",
        "PRAGMA wal_autocheckpoint=0",
        "PRAGMA wal_checkpoint(TRUNCATE)",
        "PRAGMA user_version=7",
        "PRAGMA application_id=7",
        "PRAGMA auto_vacuum=FULL",
        "PRAGMA incremental_vacuum",
        "PRAGMA optimize",
        "PRAGMA integrity_check",
        "SELECT * FROM pragma_table_info('records')",
    ],
)
def test_no_pragma_passes_the_purge_credential(
    path: Path, access: SqlitePurgeAccess, sql: str
) -> None:
    before = snapshot(path)
    settings = "secure_delete", "synchronous", "foreign_keys", "recursive_triggers", "query_only"
    own = [unguarded(access, f"PRAGMA {p}") for p in settings]
    with pytest.raises(sqlite3.DatabaseError, match=DENIED):
        attack(access, sql)
    assert snapshot(path) == before
    assert before[2][0] == "wal"
    assert [unguarded(access, f"PRAGMA {p}") for p in settings] == own
    assert own[0] == [(1,)]  # secure_delete stays on: deleted text is overwritten


@pytest.mark.parametrize(
    "sql",
    [
        "ATTACH DATABASE ':memory:' AS stash",
        "ATTACH DATABASE '{dir}/stash.db' AS stash",
        "VACUUM INTO '{dir}/copy.db'",
        "VACUUM",
        "ANALYZE",
        "REINDEX",
        "CREATE TABLE stash (content TEXT)",
        "CREATE TEMP TABLE stash (content TEXT)",
        "CREATE TEMP VIEW notebooks AS SELECT 1 AS id",
        "CREATE TEMP TRIGGER quiet BEFORE DELETE ON main.records BEGIN SELECT 1; END",
        "CREATE VIRTUAL TABLE temp.stash USING fts5(content)",
        "DROP TRIGGER temp.oh_purge_changes",
        "DROP TRIGGER oh_purge_content",
        "DROP TRIGGER notebooks_stay_purged",
        "DROP TRIGGER log_only_into_open_notebooks",
        "DROP TABLE records",
        "DROP INDEX log_by_request",
        "ALTER TABLE records RENAME TO kept",
        "ALTER TABLE notebooks ADD COLUMN note TEXT",
        "SELECT load_extension('libstash')",
        "SAVEPOINT unseen",
        "SELECT sql FROM sqlite_master",
        "SELECT sql FROM sqlite_temp_master",
        "INSERT INTO notebooks (id, owner, document, run, state, started_at, forgets_at,"
        " version, head_hash) VALUES ('nb_new', 'o', 'd', 'r', 'open', 'a', 'b', 0, 'h')",
        "REPLACE INTO schema_migrations (version, name) VALUES (1, 'x')",
        "DELETE FROM records WHERE notebook_id = '{old}' RETURNING content",
        "DELETE FROM log WHERE notebook_id = '{old}' RETURNING request_id",
        "UPDATE notebooks SET state = state WHERE id = '{old}' RETURNING owner",
        "DELETE FROM notebooks WHERE id = '{old}'",
        "DELETE FROM reviewed_vectors",
    ],
)
def test_the_purge_credential_cannot_attach_copy_or_change_the_schema(
    path: Path, ids: dict[str, str], access: SqlitePurgeAccess, sql: str
) -> None:
    before = snapshot(path)
    files = sorted(p.name for p in path.parent.iterdir())
    guards = unguarded(access, "SELECT name FROM sqlite_temp_master WHERE type = 'trigger'")
    with pytest.raises(sqlite3.DatabaseError, match=DENIED):
        attack(access, sql.format(dir=path.parent, old=ids["old"]))
    assert snapshot(path) == before
    assert sorted(p.name for p in path.parent.iterdir()) == files  # no copy, no stash
    assert unguarded(access, "SELECT name FROM sqlite_temp_master WHERE type = 'trigger'") == (
        guards
    )
    assert len(guards) == 2  # the guard before a state change, the deleter after
    with pytest.raises(sqlite3.DatabaseError, match=DENIED):
        attack(access, "DELETE FROM records WHERE notebook_id = ?", (ids["young"],))


def test_a_tombstone_takes_its_notebooks_content_with_it(
    path: Path, ids: dict[str, str], access: SqlitePurgeAccess
) -> None:
    """Issue #16: the purge credential could mark an expired notebook purged and keep its
    notes. Now the tombstone deletes them, in the same statement. (The tombstone's seal must be
    the one chained from the notebook's, or the change is refused: verify would report it.)"""
    with pytest.raises(sqlite3.IntegrityError, match="denied to the purge credential"):
        attack(
            access,
            "UPDATE notebooks SET state = 'purged', purged_at = ? WHERE id = ?",
            (LATER, ids["old"]),
        )
    attack(
        access,
        "UPDATE notebooks SET state = 'purged', purged_at = ?1,"
        " seal = oh_closed_seal(seal, 'purged', ?1) WHERE id = ?2",
        (LATER, ids["old"]),
    )
    store = SqliteMemoryStore(path)
    try:
        assert (store.notebook(ids["old"]).state, store.notebook(ids["old"]).purged_at) == (
            "purged",
            LATER,
        )
        assert store.records(ids["old"]) == []
        assert list(store.log(ids["old"])) == []
        assert len(store.records(ids["young"])) == 1
    finally:
        store.close()


@pytest.mark.parametrize(
    "stamp",
    [None, "", "soon", "2026-11-30 13:00:00", "2026-11-30T13:00:00Z", LATER + "!", FAR],
)
def test_a_tombstone_takes_only_a_real_stamp_no_later_than_the_databases_clock(
    path: Path, ids: dict[str, str], access: SqlitePurgeAccess, stamp: str | None
) -> None:
    before = snapshot(path)
    with pytest.raises(sqlite3.DatabaseError, match=DENIED):
        attack(
            access,
            "UPDATE notebooks SET state = 'purged', purged_at = ? WHERE id = ?",
            (stamp, ids["old"]),
        )
    with pytest.raises(sqlite3.DatabaseError, match=DENIED):
        attack(
            access,
            "UPDATE notebooks SET state = 'empty', purged_at = ? WHERE id = ?",
            (stamp, ids["stuck"]),
        )
    assert snapshot(path) == before


def test_raw_sql_on_the_purge_credential_can_still_purge_and_empty(
    path: Path, ids: dict[str, str], access: SqlitePurgeAccess
) -> None:
    expired = "SELECT id FROM notebooks WHERE state = 'open' AND forgets_at <= ?"
    assert attack(access, expired, (LATER,)) == [(ids["old"],)]
    attack(
        access,
        "UPDATE notebooks SET state = 'purged', purged_at = ?1,"
        " seal = oh_closed_seal(seal, 'purged', ?1) WHERE state = 'open' AND forgets_at <= ?1",
        (LATER,),
    )
    attack(
        access,
        "UPDATE notebooks SET state = 'empty', purged_at = ?1,"
        " seal = oh_closed_seal(seal, 'empty', ?1) WHERE id = ?2",
        (LATER, ids["stuck"]),
    )
    # Touching a tombstone without changing it deletes whatever content it might still hold.
    attack(access, "UPDATE notebooks SET state = state WHERE id = ?", (ids["old"],))
    store = SqliteMemoryStore(path)
    try:
        assert store.notebook(ids["old"]).state == "purged"
        assert store.notebook(ids["old"]).purged_at == LATER
        assert store.records(ids["old"]) == []
        assert store.notebook(ids["stuck"]).state == "empty"
        assert store.notebook(ids["young"]).state == "open"
        assert len(store.records(ids["young"])) == 1
    finally:
        store.close()


def test_compacting_does_not_lift_the_checks(
    path: Path, ids: dict[str, str], access: SqlitePurgeAccess
) -> None:
    assert access.compact()
    with pytest.raises(sqlite3.DatabaseError, match=DENIED):
        attack(access, "PRAGMA journal_mode=DELETE")
    with pytest.raises(sqlite3.DatabaseError, match=DENIED):
        attack(access, "DELETE FROM records WHERE notebook_id = ?", (ids["young"],))
    assert snapshot(path)[2][0] == "wal"
