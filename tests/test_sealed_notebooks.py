"""Sealed notebooks on the embedded backend (docs/keys.md): the sealed harnesses, with which
tests/test_conformance.py runs every notebook suite again (sealing changes no answer); then what
only sealing promises. Content is never at
rest in plain text (a scan of every file finds none of a distinctive note), a value forged into
the database with its digest recomputed is refused, and forgetting destroys the data key first,
so a backup taken while the notebook was open can no longer be opened with everything left on
the machine: the master key, the key store and the live database."""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harnesses import SqliteToolsHarness
from oh.core.changes import Applied
from oh.errors import IntegrityError, Purged, StorageUnavailable
from oh.keys import SEALED, Keyring, MasterKey, MasterKeys, NotebookCipher
from oh.services.notebooks import Notebooks
from oh.storage.sqlite.keys import KeyShredder, SqliteKeyStore
from oh.storage.sqlite.notebooks import Driver, SqliteMemoryStore, SqlitePurgeAccess
from oh.testing.declared import PLAIN_CONTENT
from oh.testing.lifecycle import FakeClock
from oh.testing.memory_store import add, open_notebook, write
from oh.testing.tampering import Edit
from oh.verify import verify_store
from test_libsql_store import SqliteHarness, SqliteLifecycleHarness

# A sealed store keeps no plain content: the conformance tests that edit a note's text in place
# with SQL ("true" becomes "fake") and expect verify or read to notice have nothing to edit. The
# attacks a sealed file does face (content forged with its digest recomputed, sealed values
# swapped, bytes flipped) are the tests below.
SEALED_CANNOT = frozenset({PLAIN_CONTENT})
MARK = "quokka-saffron-teleprinter"  # a note text no file may hold in plain text


class Keys:
    """A master key and a key store file, shared by every store a test opens."""

    def __init__(self, directory: Path) -> None:
        self.masters = MasterKeys(MasterKey.generate())
        self.path = directory / "keys" / "keys.db"

    def keyring(self) -> Keyring:
        return Keyring(self.masters, SqliteKeyStore(self.path))

    def tokened(self, edit: Edit) -> Edit:
        """``edit`` with its plain names, digests, request ids ... as the sealed rows keep them."""
        keyring = self.keyring()
        try:
            return edit.tokened(keyring)
        finally:
            keyring.close()

    def token(self, notebook_id: str, value: str, column: str = "name") -> str:
        """``value`` as the notebook's sealed rows keep it (``NotebookCipher.token``)."""
        keyring = self.keyring()
        try:
            return keyring.cipher(notebook_id).token(value, column)
        finally:
            keyring.close()

    def holds(self, notebook_id: str) -> bool:
        """Whether the key store holds the notebook's data key."""
        store = SqliteKeyStore(self.path)
        try:
            return store.get(notebook_id) is not None
        finally:
            store.close()


class SealedHarness(SqliteHarness):
    cannot = SEALED_CANNOT

    def __init__(self, path: Path, driver: Driver = "sqlite3") -> None:
        super().__init__(path, driver)
        self.keys = Keys(path.parent)

    def open(self) -> SqliteMemoryStore:
        return SqliteMemoryStore(self.path, keyring=self.keys.keyring(), driver=self.driver)

    def tamper(self, edit: Edit) -> None:
        super().tamper(self.keys.tokened(edit))


class SealedLifecycleHarness(SqliteLifecycleHarness):
    cannot = SEALED_CANNOT

    def __init__(self, path: Path, driver: Driver = "sqlite3") -> None:
        super().__init__(path, driver)
        self.keys = Keys(path.parent)

    def open(self) -> SqliteMemoryStore:
        return SqliteMemoryStore(self.path, keyring=self.keys.keyring(), driver=self.driver)

    def purge_access(self) -> SqlitePurgeAccess:
        self.keys.keyring().close()  # the key store exists before the shredder opens it
        return SqlitePurgeAccess(self.path, shredder=KeyShredder(self.keys.path))


class SealedToolsHarness(SqliteToolsHarness):
    cannot = SEALED_CANNOT

    def __init__(self, directory: Path, driver: Driver = "sqlite3") -> None:
        super().__init__(directory, driver)
        self.keys = Keys(directory)

    def open_memory(self) -> SqliteMemoryStore:
        return SqliteMemoryStore(self.memory_path, keyring=self.keys.keyring(), driver=self.driver)

    def tamper_memory(self, edit: Edit) -> None:
        super().tamper_memory(self.keys.tokened(edit))


# -- what only sealing promises -----------------------------------------------------------------


@pytest.fixture
def keys(tmp_path: Path) -> Keys:
    return Keys(tmp_path)


@pytest.fixture
def store(tmp_path: Path, keys: Keys) -> Iterator[SqliteMemoryStore]:
    opened = SqliteMemoryStore(tmp_path / "memory.db", keyring=keys.keyring())
    yield opened
    opened.close()


def _files(directory: Path) -> list[Path]:
    return sorted(path for path in directory.rglob("*") if path.is_file())


