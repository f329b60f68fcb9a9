"""A destroyed key is gone when forget answers, whoever is reading the key store.

Other processes hold read transactions on ``keys.db`` (a host's readers, a backup tool, an
``sqlite3`` shell) while notebooks are forgotten and purged. When ``forget`` (or a purge pass)
returns, the wrapped data key must be in no file of the keys directory: not in ``keys.db``, and
no ``-wal`` or ``-journal`` may keep it. A reader that holds on longer than the busy timeout
makes the forget fail (``storage_unavailable``) with nothing destroyed and nothing deleted,
never answer success with the key still on disk.
"""

from __future__ import annotations

import multiprocessing
import sqlite3
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from oh.errors import StorageUnavailable
from oh.keys import Keyring, MasterKey, MasterKeys
from oh.services.notebooks import purge_expired
from oh.storage.sqlite.keys import KeyShredder, SqliteKeyStore
from oh.storage.sqlite.notebooks import SqliteMemoryStore, SqlitePurgeAccess
from oh.testing.memory_store import T0, add, open_notebook, write


def _reader(path: str, stop: Any, hold: float) -> None:
    """Another process reading the key store in a loop, each read transaction held ``hold``."""
    conn = sqlite3.connect(path, isolation_level=None, timeout=30)
    while not stop.is_set():
        conn.execute("BEGIN")
        conn.execute("SELECT notebook_id, wrapped FROM data_keys").fetchall()
        time.sleep(hold)
        conn.execute("COMMIT")
        time.sleep(0.001)
    conn.close()


def _files_holding(directory: Path, needle: bytes) -> list[str]:
    return [p.name for p in directory.iterdir() if p.is_file() and needle in p.read_bytes()]


@pytest.fixture
def sealed(tmp_path: Path) -> Any:
    keys = tmp_path / "keys"
    masters = MasterKeys(MasterKey.generate())
    store = SqliteMemoryStore(
        tmp_path / "memory.db", keyring=Keyring(masters, SqliteKeyStore(keys / "keys.db"))
    )
    yield store, keys
    store.close()


def _wrapped(keys: Path, notebook_id: str) -> bytes:
    store = SqliteKeyStore(keys / "keys.db", create=False)
    try:
        found = store.get(notebook_id)
    finally:
        store.close()
    assert found is not None
    return found[1]


def test_forget_with_readers_in_other_processes_leaves_no_copy_of_the_key(sealed: Any) -> None:
    store, keys = sealed
    notebooks = [open_notebook(store, run=f"run-{i}") for i in range(24)]
    for notebook_id in notebooks:
        write(store, notebook_id, 0, "r-1", add("note:a", "a secret"))
    wrapped = {notebook_id: _wrapped(keys, notebook_id) for notebook_id in notebooks}
    context = multiprocessing.get_context("spawn")
    stop = context.Event()
    readers = [
        context.Process(target=_reader, args=(str(keys / "keys.db"), stop, hold))
        for hold in (0.0, 0.005, 0.05)
    ]
    for reader in readers:
        reader.start()
    try:
        time.sleep(0.5)  # the readers are reading
        for notebook_id in notebooks:
            store.forget(notebook_id, T0 + timedelta(minutes=1))
            assert _files_holding(keys, wrapped[notebook_id]) == [], notebook_id
    finally:
        stop.set()
        for reader in readers:
            reader.join(30)
    assert sorted(p.name for p in keys.iterdir()) == ["keys.db"]  # no WAL, no journal left


def test_a_purge_pass_with_readers_leaves_no_copy_of_the_keys(sealed: Any) -> None:
    store, keys = sealed
    notebooks = [open_notebook(store, run=f"run-{i}") for i in range(12)]
    for notebook_id in notebooks:
        write(store, notebook_id, 0, "r-1", add("note:a", "a secret"))
    wrapped = [_wrapped(keys, notebook_id) for notebook_id in notebooks]
    context = multiprocessing.get_context("spawn")
    stop = context.Event()
    reader = context.Process(target=_reader, args=(str(keys / "keys.db"), stop, 0.01))
    reader.start()
    access = SqlitePurgeAccess(store.path, shredder=KeyShredder(keys / "keys.db"))
    try:
        time.sleep(0.5)
        report = purge_expired(access, T0 + timedelta(days=2))
        assert len(report.purged) == len(notebooks)
        for key in wrapped:
            assert _files_holding(keys, key) == []
    finally:
        access.close()
        stop.set()
        reader.join(30)


def test_a_reader_that_never_lets_go_makes_forget_fail_with_nothing_destroyed(
    sealed: Any,
) -> None:
    store, keys = sealed
    notebook_id = open_notebook(store)
    write(store, notebook_id, 0, "r-1", add("note:a", "kept text"))
    wrapped = _wrapped(keys, notebook_id)
    holder = sqlite3.connect(str(keys / "keys.db"), isolation_level=None)
    holder.execute("BEGIN")
    holder.execute("SELECT count(*) FROM data_keys").fetchone()  # a read lock, held
    try:
        with pytest.raises(StorageUnavailable):
            store.forget(notebook_id, T0 + timedelta(minutes=1))
    finally:
        holder.execute("COMMIT")
        holder.close()
    # Not acknowledged, and nothing was lost: the notebook is open and reads as before.
    assert store.notebook(notebook_id).state == "open"
    assert _wrapped(keys, notebook_id) == wrapped
    record = store.record(notebook_id, "note:a")
    assert record is not None and "kept text" in record.content
    store.forget(notebook_id, T0 + timedelta(minutes=2))  # once the reader is gone, it works
    assert _files_holding(keys, wrapped) == []


def test_a_key_store_from_an_earlier_release_in_wal_mode_is_turned_to_a_journal(
    tmp_path: Path,
) -> None:
    path = tmp_path / "keys.db"
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(
        "CREATE TABLE data_keys (notebook_id TEXT PRIMARY KEY, master_id TEXT NOT NULL,"
        " wrapped BLOB NOT NULL) WITHOUT ROWID"
    )
    conn.execute("INSERT INTO data_keys VALUES ('nb_1', 'm', x'00112233')")
    conn.commit()
    conn.close()
    store = SqliteKeyStore(path)
    try:
        assert store.get("nb_1") == ("m", bytes.fromhex("00112233"))
        mode = store._conn.execute("PRAGMA journal_mode").fetchone()[0]
        assert mode == "delete"
    finally:
        store.close()
    assert not (tmp_path / "keys.db-wal").exists()
