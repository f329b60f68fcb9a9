"""Forgetting reaches the values that are not content: record names and kinds, digests, request
ids, fingerprints, the log's hashes and kept answers' ids.

Each of them tells something of a note. A name such as ``finding:patient-0042-status`` is
itself the secret; a digest is an unkeyed sha256 of the note, so whoever guesses a short value
("positive") confirms it by hashing the guess; a fingerprint, an entry hash and an answer id are
digests over the same content. On the sealed default a notebook keeps every one of them as a
token sealed under its data key (``NotebookCipher.token``): a backup of the memory database
taken while the notebook was open holds none of them, and once the notebook is forgotten no
guess can be confirmed against it, since nothing left on the machine makes a token.
"""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from oh.config import Locations, UnsealedWarning, close_host, open_host, open_memory_store
from oh.core.changes import fingerprint_and_log, parse_changes
from oh.core.records import kind_of
from oh.errors import Purged
from oh.keys import SEALED
from oh.storage.sqlite.notebooks import SqliteMemoryStore
from oh.testing.lifecycle import FakeClock
from oh.testing.memory_store import add, write
from oh.verify import verify_store

CLOCK = FakeClock()
NAME = "finding:patient-0042-status"
REQUEST = "chart-42-step-3"
GUESSES = ["negative", "positive", "pending", "inconclusive", "unknown"]
VALUE = "positive"


def _write_chart(data: Path, *, sealed: bool = True) -> tuple[str, dict[str, Any]]:
    """One notebook with the secret note, a kept answer about it; returns its id and the
    values the agent saw."""
    host = open_host(Locations(data, sealed=sealed), clock=CLOCK)
    try:
        host.register_document("you", "chart")
        notebook, _ = host.open_notebook("you", "chart", "run-1")
        token = host.agent_token(notebook.id)
        change = {"op": "add", "record": {"name": NAME, "text": VALUE}}
        written = host.call_tool(
            token, "remember", {"based_on": 0, "request_id": REQUEST, "changes": [change]}
        )
        assert written["status"] == "applied", written
        answer = host.call_tool(token, "query", {"question": "current_notes"})
        assert answer["rows"][0]["name"] == NAME
        return notebook.id, {"digest": written["written"][0]["digest"], "answer": answer}
    finally:
        close_host(host)


def _backup_bytes(backup: Path) -> bytes:
    """Every byte of the memory database as a backup holds it: the file and its WAL."""
    return b"".join(path.read_bytes() for path in sorted(backup.glob("memory.db*")))


def _log_values(data: Path, notebook_id: str, sealed: bool) -> list[str]:
    """The notebook's request ids, fingerprints, hashes, names and digests as the store reads
    them back (opened): what no file may hold."""
    memory = open_memory_store(Locations(data, sealed=sealed))
    try:
        values = [memory.notebook(notebook_id).head_hash]
        for entry in memory.log(notebook_id):
            values += [entry.request_id, entry.fingerprint, entry.prev_hash, entry.hash]
            values += [value for c in entry.changes for value in (c.name, c.digest) if value]
        return values
    finally:
        memory.close()


def _guessed_digests(guess: str) -> list[str]:
    """What a guesser computes from one guessed value, knowing the note's name and the call's
    shape: the note's digest and the call's fingerprint, as hex and as raw bytes."""
    changes = parse_changes([{"op": "add", "record": {"name": NAME, "text": guess}}])
    fingerprint, logged = fingerprint_and_log(0, changes)
    return [fingerprint, logged[0].digest or ""]


def _confirmed(held: bytes, guesses: list[str]) -> list[str]:
    """The guesses whose digests a backup holds (as text or as bytes)."""
    confirmed = []
    for guess in guesses:
        for digest in _guessed_digests(guess):
            if digest.encode() in held or bytes.fromhex(digest) in held:
                confirmed.append(guess)
                break
    return confirmed


def test_the_guessing_attack_works_on_the_plain_opt_out(tmp_path: Path) -> None:
    """The premise: without keys a backup names the note and confirms the guessed value."""
    data = tmp_path / "plain"
    with pytest.warns(UnsealedWarning):
        _write_chart(data, sealed=False)
    held = _backup_bytes(data)
    assert NAME.encode() in held and REQUEST.encode() in held
    assert _confirmed(held, GUESSES) == [VALUE]


