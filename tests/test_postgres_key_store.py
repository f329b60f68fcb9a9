"""The key store on PostgreSQL (docs/keys.md, "A key store for many servers"): one key store that
every server shares, so two servers with nothing on disk in common serve the same sealed
notebook, and forgetting through one destroys the key for all. The key store behaves as the
embedded file does (the same checks run on both); the purge role on it can destroy keys and
nothing else; a destroyed key is in no file of the key cluster afterwards; a process given
another master key is refused; ``oh key status`` says where keys live and warns when the key
database shares the memory cluster.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from oh.config import (
    Locations,
    create_master_key,
    open_keyring,
    open_memory_store,
    open_purge_access,
    rotate_master_key,
)
from oh.core.changes import Applied
from oh.errors import AlreadyExists, InvalidArgument, NotFound, StorageUnavailable
from oh.keys import MASTER_KEY_ENV, KeyStore, MasterKey
from oh.storage.postgres.keys import COMPACTION_DUE, PostgresKeyShredder, PostgresKeyStore
from oh.storage.sqlite.keys import SqliteKeyStore
from oh.testing.memory_store import LIFETIME, T0, add, open_notebook, write
from oh.testing.postgres_cluster import (
    PostgresCluster,
    Schema,
    find_binaries,
    fresh_schema,
    roles_bootstrap,
    shared_cluster,
)

SECRET = "quokka-saffron-monotype"  # a note only a key can open


@pytest.fixture(scope="module")
def key_cluster() -> Iterator[PostgresCluster]:
    """A cluster of its own for the keys, as the docs ask: apart from the memory cluster."""
    shared_cluster()  # skips (or fails under CI) exactly as the other PostgreSQL tests do
    if find_binaries() is None:  # pragma: no cover - shared_cluster skipped already
        pytest.skip("no PostgreSQL")
    cluster = PostgresCluster().start()
    try:
        cluster.execute(roles_bootstrap())
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def memory() -> Iterator[Schema]:
    with fresh_schema(shared_cluster()) as schema:
        yield schema


@pytest.fixture
def keys(key_cluster: PostgresCluster) -> Iterator[Schema]:
    with fresh_schema(key_cluster, "k") as schema:
        yield schema


@pytest.fixture
def master(monkeypatch: pytest.MonkeyPatch) -> MasterKey:
    """The one master key every process of the deployment is given (``OH_MASTER_KEY``)."""
    key = MasterKey.generate()
    monkeypatch.setenv(MASTER_KEY_ENV, key.text())
    return key


def _server(directory: Path, memory: Schema, keys: Schema) -> Locations:
    """One server's locations: a directory of its own, the shared databases."""
    return Locations(
        directory / "data",
        memory_url=memory.url(),
        knowledge_url=memory.url(),
        keys_dir=directory / "keys",
        keys_url=keys.url(),
        create=True,
    )


def _written(locations: Locations) -> str:
    """A notebook with one note, written through a store opened at ``locations``."""
    store = open_memory_store(locations)
    try:
        notebook = open_notebook(store)
        write(store, notebook, 0, "r1", add("note:a", SECRET))
        return notebook
    finally:
        store.close()


# -- the key store itself, as the embedded file behaves ---------------------------------------


