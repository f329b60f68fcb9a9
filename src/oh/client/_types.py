"""What the server answers, as typed dictionaries: each one is the JSON of one route exactly as
``oh serve`` sends it (docs/http.md, docs/tools.md), with no field added or renamed.

A key marked ``NotRequired`` is one the server sends only in some answers (a note's ``version``,
a reviewed record's ``revision``); every other key is always there.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypeAlias, TypedDict

__all__ = [
    "Bootstrap",
    "BootstrapRow",
    "CitedSource",
    "DecisionMade",
    "DecisionStamp",
    "Document",
    "Explanation",
    "Forgotten",
    "ForgottenNote",
    "FullRecord",
    "Health",
    "KnowledgeAt",
    "ListedNotebook",
    "MemoryCard",
    "NotebookObject",
    "NotebookPage",
    "NotebookState",
    "Opened",
    "ProposalMade",
    "QueryAnswer",
    "QueryRow",
    "Recalled",
    "RecalledRow",
    "Records",
    "RememberApplied",
    "RememberRefused",
    "Remembered",
    "RemovedDocument",
    "WrittenName",
]

NotebookState: TypeAlias = Literal["opening", "open", "expired", "purged", "empty"]
Origin: TypeAlias = Literal["note", "reviewed"]


class Document(TypedDict):
    """``PUT /v1/documents/{document}``: the document, registered to ``owner``."""

    document: str
    owner: str


class RemovedDocument(TypedDict):
    """``DELETE /v1/documents/{document}``: how many notebooks on it were forgotten."""

    document: str
    forgotten_notebooks: int


class NotebookObject(TypedDict):
    """``GET /v1/notebooks/{id}``: the notebook object, its state as it stands now."""

    id: str
    state: NotebookState
    started_at: str
    forgets_at: str
    version: int
    pinned_revision: int | None


class ListedNotebook(NotebookObject):
    """One notebook of a listing: the notebook object with its document and run."""

    document: str
    run: str


class NotebookPage(TypedDict):
    """``GET /v1/notebooks``: one page, newest first; ``next_cursor`` is None on the last."""

    notebooks: list[ListedNotebook]
    next_cursor: str | None


class BootstrapRow(TypedDict):
    origin: Origin
    kind: str
    name: str
    digest: str


class Bootstrap(TypedDict):
    """What the agent sees when its tools load: the first rows of ``current_notes``."""

    rows: list[BootstrapRow]
    total: int
    truncated: bool
    version: int
    revision: int | None


class Opened(TypedDict):
    """``POST /v1/documents/{document}/notebooks``: the run's notebook and what its agent needs."""

    notebook: NotebookObject
    agent_token: str
    mcp_url: str
    bootstrap: Bootstrap


class Forgotten(TypedDict):
    """``DELETE /v1/notebooks/{id}``: when it was forgotten and how many rows of each kind went."""

    notebook: str
    purged_at: str
    removed: dict[str, int]


class ForgottenNote(TypedDict):
    """``DELETE /v1/notebooks/{id}/records/{name}``: the version the removal wrote."""

    notebook: str
    version: int
    removed: str


class CitedSource(TypedDict):
    document: str
    passage: str
    locator: str | dict[str, Any]


class DecisionStamp(TypedDict):
    decision: Literal["accept", "accept_with_edits"]
    by: str
    at: str
    reason: str


class FullRecord(TypedDict):
    """A record as ``read`` answers it (and as the records and knowledge routes list it): the
    seven digested keys, its origin, digest and stamps; ``version`` for a note; ``revision``,
    ``source`` and ``decision`` for a reviewed record; ``changed`` when ``read`` was given a
    digest; ``also_reviewed`` when a note shadows a reviewed record of the same name."""

    origin: Origin
    kind: str
    name: str
    digest: str
    text: str
    fields: dict[str, Any]
    depends_on: list[str]
    supports: list[str]
    contradicts: list[str]
    author: str
    written_at: str
    version: NotRequired[int]
    revision: NotRequired[int]
    source: NotRequired[CitedSource]
    decision: NotRequired[DecisionStamp]
    changed: NotRequired[bool]
    also_reviewed: NotRequired[Literal[True]]


class Records(TypedDict):
    """``GET /v1/notebooks/{id}/records``: the notes and the reviewed records in view."""

    notes: list[FullRecord]
    reviewed: list[FullRecord]


class MemoryCard(TypedDict):
    """One ``memory-card`` event of ``GET /v1/notebooks/{id}/events``."""

    kind: Literal["remembered", "recalled"]
    notebook: str
    names: list[str]
    panel_url: str
    anchors: dict[str, str]


class WrittenName(TypedDict):
    name: str
    digest: str | None  # None for a removal


class RememberApplied(TypedDict):
    status: Literal["applied"]
    version: int
    written: list[WrittenName]


class RememberRefused(TypedDict):
    """A stale ``based_on``: nothing was written; read again from ``current_version``."""

    status: Literal["refused"]
    reason: Literal["stale"]
    current_version: int


Remembered: TypeAlias = RememberApplied | RememberRefused


class QueryRow(TypedDict):
    row: int
    origin: Origin
    kind: str
    name: str
    digest: str | None
    conflicts_with: NotRequired[list[str]]
    removed: NotRequired[Literal[True]]


class QueryAnswer(TypedDict):
    answer_id: str
    question: str
    version: int
    revision: int | None
    token: str
    token_expires_at: str
    rows: list[QueryRow]
    next_cursor: str | None


class Explanation(TypedDict):
    row: int
    name: str
    origin: Origin
    question: str
    reason: str
    path: list[str]
    version: int
    revision: int | None


class RecalledRow(TypedDict):
    name: str
    digest: str
    origin: Origin
    score: float


class Recalled(TypedDict):
    rows: list[RecalledRow]
    shadow: bool
    pending: NotRequired[int]


class KnowledgeAt(TypedDict):
    """``GET /v1/knowledge``: the reviewed records at ``revision``, and the latest revision."""

    revision: int
    latest: int
    records: list[FullRecord]


class ProposalMade(TypedDict):
    """``POST /v1/knowledge/proposals``: ``created`` is False when the same proposal was
    pending already."""

    proposal_id: str
    created: bool


class DecisionMade(TypedDict):
    """``POST /v1/knowledge/proposals/{id}/decision``: an accepted proposal names the revision
    it made and the record's name and digest; a rejected one only its state."""

    proposal_id: str
    state: Literal["accepted", "rejected"]
    revision: NotRequired[int]
    name: NotRequired[str]
    digest: NotRequired[str]


class PurgeHealth(TypedDict):
    every: float  # seconds between two passes
    last_pass: dict[str, Any] | None  # the worker's last pass line; None before the first


class Health(TypedDict):
    status: str
    version: str
    purge: NotRequired[PurgeHealth]  # when oh serve runs the purge worker beside it
