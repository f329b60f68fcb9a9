"""Rows as both backends store them, and the values they become: one column list and one
mapping each way per table, shared, so the embedded and PostgreSQL backends cannot drift apart.
A backend writes ``insert(table, COLUMNS, mark)`` with its placeholder and ``*_values(...)``."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from oh.core.answers import Answer, decode_rows, encode_rows
from oh.core.canonical import canonical_text
from oh.core.notebook import Notebook, NotebookState
from oh.core.reviewed import Decision, Proposal, ReviewedRecord, Revision, Source
from oh.keys.macs import RowKind, column_names
from oh.storage.base import PackInstall

__all__ = [
    "ANSWER_COLUMNS",
    "KINDS",
    "NOTEBOOK_COLUMNS",
    "PACK",
    "PACK_COLUMNS",
    "PROPOSAL",
    "PROPOSAL_COLUMNS",
    "REVIEWED",
    "REVIEWED_COLUMNS",
    "REVISION",
    "REVISION_COLUMNS",
    "answer_from_row",
    "answer_values",
    "insert",
    "notebook_from_row",
    "pack_values",
    "proposal_from_row",
    "proposal_values",
    "reviewed_from_row",
    "reviewed_values",
    "revision_values",
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
REVISION_COLUMNS = (
    "owner, revision, what, proposal_id, name, digest, made_by, made_at, prev_hash, hash"
)
PACK_COLUMNS = "owner, name, version, digest, content, revision, installed_by, installed_at"
ANSWER_COLUMNS = (
    "notebook_id, answer_id, caller, question, params, version, revision, created_at,"
    " expires_at, rows"
)


def insert(table: str, columns: str, mark: str) -> str:
    """``INSERT INTO table (columns) VALUES (mark, ...)``, one ``mark`` per column."""
    return f"INSERT INTO {table} ({columns}) VALUES ({', '.join([mark] * len(columns.split(',')))})"


def notebook_from_row(row: Sequence[Any], head_hash: str | None = None) -> Notebook:
    """A ``NOTEBOOK_COLUMNS`` row as a notebook; ``head_hash`` in place of the row's (a sealed
    store's row keeps it as a token)."""
    state: NotebookState = row[4]
    return Notebook(
        row[0],
        row[1],
        row[2],
        row[3],
        state,
        row[5],
        row[6],
        row[7],
        row[8],
        row[9] if head_hash is None else head_hash,
        row[10],
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


def proposal_values(proposal: Proposal, *, pending: bool = False) -> tuple[Any, ...]:
    """``proposal`` in ``PROPOSAL_COLUMNS`` order; ``pending`` writes it undecided, as added."""
    note = proposal.note or {}
    decision = None if pending or proposal.decision is None else proposal.decision.to_json()
    return (
        proposal.id,
        proposal.owner,
        proposal.proposed_by,
        proposal.proposed_at,
        proposal.name,
        proposal.content,
        proposal.digest,
        canonical_text(proposal.source.to_json()),
        "pending" if pending else proposal.state,
        note.get("notebook"),
        note.get("name"),
        note.get("author"),
        note.get("version"),
        None if decision is None else canonical_text(decision),
        None if pending else proposal.revision,
    )


def revision_values(entry: Revision) -> tuple[Any, ...]:
    return (
        entry.owner,
        entry.revision,
        entry.what,
        entry.proposal_id,
        entry.name,
        entry.digest,
        entry.made_by,
        entry.made_at,
        entry.prev_hash,
        entry.hash,
    )


def reviewed_values(owner: str, record: ReviewedRecord) -> tuple[Any, ...]:
    """``owner`` and ``record`` in the order of ``owner, REVIEWED_COLUMNS``."""
    return (
        owner,
        record.name,
        record.kind,
        record.content,
        record.digest,
        record.author,
        record.written_at,
        record.revision,
        canonical_text(record.source.to_json()),
        canonical_text(record.decision.to_json()),
        record.proposal_id,
        record.supersedes,
    )


def pack_values(install: PackInstall) -> tuple[Any, ...]:
    return (
        install.owner,
        install.name,
        install.version,
        install.digest,
        install.content,
        install.revision,
        install.installed_by,
        install.installed_at,
    )


def answer_values(answer: Answer) -> tuple[Any, ...]:
    return (
        answer.notebook_id,
        answer.answer_id,
        answer.caller,
        answer.question,
        json.dumps(answer.params, sort_keys=True),
        answer.version,
        answer.revision,
        answer.created_at,
        answer.expires_at,
        encode_rows(answer.rows),
    )


def answer_from_row(row: Sequence[Any], offset: int = 0, limit: int | None = None) -> Answer:
    """The ``Answer`` an ``ANSWER_COLUMNS`` row holds, with rows ``offset`` … ``offset + limit
    - 1`` of it (all when ``limit`` is None) and the count of all."""
    notebook_id, answer_id, caller, question, params, version, revision, created, expires, rows = (
        row
    )
    return Answer(
        answer_id=answer_id,
        notebook_id=notebook_id,
        caller=caller,
        question=question,
        params=json.loads(params),
        version=version,
        revision=revision,
        created_at=created,
        expires_at=expires,
        rows=decode_rows(rows, offset, limit),
        total=rows.count("\n") + 1 if rows else 0,
        offset=offset,
    )


# -- the MACed kinds of knowledge row (``oh.keys.macs``) -----------------------------------------

REVIEWED = RowKind(
    "reviewed",
    b"oh reviewed record v1",
    ("owner", *column_names(REVIEWED_COLUMNS)),
    ("owner", "name", "revision"),
)
PROPOSAL = RowKind("proposals", b"oh proposal v1", column_names(PROPOSAL_COLUMNS), ("id",))
REVISION = RowKind(
    "revisions", b"oh revision v1", column_names(REVISION_COLUMNS), ("owner", "revision")
)
PACK = RowKind("packs", b"oh pack install v1", column_names(PACK_COLUMNS), ("owner", "revision"))
KINDS = (REVISION, REVIEWED, PROPOSAL, PACK)
