"""Sealed notebooks on PostgreSQL (docs/keys.md): the sealed harnesses, with which
tests/test_conformance.py runs every notebook suite again (sealing changes no answer); then what
only sealing promises, as tests/test_sealed_notebooks.py
proves it for the embedded backend. A forgery written into the database is never served, a
schema written without keys is sealed on its first open with them, the purge destroys data keys
first, and the proof forgetting asks for on a server: a base backup and the WAL archive of a
cluster, taken while a notebook was open, cannot be opened once it is forgotten or purged, with
everything left on the machine (the master key, the key store, the live cluster), and no file of
the cluster, the backup or the archive ever holds a note in plain text.

The key store stays the embedded file (``SqliteKeyStore``) beside PostgreSQL, never a table in
it: the cluster's base backups and WAL archive would keep every key forgetting destroys.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from harnesses import PostgresToolsHarness
from oh.core.canonical import sha256_hex
from oh.core.changes import Applied, parse_changes
from oh.core.decision import Call
from oh.errors import IntegrityError, Purged, StorageUnavailable
from oh.keys import SEALED, NotebookCipher
from oh.services.notebooks import Notebooks
from oh.storage.log_rows import json_rows
from oh.storage.postgres.notebooks import PostgresMemoryStore, PostgresPurgeAccess
from oh.storage.sqlite.keys import KeyShredder
from oh.testing.archiving import ArchivingCluster
from oh.testing.lifecycle import FakeClock
from oh.testing.memory_store import (
    T0,
    add,
    open_notebook,
    remove,
    write,
)
from oh.testing.postgres_cluster import (
    Schema,
    find_binaries,
    fresh_schema,
    shared_cluster,
)
from oh.testing.tampering import Edit
from oh.tools import Caller, Tools
from oh.verify import verify_store
from test_postgres_store import PostgresHarness, PostgresLifecycleHarness, run_sql
from test_sealed_notebooks import SEALED_CANNOT, Keys

# The log's changes one per row (an entry keeps them in its one row since migration 0010: the
# value itself for one change, a JSON array for several; ``oh_log_values`` reads either).
LOGGED = (
    "(SELECT l.notebook_id, l.version, n.i - 1 AS seq, n.v AS name, c.v AS content,"
    " d.v AS digest FROM log AS l CROSS JOIN LATERAL oh_log_values(l.changes, l.name) AS n"
    " JOIN LATERAL oh_log_values(l.changes, l.content) AS c ON c.i = n.i"
    " JOIN LATERAL oh_log_values(l.changes, l.digest) AS d ON d.i = n.i) AS logged"
)

MARK = "wombat-vermilion-stenotype"  # a note text no file may hold in plain text
CONTROL = "numbat-cobalt-linotype"  # written without keys: the scans must find it


@pytest.fixture
def schema() -> Iterator[Schema]:
    with fresh_schema(shared_cluster()) as schema:
        yield schema


class SealedHarness(PostgresHarness):
    cannot = SEALED_CANNOT  # as on the embedded backend

    def __init__(self, schema: Schema, directory: Path) -> None:
        super().__init__(schema)
        self.keys = Keys(directory)

    def open(self) -> PostgresMemoryStore:
        return PostgresMemoryStore(self.schema.url(), keyring=self.keys.keyring(), max_size=4)

    def tamper(self, edit: Edit) -> None:
        super().tamper(self.keys.tokened(edit))


class SealedLifecycleHarness(PostgresLifecycleHarness):
    cannot = SEALED_CANNOT  # as on the embedded backend

    def __init__(self, schema: Schema, directory: Path) -> None:
        super().__init__(schema)
        self.keys = Keys(directory)

    def open(self) -> PostgresMemoryStore:
        return PostgresMemoryStore(self.schema.url(), keyring=self.keys.keyring(), max_size=4)

    def purge_access(self) -> PostgresPurgeAccess:
        self.keys.keyring().close()  # the key store exists before the shredder opens it
        return PostgresPurgeAccess(self.schema.purge_url, shredder=KeyShredder(self.keys.path))


class SealedToolsHarness(PostgresToolsHarness):
    cannot = SEALED_CANNOT  # as on the embedded backend

    def __init__(self, schema: Schema, directory: Path) -> None:
        super().__init__(schema)
        self.keys = Keys(directory)

    def open_memory(self) -> PostgresMemoryStore:
        return PostgresMemoryStore(self.schema.url(), keyring=self.keys.keyring(), max_size=2)

    def tamper_memory(self, edit: Edit) -> None:
        super().tamper_memory(self.keys.tokened(edit))


# -- what only sealing promises -----------------------------------------------------------------


@pytest.fixture
def keys(tmp_path: Path) -> Keys:
    return Keys(tmp_path)


@pytest.fixture
def store(schema: Schema, keys: Keys) -> Iterator[PostgresMemoryStore]:
    opened = PostgresMemoryStore(schema.url(), keyring=keys.keyring(), max_size=2)
    yield opened
    opened.close()


def _notes(store: PostgresMemoryStore, notebook_id: str, count: int, text: str = MARK) -> None:
    for version in range(count):
        long_text = f"{text} #{version} " + "reef " * 40
        result = write(
            store, notebook_id, version, f"r-{version}", add(f"note:n{version}", long_text)
        )
        assert isinstance(result, Applied), result


def _database_files(schema: Schema) -> list[Path]:
    """The files of the shared cluster's database (tables, indexes, TOAST) and its WAL."""
    files: list[Path] = PostgresLifecycleHarness(schema).files()
    return files


