"""Recall on PostgreSQL (docs/recall.md): vectors kept in the memory cluster, sealed like the
notes, deleted with them by forget and the purge, checked by verify; each server builds its own
index in memory from them, so a server that never embedded a note recalls it; ``oh index
rebuild`` and the shadow/on/off modes work as on the embedded backend.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import psycopg
import pytest

from oh.config import (
    Locations,
    RecallConfig,
    close_host,
    close_recall,
    open_agent_host,
    open_purge_access,
    open_recall,
)
from oh.core.notebook import new_notebook_id
from oh.errors import Purged
from oh.keys import MASTER_KEY_ENV, SEALED, SEALED_VECTOR, MasterKey
from oh.recall import Recall
from oh.storage.sql.vectors import VECTORS_SEALED_MARKER
from oh.storage.sqlite.keys import SqliteKeyStore
from oh.testing.lifecycle import FakeClock
from oh.testing.memory_store import LIFETIME, T0, add, open_notebook, remove, write
from oh.testing.postgres_cluster import Schema, fresh_schema, shared_cluster
from oh.verify import verify_notebook

WOMBAT = "the wombat digs burrows in dry grassland"
QUARK = "quantum chromodynamics binds quarks with gluons"


@pytest.fixture
def schema() -> Iterator[Schema]:
    with fresh_schema(shared_cluster()) as schema:
        yield schema


@pytest.fixture(autouse=True)
def master(monkeypatch: pytest.MonkeyPatch) -> MasterKey:
    key = MasterKey.generate()
    monkeypatch.setenv(MASTER_KEY_ENV, key.text())
    return key


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def _server(tmp_path: Path, schema: Schema, name: str = "a") -> Locations:
    return Locations(
        tmp_path / name,
        memory_url=schema.url(),
        knowledge_url=schema.url(),
        keys_dir=tmp_path / "keys",  # one machine: one key store file for both
    )


@pytest.fixture
def recall(tmp_path: Path, schema: Schema, clock: FakeClock) -> Iterator[Recall]:
    service = open_recall(_server(tmp_path, schema), clock=clock)
    yield service
    close_recall(service)


def _sql(schema: Schema, sql: str, params: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    with psycopg.connect(schema.url(), autocommit=True) as conn:
        cursor = conn.execute(sql, params or None)
        return cursor.fetchall() if cursor.description else []


def _notebook(recall: Recall, run: str = "run-1") -> str:
    notebook = open_notebook(recall.memory, run=run)
    write(recall.memory, notebook, 0, "r1", add("note:wombat", WOMBAT), add("note:quark", QUARK))
    return notebook


def test_recall_finds_the_nearest_note_and_vectors_are_sealed_at_rest(
    recall: Recall, schema: Schema
) -> None:
    notebook = _notebook(recall)
    report = recall.catch_up_all()
    assert (report.notes, report.pending) == (2, 0)
    answer = recall.recall(notebook, "wombat burrows in grassland", 5)
    assert answer["rows"][0]["name"] == "note:wombat"
    assert answer["pending"] == 0
    rows = _sql(schema, "SELECT digest, vector FROM note_vectors")
    assert len(rows) == 2
    for digest, vector in rows:
        assert str(digest).startswith(SEALED)  # a token, not the digest
        assert bytes(vector).startswith(SEALED_VECTOR)  # sealed under the data key
    assert verify_notebook(recall.memory, notebook).problems == []


def test_a_removed_note_is_not_recalled_and_its_vector_goes(recall: Recall, schema: Schema) -> None:
    notebook = _notebook(recall)
    recall.catch_up_all()
    write(recall.memory, notebook, 1, "r2", remove("note:wombat"))
    recall.catch_up_all()
    answer = recall.recall(notebook, "wombat burrows", 5)
    assert [row["name"] for row in answer["rows"]] == ["note:quark"]
    assert len(_sql(schema, "SELECT 1 FROM note_vectors")) == 1


def test_forget_and_the_purge_delete_a_notebooks_vectors_and_only_its_own(
    tmp_path: Path, recall: Recall, schema: Schema
) -> None:
    forgotten, purged, kept = (_notebook(recall, run) for run in ("run-1", "run-2", "run-3"))
    recall.catch_up_all()
    assert len(_sql(schema, "SELECT 1 FROM note_vectors")) == 6
    removed = recall.memory.forget(forgotten, T0)
    assert removed["note_vectors"] == 2
    purge = open_purge_access(
        Locations(
            tmp_path / "purge",
            memory_url=schema.purge_url,
            keys_dir=tmp_path / "keys",
            create=False,
        )
    )
    try:
        # Purge only one of the two still open (the clock says both are due).
        assert set(purge.purge([purged], T0 + LIFETIME)) == {purged}
    finally:
        purge.close()
    left = {row[0] for row in _sql(schema, "SELECT notebook_id FROM note_vectors")}
    assert left == {kept}


def test_the_database_refuses_a_vector_for_a_notebook_that_is_not_open(recall: Recall) -> None:
    notebook = _notebook(recall)
    recall.memory.forget(notebook, T0)
    with pytest.raises(Purged):
        recall.vectors.put_note_vectors(notebook, "m", [("note:wombat", "0" * 64, b"\x00" * 16)])


def test_verify_finds_a_vector_changed_in_the_database(recall: Recall, schema: Schema) -> None:
    notebook = _notebook(recall)
    recall.catch_up_all()
    _sql(schema, "UPDATE note_vectors SET vector = substring(vector from 1 for 8)")
    problems = verify_notebook(recall.memory, notebook).problems
    assert len(problems) == 2 and all("vector" in p.what for p in problems)


def test_plain_vectors_left_in_a_sealed_database_are_dropped_once(
    tmp_path: Path, recall: Recall, schema: Schema, clock: FakeClock
) -> None:
    notebook = _notebook(recall)
    recall.catch_up_all()
    plain = (
        "INSERT INTO note_vectors (notebook_id, model_id, digest, vector) VALUES (%s, 'm', 'd', %s)"
    )
    _sql(schema, plain, (notebook, b"\x00\x01plain"))  # as a store without keys writes it
    # The key store records that this database's plain vectors were dropped: never again.
    close_recall(open_recall(_server(tmp_path, schema, "b"), clock=clock))
    assert len(_sql(schema, "SELECT 1 FROM note_vectors")) == 3
    # A key store that has no such record (an earlier release's) drops them when recall opens.
    store = SqliteKeyStore(tmp_path / "keys" / "keys.db")
    try:
        with store._write() as conn:
            conn.execute("DELETE FROM markers WHERE name = ?", (VECTORS_SEALED_MARKER,))
    finally:
        store.close()
    close_recall(open_recall(_server(tmp_path, schema, "c"), clock=clock))
    rows = _sql(schema, "SELECT vector FROM note_vectors")
    assert len(rows) == 2 and all(bytes(row[0]).startswith(SEALED_VECTOR) for row in rows)


def test_a_server_that_never_embedded_a_note_recalls_it_from_the_shared_rows(
    tmp_path: Path, schema: Schema, clock: FakeClock
) -> None:
    first = open_recall(_server(tmp_path, schema, "a"), clock=clock)
    second = open_recall(_server(tmp_path, schema, "b"), clock=clock)
    try:
        notebook = _notebook(first)
        first.catch_up_all()
        answer = second.recall(notebook, "quarks and gluons", 1)
        assert [row["name"] for row in answer["rows"]] == ["note:quark"]
        # A write through the first server: the second's index follows the notebook's version.
        write(first.memory, notebook, 1, "r2", add("note:reef", "coral reef bleaching survey"))
        first.catch_up_all()
        answer = second.recall(notebook, "coral reef bleaching", 1)
        assert [row["name"] for row in answer["rows"]] == ["note:reef"]
    finally:
        close_recall(first)
        close_recall(second)


@pytest.mark.parametrize(("mode", "offered"), [(None, True), ("on", True), ("off", False)])
def test_the_recall_modes_are_those_of_the_embedded_backend(
    tmp_path: Path, schema: Schema, mode: str | None, offered: bool
) -> None:
    locations = _server(tmp_path, schema)
    config = RecallConfig.resolve(locations, mode, environ={})
    assert config.mode == (mode or "shadow")
    host = open_agent_host(locations, config)
    try:
        assert host.recall_enabled is offered
    finally:
        close_host(host)


def test_index_rebuild_rebuilds_the_vectors_on_postgres(tmp_path: Path, schema: Schema) -> None:
    # The real clock, deliberately: the command's recall rebuilds only notebooks open by it.
    now = datetime.now(UTC)
    recall = open_recall(_server(tmp_path, schema), clock=lambda: now)
    try:
        notebook = new_notebook_id()
        recall.memory.create_notebook(
            notebook,
            owner="ann",
            document="doc-1",
            run="run-1",
            started_at=now,
            forgets_at=now + LIFETIME,
        )
        recall.memory.mark_open(notebook, None)
        write(recall.memory, notebook, 0, "r1", add("note:wombat", WOMBAT), now=now)
        assert recall.catch_up_all().notes == 1
        _rebuild_and_compare(tmp_path, schema, recall, notebook)
    finally:
        close_recall(recall)


def _rebuild_and_compare(tmp_path: Path, schema: Schema, recall: Recall, notebook: str) -> None:
    before = _sql(schema, "SELECT digest, model_id FROM note_vectors ORDER BY 1")
    env = {k: v for k, v in os.environ.items() if not k.startswith("OH_")}
    env |= {
        MASTER_KEY_ENV: os.environ[MASTER_KEY_ENV],
        "OH_MEMORY_URL": schema.url(),
        "OH_KNOWLEDGE_URL": schema.url(),
        "OH_KEYS": str(tmp_path / "keys"),
    }
    done = subprocess.run(
        [sys.executable, "-m", "oh.cli", "index", "rebuild", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    after = _sql(schema, "SELECT digest, model_id FROM note_vectors ORDER BY 1")
    assert after == before  # the same vectors again, under the same model
    assert verify_notebook(recall.memory, notebook).problems == []
