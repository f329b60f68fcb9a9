"""Similarity recall (SPEC §5 recall, §7): the derived vector index and the ``Recall`` service."""

from __future__ import annotations

import argparse
import io
import json
import logging
import os
import socket
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from oh.cli.index import add_rebuild_arguments, rebuild_command
from oh.config import Locations, close_recall, open_recall
from oh.core.changes import Applied
from oh.core.clock import system_clock
from oh.core.notebook import new_notebook_id
from oh.errors import Expired, Forbidden, IntegrityError, InvalidArgument, Purged
from oh.recall import (
    EmbedderRejected,
    EmbedderUnavailable,
    HashingEmbedder,
    IndexSettings,
    OpenAIEmbedder,
    Recall,
    RecallAnswer,
    VectorIndex,
    render,
)
from oh.recall.embedders import Vectors, import_usearch
from oh.services.knowledge import Knowledge
from oh.services.notebooks import Notebooks
from oh.storage.sqlite.knowledge import SqliteKnowledgeStore
from oh.storage.sqlite.notebooks import CONTENT_TABLES, SqliteMemoryStore
from oh.storage.sqlite.vectors import VECTOR_TABLES, SqliteVectorStore
from oh.testing.lifecycle import FakeClock
from oh.testing.memory_store import T0, add, open_notebook, remove, replace, write
from oh.verify import verify_notebook

SOURCE = {"document": "hughes-2018.pdf", "passage": "Recovery took a decade.", "locator": "p. 4"}

NOTES = {
    "lead:reef-survey-2016": "Reef survey 2016: the methods section is missing",
    "dataset:noaa-sst": "Sea surface temperature dataset ends in 2014: ruled out",
    "figure:bleaching-threshold": "Check the bleaching threshold figure against a second paper",
    "lead:coral-cover": "Coral cover recovered within ten years after the bleaching",
}