def _holding(files: list[Path], text: str) -> list[str]:
    needle = text.encode()
    held = []
    for path in files:
        with contextlib.suppress(FileNotFoundError):  # a WAL segment removed meanwhile
            if needle in path.read_bytes():
                held.append(str(path))
    return held


def test_content_is_sealed_on_every_write_path(
    schema: Schema, keys: Keys, store: PostgresMemoryStore
) -> None:
    """The one-round-trip path (``oh_remember``), the full path (duplicate names in one call go
    it) and a remove: every content value in the database is sealed, and reads open it."""
    notebook_id = open_notebook(store)
    _notes(store, notebook_id, 3)
    store._known_heads.clear()  # the next call finds the head through ``oh_remember``'s 'head'
    write(store, notebook_id, 3, "r-multi", add("note:m1", MARK), add("note:m2", MARK + " two"))
    call = Call.prepare(
        notebook_id,
        based_on=4,
        request_id="r-full",
        changes=parse_changes([add("note:f", MARK)]),
        author="agent:run-1",
        now=T0,
    )
    applied = store._decide_and_write(call)
    assert isinstance(applied, Applied) and applied.version == 5
    assert store._decide_and_write(call) == applied  # the retry opens the logged entry
    assert isinstance(write(store, notebook_id, 5, "r-rm", remove("note:n0")), Applied)
    values = run_sql(
        schema.url(),
        f"SELECT content FROM {LOGGED} WHERE content IS NOT NULL"
        " UNION ALL SELECT content FROM records",
    )
    assert len(values) == 6 + 5 and all(value.startswith(SEALED) for (value,) in values)
    assert store.record(notebook_id, "note:m2").content.count(MARK) == 1  # type: ignore[union-attr]
    entries = list(store.log(notebook_id))
    assert [e.version for e in entries] == [1, 2, 3, 4, 5, 6]
    assert all(MARK in str(c.content) for e in entries[:5] for c in e.changes)
    current, changes = store.changes_after(notebook_id, 3)
    assert current == 6
    assert [name for name, _, _ in changes] == ["note:m1", "note:m2", "note:f", "note:n0"]
    assert all(MARK in str(content) for _, _, content in changes[:3])
    assert changes[3][2] is None
    assert verify_store(store).problems == []


def _forge_record(url: str, notebook_id: str, name: str, content: str, digest: str) -> None:
    run_sql(
        url,
        "UPDATE records SET content = ?, digest = ? WHERE notebook_id = ? AND name = ?",
        (content, digest, notebook_id, name),
    )


