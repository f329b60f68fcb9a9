"""`verify` over the knowledge database: revision chains and reviewed digests."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from oh.services.knowledge import Knowledge
from oh.storage.sqlite.knowledge import SqliteKnowledgeStore
from oh.storage.sqlite.notebooks import SqliteMemoryStore
from oh.testing.knowledge import SOURCE
from oh.testing.lifecycle import FakeClock
from oh.verify import verify_knowledge


@pytest.fixture
def knowledge_path(tmp_path: Path) -> Path:
    memory = SqliteMemoryStore(tmp_path / "memory.db")
    store = SqliteKnowledgeStore(tmp_path / "knowledge.db")
    knowledge = Knowledge(store, memory, clock=FakeClock())
    for text in ("ten years", "twelve years"):
        proposal = knowledge.propose(
            "ann", source=SOURCE, record={"name": "finding:a", "text": text}
        )
        knowledge.decide("ann", proposal.id, decision="accept", reason="ok")
    store.close()
    memory.close()
    return tmp_path / "knowledge.db"


def _tamper(path: Path, *statements: str) -> None:
    conn = sqlite3.connect(str(path), isolation_level=None)
    for statement in statements:
        conn.execute(statement)
    conn.close()


def _problems(path: Path) -> set[str]:
    store = SqliteKnowledgeStore(path)
    try:
        report = verify_knowledge(store)
    finally:
        store.close()
    assert report.entries == 2
    return {p.what for p in report.problems}


def test_an_untouched_knowledge_base_verifies(knowledge_path: Path) -> None:
    assert _problems(knowledge_path) == set()


def test_altered_reviewed_content_is_detected(knowledge_path: Path) -> None:
    _tamper(
        knowledge_path,
        "DROP TRIGGER reviewed_is_append_only_update",
        "UPDATE reviewed SET content = replace(content, 'ten', 'two')",
    )
    assert "digest" in _problems(knowledge_path)


def test_a_substituted_reviewed_version_is_detected(knowledge_path: Path) -> None:
    _tamper(
        knowledge_path,
        "DROP TRIGGER reviewed_is_append_only_update",
        "UPDATE reviewed SET content = (SELECT content FROM reviewed WHERE revision = 2),"
        " digest = (SELECT digest FROM reviewed WHERE revision = 2) WHERE revision = 1",
    )
    assert "drift" in _problems(knowledge_path)


def test_an_altered_revision_entry_is_detected(knowledge_path: Path) -> None:
    _tamper(
        knowledge_path,
        "DROP TRIGGER revisions_are_append_only_update",
        "UPDATE revisions SET made_by = 'mallory' WHERE revision = 1",
    )
    assert "chain" in _problems(knowledge_path)