class Counting:
    """Wraps an embedder: counts texts, can fail, can run a hook before answering."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.texts: list[str] = []
        self.fail: Exception | None = None
        self.before: Callable[[Sequence[str]], None] | None = None

    @property
    def model_id(self) -> str:
        return str(self.inner.model_id)

    @property
    def dimensions(self) -> int:
        return int(self.inner.dimensions)

    def embed(self, texts: Sequence[str]) -> Vectors:
        if self.fail is not None:
            raise self.fail
        if self.before is not None:
            self.before(texts)
        self.texts.extend(texts)
        result: Vectors = self.inner.embed(texts)
        return result


class Constant:
    """Every text lands on the same vector: every score ties."""

    model_id = "constant-4"
    dimensions = 4

    def embed(self, texts: Sequence[str]) -> Vectors:
        return np.tile(np.asarray([1.0, 0.0, 0.0, 0.0], dtype=np.float32), (len(texts), 1))


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "memory.db"


@pytest.fixture
def memory(db: Path) -> Iterator[SqliteMemoryStore]:
    store = SqliteMemoryStore(db)
    yield store
    store.close()


@pytest.fixture
def vectors(db: Path, memory: SqliteMemoryStore) -> Iterator[SqliteVectorStore]:
    store = SqliteVectorStore(db)
    yield store
    store.close()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def embedder() -> Counting:
    return Counting(HashingEmbedder(64))


@pytest.fixture
def recall(
    memory: SqliteMemoryStore, vectors: SqliteVectorStore, embedder: Counting, clock: FakeClock
) -> Recall:
    return Recall(memory, vectors, embedder, clock=clock)


def _notebook(memory: SqliteMemoryStore, notes: dict[str, str] = NOTES, run: str = "run-1") -> str:
    notebook_id = open_notebook(memory, run=run)
    write(memory, notebook_id, 0, "r-1", *(add(name, text) for name, text in notes.items()))
    return notebook_id


def _digests(memory: SqliteMemoryStore, notebook: str) -> dict[str, str]:
    return {record.name: record.digest for record in memory.records(notebook)}


def _names(answer: RecallAnswer) -> list[str]:
    return [row.name for row in answer.rows]


def _raw(db: Path, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
    conn = sqlite3.connect(str(db), isolation_level=None)
    try:
        return list(conn.execute(sql, params).fetchall() or ())
    finally:
        conn.close()


# -- answers ---------------------------------------------------------------------------------


def test_recall_answers_names_digests_origins_and_scores_never_text(
    memory: SqliteMemoryStore, recall: Recall
) -> None:
    notebook = _notebook(memory)
    recall.catch_up(notebook)
    body = recall.recall(memory.notebook(notebook), "bleaching threshold", limit=3)
    assert set(body) == {"rows", "pending", "version", "revision"}
    assert (body["pending"], body["version"], body["revision"]) == (0, 1, None)
    assert len(body["rows"]) == 3
    digests = _digests(memory, notebook)
    for row in body["rows"]:
        assert set(row) == {"name", "digest", "origin", "score"}
        assert row["digest"] == digests[row["name"]]
        assert row["origin"] == "note"
    assert body["rows"][0]["name"] == "figure:bleaching-threshold"
    assert not any(word in json.dumps(body) for word in ("threshold figure", "second paper"))
    assert recall.answer(notebook, "bleaching threshold", limit=3).to_json() == body


def test_recall_ranks_by_score_then_name_then_notes_before_reviewed(
    memory: SqliteMemoryStore, vectors: SqliteVectorStore, clock: FakeClock, tmp_path: Path
) -> None:
    knowledge = SqliteKnowledgeStore(tmp_path / "knowledge.db")
    review = Knowledge(knowledge, memory, clock=clock)
    shared = {"name": "lead:coral-cover", "text": NOTES["lead:coral-cover"]}
    proposal = review.propose("ann", source=SOURCE, record=shared)
    review.decide("ann", proposal.id, decision="accept", reason="checked")
    notebook = Notebooks(memory, clock=clock, knowledge=knowledge).open("ann", "doc", "run-1")
    write(memory, notebook.id, 0, "r-1", *(add(name, text) for name, text in NOTES.items()))
    recall = Recall(memory, vectors, Constant(), knowledge, clock=clock)
    recall.catch_up(notebook.id)
    answer = recall.answer(notebook.id, "anything", limit=20)
    assert [(row.name, row.origin, row.score) for row in answer.rows] == [
        ("dataset:noaa-sst", "note", 1.0),
        ("figure:bleaching-threshold", "note", 1.0),
        ("lead:coral-cover", "note", 1.0),
        ("lead:coral-cover", "reviewed", 1.0),
        ("lead:reef-survey-2016", "note", 1.0),
    ]
    knowledge.close()


def test_scores_are_cosines_rounded_to_four_decimals(
    memory: SqliteMemoryStore, recall: Recall
) -> None:
    notebook = _notebook(memory)
    recall.catch_up(notebook)
    answer = recall.answer(notebook, "coral bleaching recovery", limit=20)
    assert len(answer.rows) == len(NOTES)
    scores = [row.score for row in answer.rows]
    assert scores == sorted(scores, reverse=True)
    for score in scores:
        assert score == round(score, 4) and -1.0 <= score <= 1.0


@pytest.mark.parametrize(
    ("text", "limit"),
    [("", 5), ("   ", 5), (None, 5), ("x" * 4001, 5), ("reef", 0), ("reef", 21), ("reef", True)],
)
def test_recall_takes_non_empty_text_and_a_limit_up_to_20(
    memory: SqliteMemoryStore, recall: Recall, text: Any, limit: Any
) -> None:
    notebook = _notebook(memory)
    with pytest.raises(InvalidArgument):
        recall.answer(notebook, text, limit)


def test_the_rendered_text_is_kind_name_and_text(memory: SqliteMemoryStore) -> None:
    notebook = _notebook(memory)
    stored = memory.record(notebook, "dataset:noaa-sst")
    assert stored is not None
    assert render(stored.content) == (
        "dataset dataset:noaa-sst: Sea surface temperature dataset ends in 2014: ruled out"
    )


# -- embedding happens outside writes, and is cached ---------------------------------------------


def test_remember_makes_no_embedding_call_and_recall_says_it_is_behind(
    memory: SqliteMemoryStore, recall: Recall, embedder: Counting
) -> None:
    notebook = _notebook(memory)
    assert embedder.texts == []
    answer = recall.answer(notebook, "reef survey")
    assert (answer.rows, answer.pending) == ((), len(NOTES))
    assert recall.pending(notebook) == len(NOTES)
    report = recall.catch_up(notebook)
    assert (report.notes, report.pending) == (len(NOTES), 0)
    assert recall.answer(notebook, "reef survey").pending == 0


def test_an_unchanged_note_is_never_embedded_twice(
    memory: SqliteMemoryStore,
    vectors: SqliteVectorStore,
    recall: Recall,
    embedder: Counting,
    clock: FakeClock,
) -> None:
    notebook = _notebook(memory)
    recall.catch_up(notebook)
    write(
        memory,
        notebook,
        1,
        "r-2",
        replace("lead:coral-cover", NOTES["lead:coral-cover"]),  # same content, same digest
        add("note:new", "A new note"),
    )
    recall.catch_up(notebook)
    later = Recall(memory, vectors, embedder, clock=clock)  # another process, same database
    later.catch_up(notebook)
    later.recall(notebook, "coral")
    assert len(embedder.texts) == len(NOTES) + 1 + 1  # four notes, one new, one query
    assert embedder.texts[len(NOTES)] == "note note:new: A new note"


def test_a_replaced_note_gets_a_new_vector_and_its_old_one_goes(
    memory: SqliteMemoryStore, vectors: SqliteVectorStore, recall: Recall, db: Path
) -> None:
    notebook = _notebook(memory)
    recall.catch_up(notebook)
    old = _digests(memory, notebook)["dataset:noaa-sst"]
    write(memory, notebook, 1, "r-2", replace("dataset:noaa-sst", "Usable after all"))
    new = _digests(memory, notebook)["dataset:noaa-sst"]
    assert recall.answer(notebook, "usable").pending == 1
    report = recall.catch_up(notebook)
    assert (report.notes, report.removed) == (1, 1)
    stored = {row[0] for row in _raw(db, "SELECT digest FROM note_vectors")}
    assert new in stored and old not in stored
    top = recall.answer(notebook, "usable after all", limit=1).rows[0]
    assert (top.name, top.digest) == ("dataset:noaa-sst", new)


def test_a_removed_note_is_never_recalled_and_its_vector_goes(
    memory: SqliteMemoryStore, recall: Recall, db: Path
) -> None:
    notebook = _notebook(memory)
    recall.catch_up(notebook)
    recall.answer(notebook, "reef survey methods")  # this process now holds the vectors
    write(memory, notebook, 1, "r-2", remove("lead:reef-survey-2016"))
    answer = recall.answer(notebook, "reef survey methods", limit=20)
    assert "lead:reef-survey-2016" not in _names(answer)  # before any catch-up
    assert recall.catch_up(notebook).removed == 1
    assert _raw(db, "SELECT count(*) FROM note_vectors")[0][0] == len(NOTES) - 1


def test_a_catch_up_in_another_process_is_seen_by_recall(
    memory: SqliteMemoryStore, recall: Recall, db: Path, clock: FakeClock
) -> None:
    notebook = _notebook(memory)
    assert recall.answer(notebook, "reef").pending == len(NOTES)
    other_memory, other_vectors = SqliteMemoryStore(db), SqliteVectorStore(db)
    Recall(other_memory, other_vectors, HashingEmbedder(64), clock=clock).catch_up(notebook)
    other_memory.close()
    other_vectors.close()
    answer = recall.answer(notebook, "reef survey")
    assert answer.pending == 0 and answer.rows[0].name == "lead:reef-survey-2016"


# -- vectors are derived data, never text, and go with their notebook -----------------------------


def test_the_index_holds_only_digests_and_vectors_never_text(
    memory: SqliteMemoryStore, recall: Recall, db: Path
) -> None:
    notebook = _notebook(memory)
    recall.catch_up(notebook)
    columns = {
        table: [row[1] for row in _raw(db, f"PRAGMA table_info({table})")]
        for table in ("note_vectors", "reviewed_vectors")
    }
    assert columns == {
        "note_vectors": ["notebook_id", "model_id", "digest", "vector", "seal"],
        "reviewed_vectors": ["owner", "model_id", "digest", "vector", "seal"],
    }
    for (blob,) in _raw(db, "SELECT vector FROM note_vectors"):
        assert len(blob) == 4 * 64
        assert b"reef" not in blob.lower()


def test_the_vector_tables_are_content_tables() -> None:
    # Forget and purge delete from every content table; the purge credential may delete there.
    assert set(VECTOR_TABLES) <= set(CONTENT_TABLES)


def test_forgetting_a_notebook_deletes_its_vectors_and_only_its_own(
    memory: SqliteMemoryStore, recall: Recall, embedder: Counting, db: Path
) -> None:
    first = _notebook(memory, run="run-1")
    second = _notebook(memory, run="run-2")  # the same notes in another run
    recall.catch_up(first)
    recall.catch_up(second)
    assert len(embedder.texts) == 2 * len(NOTES)  # the cache never crosses notebooks
    recall.answer(first, "reef")
    removed = memory.forget(first, T0)
    recall.evict(first)
    assert removed["note_vectors"] == len(NOTES)
    by_notebook = dict(_raw(db, "SELECT notebook_id, count(*) FROM note_vectors GROUP BY 1"))
    assert by_notebook == {second: len(NOTES)}
    assert recall.cached_notebooks() == []
    with pytest.raises(Purged):
        recall.answer(first, "reef")


def test_a_purged_notebook_leaves_no_vector(tmp_path: Path) -> None:
    # The wall clock, deliberately: the `oh purge` child decides expiry on its own real clock
    # (shifted with this process's when OH_CLOCK_SHIFT_DAYS is set), so the notebook must be
    # old by that clock.
    long_ago = datetime.now(UTC) - timedelta(hours=30)
    memory = SqliteMemoryStore(tmp_path / "memory.db")
    vectors = SqliteVectorStore(tmp_path / "memory.db")
    notebook = Notebooks(memory, clock=lambda: long_ago).open("ann", "doc", "run-1")
    write(memory, notebook.id, 0, "r-1", add("note:a", "reef"), now=long_ago)
    Recall(memory, vectors, HashingEmbedder(64), clock=lambda: long_ago).catch_up(notebook.id)
    assert vectors.vector_count()["note_vectors"] == 1
    memory.close()
    vectors.close()
    done = subprocess.run(
        [sys.executable, "-m", "oh.cli", "purge", "--data", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1])["removed"]["note_vectors"] == 1
    assert _raw(tmp_path / "memory.db", "SELECT count(*) FROM note_vectors") == [(0,)]


def test_a_vector_embedded_while_its_notebook_is_forgotten_is_never_stored(
    memory: SqliteMemoryStore, recall: Recall, embedder: Counting, db: Path
) -> None:
    notebook = _notebook(memory)
    embedder.before = lambda texts: memory.forget(notebook, T0)
    report = recall.catch_up(notebook)
    assert report.notes == 0
    assert _raw(db, "SELECT count(*) FROM note_vectors") == [(0,)]


def test_the_database_refuses_vectors_for_a_notebook_that_is_not_open(
    memory: SqliteMemoryStore, db: Path
) -> None:
    notebook = _notebook(memory)
    memory.forget(notebook, T0)
    with pytest.raises(sqlite3.Error, match="oh: notebook is not open"):
        _raw(
            db,
            "INSERT INTO note_vectors (notebook_id, model_id, digest, vector) VALUES (?, ?, ?, ?)",
            (notebook, "m", "d" * 64, b"\x00" * 16),
        )


# -- notebook states -------------------------------------------------------------------------


def test_recall_follows_the_notebook_state(
    memory: SqliteMemoryStore, recall: Recall, clock: FakeClock
) -> None:
    notebook = _notebook(memory)
    opening = new_notebook_id()
    memory.create_notebook(
        opening, owner="ann", document="d", run="r", started_at=T0, forgets_at=T0 + timedelta(1)
    )
    with pytest.raises(Forbidden):
        recall.answer(opening, "reef")
    assert recall.catch_up(opening).skipped == 1
    clock.advance(hours=25)
    with pytest.raises(Expired):
        recall.answer(notebook, "reef")
    assert recall.catch_up(notebook).skipped == 1


def test_catch_up_all_embeds_every_open_notebook_and_drops_closed_ones(
    memory: SqliteMemoryStore, recall: Recall
) -> None:
    first = _notebook(memory, run="run-1")
    second = _notebook(memory, run="run-2")
    recall.answer(second, "reef")
    memory.forget(second, T0)  # by another part of the host, without telling recall
    report = recall.catch_up_all()
    assert (report.notebooks, report.notes, report.pending) == (1, len(NOTES), 0)
    assert recall.cached_notebooks() == []
    assert recall.answer(first, "reef").pending == 0


def test_recall_runs_while_another_thread_writes_and_catches_up(
    memory: SqliteMemoryStore, recall: Recall
) -> None:
    notebook = _notebook(memory)
    written = set(_digests(memory, notebook).items())
    errors: list[BaseException] = []
    done = threading.Event()

    def keep_recalling() -> None:
        try:
            while not done.is_set():
                for row in recall.answer(notebook, "reef survey", limit=20).rows:
                    assert (row.name, row.digest) in written
        except BaseException as exc:
            errors.append(exc)

    readers = [threading.Thread(target=keep_recalling) for _ in range(3)]
    for reader in readers:
        reader.start()
    for version in range(1, 21):
        note = add(f"note:n{version:02d}", f"reef {version}")
        applied = write(memory, notebook, version, f"r-{version + 1}", note)
        assert isinstance(applied, Applied)
        written.update(applied.written)
        recall.catch_up(notebook)
    done.set()
    for reader in readers:
        reader.join()
    assert errors == []
    assert recall.pending(notebook) == 0
    assert len(recall.answer(notebook, "reef", limit=20).rows) == 20


# -- failures --------------------------------------------------------------------------------


def test_an_embedder_that_is_down_leaves_notes_pending(
    memory: SqliteMemoryStore, recall: Recall, embedder: Counting
) -> None:
    notebook = _notebook(memory)
    embedder.fail = EmbedderUnavailable("the endpoint is down")
    with pytest.raises(EmbedderUnavailable) as info:
        recall.catch_up(notebook)
    assert info.value.code == "storage_unavailable"
    with pytest.raises(EmbedderUnavailable):
        recall.catch_up_all()
    with pytest.raises(EmbedderUnavailable):
        recall.answer(notebook, "reef")
    embedder.fail = None
    assert recall.answer(notebook, "reef").pending == len(NOTES)


def test_a_notebook_whose_texts_are_refused_does_not_stop_the_others(
    memory: SqliteMemoryStore, recall: Recall, embedder: Counting, caplog: pytest.LogCaptureFixture
) -> None:
    refused = _notebook(memory, {"note:too-long": "x"}, run="run-1")
    fine = _notebook(memory, run="run-2")

    def refuse(texts: Sequence[str]) -> None:
        if any("note:too-long" in text for text in texts):
            raise EmbedderRejected("input too long", status=400)

    embedder.before = refuse
    report = recall.catch_up_all()
    assert (report.failed, report.notebooks, report.notes) == (1, 1, len(NOTES))
    assert refused in caplog.text
    assert recall.answer(fine, "reef").pending == 0


def test_a_damaged_note_is_not_embedded(
    memory: SqliteMemoryStore, recall: Recall, db: Path, caplog: pytest.LogCaptureFixture
) -> None:
    notebook = _notebook(memory)
    _raw(
        db,
        "UPDATE records SET content = replace(content, 'Reef', 'Fish') WHERE name = ?",
        ("lead:reef-survey-2016",),
    )
    with caplog.at_level(logging.ERROR, logger="oh.recall"):
        report = recall.catch_up(notebook)
    assert (report.notes, report.pending) == (len(NOTES) - 1, 1)
    assert "lead:reef-survey-2016" in caplog.text


def test_a_recall_reads_every_store_before_it_waits_for_the_embedder(
    db: Path, clock: FakeClock
) -> None:
    # A call given up at its deadline may get its vector long after the host closed its
    # stores; what is left to do then happens in memory.
    memory = SqliteMemoryStore(db)
    vectors = SqliteVectorStore(db)
    embedder = Counting(HashingEmbedder(64))
    recall = Recall(memory, vectors, embedder, clock=clock)
    notebook = _notebook(memory)
    recall.catch_up(notebook)
    waiting, release = threading.Event(), threading.Event()

    def slow(texts: Sequence[str]) -> None:
        waiting.set()
        assert release.wait(30)

    embedder.before = slow
    answers: list[Any] = []
    worker = threading.Thread(
        target=lambda: answers.append(_answer_or_error(recall, notebook)), daemon=True
    )
    worker.start()
    assert waiting.wait(30)
    vectors.close()
    memory.close()
    release.set()
    worker.join(30)
    assert len(answers) == 1 and isinstance(answers[0], RecallAnswer), answers
    assert _names(answers[0])[0] == "lead:reef-survey-2016"


def _answer_or_error(recall: Recall, notebook: str) -> RecallAnswer | BaseException:
    try:
        return recall.answer(notebook, "reef survey methods")
    except BaseException as exc:  # a closed libSQL connection panics (a BaseException)
        return exc


def test_a_damaged_vector_is_an_integrity_error(
    memory: SqliteMemoryStore, recall: Recall, db: Path
) -> None:
    notebook = _notebook(memory)
    recall.catch_up(notebook)
    _raw(db, "UPDATE note_vectors SET vector = x'00000000'")
    recall.clear()
    with pytest.raises(IntegrityError, match="oh index rebuild"):
        recall.answer(notebook, "reef")


# -- reviewed knowledge ------------------------------------------------------------------------


@pytest.fixture
def knowledge(tmp_path: Path) -> Iterator[SqliteKnowledgeStore]:
    store = SqliteKnowledgeStore(tmp_path / "knowledge.db")
    yield store
    store.close()


def _review(
    knowledge: SqliteKnowledgeStore,
    memory: SqliteMemoryStore,
    clock: FakeClock,
    name: str,
    text: str,
) -> None:
    review = Knowledge(knowledge, memory, clock=clock)
    proposal = review.propose("ann", source=SOURCE, record={"name": name, "text": text})
    review.decide("ann", proposal.id, decision="accept", reason="checked")


def test_reviewed_records_at_the_pinned_revision_are_recalled_as_reviewed(
    memory: SqliteMemoryStore,
    vectors: SqliteVectorStore,
    knowledge: SqliteKnowledgeStore,
    clock: FakeClock,
) -> None:
    _review(knowledge, memory, clock, "finding:bleaching-threshold", "Bleaching starts at 1 °C")
    notebook = Notebooks(memory, clock=clock, knowledge=knowledge).open("ann", "doc", "run-1")
    _review(knowledge, memory, clock, "finding:later", "Bleaching threshold, reviewed later")
    recall = Recall(memory, vectors, HashingEmbedder(64), knowledge, clock=clock)
    assert recall.answer(notebook.id, "bleaching").pending == 1
    assert recall.catch_up(notebook.id).reviewed == 1
    answer = recall.answer(notebook.id, "bleaching threshold", limit=20)
    assert [(row.name, row.origin) for row in answer.rows] == [
        ("finding:bleaching-threshold", "reviewed")
    ]
    assert (answer.revision, answer.pending) == (1, 0)


def test_reviewed_vectors_are_embedded_once_for_all_the_owners_notebooks(
    memory: SqliteMemoryStore,
    vectors: SqliteVectorStore,
    knowledge: SqliteKnowledgeStore,
    clock: FakeClock,
) -> None:
    _review(knowledge, memory, clock, "finding:bleaching-threshold", "Bleaching starts at 1 °C")
    notebooks = Notebooks(memory, clock=clock, knowledge=knowledge)
    first = notebooks.open("ann", "doc", "run-1")
    second = notebooks.open("ann", "doc", "run-2")
    embedder = Counting(HashingEmbedder(64))
    recall = Recall(memory, vectors, embedder, knowledge, clock=clock)
    recall.catch_up(first.id)
    Recall(memory, vectors, embedder, knowledge, clock=clock).catch_up(second.id)
    assert len(embedder.texts) == 1
    assert vectors.vector_count()["reviewed_vectors"] == 1
    memory.forget(first.id, T0)
    assert recall.answer(second.id, "bleaching").rows[0].origin == "reviewed"


# -- rebuild -----------------------------------------------------------------------------------

QUERIES = ("reef survey", "bleaching threshold", "temperature dataset", "coral", "paper 2014")


def _answers(recall: Recall, notebook: str) -> list[dict[str, Any]]:
    return [recall.answer(notebook, text, limit=20).to_json() for text in QUERIES]


def test_a_rebuilt_index_answers_identically(
    memory: SqliteMemoryStore,
    vectors: SqliteVectorStore,
    knowledge: SqliteKnowledgeStore,
    clock: FakeClock,
    db: Path,
) -> None:
    _review(knowledge, memory, clock, "finding:bleaching-threshold", "Bleaching starts at 1 °C")
    notebook = Notebooks(memory, clock=clock, knowledge=knowledge).open("ann", "doc", "run-1")
    write(memory, notebook.id, 0, "r-1", *(add(name, text) for name, text in NOTES.items()))
    recall = Recall(memory, vectors, HashingEmbedder(64), knowledge, clock=clock)
    recall.catch_up(notebook.id)
    before = _answers(recall, notebook.id)
    stored = _raw(db, "SELECT digest, vector FROM note_vectors ORDER BY digest")
    seen: list[tuple[int, int]] = []
    report = recall.rebuild(progress=lambda done, total: seen.append((done, total)))
    assert report.dropped == {"note_vectors": len(NOTES), "reviewed_vectors": 1}
    assert (report.caught_up.notes, report.caught_up.reviewed) == (len(NOTES), 1)
    assert seen == [(0, 1), (1, 1)]
    assert _raw(db, "SELECT digest, vector FROM note_vectors ORDER BY digest") == stored
    assert _answers(recall, notebook.id) == before
    fresh = Recall(memory, vectors, HashingEmbedder(64), knowledge, clock=clock)
    assert _answers(fresh, notebook.id) == before


def test_rebuild_drops_the_vectors_of_every_model(
    memory: SqliteMemoryStore, vectors: SqliteVectorStore, clock: FakeClock, db: Path
) -> None:
    notebook = _notebook(memory)
    Recall(memory, vectors, HashingEmbedder(32), clock=clock).catch_up(notebook)
    Recall(memory, vectors, HashingEmbedder(64), clock=clock).rebuild()
    models = _raw(db, "SELECT model_id, count(*) FROM note_vectors GROUP BY 1")
    assert models == [("oh-hashing-v1-64", len(NOTES))]


needs_usearch = pytest.mark.skipif(import_usearch() is None, reason="the ann extra is missing")


@needs_usearch
def test_a_rebuilt_graph_index_answers_identically(
    memory: SqliteMemoryStore, vectors: SqliteVectorStore, clock: FakeClock
) -> None:
    notes = {f"note:n{i:03d}": f"Observation {i} about reef site {i % 17}" for i in range(150)}
    notebook = open_notebook(memory)
    names = list(notes)
    for start in range(0, len(names), 50):
        write(
            memory,
            notebook,
            start // 50,
            f"r-{start}",
            *(add(name, notes[name]) for name in names[start : start + 50]),
        )
    settings = IndexSettings(ann_threshold=100, threads=1)
    recall = Recall(memory, vectors, HashingEmbedder(64), clock=clock, settings=settings)
    recall.catch_up(notebook)
    answer = recall.answer(notebook, "reef site 3", limit=10)
    assert answer.approximate and len(answer.rows) == 10
    before = _answers(recall, notebook)
    recall.rebuild()
    assert recall.answer(notebook, "reef site 3", limit=10).approximate
    assert _answers(recall, notebook) == before


def test_the_rebuild_command_rebuilds_the_data_directory(tmp_path: Path) -> None:
    memory = SqliteMemoryStore(tmp_path / "memory.db")
    # The real clock, deliberately: rebuild_command opens its own recall on the real clock
    # and rebuilds only notebooks open by it. Nothing stamped here is compared.
    opened = system_clock()
    notebook = Notebooks(memory, clock=lambda: opened).open("ann", "doc", "run-1")
    notes = (add(name, text) for name, text in NOTES.items())
    write(memory, notebook.id, 0, "r-1", *notes, now=opened)
    memory.close()
    parser = argparse.ArgumentParser()
    parser.add_argument("--data")
    parser.add_argument("--memory-url")
    parser.add_argument("--knowledge-url")
    add_rebuild_arguments(parser)
    args = parser.parse_args(["--data", str(tmp_path), "--embedder", "hashing", "--json"])
    out = io.StringIO()
    assert rebuild_command(args, out=out, err=io.StringIO()) == 0
    report = json.loads(out.getvalue())
    assert (report["event"], report["model"]) == ("index_rebuilt", "oh-hashing-v1-384")
    assert (report["notebooks"], report["notes"], report["pending"]) == (1, len(NOTES), 0)
    out = io.StringIO()
    args = parser.parse_args(["--data", str(tmp_path), "--embedder", "hashing"])
    assert rebuild_command(args, out=out, err=io.StringIO()) == 0
    assert out.getvalue().startswith(f"index rebuild: dropped {len(NOTES)} note")


def test_a_rebuilt_index_on_the_sealed_default_verifies_and_recalls(tmp_path: Path) -> None:
    """The staged vectors are sealed as the model they become: after ``oh index rebuild`` on a
    default (sealed) data directory, verify finds nothing altered and recall finds the note."""
    data = tmp_path / "oh-data"
    opened = system_clock()
    service = open_recall(Locations(data), clock=lambda: opened)
    try:
        notebook = Notebooks(service.memory, clock=lambda: opened).open("ann", "doc", "run-1")
        write(service.memory, notebook.id, 0, "r-1", add("note:reef", "reef site 3"), now=opened)
        assert service.catch_up_all().notes == 1
    finally:
        close_recall(service)
    env = {k: v for k, v in os.environ.items() if not k.startswith("OH_")}
    for command in (["index", "rebuild"], ["verify"]):
        done = subprocess.run(
            [sys.executable, "-m", "oh.cli", *command, "--data", str(data)],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
            check=False,
        )
        assert done.returncode == 0, (command, done.stdout, done.stderr)
    service = open_recall(Locations(data), clock=lambda: opened)
    try:
        assert verify_notebook(service.memory, notebook.id).problems == []
        answer = service.answer(notebook.id, "reef site 3", limit=1)
        assert [row.name for row in answer.rows] == ["note:reef"]
    finally:
        close_recall(service)


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _vector_rows(db: Path) -> list[Any]:
    return _raw(
        db,
        "SELECT 'note', notebook_id, model_id, digest, vector FROM note_vectors UNION ALL"
        " SELECT 'reviewed', owner, model_id, digest, vector FROM reviewed_vectors"
        " ORDER BY 1, 2, 3, 4",
    )


def test_a_rebuild_with_an_unreachable_endpoint_leaves_the_old_index_intact(
    memory: SqliteMemoryStore,
    vectors: SqliteVectorStore,
    knowledge: SqliteKnowledgeStore,
    clock: FakeClock,
    db: Path,
) -> None:
    _review(knowledge, memory, clock, "finding:bleaching-threshold", "Bleaching starts at 1 °C")
    notebook = Notebooks(memory, clock=clock, knowledge=knowledge).open("ann", "doc", "run-1")
    write(memory, notebook.id, 0, "r-1", *(add(name, text) for name, text in NOTES.items()))
    old = Recall(memory, vectors, HashingEmbedder(64), knowledge, clock=clock)
    old.catch_up(notebook.id)
    before = _vector_rows(db)
    answers = _answers(old, notebook.id)
    cloud = OpenAIEmbedder(f"http://127.0.0.1:{_closed_port()}/v1", "m", 64, max_retries=0)
    try:
        with pytest.raises(EmbedderUnavailable) as info:
            Recall(memory, vectors, cloud, knowledge, clock=clock).rebuild()
    finally:
        cloud.close()
    assert info.value.code == "storage_unavailable"
    assert "index rebuild stopped, the index is unchanged" in info.value.message
    assert "could not be reached" in info.value.message
    assert _vector_rows(db) == before
    assert _answers(old, notebook.id) == answers


def test_a_rebuild_that_fails_half_way_leaves_nothing_of_itself(
    memory: SqliteMemoryStore, vectors: SqliteVectorStore, clock: FakeClock, db: Path
) -> None:
    first, second = _notebook(memory, run="run-1"), _notebook(memory, run="run-2")
    Recall(memory, vectors, HashingEmbedder(64), clock=clock).catch_up_all()
    before = _vector_rows(db)
    embedder = Counting(HashingEmbedder(32))
    embedded: list[int] = []

    def fail_on_the_second_notebook(texts: Sequence[str]) -> None:
        embedded.append(len(texts))
        if len(embedded) == 2:
            raise EmbedderUnavailable("the endpoint went away")

    embedder.before = fail_on_the_second_notebook
    with pytest.raises(EmbedderUnavailable, match="the index is unchanged"):
        Recall(memory, vectors, embedder, clock=clock).rebuild()
    assert embedded == [len(NOTES), len(NOTES)]  # the first notebook was staged, then dropped
    assert _vector_rows(db) == before
    assert {first, second} == {row[1] for row in before}


def test_until_a_rebuild_swaps_in_recalls_answer_from_the_old_index(
    memory: SqliteMemoryStore, vectors: SqliteVectorStore, clock: FakeClock
) -> None:
    first, second = sorted([_notebook(memory, run="run-1"), _notebook(memory, run="run-2")])
    recall = Recall(memory, vectors, HashingEmbedder(64), clock=clock)
    recall.catch_up_all()
    before = _answers(recall, second)
    during: list[tuple[int, list[dict[str, Any]]]] = []

    def progress(done: int, total: int) -> None:
        if done == 1:  # the first notebook is staged, the second not yet
            during.append((recall.pending(second), _answers(recall, second)))

    recall.rebuild(progress)
    assert during == [(0, before)]
    assert _answers(recall, second) == before
    assert first != second


def test_the_rebuild_command_fails_clearly_and_keeps_the_index_when_the_endpoint_is_down(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from oh.cli import main

    memory = SqliteMemoryStore(tmp_path / "memory.db")
    # The command runs on the process clock, so the notebook is opened on it too.
    notebook = Notebooks(memory, clock=system_clock).open("ann", "doc", "run-1")
    write(memory, notebook.id, 0, "r-1", *(add(name, text) for name, text in NOTES.items()))
    memory.close()
    assert main(["index", "rebuild", "--data", str(tmp_path), "--embedder", "hashing"]) == 0
    before = _vector_rows(tmp_path / "memory.db")
    assert len(before) == len(NOTES)
    capsys.readouterr()
    monkeypatch.setenv("OH_EMBEDDER", "openai")
    monkeypatch.setenv("OH_EMBEDDINGS_URL", f"http://127.0.0.1:{_closed_port()}/v1")
    monkeypatch.setenv("OH_EMBEDDINGS_MODEL", "text-embedding-3-small")
    monkeypatch.setenv("OH_EMBEDDINGS_DIMENSIONS", "64")
    monkeypatch.setenv("OH_EMBEDDINGS_RETRIES", "1")
    assert main(["index", "rebuild", "--data", str(tmp_path)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("oh index: storage_unavailable: index rebuild stopped, the index is")
    assert "could not be reached (ConnectError) (2 attempts)" in err
    assert _vector_rows(tmp_path / "memory.db") == before


# -- the index itself ------------------------------------------------------------------------


def _random_unit(rows: int, dimensions: int, seed: int) -> np.ndarray:
    generator = np.random.default_rng(seed)
    latent = generator.standard_normal((rows, 8)) @ generator.standard_normal((8, dimensions))
    data = latent + 0.1 * generator.standard_normal((rows, dimensions))
    return (data / np.linalg.norm(data, axis=1, keepdims=True)).astype(np.float32)


def _filled(settings: IndexSettings, data: np.ndarray) -> VectorIndex:
    index = VectorIndex(data.shape[1], settings)
    index.add([f"d{i:05d}" for i in range(len(data))], data)
    return index


@needs_usearch
def test_the_graph_agrees_with_exact_search() -> None:
    data = _random_unit(3000, 32, seed=1)
    queries = _random_unit(40, 32, seed=2)
    exact = _filled(IndexSettings(ann_threshold=10**6), data)
    graph = _filled(IndexSettings(ann_threshold=1000, threads=1), data)
    assert graph.build_graph() and graph.approximate and not exact.approximate
    hits = 0
    for query in queries:
        truth = exact.search(query, 10)[:10]
        found = graph.search(query, 10)[:10]
        hits += len({d for d, _ in truth} & {d for d, _ in found})
        scores = dict(truth)
        for digest, score in found:
            if digest in scores:
                assert score == scores[digest]  # the same exact score on both paths
    assert hits / (10 * len(queries)) >= 0.95


@needs_usearch
def test_the_graph_follows_additions_and_removals() -> None:
    data = _random_unit(1200, 32, seed=3)
    index = _filled(IndexSettings(ann_threshold=1000, threads=1), data)
    assert index.build_graph()
    nearest = index.search(data[7], 1)[0][0]
    assert nearest == "d00007"
    index.discard(["d00007"])
    assert all(digest != "d00007" for digest, _ in index.search(data[7], 10))
    index.add(["fresh"], data[7:8])
    assert index.search(data[7], 1)[0][0] == "fresh"


def test_a_view_filter_answers_only_allowed_digests() -> None:
    data = _random_unit(200, 16, seed=4)
    index = _filled(IndexSettings(), data)
    allowed = frozenset(f"d{i:05d}" for i in range(0, 200, 3))
    found = index.search(data[1], 10, allowed=allowed)
    assert found and all(digest in allowed for digest, _ in found)
    assert index.search(data[1], 10, allowed=frozenset()) == []


def test_removed_rows_are_compacted_away() -> None:
    data = _random_unit(3000, 8, seed=5)
    index = _filled(IndexSettings(), data)
    index.discard([f"d{i:05d}" for i in range(2500)])
    index.maintain()
    assert len(index) == 500
    assert index.search(data[2700], 1)[0][0] == "d02700"