def test_forgeries_written_into_the_database_are_never_served(
    schema: Schema, keys: Keys, store: PostgresMemoryStore
) -> None:
    url = schema.url()
    notebook_id = open_notebook(store)
    _notes(store, notebook_id, 3)
    genuine = store.record(notebook_id, "note:n0")
    assert genuine is not None
    forged_text = genuine.content.replace(MARK, "the forger's claim")
    n0, n1, n2 = (keys.token(notebook_id, f"note:n{i}") for i in range(3))
    # 1. plain content with its digest recomputed (as a token too: a forger with the key)
    forged_digest = keys.token(notebook_id, sha256_hex(forged_text), "digest")
    _forge_record(url, notebook_id, n0, forged_text, forged_digest)
    with pytest.raises(IntegrityError):
        store.record(notebook_id, "note:n0")
    with pytest.raises(IntegrityError):
        store.read_record(notebook_id, "note:n0")
    with pytest.raises(IntegrityError):
        store.records(notebook_id)
    # 2. another record's sealed content, with that record's digest
    ((content, digest),) = run_sql(
        url,
        "SELECT content, digest FROM records WHERE name = ? AND notebook_id = ?",
        (n1, notebook_id),
    )
    _forge_record(url, notebook_id, n0, content, digest)
    with pytest.raises(IntegrityError):
        store.record(notebook_id, "note:n0")
    # 3. the sealed text with one character changed, in the log
    ((mine,),) = run_sql(url, "SELECT content FROM log WHERE name = ?", (n2,))  # one change
    flipped = mine[:-3] + ("A" if mine[-3] != "A" else "B") + mine[-2:]
    run_sql(url, "UPDATE log SET content = ? WHERE name = ?", (flipped, n2))
    with pytest.raises(IntegrityError):
        list(store.log(notebook_id))
    with pytest.raises(IntegrityError):
        store.changes_after(notebook_id, 2)
    problems = verify_store(store).problems
    assert any(p.what == "damaged" and "note:n2" in p.detail for p in problems), problems
    # 4. a whole notebook forged into the database: it has no data key, so nothing is served
    forged_id = "nb_" + "f" * 32
    run_sql(
        url,
        "INSERT INTO notebooks (id, owner, document, run, state, started_at, forgets_at, version,"
        " head_hash, seal) SELECT ?, owner, document, 'forged', state, started_at, forgets_at,"
        " version, head_hash, seal FROM notebooks WHERE id = ?",
        (forged_id, notebook_id),
    )
    run_sql(
        url,
        "INSERT INTO records (notebook_id, name, kind, content, digest, author, written_at,"
        " version) VALUES (?, 'note:x', 'note', ?, ?, 'agent:run-1', ?, 1)",
        (forged_id, forged_text, sha256_hex(forged_text), genuine.written_at),
    )
    with pytest.raises(Purged):
        store.read_record(forged_id, "note:x")
    reopened = PostgresMemoryStore(url, keyring=keys.keyring(), max_size=1)
    try:  # not sealed for the forger on the next open either
        with pytest.raises(Purged):
            reopened.record(forged_id, "note:x")
    finally:
        reopened.close()


def test_a_schema_written_without_keys_is_sealed_when_first_opened_with_them(
    schema: Schema, keys: Keys
) -> None:
    url = schema.url()
    text = MARK + "-migrated"
    plain = PostgresMemoryStore(url, max_size=2)
    open_id = open_notebook(plain)
    _notes(plain, open_id, 3, text)
    write(plain, open_id, 3, "r-multi", add("note:m1", text), add("note:m2", text + " two"))
    tools = Tools(plain, None, b"x" * 32, clock=FakeClock())
    answered = tools.call(
        Caller(open_id, "agent:run-1", "agent:run"), "query", {"question": "current_notes"}
    )
    assert "error" not in answered, answered
    forgotten_id = open_notebook(plain, run="run-2")
    plain.forget(forgotten_id, FakeClock()())
    before = {r.name: r for r in plain.records(open_id)}
    entries = list(plain.log(open_id))
    plain.close()
    assert _holding(_database_files(schema), text)  # written without keys: plain text on disk
    # A store that compacts with a plain VACUUM: sealing still rewrites the tables in full.
    sealed = PostgresMemoryStore(url, keyring=keys.keyring(), max_size=2, full_compaction=False)
    try:
        assert {r.name: r for r in sealed.records(open_id)} == before
        assert list(sealed.log(open_id)) == entries
        assert verify_store(sealed).problems == []
        values = run_sql(
            url,
            f"SELECT content FROM {LOGGED} UNION ALL SELECT content FROM records"
            " UNION ALL SELECT question FROM answers UNION ALL SELECT rows FROM answers",
        )
        assert values and all(value.startswith(SEALED) for (value,) in values)
        assert _holding(_database_files(schema), text) == []  # compacted after sealing
        assert keys.keyring().store.get(forgotten_id) is None
        assert run_sql(url, "SELECT count(*) FROM sealing") == [(1,)]
    finally:
        sealed.close()
    with pytest.raises(StorageUnavailable, match="master key"):
        PostgresMemoryStore(url, max_size=1)  # sealed now: refused without its keys
    again = PostgresMemoryStore(url, keyring=keys.keyring(), max_size=1)  # sealing is once
    try:
        assert {r.name: r for r in again.records(open_id)} == before
    finally:
        again.close()


