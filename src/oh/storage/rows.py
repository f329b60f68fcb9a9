"""Rows as both backends store them, and the values they become: one column list and one
mapping per table, shared, so the embedded and PostgreSQL backends cannot drift apart."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from oh.core.notebook import Notebook, NotebookState
from oh.core.reviewed import Decision, Proposal, ReviewedRecord, Source

__all__ = [
    "NOTEBOOK_COLUMNS",
    "PROPOSAL_COLUMNS",
    "REVIEWED_COLUMNS",
    "notebook_from_row",
    "proposal_from_row",
    "reviewed_from_row",
]

NOTEBOOK_COLUMNS = (
    "id, owner, document, run, state, started_at, forgets_at, version, pinned_revision,"
    " head_hash, purged_at"
)
REVIEWED_COLUMNS = (
    "name, kind, content, digest, author, written_at, revision, source, decision, proposal_id,"
    " supersedes"
)
PROPOSAL_COLUMNS = (
    "id, owner, proposed_by, proposed_at, name, content, digest, source, state, notebook_id,"
    " note_name, note_author, note_version, decision, revision"
)


def notebook_from_row(row: Sequence[Any]) -> Notebook:
    state: NotebookState = row[4]
    return Notebook(
        id=row[0],
        owner=row[1],
        document=row[2],
        run=row[3],
        state=state,
        started_at=row[5],
        forgets_at=row[6],
        version=row[7],
        pinned_revision=row[8],
        head_hash=row[9],
        purged_at=row[10],
    )


def reviewed_from_row(row: Sequence[Any]) -> ReviewedRecord:
    return ReviewedRecord(
        name=row[0],
        kind=row[1],
        content=row[2],
        digest=row[3],
        author=row[4],
        written_at=row[5],
        revision=row[6],
        source=Source(**json.loads(row[7])),
        decision=Decision.from_json(json.loads(row[8])),
        proposal_id=row[9],
        supersedes=row[10],
    )


def proposal_from_row(row: Sequence[Any]) -> Proposal:
    note = None
    if row[9] is not None:
        note = {"notebook": row[9], "name": row[10], "author": row[11], "version": row[12]}
    return Proposal(
        id=row[0],
        owner=row[1],
        proposed_by=row[2],
        proposed_at=row[3],
        name=row[4],
        content=row[5],
        digest=row[6],
        source=Source(**json.loads(row[7])),
        state=row[8],
        note=note,
        decision=None if row[13] is None else Decision.from_json(json.loads(row[13])),
        revision=row[14],
    )
