"""Recall vectors are a copy of a note, and forgetting reaches them: they are kept sealed under
the notebook's data key.

The attack: the default hashing embedder has no secret, so a word list run through it and
compared with a stored note vector names the note's words. It works on plain vectors (the
opt-out shows it recovering 8 of 8 words of a medical note). On the sealed default, a backup
of the memory database taken while the notebook was open holds no vector at all in plain form,
and once the notebook is forgotten, no key left on the machine opens one.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from oh.config import (
    Locations,
    UnsealedWarning,
    close_host,
    open_host,
    open_knowledge_store,
    open_memory_store,
)
from oh.errors import IntegrityError, Purged
from oh.keys import SEALED_VECTOR
from oh.recall import HashingEmbedder, Recall
from oh.storage.sqlite.vectors import SqliteVectorStore
from oh.testing.lifecycle import FakeClock

NOTE_WORDS = ["patient", "biopsy", "malignant", "oncology", "referral", "stage", "three", "tumour"]
OTHER_WORDS = [
    "harbour",
    "river",
    "gauge",
    "tide",
    "storm",
    "reef",
    "coral",
    "survey",
    "annex",
    "methods",
    "dataset",
    "ocean",
    "salinity",
    "kelp",
    "forest",
    "bleaching",
    "threshold",
    "current",
    "wind",
    "pressure",
    "rainfall",
    "drought",
    "soil",
    "wheat",
    "barley",
    "invoice",
    "ledger",
    "payment",
    "audit",
    "quarter",
    "revenue",
    "margin",
    "budget",
    "contract",
    "supplier",
    "freight",
]
WORD_LIST = sorted(NOTE_WORDS + OTHER_WORDS)
CLOCK = FakeClock()


def _embed_note(data: Path, sealed: bool) -> str:
    locations = Locations(data, sealed=sealed)
    host = open_host(locations, clock=CLOCK)
    try:
        host.register_document("you", "chart")
        notebook, _ = host.open_notebook("you", "chart", "run-1")
        written = host.call_tool(
            host.agent_token(notebook.id),
            "remember",
            {
                "based_on": 0,
                "request_id": "r-1",
                "changes": [
                    {"op": "add", "record": {"name": "finding:f1", "text": " ".join(NOTE_WORDS)}}
                ],
            },
        )
        assert written["status"] == "applied", written
    finally:
        close_host(host)
    memory, knowledge = open_memory_store(locations), open_knowledge_store(locations)
    vectors = SqliteVectorStore(data / "memory.db")
    try:
        recall = Recall(memory, vectors, HashingEmbedder(), knowledge, clock=CLOCK)
        recall.catch_up_all()
    finally:
        vectors.close()
        knowledge.close()
        memory.close()
    return notebook.id


def _stored_vectors(database: Path) -> list[bytes]:
    conn = sqlite3.connect(database)
    try:
        return [bytes(row[0]) for row in conn.execute("SELECT vector FROM note_vectors")]
    finally:
        conn.close()


def _words_recovered(stored: bytes) -> int:
    """How many of the note's words the word-list attack names from one stored vector: the
    words of the list whose embedding is closest to it, as many as the note has."""
    embedder = HashingEmbedder()
    if len(stored) != 4 * embedder.dimensions:
        return 0  # not a float32 vector of this model: there is nothing to compare with
    vector = np.frombuffer(stored, dtype="<f4")
    scores = embedder.embed(WORD_LIST) @ vector
    best = [WORD_LIST[i] for i in np.argsort(-scores)[: len(NOTE_WORDS)]]
    return len(set(best) & set(NOTE_WORDS))


def test_the_word_list_attack_works_on_plain_vectors(tmp_path: Path) -> None:
    """The premise, on the opt-out: plain vectors give the note's words away."""
    with pytest.warns(UnsealedWarning):
        _embed_note(tmp_path / "plain", sealed=False)
    [stored] = _stored_vectors(tmp_path / "plain" / "memory.db")
    assert _words_recovered(stored) >= 7


def test_a_backup_holds_only_sealed_vectors_and_none_opens_after_forget(tmp_path: Path) -> None:
    data = tmp_path / "data"
    notebook_id = _embed_note(data, sealed=True)
    backup = tmp_path / "backup"
    shutil.copytree(data, backup)  # the database and its WAL, as an operator copies them
    stored = _stored_vectors(backup / "memory.db")
    assert stored and all(vector.startswith(SEALED_VECTOR) for vector in stored)
    assert sum(_words_recovered(vector) for vector in stored) == 0
    host = open_host(Locations(data), clock=CLOCK)
    try:
        host.forget("you", notebook_id)
    finally:
        close_host(host)
    # Everything left on the machine: the master key and the key store.
    memory = open_memory_store(Locations(data))
    try:
        keyring: Any = memory.keyring  # type: ignore[attr-defined]
        with pytest.raises(Purged):
            keyring.cipher(notebook_id)
        for vector in stored:
            for other in keyring.store.wrapped():
                cipher = keyring.cipher(other[0])
                with pytest.raises(IntegrityError):
                    cipher.open_vector(vector, HashingEmbedder().model_id, "any")
    finally:
        memory.close()
    assert _stored_vectors(data / "memory.db") == []  # forget took the live copy


def test_plain_vectors_of_a_sealed_database_are_dropped_once_and_embedded_again_sealed(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    notebook_id = _embed_note(data, sealed=True)
    conn = sqlite3.connect(data / "memory.db")
    plain = HashingEmbedder().embed([" ".join(NOTE_WORDS)])[0].astype("<f4").tobytes()
    conn.execute("UPDATE note_vectors SET vector = ?", (plain,))  # as an earlier release kept it
    conn.commit()
    conn.close()
    locations = Locations(data)
    memory, knowledge = open_memory_store(locations), open_knowledge_store(locations)
    keyring: Any = memory.keyring  # type: ignore[attr-defined]
    # A key store from before vectors were sealed: it has no record of dropping plain ones.
    keyring.store._conn.execute("DELETE FROM markers WHERE name = 'note_vectors_sealed'")
    vectors = SqliteVectorStore(data / "memory.db")
    try:
        recall = Recall(memory, vectors, HashingEmbedder(), knowledge, clock=CLOCK)
        assert _stored_vectors(data / "memory.db") == []  # the plain vector is gone
        recall.catch_up_all()
        found = recall.recall(notebook_id, "malignant tumour biopsy", limit=3)
        assert [row["name"] for row in found["rows"]] == ["finding:f1"]
    finally:
        vectors.close()
        knowledge.close()
        memory.close()
    stored = _stored_vectors(data / "memory.db")
    assert stored and all(vector.startswith(SEALED_VECTOR) for vector in stored)
    assert plain not in (data / "memory.db").read_bytes()