def test_a_backup_holds_no_name_digest_request_id_or_hash_and_confirms_no_guess(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    notebook_id, seen = _write_chart(data)
    backup = tmp_path / "backup"
    shutil.copytree(data, backup)  # the database and its WAL, as an operator copies them
    held = _backup_bytes(backup)
    secrets = [
        NAME,
        "patient-0042",
        REQUEST,
        seen["digest"],
        seen["answer"]["answer_id"],
        *_log_values(data, notebook_id, sealed=True),
    ]
    assert [s for s in secrets if s.encode() in held] == []
    assert [s for s in secrets if len(s) == 64 and bytes.fromhex(s) in held] == []
    assert _confirmed(held, GUESSES) == []
    conn = sqlite3.connect(backup / "memory.db")
    try:
        kinds = [row[0] for row in conn.execute("SELECT kind FROM records")]
        ids = [row[0] for row in conn.execute("SELECT answer_id FROM answers")]
    finally:
        conn.close()
    assert kinds and all(kind.startswith(SEALED) for kind in kinds)
    assert ids and all(answer_id.startswith(SEALED) for answer_id in ids)
    # Forgotten: the key is destroyed, and nothing left on the machine makes or opens a token.
    host = open_host(Locations(data), clock=CLOCK)
    try:
        host.forget("you", notebook_id)
    finally:
        close_host(host)
    memory = open_memory_store(Locations(data))
    try:
        keyring: Any = memory.keyring  # type: ignore[attr-defined]
        with pytest.raises(Purged):
            keyring.cipher(notebook_id)
        for other, _, _ in keyring.store.wrapped():
            cipher = keyring.cipher(other)
            assert cipher.token(NAME, "name").encode() not in held
            assert _confirmed(held, GUESSES) == []
    finally:
        memory.close()
    assert NAME.encode() not in _backup_bytes(data)


def _to_plain_values(path: Path, keyring: Any) -> None:
    """Turn a sealed database back into the layout of the release before values were tokens
    (content sealed, names, digests, request ids, fingerprints, hashes and answer ids plain,
    no ``sealed_values`` rows), as an upgrade finds it."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("BEGIN")
        for (notebook_id,) in conn.execute("SELECT notebook_id FROM sealed_values").fetchall():
            cipher = keyring.cipher(notebook_id)

            def plain(value: Any, column: str, cipher: Any = cipher) -> Any:
                return None if value is None else cipher.untoken(value, column)

            for rowid, changes, *values in conn.execute(
                "SELECT rowid, changes, request_id, fingerprint, prev_hash, hash, name, digest"
                " FROM log WHERE notebook_id = ?",
                (notebook_id,),
            ).fetchall():
                request_id, fingerprint, prev_hash, hash_, name, digest = values
                assert changes == 1  # the test writes one change a call
                conn.execute(
                    "UPDATE log SET request_id = ?, fingerprint = ?, prev_hash = ?, hash = ?,"
                    " name = ?, digest = ? WHERE rowid = ?",
                    (
                        plain(request_id, "request"),
                        plain(fingerprint, "fingerprint"),
                        plain(prev_hash, "hash"),
                        plain(hash_, "hash"),
                        plain(name, "name"),
                        plain(digest, "digest"),
                        rowid,
                    ),
                )
            for rowid, name, kind, digest in conn.execute(
                "SELECT rowid, name, kind, digest FROM records WHERE notebook_id = ?",
                (notebook_id,),
            ).fetchall():
                conn.execute(
                    "UPDATE records SET name = ?, kind = ?, digest = ? WHERE rowid = ?",
                    (plain(name, "name"), plain(kind, "kind"), plain(digest, "digest"), rowid),
                )
            for rowid, answer_id in conn.execute(
                "SELECT rowid, answer_id FROM answers WHERE notebook_id = ?", (notebook_id,)
            ).fetchall():
                conn.execute(
                    "UPDATE answers SET answer_id = ? WHERE rowid = ?",
                    (plain(answer_id, "answer"), rowid),
                )
            (head,) = conn.execute(
                "SELECT head_hash FROM notebooks WHERE id = ?", (notebook_id,)
            ).fetchone()
            conn.execute(
                "UPDATE notebooks SET head_hash = ? WHERE id = ?",
                (plain(head, "hash"), notebook_id),
            )
        conn.execute("DELETE FROM sealed_values")
        conn.execute("COMMIT")
    finally:
        conn.close()


def test_a_database_sealed_before_values_were_tokens_is_converted_once_on_open(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    notebook_id, seen = _write_chart(data)
    locations = Locations(data)
    memory: Any = open_memory_store(locations)
    try:
        for version in range(1, 4):
            result = write(memory, notebook_id, version, f"r-{version}", add(f"note:n{version}"))
            assert result.version == version + 1  # type: ignore[union-attr]
        before = memory.records(notebook_id)
        entries = list(memory.log(notebook_id))
        _to_plain_values(data / "memory.db", memory.keyring)
    finally:
        memory.close()
    assert NAME.encode() in _backup_bytes(data)  # the layout an upgrade finds
    converted: Any = open_memory_store(locations)
    try:
        assert NAME.encode() not in _backup_bytes(data)  # converted (and compacted) on open
        assert converted.records(notebook_id) == before
        assert list(converted.log(notebook_id)) == entries
        assert verify_store(converted).ok
        # A retry of a call made before the upgrade is answered as the original.
        again = write(converted, notebook_id, 0, REQUEST, add(NAME, VALUE))
        assert again.version == 1  # type: ignore[union-attr]
        assert converted.answer(notebook_id, seen["answer"]["answer_id"]) is not None
        # The next write continues the chain the upgrade kept.
        assert write(converted, notebook_id, 4, "r-5", add("note:n5")).version == 5  # type: ignore[union-attr]
        assert verify_store(converted).ok
    finally:
        converted.close()
    # Once: a second open finds nothing to convert.
    reopened = SqliteMemoryStore(data / "memory.db", keyring=_keyring(locations))
    try:
        assert reopened._token_notebooks(reopened.keyring) == 0
    finally:
        reopened.close()


def _keyring(locations: Locations) -> Any:
    from oh.config import open_keyring

    return open_keyring(locations)


def test_kinds_come_from_names_and_stay_tokens(tmp_path: Path) -> None:
    data = tmp_path / "data"
    notebook_id, _ = _write_chart(data)
    memory = open_memory_store(Locations(data))
    try:
        (record,) = memory.records(notebook_id)
        assert record.kind == kind_of(NAME) == "finding"
        assert hashlib.sha256(record.content.encode()).hexdigest() == record.digest
    finally:
        memory.close()