def test_servers_opening_a_plain_schema_with_keys_at_once_seal_it_once(
    schema: Schema, keys: Keys
) -> None:
    url = schema.url()
    plain = PostgresMemoryStore(url, max_size=1)
    ids = [open_notebook(plain, run=f"run-{i}") for i in range(6)]
    for notebook_id in ids:
        _notes(plain, notebook_id, 2)
    before = {notebook_id: plain.records(notebook_id) for notebook_id in ids}
    plain.close()
    keys.keyring().close()  # the key store made first: this test is about sealing at once
    start = threading.Barrier(4)
    opened: list[PostgresMemoryStore] = []
    errors: list[BaseException] = []

    def server() -> None:
        try:
            start.wait()
            opened.append(PostgresMemoryStore(url, keyring=keys.keyring(), max_size=1))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=server) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    try:
        assert errors == []
        assert sorted(row[0] for row in keys.keyring().store.wrapped()) == sorted(ids)
        for store in opened:
            assert {n: store.records(n) for n in ids} == before
        assert verify_store(opened[0]).problems == []
        values = run_sql(url, f"SELECT content FROM {LOGGED} UNION ALL SELECT content FROM records")
        assert len(values) == 6 * 4 and all(value.startswith(SEALED) for (value,) in values)
    finally:
        for store in opened:
            store.close()


def test_without_a_keyring_nothing_is_sealed(schema: Schema) -> None:
    plain = PostgresMemoryStore(schema.url(), max_size=1)
    try:
        notebook_id = open_notebook(plain)
        _notes(plain, notebook_id, 2)
        values = run_sql(schema.url(), "SELECT content FROM records")
        assert len(values) == 2 and all(MARK in value for (value,) in values)
        assert run_sql(schema.url(), "SELECT count(*) FROM sealing") == [(0,)]
    finally:
        plain.close()


def test_the_purge_destroys_the_data_key_first(schema: Schema, keys: Keys) -> None:
    clock = FakeClock()
    store = PostgresMemoryStore(schema.url(), keyring=keys.keyring(), max_size=2)
    notebooks = Notebooks(store, clock=clock)
    notebook = notebooks.open("ann", "doc", "run-1")
    _notes(store, notebook.id, 2)
    store.create_notebook(
        "nb_" + "e" * 32,
        owner="ann",
        document="doc",
        run="stuck",
        started_at=clock(),
        forgets_at=clock() + timedelta(hours=24),
    )
    store.close()
    access = PostgresPurgeAccess(schema.purge_url, shredder=KeyShredder(keys.path))
    try:
        assert access.purge([notebook.id], clock()) == {}  # not due: key and notes stay
        assert keys.keyring().store.get(notebook.id) is not None
        clock.advance(hours=25)
        assert list(access.purge(access.expired(clock()), clock())) == [notebook.id]
        assert keys.keyring().store.get(notebook.id) is None
        stuck = access.stale_openings(clock())
        assert access.mark_empty(stuck, clock(), clock()) == ["nb_" + "e" * 32]
        assert keys.keyring().store.get("nb_" + "e" * 32) is None
    finally:
        access.close()


# -- base backups and the WAL archive -----------------------------------------------------------


def _every_file(*directories: Path) -> list[Path]:
    return sorted(p for d in directories for p in d.rglob("*") if p.is_file())


@pytest.fixture
def archiving() -> Iterator[ArchivingCluster]:
    if find_binaries() is None:
        shared_cluster()  # skips (or fails under CI) as every PostgreSQL test does
    started = ArchivingCluster()
    try:
        yield started
    finally:
        started.stop()