@pytest.fixture(params=["file", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[KeyStore]:
    with contextlib.ExitStack() as stack:
        if request.param == "file":
            opened: KeyStore = SqliteKeyStore(tmp_path / "keys.db")
        else:
            cluster = request.getfixturevalue("key_cluster")
            opened = PostgresKeyStore(stack.enter_context(fresh_schema(cluster, "k")).url())
        stack.callback(opened.close)
        yield opened


def test_both_key_stores_keep_destroy_rewrap_and_mark_alike(store: KeyStore) -> None:
    s = store
    s.put("nb-1", "m1", b"\x01" * 60)
    s.put("nb-2", "m1", b"\x02" * 60)
    with pytest.raises(AlreadyExists):
        s.put("nb-1", "m1", b"\x03" * 60)
    assert s.get("nb-1") == ("m1", b"\x01" * 60)
    assert s.get("nb-9") is None
    assert s.count() == {"m1": 2}
    s.rewrap([("nb-1", "m2", b"\x04" * 60)])
    assert s.wrapped() == [("nb-1", "m2", b"\x04" * 60), ("nb-2", "m1", b"\x02" * 60)]
    assert s.destroy(["nb-2", "nb-9"]) == 1
    assert s.destroy([]) == 0
    assert s.get("nb-2") is None and s.count() == {"m2": 1}
    assert s.marker("x") is None
    s.mark("x", "1")
    s.mark("x", "2")
    assert s.marker("x") == "2"
    assert s.claim("y", "first") == "first"
    assert s.claim("y", "second") == "first"


# -- the purge role on the key database ---------------------------------------------------------


def test_the_purge_role_destroys_keys_and_can_do_nothing_else(keys: Schema) -> None:
    store = PostgresKeyStore(keys.url())
    shredder = PostgresKeyShredder(keys.purge_url)
    try:
        store.put("nb-1", "m1", b"\x01" * 60)
        store.put("nb-2", "m1", b"\x02" * 60)
        refused = [
            "SELECT wrapped FROM data_keys",
            "SELECT notebook_id FROM data_keys",
            "SELECT value FROM key_markers",
            "INSERT INTO data_keys VALUES ('nb-3', 'm1', '\\x00')",
            "UPDATE data_keys SET wrapped = '\\x00'",
            "DELETE FROM data_keys",
            "INSERT INTO key_markers VALUES ('master_key', 'forged')",
            "TRUNCATE data_keys",
            "CREATE TABLE stolen (k bytea)",
            "SET ROLE oh_app",
        ]
        with psycopg.connect(keys.purge_url, autocommit=True) as conn:
            for sql in refused:
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    conn.execute(sql)
        assert store.count() == {"m1": 2}
        assert shredder.destroy(["nb-1", "nb-404"]) == 1
        assert store.get("nb-1") is None and store.get("nb-2") is not None
        # It left the mark that asks for compaction; the next key a server creates compacts.
        assert store.marker(COMPACTION_DUE) is not None
        store.put("nb-3", "m1", b"\x03" * 60)
        assert store.marker(COMPACTION_DUE) is None
    finally:
        shredder.close()
        store.close()


# -- every copy -----------------------------------------------------------------------------------


def _cluster_files_holding(cluster: PostgresCluster, needle: bytes) -> list[Path]:
    found = []
    for path in sorted(cluster.data.rglob("*")):
        if path.is_file() and needle in path.read_bytes():
            found.append(path)
    return found


def test_a_destroyed_key_is_in_no_file_of_the_key_cluster(
    key_cluster: PostgresCluster, keys: Schema
) -> None:
    store = PostgresKeyStore(keys.url())
    shredder = PostgresKeyShredder(keys.purge_url)
    forgotten, purged, kept = os.urandom(60), os.urandom(60), os.urandom(60)
    try:
        store.put("nb-forgotten", "m1", forgotten)
        store.put("nb-purged", "m1", purged)
        store.put("nb-kept", "m1", kept)
        with psycopg.connect(key_cluster.url(), autocommit=True) as conn:
            conn.execute("CHECKPOINT")  # every key now in the table's file as well as the WAL
        assert _cluster_files_holding(key_cluster, kept)  # the scan finds what is there
        assert _cluster_files_holding(key_cluster, forgotten)
        assert store.destroy(["nb-forgotten"]) == 1  # a forget, through a server
        assert _cluster_files_holding(key_cluster, forgotten) == []
        assert shredder.destroy(["nb-purged"]) == 1  # the purge worker
        store.put("nb-next", "m1", os.urandom(60))  # the next server to make a key compacts
        assert _cluster_files_holding(key_cluster, purged) == []
        assert _cluster_files_holding(key_cluster, kept)
    finally:
        shredder.close()
        store.close()


@contextlib.contextmanager
def _reader_on(url: str) -> Iterator[psycopg.Connection]:
    """A transaction whose snapshot is taken at once and kept until the block ends."""
    with psycopg.connect(url) as conn:
        conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        conn.execute("SELECT count(*) FROM key_markers").fetchall()
        yield conn
        conn.rollback()


def test_a_key_destroyed_under_an_older_reader_leaves_the_files_when_the_reader_ends(
    key_cluster: PostgresCluster, keys: Schema, caplog: pytest.LogCaptureFixture
) -> None:
    """An older snapshot may still see the deleted key, so ``VACUUM FULL`` would copy it into
    the new file: the compaction waits for it; one that outlives the wait leaves the mark."""
    store = PostgresKeyStore(keys.url())
    impatient = PostgresKeyStore(keys.url(), compaction_wait=0.3)
    creator = PostgresKeyStore(keys.url(), compaction_wait=60)
    creator.CREATION_WAIT = 0.2
    waited, outlived = os.urandom(60), os.urandom(60)
    try:
        store.put("nb-waited", "m1", waited)
        store.put("nb-outlived", "m1", outlived)
        with _reader_on(keys.url()) as reader:
            threading.Timer(0.3, reader.rollback).start()  # ends while the compaction waits
            assert store.destroy(["nb-waited"]) == 1
        assert _cluster_files_holding(key_cluster, waited) == []
        assert store.marker(COMPACTION_DUE) is None
        with _reader_on(keys.url()):
            assert impatient.destroy(["nb-outlived"]) == 1  # the reader outlives the wait
            assert "transactions older than it are still open" in caplog.text
            assert store.marker(COMPACTION_DUE) is not None
            assert _cluster_files_holding(key_cluster, outlived)
            # A key created meanwhile waits briefly for the reader, then leaves the mark...
            creator.put("nb-during", "m1", os.urandom(60))
            assert store.marker(COMPACTION_DUE) is not None
        # ...and that store does not try again at once, so one long transaction slows one
        # creation, not every one.
        creator.put("nb-backed-off", "m1", os.urandom(60))
        assert _cluster_files_holding(key_cluster, outlived)
        store.put("nb-next", "m1", os.urandom(60))  # the next key created elsewhere compacts
        assert _cluster_files_holding(key_cluster, outlived) == []
        assert store.marker(COMPACTION_DUE) is None
    finally:
        creator.close()
        impatient.close()
        store.close()


def _replayed(primary: PostgresCluster, standby: PostgresCluster) -> None:
    """Wait until ``standby`` has replayed everything ``primary`` has written so far."""
    with psycopg.connect(primary.url(), autocommit=True) as conn:
        row = conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()
    assert row is not None
    with psycopg.connect(standby.url(), autocommit=True) as conn:
        for _ in range(600):
            done = conn.execute(
                "SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (row[0],)
            ).fetchone()
            if done is not None and done[0]:
                return
            time.sleep(0.05)
    raise AssertionError("the standby did not catch up within 30 s")


def test_a_streaming_replica_of_the_key_cluster_forgets_with_it(
    key_cluster: PostgresCluster, keys: Schema
) -> None:
    """The rule's second point: a streaming replica replays the delete and the rewrite, and
    once it has made its next restartpoint (a CHECKPOINT on the standby forces one; otherwise
    within checkpoint_timeout) no file of it holds the destroyed key either."""
    standby = key_cluster.replica()
    store = PostgresKeyStore(keys.url())
    forgotten, kept = os.urandom(60), os.urandom(60)
    try:
        store.put("nb-forgotten", "m1", forgotten)
        store.put("nb-kept", "m1", kept)
        with psycopg.connect(key_cluster.url(), autocommit=True) as conn:
            conn.execute("CHECKPOINT")
        _replayed(key_cluster, standby)
        with psycopg.connect(standby.url(), autocommit=True) as conn:
            conn.execute("CHECKPOINT")  # a restartpoint: the keys reach the standby's files
        assert _cluster_files_holding(standby, forgotten)  # the scan finds what is there
        assert store.destroy(["nb-forgotten"]) == 1
        _replayed(key_cluster, standby)
        with psycopg.connect(standby.url(), autocommit=True) as conn:
            conn.execute("CHECKPOINT")
        assert _cluster_files_holding(standby, forgotten) == []
        assert _cluster_files_holding(standby, kept)
    finally:
        store.close()
        standby.stop()


# -- two servers, one key store ----------------------------------------------------------------


def test_two_servers_share_nothing_on_disk_and_serve_one_sealed_notebook(
    tmp_path: Path, memory: Schema, keys: Schema, master: MasterKey
) -> None:
    first = open_memory_store(_server(tmp_path / "a", memory, keys))
    second = open_memory_store(_server(tmp_path / "b", memory, keys))
    try:
        notebook = open_notebook(first)
        assert isinstance(write(first, notebook, 0, "r1", add("note:a", SECRET)), Applied)
        # The second server never saw this notebook: it finds the key in the shared store.
        stored = second.record(notebook, "note:a")
        assert stored is not None and SECRET in stored.content
        assert isinstance(write(second, notebook, 1, "r2", add("note:b", "more")), Applied)
        with psycopg.connect(memory.url(), autocommit=True) as conn:
            rows = conn.execute("SELECT content FROM records").fetchall()
        assert rows and all(SECRET not in str(row[0]) for row in rows)  # sealed at rest
        second.forget(notebook, T0)  # forgotten through the second server
        state, gone = first.read_record(notebook, "note:a")
        assert (state.state, gone) == ("purged", None)
        assert first.data_key_destroyed(notebook)
        keyring = first.keyring  # the first server had opened the key: it keeps no copy
        assert keyring is not None and notebook not in keyring._ciphers
        assert not list((tmp_path / "a").rglob("keys.db"))  # no key store file anywhere
        assert not list((tmp_path / "b").rglob("keys.db"))
    finally:
        first.close()
        second.close()


def test_the_purge_worker_destroys_keys_with_the_purge_role_on_the_key_database(
    tmp_path: Path, memory: Schema, keys: Schema, master: MasterKey
) -> None:
    notebook = _written(_server(tmp_path / "a", memory, keys))
    purge_locations = Locations(
        tmp_path / "purge",
        memory_url=memory.purge_url,
        keys_dir=tmp_path / "purge-keys",
        keys_url=keys.purge_url,
        create=False,
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv(MASTER_KEY_ENV)  # the purge worker is given no master key
        access = open_purge_access(purge_locations)
        try:
            due = access.expired(T0 + LIFETIME)
            assert due == [notebook]
            assert set(access.purge(due, T0 + LIFETIME)) == {notebook}
        finally:
            access.close()
    check = PostgresKeyStore(keys.url())
    try:
        assert check.get(notebook) is None
    finally:
        check.close()


def test_a_process_given_another_master_key_is_refused_before_it_writes(
    tmp_path: Path, memory: Schema, keys: Schema, master: MasterKey, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = open_memory_store(_server(tmp_path / "a", memory, keys))
    try:
        open_notebook(store)
    finally:
        store.close()
    other = MasterKey.generate()
    monkeypatch.setenv(MASTER_KEY_ENV, other.text())
    with pytest.raises(StorageUnavailable) as refused:
        open_keyring(_server(tmp_path / "b", memory, keys))
    assert master.id in str(refused.value) and other.id in str(refused.value)
    assert "nothing was changed" in str(refused.value)
    check = PostgresKeyStore(keys.url())
    try:
        assert set(check.count()) == {master.id}
    finally:
        check.close()


def test_no_server_makes_a_master_key_of_its_own_for_a_shared_key_store(
    tmp_path: Path, memory: Schema, keys: Schema, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(MASTER_KEY_ENV, raising=False)
    with pytest.raises(InvalidArgument, match="oh key create --stdout"):
        open_keyring(_server(tmp_path / "a", memory, keys))
    assert not (tmp_path / "a" / "keys").exists()


def test_a_command_that_creates_nothing_refuses_an_empty_key_database(
    tmp_path: Path, memory: Schema, keys: Schema, master: MasterKey
) -> None:
    locations = Locations(
        tmp_path, memory_url=memory.url(), keys_url=keys.url(), keys_dir=tmp_path, create=False
    )
    with pytest.raises(NotFound, match="--keys-url"):
        open_keyring(locations)
    with psycopg.connect(keys.url(), autocommit=True) as conn:
        assert conn.execute("SELECT to_regclass('data_keys')").fetchone() == (None,)


def test_rotation_rewraps_the_shared_store_and_moves_its_record_of_the_key(
    tmp_path: Path, memory: Schema, keys: Schema, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(MASTER_KEY_ENV, raising=False)
    server = _server(tmp_path / "a", memory, keys)
    old = create_master_key(server)  # the key file of this server's keys directory
    notebook = _written(server)
    rotation = rotate_master_key(server)
    assert (rotation.old_id, rotation.rewrapped) == (old.id, 1)
    store = open_memory_store(server)
    try:
        stored = store.record(notebook, "note:a")
        assert stored is not None and SECRET in stored.content
    finally:
        store.close()
    monkeypatch.setenv(MASTER_KEY_ENV, old.text())  # a server still given the old key
    with pytest.raises(StorageUnavailable, match=rotation.new_id):
        open_keyring(_server(tmp_path / "b", memory, keys))


# -- oh key status ---------------------------------------------------------------------------


def _status(env: dict[str, str], *argv: str) -> tuple[dict[str, object], str]:
    def run(*extra: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "oh.cli", "key", "status", *extra, *argv],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    return json.loads(run("--json")), run()


def test_key_status_says_where_keys_live_and_warns_when_it_is_the_memory_cluster(
    tmp_path: Path, memory: Schema, keys: Schema, master: MasterKey
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OH_")}
    env |= {
        MASTER_KEY_ENV: master.text(),
        "OH_MEMORY_URL": memory.url(),
        "OH_KNOWLEDGE_URL": memory.url(),
        "OH_KEYS": str(tmp_path / "keys"),
    }
    with_password = keys.url().replace("@", ":sekret@", 1)  # trust auth ignores it
    apart, text = _status(env, "--keys-url", with_password)
    masked = keys.url().replace("@", ":***@", 1)
    assert apart["key_store"] == masked and apart["key_store_shared"] is True
    assert apart["key_store_exists"] is False and apart["warnings"] == []
    assert f"key store: {masked} (shared by every server) (not created yet)" in text
    assert "sekret" not in text
    with fresh_schema(shared_cluster(), "k") as beside:
        together, text = _status(env, "--keys-url", beside.url())
    warnings = together["warnings"]
    assert isinstance(warnings, list) and len(warnings) == 2
    assert "same PostgreSQL cluster as the memory database" in warnings[0]
    assert f"warning: {warnings[0]}" in text
