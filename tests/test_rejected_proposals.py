"""Proposals of a forgotten notebook: one rule, in the code as docs/design.md states it.

A pending proposal is the owner's to keep until decided: forgetting (and purging) its notebook
leaves it on the review page. A rejected one keeps its decision, not its text: rejecting empties
the proposed content and digest, so from then on no copy of the knowledge database holds what
was proposed, and no guess of it can be confirmed against a digest. An accepted one becomes
reviewed knowledge, which is what review is for. A proposal rejected by an earlier release is
emptied once, when a store opens the database.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from oh.config import Locations, close_host, open_host
from oh.core.reviewed import DISCARDED
from oh.storage.migrations import libsql_knowledge as knowledge_migrations
from oh.storage.rows import PROPOSAL, PROPOSAL_COLUMNS
from oh.testing.lifecycle import FakeClock
from oh.verify import verify_knowledge

SECRET = "zrejected patient seven tested positive"
SOURCE = {"document": "chart.pdf", "passage": "the chart says so", "locator": "p. 2"}


def _proposed(host: Any, run: str, text: str) -> tuple[str, str]:
    host.register_document("you", "chart.pdf")
    notebook, _ = host.open_notebook("you", "chart.pdf", run)
    written = host.call_tool(
        host.agent_token(notebook.id),
        "remember",
        {
            "based_on": 0,
            "request_id": "r-1",
            "changes": [{"op": "add", "record": {"name": "finding:status", "text": text}}],
        },
    )
    assert written["status"] == "applied", written
    answer = host.propose(
        "you", {"notebook": notebook.id, "name": "finding:status", "source": SOURCE}
    )
    return notebook.id, answer["proposal_id"]


def _files_hold(directory: Path, text: str) -> list[str]:
    needle = text.encode()
    return [p.name for p in directory.iterdir() if p.is_file() and needle in p.read_bytes()]


def test_rejecting_keeps_the_decision_and_no_copy_of_the_text(tmp_path: Path) -> None:
    data, clock = tmp_path / "data", FakeClock()
    host = open_host(Locations(data), clock=clock)
    try:
        notebook_id, proposal_id = _proposed(host, "run-1", SECRET)
        host.forget("you", notebook_id)
        # Pending: the owner's to keep until decided, notebook forgotten or not.
        kept = host.proposal("you", proposal_id)
        assert kept.state == "pending" and SECRET in kept.content
        digest = kept.digest
        host.decide("you", proposal_id, {"decision": "reject", "reason": "not supported"})
        rejected = host.proposal("you", proposal_id)
        assert rejected.state == "rejected" and rejected.discarded
        assert (rejected.content, rejected.digest) == (DISCARDED, DISCARDED)
        assert rejected.decision is not None and rejected.decision.reason == "not supported"
        report = verify_knowledge(host._review.store)
        assert report.ok, report.to_json()
    finally:
        close_host(host)
    assert _files_hold(data, SECRET) == []
    assert _files_hold(data, digest) == []  # a guess of the text has nothing to match


def test_a_proposal_rejected_by_an_earlier_release_is_emptied_once(tmp_path: Path) -> None:
    data, clock = tmp_path / "data", FakeClock()
    host = open_host(Locations(data), clock=clock)
    try:
        _, proposal_id = _proposed(host, "run-1", SECRET)
        original = host.proposal("you", proposal_id)
        host.decide("you", proposal_id, {"decision": "reject", "reason": "no"})
        macs = host._review.store.macs
        assert macs is not None
    finally:
        close_host(host)
    # As an earlier release left it: rejected, text kept, MAC over the text.
    conn = sqlite3.connect(data / "knowledge.db")
    row = list(
        conn.execute(
            f"SELECT {PROPOSAL_COLUMNS} FROM proposals WHERE id = ?", (proposal_id,)
        ).fetchone()
    )
    row[PROPOSAL.columns.index("content")] = original.content
    row[PROPOSAL.columns.index("digest")] = original.digest
    conn.execute("DROP TRIGGER proposals_decided_once")
    conn.execute(
        "UPDATE proposals SET content = ?, digest = ?, mac = ? WHERE id = ?",
        (original.content, original.digest, macs.mac(PROPOSAL, row), proposal_id),
    )
    trigger = (
        Path(knowledge_migrations.__file__).parent / "0006_rejected_keep_no_text.sql"
    ).read_text()
    conn.executescript(trigger.split("DROP TRIGGER proposals_decided_once;", 1)[1])
    conn.commit()
    conn.close()
    assert _files_hold(data, SECRET) != []
    host = open_host(Locations(data), clock=clock)
    try:
        assert host.proposal("you", proposal_id).discarded
        assert verify_knowledge(host._review.store).ok
    finally:
        close_host(host)
    assert _files_hold(data, SECRET) == []


@pytest.mark.parametrize("field", ["name", "source", "decision"])
def test_a_decided_proposal_takes_no_other_change(tmp_path: Path, field: str) -> None:
    data, clock = tmp_path / "data", FakeClock()
    host = open_host(Locations(data), clock=clock)
    try:
        _, proposal_id = _proposed(host, "run-1", SECRET)
        host.decide("you", proposal_id, {"decision": "reject", "reason": "no"})
    finally:
        close_host(host)
    conn = sqlite3.connect(data / "knowledge.db")
    with pytest.raises(sqlite3.DatabaseError, match="already decided"):
        conn.execute(f"UPDATE proposals SET {field} = 'x' WHERE id = ?", (proposal_id,))
    conn.close()