def test_a_base_backup_and_the_wal_archive_cannot_be_opened_after_forget(
    archiving: ArchivingCluster, keys: Keys
) -> None:
    """The issue's proof on a server: a ``pg_basebackup`` taken while notebooks were open, and
    every WAL segment archived, can no longer be opened once one notebook is forgotten and
    another purged. A cluster started on the backup serves the notebooks' sealed rows as they
    were; the store opened there with the live keyring refuses both (``purged``), and no data
    key the key store still holds opens any of their sealed values. No file of the live
    cluster, the backup or the archive holds a note in plain text at any point."""
    cluster = archiving.cluster
    with fresh_schema(cluster) as schema:
        clock = FakeClock()
        store = PostgresMemoryStore(schema.url(), keyring=keys.keyring(), max_size=2)
        notebooks = Notebooks(store, clock=clock)
        tools = Tools(store, None, b"x" * 32, clock=clock)
        forgotten = notebooks.open("ann", "doc", "forgotten")
        purged = notebooks.open("ann", "doc", "purged")
        kept = notebooks.open("ann", "doc", "kept")
        for notebook in (forgotten, purged, kept):
            _notes(store, notebook.id, 4)
            write(store, notebook.id, 4, "r-m", add("note:m1", MARK), add("note:m2", MARK))
            answer = tools.call(
                Caller(notebook.id, "agent:run-1", "agent:run"),
                "query",
                {"question": "current_notes"},
            )
            assert "error" not in answer, answer
        with fresh_schema(cluster, prefix="plain") as control:
            # The scans' premise: a notebook written without keys in the same cluster is found
            # in plain text in the backup and in the archive.
            plain = PostgresMemoryStore(control.url(), max_size=1)
            try:
                _notes(plain, open_notebook(plain), 2, CONTROL)
            finally:
                plain.close()
            everywhere = [archiving.root]  # the live cluster, the backup, the archive, the logs
            assert _holding(_every_file(*everywhere), MARK) == []
            backup = archiving.base_backup("backup")
            assert archiving.archived()
            assert _holding(_every_file(*everywhere), MARK) == []
            assert _holding(_every_file(backup), CONTROL)
            assert _holding(_every_file(archiving.archive), CONTROL)

        notebooks.forget(forgotten.id, "ann")
        clock.advance(hours=25)
        access = PostgresPurgeAccess(schema.purge_url, shredder=KeyShredder(keys.path))
        try:
            assert list(access.purge([purged.id], clock())) == [purged.id]
        finally:
            access.close()
        store.compact()
        archiving.archived()
        assert _holding(_every_file(*everywhere), MARK) == []
        assert keys.keyring().store.get(forgotten.id) is None
        assert keys.keyring().store.get(purged.id) is None
        assert store.notebook(kept.id).state in ("open", "expired")
        store.close()

        gone = (forgotten.id, purged.id)
        with archiving.started_on(backup) as restored:
            url = restored.url("oh_app", search_path=schema.name)
            sealed = {
                notebook_id: run_sql(
                    url,
                    "SELECT name, version, digest, content FROM records WHERE notebook_id = ?"
                    f" UNION ALL SELECT name, version, digest, content FROM {LOGGED}"
                    " WHERE notebook_id = ? AND content IS NOT NULL",
                    (notebook_id, notebook_id),
                )
                for notebook_id in gone
            }
            answers = run_sql(
                url,
                "SELECT notebook_id, answer_id, question, params, rows FROM answers"
                " WHERE notebook_id = ANY(?)",
                (list(gone),),
            )
            copy = PostgresMemoryStore(url, keyring=keys.keyring(), max_size=1)
            try:
                for notebook_id in gone:
                    assert copy.notebook(notebook_id).state == "open"  # as it was when taken
                    with pytest.raises(Purged):
                        copy.record(notebook_id, "note:n1")
                    with pytest.raises(Purged):
                        list(copy.log(notebook_id))
                assert copy.record(kept.id, "note:n1") is not None  # a kept one still opens
            finally:
                copy.close()
        # 6 records and 6 logged values each, and one kept answer each, were in the backup.
        assert {notebook_id: len(rows) for notebook_id, rows in sealed.items()} == {
            forgotten.id: 12,
            purged.id: 12,
        }
        assert len(answers) == 2
        ring = keys.keyring()
        tried = 0
        try:
            live = ring.store.wrapped()
            assert [row[0] for row in live] == [kept.id]
            for other_id, master_id, wrapped in live:
                data_key = keys.masters.by_id(master_id).unwrap(wrapped, other_id)
                for notebook_id, rows in sealed.items():
                    cipher = NotebookCipher(notebook_id, data_key)  # bound as the gone one
                    for name, version, digest, content in rows:
                        tried += 1
                        with pytest.raises(IntegrityError):
                            cipher.open(content, name, version, digest)
                for notebook_id, answer_id, *columns in answers:
                    cipher = NotebookCipher(notebook_id, data_key)
                    for value, column in zip(columns, ("question", "params", "rows"), strict=True):
                        tried += 1
                        with pytest.raises(IntegrityError):
                            cipher.open_field(value, answer_id, column)
        finally:
            ring.close()
        assert tried == 2 * 12 + 2 * 3
        archive_and_backup = _every_file(backup, archiving.archive)
        assert any(p.parent.name == "archive" for p in archive_and_backup)
        assert _holding(_every_file(*everywhere), MARK) == []


