"""The embedded backend's shortcuts pinned to ``decide``: a write from the head the store
remembers (one statement per table, no read first), several changes in one statement each, and
calls sharing one flush all answer every combination ``decide`` tells apart as the in-memory
reference backend does, and leave the same log and records (``oh.testing.memory_store``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from oh.keys import Keyring, MasterKey, MasterKeys
from oh.storage.memory import InMemoryStore
from oh.storage.sqlite.keys import SqliteKeyStore
from oh.storage.sqlite.notebooks import SqliteMemoryStore
from oh.testing.memory_store import (
    SINGLE_CHANGE_CASES,
    TWO_CHANGE_CASES,
    change_of,
    decided_as_reference,
)

# sqlite3 sealed (the default), sqlite3 without keys, and the libsql driver.
SETUPS = [("sqlite3", True), ("sqlite3", False), ("libsql", False)]


@pytest.fixture(params=SETUPS, ids=lambda s: f"{s[0]}-{'sealed' if s[1] else 'plain'}")
def stores(request: Any, tmp_path: Path) -> Iterator[tuple[SqliteMemoryStore, SqliteMemoryStore]]:
    """Two stores on one file (the second writes a head the first never saw), and one keyring."""
    driver, sealed = request.param
    if driver == "libsql":
        pytest.importorskip("libsql")
    keyring = None
    if sealed:
        keyring = Keyring(MasterKeys(MasterKey.generate()), SqliteKeyStore(tmp_path / "keys.db"))
    options: dict[str, Any] = {"keyring": keyring, "driver": driver, "synchronous": "OFF"}
    store = SqliteMemoryStore(tmp_path / "memory.db", **options)
    other = SqliteMemoryStore(tmp_path / "memory.db", **options)
    yield store, other
    store.close()
    other.close()


@pytest.mark.parametrize(
    ("op", "name", "based_on", "request_id", "head"),
    [pytest.param(*case, id="-".join(str(p) for p in case)) for case in SINGLE_CHANGE_CASES],
)
def test_every_single_change_call_answers_as_the_reference_backend(
    stores: tuple[SqliteMemoryStore, SqliteMemoryStore],
    op: str,
    name: str,
    based_on: int,
    request_id: str,
    head: str,
) -> None:
    call = (based_on, request_id, [change_of(op, name)])
    decided_as_reference(*stores, InMemoryStore(), call, head=head)


@pytest.mark.parametrize(
    ("first", "second", "head"),
    [
        pytest.param(*case, id=f"{case[0][0]}-{case[0][1]}-{case[1][0]}-{case[1][1]}-{case[2]}")
        for case in TWO_CHANGE_CASES
    ],
)
def test_every_two_change_call_answers_as_the_reference_backend(
    stores: tuple[SqliteMemoryStore, SqliteMemoryStore],
    first: tuple[str, str],
    second: tuple[str, str],
    head: str,
) -> None:
    call = (1, "r-2", [change_of(*first), change_of(*second)])
    decided_as_reference(*stores, InMemoryStore(), call, first=("note:a", "note:b"), head=head)
