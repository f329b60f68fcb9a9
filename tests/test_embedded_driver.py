"""The embedded backend on its second driver, the ``libsql`` package (every conformance suite runs
on it too: its rows in tests/test_conformance.py), and the checks that the two drivers read and
write one file format (docs/design.md, "The embedded driver")."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from oh.config import Locations, embedded_driver, open_host, open_memory_store
from oh.core.changes import Applied
from oh.errors import AlreadyExists, InvalidArgument, StorageUnavailable
from oh.storage.sqlite.knowledge import SqliteKnowledgeStore
from oh.storage.sqlite.notebooks import DRIVERS, Driver, SqliteMemoryStore, connect, translated
from oh.testing.lifecycle import FakeClock
from oh.testing.memory_store import T0, add, open_notebook, write
from oh.verify import verify_store

# The sealed suites too (tests/test_sealed_notebooks.py), with every test they add, on the
# libsql driver: sealing must change no answer on either driver. MACed knowledge runs on both
# drivers in tests/test_knowledge_macs.py.


def _note(store: SqliteMemoryStore, notebook_id: str, based_on: int, text: str) -> None:
    result = write(store, notebook_id, based_on, f"req-{based_on}", add(f"note:n{based_on}", text))
    assert isinstance(result, Applied), result


@pytest.mark.parametrize(("first", "second"), [("sqlite3", "libsql"), ("libsql", "sqlite3")])
def test_a_file_written_by_one_driver_is_read_written_and_verified_by_the_other(
    tmp_path: Path, first: Driver, second: Driver
) -> None:
    path = tmp_path / "memory.db"
    store = SqliteMemoryStore(path, driver=first)  # creates and migrates the file
    notebook_id = open_notebook(store)
    for version in range(3):
        _note(store, notebook_id, version, f"written through {first}, note {version}")
    store.close()

    other = SqliteMemoryStore(path, driver=second)
    assert [r.name for r in other.records(notebook_id)] == ["note:n0", "note:n1", "note:n2"]
    _note(other, notebook_id, 3, f"written through {second}")
    assert verify_store(other).ok
    other.close()

    again = SqliteMemoryStore(path, driver=first)
    assert [r.version for r in again.records(notebook_id)] == [1, 2, 3, 4]
    assert verify_store(again).ok
    again.close()


@pytest.mark.parametrize("driver", DRIVERS)
def test_both_drivers_translate_driver_errors_the_same(tmp_path: Path, driver: Driver) -> None:
    path = tmp_path / "knowledge.db"
    SqliteKnowledgeStore(path, driver=driver).close()
    conn = connect(path, driver=driver)
    insert = (
        "INSERT INTO proposals (id, owner, proposed_by, proposed_at, name, content, digest,"
        " source, state) VALUES (?, 'ann', 'ann', ?, 'finding:a', '{}', 'd', '{}', 'pending')"
    )
    store = SqliteMemoryStore(tmp_path / "memory.db", driver=driver, busy_wait=0.05)
    blocker = connect(tmp_path / "memory.db", driver=driver)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(StorageUnavailable):  # another writer holds the lock
            open_notebook(store)
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert store.notebook_ids() == []
    store.close()
    conn.execute(insert, ("pr_1", "2026-01-01T00:00:00.000000Z"))
    with pytest.raises(AlreadyExists), translated():  # one pending proposal per name
        conn.execute(insert, ("pr_2", "2026-01-01T00:00:00.000000Z"))
    conn.close()


def test_the_driver_comes_from_oh_embedded_driver(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert embedded_driver({}) == "sqlite3"
    assert embedded_driver({"OH_EMBEDDED_DRIVER": ""}) == "sqlite3"
    assert embedded_driver({"OH_EMBEDDED_DRIVER": "libsql"}) == "libsql"
    for wrong in ("LIBSQL", "sqlite", "libsql ", "pysqlite3"):
        with pytest.raises(InvalidArgument, match="OH_EMBEDDED_DRIVER"):
            embedded_driver({"OH_EMBEDDED_DRIVER": wrong})
    monkeypatch.setenv("OH_EMBEDDED_DRIVER", "libsql")
    locations = Locations.resolve(str(tmp_path / "data"))
    store = open_memory_store(locations)
    assert isinstance(store, SqliteMemoryStore) and store.driver == "libsql"
    store.close()
    host = open_host(locations, clock=FakeClock(T0))
    try:
        parts = (host._memory, host._knowledge, host._registry)
        assert {getattr(part, "driver", None) for part in parts} == {"libsql"}
    finally:
        host.close()


def test_an_unknown_driver_is_refused_before_a_file_is_made(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgument, match="embedded driver"):
        SqliteMemoryStore(tmp_path / "memory.db", driver="bogus")  # type: ignore[arg-type]
    assert os.listdir(tmp_path) == []
