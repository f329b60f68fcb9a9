"""``verify`` covers every derived copy (SPEC §2, §7, §9): recall vectors, and data written by
the schema before seals, on the embedded backend (vectors live only there) and PostgreSQL.

The rules that are storage behaviour on both backends (notebook seals, kept answers) are in
the conformance suites (``oh.testing.memory_store``, ``lifecycle``, ``tools``); here are the
vector tables, the values only SQLite can hold (any type in any column), upgrading a database
written before seals existed, and what ``oh verify`` prints.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from oh.core.seals import vector_seal
from oh.recall import HashingEmbedder, Recall
from oh.services.knowledge import Knowledge
from oh.services.notebooks import Notebooks
from oh.services.query import ask
from oh.services.view import assemble
from oh.storage.postgres.notebooks import MEMORY_MIGRATIONS, PostgresMemoryStore
from oh.storage.postgres.notebooks import migrate as migrate_postgres
from oh.storage.sqlite.knowledge import SqliteKnowledgeStore
from oh.storage.sqlite.notebooks import SqliteMemoryStore, migrate
from oh.storage.sqlite.vectors import SqliteVectorStore
from oh.testing.knowledge import SOURCE
from oh.testing.lifecycle import FakeClock
from oh.testing.memory_store import T0, add, open_notebook, replace, write
from oh.testing.postgres_cluster import fresh_schema, shared_cluster
from oh.verify import verify_knowledge, verify_notebook, verify_reviewed_vectors, verify_store

DATA = Path(__file__).parent / "data"
MODEL = HashingEmbedder(16).model_id


def _raw(db: Path, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
    conn = sqlite3.connect(str(db), isolation_level=None)
    try:
        cursor = conn.execute(sql, params)
        return list(cursor.fetchall()) if cursor.description else []
    finally:
        conn.close()


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "memory.db"


@pytest.fixture
def memory(db: Path) -> Iterator[SqliteMemoryStore]:
    store = SqliteMemoryStore(db)
    yield store
    store.close()


@pytest.fixture
def knowledge(tmp_path: Path) -> Iterator[SqliteKnowledgeStore]:
    store = SqliteKnowledgeStore(tmp_path / "knowledge.db")
    yield store
    store.close()


@pytest.fixture
def vectors(db: Path, memory: SqliteMemoryStore) -> Iterator[SqliteVectorStore]:
    store = SqliteVectorStore(db)
    yield store
    store.close()


@pytest.fixture
def recall(
    memory: SqliteMemoryStore, vectors: SqliteVectorStore, knowledge: SqliteKnowledgeStore
) -> Recall:
    return Recall(memory, vectors, HashingEmbedder(16), knowledge, clock=FakeClock())


def _indexed(memory: SqliteMemoryStore, recall: Recall, run: str = "run-1") -> str:
    """A notebook of three notes, each with its vector."""
    notebook = open_notebook(memory, run=run)
    write(
        memory,
        notebook,
        0,
        "r-1",
        add("note:a", "reef survey lacks methods"),
        add("note:b", "dataset ends 2014"),
        add("note:c", "check figure 3"),
    )
    assert recall.catch_up(notebook).notes == 3
    return notebook


def _vector_problems(memory: SqliteMemoryStore, notebook: str) -> list[str]:
    return [p.what for p in verify_notebook(memory, notebook).problems]


def _digest(memory: SqliteMemoryStore, notebook: str, name: str) -> str:
    record = memory.record(notebook, name)
    assert record is not None
    return record.digest


# -- note vectors ---------------------------------------------------------------------------------


def test_vectors_oh_embeds_verify_ok_and_a_replaced_notes_vector_may_wait_for_catch_up(
    memory: SqliteMemoryStore, recall: Recall, db: Path
) -> None:
    notebook = _indexed(memory, recall)
    assert verify_notebook(memory, notebook).problems == []
    # The old vector of a replaced note stays cached until the next catch-up deletes it.
    write(memory, notebook, 1, "r-2", replace("note:a", "reef survey has methods"))
    assert len(_raw(db, "SELECT 1 FROM note_vectors WHERE notebook_id = ?", (notebook,))) == 3
    assert verify_notebook(memory, notebook).problems == []
    recall.catch_up(notebook)
    assert verify_notebook(memory, notebook).problems == []


@pytest.mark.parametrize(
    ("alteration", "sql"),
    [
        (
            "zeroed",
            "UPDATE note_vectors SET vector = zeroblob(length(vector))"
            " WHERE notebook_id = ?1 AND digest = ?2",
        ),
        (
            "cut short",
            "UPDATE note_vectors SET vector = substr(vector, 1, 8)"
            " WHERE notebook_id = ?1 AND digest = ?2",
        ),
        (
            "another model's",
            "UPDATE note_vectors SET model_id = 'openai:other:16'"
            " WHERE notebook_id = ?1 AND digest = ?2",
        ),
        ("unsealed", "UPDATE note_vectors SET seal = NULL WHERE notebook_id = ?1 AND digest = ?2"),
        (
            "sealed for another notebook",
            "UPDATE note_vectors SET seal = (SELECT v.seal FROM note_vectors AS v"
            " WHERE v.notebook_id != ?1 LIMIT 1) WHERE notebook_id = ?1 AND digest = ?2",
        ),
    ],
)
def test_verify_reports_an_altered_vector(
    memory: SqliteMemoryStore, recall: Recall, db: Path, alteration: str, sql: str
) -> None:
    notebook = _indexed(memory, recall)
    _indexed(memory, recall, run="run-2")
    _raw(db, sql, (notebook, _digest(memory, notebook, "note:b")))
    problems = verify_notebook(memory, notebook).problems
    assert [p.what for p in problems] == ["vector"]
    assert "note:b" in problems[0].detail  # named by the note it belongs to


def test_verify_reports_two_vectors_swapped(
    memory: SqliteMemoryStore, recall: Recall, db: Path
) -> None:
    notebook = _indexed(memory, recall)
    a, b = (_digest(memory, notebook, name) for name in ("note:a", "note:b"))
    rows = dict(
        _raw(db, "SELECT digest, vector FROM note_vectors WHERE notebook_id = ?", (notebook,))
    )
    for digest, other in ((a, b), (b, a)):
        _raw(
            db,
            "UPDATE note_vectors SET vector = ? WHERE notebook_id = ? AND digest = ?",
            (rows[other], notebook, digest),
        )
    assert _vector_problems(memory, notebook) == ["vector", "vector"]


def test_verify_reports_two_vectors_swapped_with_their_seals(
    memory: SqliteMemoryStore, recall: Recall, db: Path
) -> None:
    notebook = _indexed(memory, recall)
    a, b = (_digest(memory, notebook, name) for name in ("note:a", "note:b"))
    rows = {
        digest: (vector, seal)
        for digest, vector, seal in _raw(
            db, "SELECT digest, vector, seal FROM note_vectors WHERE notebook_id = ?", (notebook,)
        )
    }
    for digest, other in ((a, b), (b, a)):
        _raw(
            db,
            "UPDATE note_vectors SET vector = ?, seal = ? WHERE notebook_id = ? AND digest = ?",
            (*rows[other], notebook, digest),
        )
    assert _vector_problems(memory, notebook) == ["vector", "vector"]


def test_verify_reports_a_vector_copied_from_another_notebook(
    memory: SqliteMemoryStore, recall: Recall, db: Path
) -> None:
    notebook = _indexed(memory, recall)
    other = open_notebook(memory, run="run-2")
    write(memory, other, 0, "r-1", add("note:secret", "another run's note"))
    recall.catch_up(other)
    _raw(
        db,
        "INSERT INTO note_vectors (notebook_id, model_id, digest, vector, seal)"
        " SELECT ?, model_id, digest, vector, seal FROM note_vectors WHERE notebook_id = ?",
        (notebook, other),
    )
    problems = verify_notebook(memory, notebook).problems
    assert [p.what for p in problems] == ["vector", "vector"]
    assert "does not match its seal" in problems[0].detail
    assert "never wrote" in problems[1].detail


def test_verify_reports_a_sealed_vector_of_a_digest_the_notebook_never_wrote(
    memory: SqliteMemoryStore, recall: Recall, db: Path
) -> None:
    # Even a row whose seal was recomputed must index a digest of this notebook.
    notebook = _indexed(memory, recall)
    digest, blob = "e" * 64, b"\x00" * 64
    _raw(
        db,
        "INSERT INTO note_vectors (notebook_id, model_id, digest, vector, seal)"
        " VALUES (?, ?, ?, ?, ?)",
        (notebook, MODEL, digest, blob, vector_seal("note", notebook, MODEL, digest, blob)),
    )
    problems = verify_notebook(memory, notebook).problems
    assert [p.what for p in problems] == ["vector"]
    assert "never wrote" in problems[0].detail


@pytest.mark.parametrize(
    "sql",
    [
        "UPDATE note_vectors SET vector = 'not bytes' WHERE notebook_id = ?1 AND digest = ?2",
        "UPDATE note_vectors SET digest = x'00' WHERE notebook_id = ?1 AND digest = ?2",
        "UPDATE note_vectors SET model_id = x'00' WHERE notebook_id = ?1 AND digest = ?2",
        "UPDATE note_vectors SET seal = 7 WHERE notebook_id = ?1 AND digest = ?2",
    ],
)
def test_verify_reports_a_vector_value_of_the_wrong_type_instead_of_crashing(
    memory: SqliteMemoryStore, recall: Recall, db: Path, sql: str
) -> None:
    notebook = _indexed(memory, recall)
    _raw(db, sql, (notebook, _digest(memory, notebook, "note:c")))
    assert _vector_problems(memory, notebook) == ["vector"]


def test_verify_reports_vectors_left_behind_by_a_forget(
    memory: SqliteMemoryStore, recall: Recall, db: Path
) -> None:
    notebook = _indexed(memory, recall)
    kept = _indexed(memory, recall, run="run-2")
    memory.forget(notebook, T0)
    _raw(db, "UPDATE note_vectors SET notebook_id = ? WHERE notebook_id = ?", (notebook, kept))
    problems = verify_notebook(memory, notebook).problems
    assert [p.what for p in problems] == ["forgotten"]
    assert "3 recall vectors" in problems[0].detail


# -- kept answers ---------------------------------------------------------------------------------


def test_changes_since_answers_only_up_to_its_own_version(memory: SqliteMemoryStore) -> None:
    # A write that lands while an answer is computed is not part of it, so the answer is what
    # its version implies and verify can recompute it from the log.
    notebook = open_notebook(memory)
    write(memory, notebook, 0, "r-1", add("note:a"))
    write(memory, notebook, 1, "r-2", add("note:b"))
    view = assemble(memory.notebook(notebook), 1, {}, {})
    rows = ask(view, "changes_since", {"since": 0}, memory.log(notebook))
    assert [row.name for row in rows] == ["note:a"]


# -- reviewed vectors -----------------------------------------------------------------------------


def _reviewed(memory: SqliteMemoryStore, knowledge: SqliteKnowledgeStore, recall: Recall) -> str:
    review = Knowledge(knowledge, memory, clock=FakeClock())
    proposal = review.propose("ann", source=SOURCE, record={"name": "finding:a", "text": "ten"})
    review.decide("ann", proposal.id, decision="accept", reason="checked")
    notebook = Notebooks(memory, clock=FakeClock(), knowledge=knowledge).open("ann", "d", "r")
    assert recall.catch_up(notebook.id).reviewed == 1
    return notebook.id


def test_verify_reports_an_altered_reviewed_vector(
    memory: SqliteMemoryStore, knowledge: SqliteKnowledgeStore, recall: Recall, db: Path
) -> None:
    _reviewed(memory, knowledge, recall)
    assert verify_reviewed_vectors(memory, knowledge).problems == []
    _raw(db, "UPDATE reviewed_vectors SET vector = zeroblob(length(vector))")
    problems = verify_reviewed_vectors(memory, knowledge).problems
    assert [(p.notebook_id, p.what) for p in problems] == [("knowledge:ann", "vector")]


def test_verify_reports_a_reviewed_vector_of_a_digest_no_review_decided(
    memory: SqliteMemoryStore, knowledge: SqliteKnowledgeStore, recall: Recall, db: Path
) -> None:
    _reviewed(memory, knowledge, recall)
    digest, blob = "e" * 64, b"\x00" * 64
    _raw(
        db,
        "INSERT INTO reviewed_vectors (owner, model_id, digest, vector, seal)"
        " VALUES ('ann', ?, ?, ?, ?)",
        (MODEL, digest, blob, vector_seal("reviewed", "ann", MODEL, digest, blob)),
    )
    problems = verify_reviewed_vectors(memory, knowledge).problems
    assert [p.what for p in problems] == ["vector"]
    assert "no decision" in problems[0].detail


# -- values only SQLite can hold ------------------------------------------------------------------


@pytest.mark.parametrize(
    "sql",
    [
        "UPDATE notebooks SET owner = CAST(owner AS BLOB) WHERE id = ?",
        "UPDATE notebooks SET pinned_revision = 'three' WHERE id = ?",
        "UPDATE notebooks SET forgets_at = 2999 WHERE id = ?",
        "UPDATE notebooks SET seal = x'00' WHERE id = ?",
    ],
)
def test_verify_reports_metadata_of_the_wrong_type_instead_of_crashing(
    memory: SqliteMemoryStore, sql: str, db: Path
) -> None:
    notebook = open_notebook(memory)
    _raw(db, sql, (notebook,))
    assert "seal" in [p.what for p in verify_notebook(memory, notebook).problems]


@pytest.mark.parametrize(
    "sql",
    [
        "UPDATE answers SET version = 'two' WHERE notebook_id = ?",
        "UPDATE answers SET revision = 'none' WHERE notebook_id = ?",
        "UPDATE answers SET rows = x'00' WHERE notebook_id = ?",
        "UPDATE answers SET params = 7 WHERE notebook_id = ?",
        "UPDATE answers SET question = x'00' WHERE notebook_id = ?",
    ],
)
def test_verify_reports_a_kept_answer_of_the_wrong_type_instead_of_crashing(
    memory: SqliteMemoryStore, sql: str, db: Path
) -> None:
    from oh.testing.memory_store import keep_answers

    notebook = open_notebook(memory)
    keep_answers(memory, notebook)
    _raw(db, sql, (notebook,))
    whats = {p.what for p in verify_notebook(memory, notebook).problems}
    assert whats == {"answer"}


# -- a database written before seals ---------------------------------------------------------------


def _restore(insert: Any, fixture: Path) -> int:
    """Insert every row of a fixture (JSON lines of tables, written by the code of the release
    before seals; tests/data/README.md) with ``insert(table, columns, row)``."""
    count = 0
    for line in fixture.read_text("utf-8").splitlines():
        table = json.loads(line)
        for row in table["rows"]:
            values = [bytes.fromhex(v["blob"]) if isinstance(v, dict) else v for v in row]
            insert(table["table"], table["columns"], values)
            count += 1
    return count


def test_a_libsql_database_from_before_seals_verifies_after_upgrading(db: Path) -> None:
    conn = sqlite3.connect(str(db), isolation_level=None)
    assert migrate(conn, "oh.storage.migrations.libsql", upto=6) == 6  # the schema it had

    def insert(table: str, columns: list[str], row: list[Any]) -> None:
        marks = ", ".join("?" * len(columns))
        conn.execute(f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})", tuple(row))

    assert _restore(insert, DATA / "memory_before_seals_libsql.jsonl") > 20
    conn.close()
    store = SqliteMemoryStore(db)  # migrates to the current schema
    try:
        report = verify_store(store)
        assert report.problems == []
        assert report.notebooks == 6 and report.entries > 0
        assert len([1 for n in store.notebook_ids() if store.kept_answers(n)]) == 1
        assert _raw(db, "SELECT count(*) FROM note_vectors WHERE seal IS NOT NULL")[0][0] == 4
        # the upgrade seals what was there; an edit after it is found
        _raw(db, "UPDATE notebooks SET forgets_at = '2999-01-01T00:00:00.000000Z'")
        _raw(db, "UPDATE note_vectors SET vector = zeroblob(length(vector))")
        whats = [p.what for p in verify_store(store).problems]
        assert whats.count("seal") == 6 and whats.count("vector") == 4
    finally:
        store.close()
    assert _raw(db, "SELECT max(version) FROM schema_migrations") == [(9,)]


def test_a_postgres_database_from_before_seals_verifies_after_upgrading() -> None:
    with fresh_schema(shared_cluster(), prefix="upgrade") as schema:
        with psycopg.connect(schema.url()) as conn:
            assert migrate_postgres(conn, "memory", MEMORY_MIGRATIONS, upto=4) == 4

            def insert(table: str, columns: list[str], row: list[Any]) -> None:
                marks = ", ".join(["%s"] * len(columns))
                conn.execute(
                    f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})", tuple(row)
                )

            assert _restore(insert, DATA / "memory_before_seals_postgres.jsonl") > 20
            conn.commit()
        store = PostgresMemoryStore(schema.url())  # migrates to the current schema
        try:
            report = verify_store(store)
            assert report.problems == []
            assert report.notebooks == 6 and report.entries > 0
            with psycopg.connect(schema.url(), autocommit=True) as conn:
                conn.execute("UPDATE notebooks SET started_at = '2026-01-01T00:00:00.000000Z'")
            assert [p.what for p in verify_store(store).problems] == ["seal"] * 6
        finally:
            store.close()


# -- what `oh verify` says ------------------------------------------------------------------------


def test_oh_verify_names_each_altered_derived_value(
    tmp_path: Path, memory: SqliteMemoryStore, recall: Recall, knowledge: SqliteKnowledgeStore
) -> None:
    from oh.testing.memory_store import keep_answers

    notebook = open_notebook(memory)
    keep_answers(memory, notebook)
    assert recall.catch_up(notebook).notes == 3
    command = [sys.executable, "-m", "oh.cli", "verify", "--data", str(tmp_path)]
    ok = subprocess.run(command, capture_output=True, text=True)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    db = tmp_path / "memory.db"
    _raw(db, "UPDATE notebooks SET forgets_at = '2999-01-01T00:00:00.000000Z'")
    _raw(db, "UPDATE note_vectors SET vector = zeroblob(length(vector)) WHERE rowid = 1")
    _raw(db, "UPDATE answers SET rows = replace(rows, 'lead:c', 'lead:zz')")
    bad = subprocess.run(command, capture_output=True, text=True)
    assert bad.returncode == 1
    lines = bad.stdout.splitlines()
    assert lines[-1].endswith("FAILED")
    assert any(line.startswith(f"{notebook}: seal: ") and "2999" in line for line in lines)
    assert any(line.startswith(f"{notebook}: vector: the recall vector of") for line in lines)
    assert any(line.startswith(f"{notebook}: answer: kept answer an_") for line in lines)
    report = json.loads(subprocess.run([*command, "--json"], capture_output=True, text=True).stdout)
    assert {p["what"] for p in report["memory"]["problems"]} == {"seal", "vector", "answer"}
    assert verify_knowledge(knowledge).ok