def test_a_database_sealed_before_values_were_tokens_is_converted_once_on_open(
    schema: Schema, keys: Keys, store: PostgresMemoryStore
) -> None:
    """As on the embedded backend (tests/test_sealed_values.py): names, kinds, digests,
    request ids, fingerprints and hashes kept plain by the release before are made tokens, once,
    on the first open; reads, the chain and retries across the upgrade are unchanged."""
    url = schema.url()
    notebook_id = open_notebook(store)
    names = [f"finding:patient-{i:04d}" for i in range(3)]
    write(store, notebook_id, 0, "r-0", add(names[0], MARK), add(names[1], MARK + " 1"))
    write(store, notebook_id, 1, "r-1", remove(names[0]), add(names[2], MARK + " 2"))
    before, entries = store.records(notebook_id), list(store.log(notebook_id))
    cipher = keys.keyring().cipher(notebook_id)

    def plain(value: Any, column: str) -> Any:
        return None if value is None else cipher.untoken(value, column)

    # The layout of the release before: every value plain, no row in sealed_values.
    for version, *values in run_sql(
        url,
        "SELECT version, request_id, fingerprint, prev_hash, hash FROM log WHERE notebook_id = ?",
        (notebook_id,),
    ):
        columns = ("request", "fingerprint", "hash", "hash")
        run_sql(
            url,
            "UPDATE log SET request_id = ?, fingerprint = ?, prev_hash = ?, hash = ?"
            " WHERE notebook_id = ? AND version = ?",
            (*[plain(v, c) for v, c in zip(values, columns, strict=True)], notebook_id, version),
        )
    for version, count, name, digest in run_sql(
        url,
        "SELECT version, changes, name, digest FROM log WHERE notebook_id = ?",
        (notebook_id,),
    ):
        if count == 1:
            name, digest = plain(name, "name"), plain(digest, "digest")
        else:
            name = json_rows([plain(n, "name") for n in json.loads(name)])
            digest = json_rows([plain(d, "digest") for d in json.loads(digest)])
        run_sql(
            url,
            "UPDATE log SET name = ?, digest = ? WHERE notebook_id = ? AND version = ?",
            (name, digest, notebook_id, version),
        )
    for name, kind, digest in run_sql(
        url, "SELECT name, kind, digest FROM records WHERE notebook_id = ?", (notebook_id,)
    ):
        run_sql(
            url,
            "UPDATE records SET name = ?, kind = ?, digest = ? WHERE notebook_id = ? AND name = ?",
            (plain(name, "name"), plain(kind, "kind"), plain(digest, "digest"), notebook_id, name),
        )
    ((head,),) = run_sql(url, "SELECT head_hash FROM notebooks WHERE id = ?", (notebook_id,))
    run_sql(
        url, "UPDATE notebooks SET head_hash = ? WHERE id = ?", (plain(head, "hash"), notebook_id)
    )
    run_sql(url, "DELETE FROM sealed_values")
    assert run_sql(url, "SELECT count(*) FROM records WHERE name = ?", (names[1],)) == [(1,)]
    converted = PostgresMemoryStore(url, keyring=keys.keyring(), max_size=2)
    try:
        assert run_sql(url, "SELECT count(*) FROM records WHERE name LIKE 'finding:%'") == [(0,)]
        finding = f"SELECT count(*) FROM {LOGGED} WHERE name LIKE 'finding:%'"
        assert run_sql(url, finding) == [(0,)]
        assert converted.records(notebook_id) == before
        assert list(converted.log(notebook_id)) == entries
        assert verify_store(converted).ok
        # a retry from before the upgrade is answered as the original; the chain goes on
        retried = write(
            converted, notebook_id, 1, "r-1", remove(names[0]), add(names[2], MARK + " 2")
        )
        assert isinstance(retried, Applied) and retried.version == 2
        following = write(converted, notebook_id, 2, "r-2", add("note:next"))
        assert isinstance(following, Applied) and following.version == 3
        assert verify_store(converted).ok
        assert converted._token_notebooks(keys.keyring()) == 0  # once
    finally:
        converted.close()