def _holding(directory: Path, text: str) -> list[str]:
    needle = text.encode()
    return [path.name for path in _files(directory) if needle in path.read_bytes()]


def _raw(path: Path, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def _notes(store: SqliteMemoryStore, notebook_id: str, count: int, text: str = MARK) -> None:
    for version in range(count):
        long_text = f"{text} #{version} " + "reef " * 40
        result = write(
            store, notebook_id, version, f"r-{version}", add(f"note:n{version}", long_text)
        )
        assert isinstance(result, Applied), result


def test_no_file_ever_holds_a_note_in_plain_text(
    tmp_path: Path, keys: Keys, store: SqliteMemoryStore
) -> None:
    clock = FakeClock()
    notebooks = Notebooks(store, clock=clock)
    kept = notebooks.open("ann", "doc", "kept")
    gone = notebooks.open("ann", "doc", "gone")
    _notes(store, kept.id, 5)
    _notes(store, gone.id, 5)
    write(store, kept.id, 5, "r-multi", add("note:m1", MARK), add("note:m2", MARK + " two"))
    assert _raw(tmp_path / "memory.db", "SELECT count(*) FROM log")[0][0] > 0
    assert _holding(tmp_path, MARK) == []
    assert store.record(kept.id, "note:m2").content.count(MARK) == 1  # type: ignore[union-attr]
    values = [row[0] for row in _raw(tmp_path / "memory.db", "SELECT content FROM records")]
    assert values and all(value.startswith(SEALED) for value in values)
    notebooks.forget(gone.id, "ann")
    assert _holding(tmp_path, MARK) == []
    assert verify_store(store).problems == []


def test_a_backup_taken_while_open_cannot_be_opened_after_forget(
    tmp_path: Path, keys: Keys, store: SqliteMemoryStore
) -> None:
    notebook_id = open_notebook(store)
    _notes(store, notebook_id, 3)
    backup = tmp_path / "backup"
    backup.mkdir()
    with store._lock:  # a nightly copy: the file and its WAL, as they are on disk
        for name in ("memory.db", "memory.db-wal"):
            if (tmp_path / name).exists():
                shutil.copy(tmp_path / name, backup / name)
    copy = SqliteMemoryStore(backup / "memory.db", keyring=keys.keyring())
    assert copy.record(notebook_id, "note:n1") is not None  # the backup opens while the key lives
    copy.close()
    store.forget(notebook_id, FakeClock()())
    # Everything left on the machine: the master key, the key store, the live database.
    assert not keys.holds(notebook_id)
    sealed = _raw(backup / "memory.db", "SELECT name, version, digest, content FROM records")
    assert len(sealed) == 3
    copy = SqliteMemoryStore(backup / "memory.db", keyring=keys.keyring())
    try:
        with pytest.raises(Purged):
            copy.record(notebook_id, "note:n1")
        with pytest.raises(Purged):
            list(copy.log(notebook_id))
    finally:
        copy.close()
    # No data key the key store still holds opens the backup's content either.
    ring = keys.keyring()
    for other_id, master_id, wrapped in ring.store.wrapped():
        cipher = NotebookCipher(
            notebook_id, keys.masters.by_id(master_id).unwrap(wrapped, other_id)
        )
        for name, version, digest, content in sealed:
            with pytest.raises(IntegrityError):
                cipher.open(content, name, version, digest)
    ring.close()
    assert _holding(tmp_path, MARK) == []


def _forge_record(path: Path, notebook_id: str, name: str, content: str, digest: str) -> None:
    _raw(
        path,
        "UPDATE records SET content = ?, digest = ? WHERE notebook_id = ? AND name = ?",
        (content, digest, notebook_id, name),
    )


def test_forgeries_written_into_the_database_are_never_served(
    tmp_path: Path, keys: Keys, store: SqliteMemoryStore
) -> None:
    from oh.core.canonical import sha256_hex

    path = tmp_path / "memory.db"
    notebook_id = open_notebook(store)
    _notes(store, notebook_id, 3)
    genuine = store.record(notebook_id, "note:n0")
    assert genuine is not None
    forged_text = genuine.content.replace(MARK, "the forger's claim")
    n0, n1, n2 = (keys.token(notebook_id, f"note:n{i}") for i in range(3))
    # 1. plain content with its digest recomputed (as a token too: a forger with the key)
    forged_digest = keys.token(notebook_id, sha256_hex(forged_text), "digest")
    _forge_record(path, notebook_id, n0, forged_text, forged_digest)
    with pytest.raises(IntegrityError):
        store.record(notebook_id, "note:n0")
    with pytest.raises(IntegrityError):
        store.read_record(notebook_id, "note:n0")
    # 2. another record's sealed content, with that record's digest
    (other,) = _raw(
        path,
        "SELECT content, digest FROM records WHERE name = ? AND notebook_id = ?",
        (n1, notebook_id),
    )
    _forge_record(path, notebook_id, n0, other[0], other[1])
    with pytest.raises(IntegrityError):
        store.record(notebook_id, "note:n0")
    # 3. the sealed text with one character changed
    (mine,) = _raw(path, "SELECT content FROM log WHERE name = ?", (n2,))
    flipped = mine[0][:-3] + ("A" if mine[0][-3] != "A" else "B") + mine[0][-2:]
    _raw(path, "UPDATE log SET content = ? WHERE name = ?", (flipped, n2))
    problems = verify_store(store).problems
    assert any(p.what == "damaged" and "note:n2" in p.detail for p in problems), problems
    # 4. a whole notebook forged into the database: it has no data key, so nothing is served
    forged_id = "nb_" + "f" * 32
    _raw(
        path,
        "INSERT INTO notebooks (id, owner, document, run, state, started_at, forgets_at, version,"
        " head_hash) SELECT ?, owner, document, 'forged', state, started_at, forgets_at, version,"
        " head_hash FROM notebooks WHERE id = ?",
        (forged_id, notebook_id),
    )
    _raw(
        path,
        "INSERT INTO records (notebook_id, name, kind, content, digest, author, written_at,"
        " version) VALUES (?, 'note:x', 'note', ?, ?, 'agent:run-1', ?, 1)",
        (forged_id, forged_text, sha256_hex(forged_text), genuine.written_at),
    )
    with pytest.raises(Purged):
        store.read_record(forged_id, "note:x")
    reopened = SqliteMemoryStore(path, keyring=keys.keyring())  # not sealed for the forger either
    try:
        with pytest.raises(Purged):
            reopened.record(forged_id, "note:x")
    finally:
        reopened.close()


def test_a_database_written_without_keys_is_sealed_when_first_opened_with_them(
    tmp_path: Path, keys: Keys
) -> None:
    path = tmp_path / "memory.db"
    plain = SqliteMemoryStore(path)
    open_id = open_notebook(plain)
    _notes(plain, open_id, 3)
    write(plain, open_id, 3, "r-multi", add("note:m1", MARK), add("note:m2", MARK + " two"))
    forgotten_id = open_notebook(plain, run="run-2")
    plain.forget(forgotten_id, FakeClock()())
    before = {r.name: r for r in plain.records(open_id)}
    plain.close()
    assert _holding(tmp_path, MARK)  # written without keys: plain text in the file
    sealed = SqliteMemoryStore(path, keyring=keys.keyring())
    try:
        assert {r.name: r for r in sealed.records(open_id)} == before
        assert verify_store(sealed).problems == []
        assert _holding(tmp_path, MARK) == []
        assert not keys.holds(forgotten_id)
    finally:
        sealed.close()
    with pytest.raises(StorageUnavailable, match="master key"):
        SqliteMemoryStore(path)  # sealed now: refused without its keys


def test_the_purge_destroys_the_data_key_first(tmp_path: Path, keys: Keys) -> None:
    path = tmp_path / "memory.db"
    clock = FakeClock()
    store = SqliteMemoryStore(path, keyring=keys.keyring())
    notebook = Notebooks(store, clock=clock).open("ann", "doc", "run-1")
    _notes(store, notebook.id, 2)
    store.close()
    access = SqlitePurgeAccess(path, shredder=KeyShredder(keys.path))
    try:
        assert access.purge([notebook.id], clock()) == {}  # not due: key and notes stay
        assert keys.holds(notebook.id)
        clock.advance(hours=25)
        purged = access.purge(access.expired(clock()), clock())
        assert list(purged) == [notebook.id]
    finally:
        access.close()
    assert not keys.holds(notebook.id)
    assert _holding(tmp_path, MARK) == []


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT wrapped FROM data_keys",
        "SELECT * FROM data_keys",
        "SELECT master_id FROM data_keys",
        "SELECT value FROM markers",
        "INSERT INTO data_keys VALUES ('nb_x', 'm', x'00')",
        "UPDATE data_keys SET wrapped = x'00'",
        "DELETE FROM markers",
        "DROP TABLE data_keys",
        "CREATE TABLE stolen AS SELECT * FROM data_keys",
        "ATTACH DATABASE ':memory:' AS other",
        "PRAGMA secure_delete=OFF",
        "SELECT count(*) FROM data_keys WHERE wrapped IS NOT NULL",
    ],
)
def test_the_purge_credential_on_the_key_store_can_only_destroy_keys(
    tmp_path: Path, keys: Keys, store: SqliteMemoryStore, sql: str
) -> None:
    notebook_id = open_notebook(store)
    shredder = KeyShredder(keys.path)
    try:
        with pytest.raises(sqlite3.DatabaseError, match=r"not authorized|prohibited"):
            shredder._conn.execute(sql).fetchall()
        assert keys.holds(notebook_id)  # nothing changed
        assert shredder.destroy([notebook_id]) == 1
        assert shredder.destroy([notebook_id]) == 0
    finally:
        shredder.close()
    assert not keys.holds(notebook_id)
