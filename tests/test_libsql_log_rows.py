"""The embedded log keeps an entry and its changes in one row (migration 0006): a database
written in the earlier layout (a ``log`` row plus one ``log_changes`` row per change) migrates to
exactly the same log, and a row whose change columns do not hold its changes reads as damage."""

from __future__ import annotations

import sqlite3
from importlib import resources
from pathlib import Path

import pytest

from oh.core.changes import LogEntry, parse_changes
from oh.errors import IntegrityError
from oh.storage.sqlite.notebooks import SqliteMemoryStore, _statements
from oh.testing.memory_store import T0, add, open_notebook, remove, replace
from oh.verify import verify_notebook

MIGRATIONS = "oh.storage.migrations.libsql"


def _write(store: SqliteMemoryStore, notebook: str) -> None:
    calls = [
        [add("note:a", "first"), add("note:b", 'quotes " and \\ and \u00e9 \U0001f600')],
        [add("note:c", "one change")],
        [replace("note:a", "second"), remove("note:b"), add("note:d", "x\ny")],
        [remove("note:c")],
        [add(f"note:n{i:02d}", f"note {i}") for i in range(64)],
    ]
    for version, changes in enumerate(calls):
        store.remember(
            notebook,
            based_on=version,
            request_id=f"r-{version}",
            changes=parse_changes(changes),
            author="agent:a",
            now=T0,
        )


def _old_layout(path: Path) -> None:
    """A database at migration 0005: the layout before entries kept their changes."""
    conn = sqlite3.connect(str(path), isolation_level=None)
    conn.execute("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL)")
    for entry in sorted(resources.files(MIGRATIONS).iterdir(), key=lambda e: e.name):
        number = entry.name.split("_", 1)[0]
        if not entry.name.endswith(".sql") or int(number) > 5:
            continue
        for statement in _statements(entry.read_text("utf-8")):
            conn.execute(statement)
        conn.execute("INSERT INTO schema_migrations VALUES (?, ?)", (int(number), entry.name))
    conn.close()


def _copy_into_old_layout(store: SqliteMemoryStore, notebook: str, path: Path) -> None:
    entries = list(store.log(notebook))
    nb = store.notebook(notebook)
    conn = sqlite3.connect(str(path), isolation_level=None)
    conn.execute(
        "INSERT INTO notebooks (id, owner, document, run, state, started_at, forgets_at, version,"
        " pinned_revision, head_hash) VALUES (?, ?, ?, ?, 'open', ?, ?, ?, NULL, ?)",
        (
            nb.id,
            nb.owner,
            nb.document,
            nb.run,
            nb.started_at,
            nb.forgets_at,
            nb.version,
            nb.head_hash,
        ),
    )
    for e in entries:
        conn.execute(
            "INSERT INTO log (notebook_id, version, request_id, fingerprint, author, written_at,"
            " prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                notebook,
                e.version,
                e.request_id,
                e.fingerprint,
                e.author,
                e.written_at,
                e.prev_hash,
                e.hash,
            ),
        )
        for seq, c in enumerate(e.changes):
            conn.execute(
                "INSERT INTO log_changes (notebook_id, version, seq, op, name, content, digest)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (notebook, e.version, seq, c.op, c.name, c.content, c.digest),
            )
    for r in store.records(notebook):
        conn.execute(
            "INSERT INTO records (notebook_id, name, kind, content, digest, author, written_at,"
            " version) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (notebook, r.name, r.kind, r.content, r.digest, r.author, r.written_at, r.version),
        )
    conn.close()


def test_a_database_in_the_earlier_layout_migrates_to_the_same_log(tmp_path: Path) -> None:
    store = SqliteMemoryStore(tmp_path / "new.db")
    notebook = open_notebook(store)
    _write(store, notebook)
    entries: list[LogEntry] = list(store.log(notebook))
    assert [len(e.changes) for e in entries] == [2, 1, 3, 1, 64]
    _old_layout(tmp_path / "old.db")
    _copy_into_old_layout(store, notebook, tmp_path / "old.db")

    migrated = SqliteMemoryStore(tmp_path / "old.db")
    try:
        assert list(migrated.log(notebook)) == entries
        assert list(migrated.log(notebook, batch=1)) == entries
        assert migrated.records(notebook) == store.records(notebook)
        assert migrated.changes_after(notebook, 0) == store.changes_after(notebook, 0)
        assert verify_notebook(migrated, notebook).ok
        tables = {
            row[0] for row in migrated._conn.execute("SELECT name FROM sqlite_master").fetchall()
        }
        assert "log_changes" not in tables
        # and it goes on from the migrated head exactly as the store it came from
        for target in (store, migrated):
            target.remember(
                notebook,
                based_on=5,
                request_id="r-5",
                changes=parse_changes([add("note:e", "after")]),
                author="agent:a",
                now=T0,
            )
        assert list(migrated.log(notebook)) == list(store.log(notebook))
    finally:
        migrated.close()
        store.close()


@pytest.mark.parametrize(
    "damage",
    [
        "UPDATE log SET changes = 3 WHERE version = 1",  # the count disagrees with the arrays
        "UPDATE log SET content = substr(content, 2) WHERE version = 1",  # not JSON any more
        "UPDATE log SET name = '[\"note:a\"]' WHERE version = 1",  # one array too short
    ],
)
def test_a_row_that_does_not_hold_its_changes_is_damage(tmp_path: Path, damage: str) -> None:
    store = SqliteMemoryStore(tmp_path / "memory.db")
    notebook = open_notebook(store)
    _write(store, notebook)
    conn = sqlite3.connect(str(tmp_path / "memory.db"), isolation_level=None)
    conn.execute(damage)
    conn.close()
    try:
        problems = verify_notebook(store, notebook).problems
        assert "damaged" in {p.what for p in problems}
        with pytest.raises(IntegrityError):
            list(store.log(notebook))
        with pytest.raises(IntegrityError):
            store.changes_after(notebook, 0)
    finally:
        store.close()


def test_one_change_is_kept_plainly_and_several_as_arrays(tmp_path: Path) -> None:
    store = SqliteMemoryStore(tmp_path / "memory.db")
    notebook = open_notebook(store)
    _write(store, notebook)
    rows = store._conn.execute(
        "SELECT changes, op, name, digest FROM log WHERE notebook_id = ? ORDER BY version",
        (notebook,),
    ).fetchall()
    try:
        assert rows[1][:3] == (1, "add", "note:c")
        assert rows[3] == (1, "remove", "note:c", None)
        assert rows[2][:3] == (3, '["replace","remove","add"]', '["note:a","note:b","note:d"]')
        assert rows[2][3].startswith('["') and ",null," in rows[2][3]
    finally:
        store.close()
