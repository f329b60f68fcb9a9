"""The narrow storage protocol every memory backend implements.

A backend does I/O and enforces invariants with its database (one writer per notebook version,
unique request ids); what a write *means* comes from ``oh.core``. Convenience (verify, rebuild,
lifecycle) lives above this protocol, never in a backend.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, NamedTuple, Protocol

from oh.core.answers import Answer
from oh.core.changes import Change, LogEntry, RememberResult
from oh.core.decision import Call
from oh.core.notebook import Notebook
from oh.core.records import Record, StoredRecord
from oh.core.reviewed import Decision, Proposal, ReviewedRecord, Revision

__all__ = [
    "OPENING_GRACE_FLOOR",
    "PURGE_CLOCK_ALLOWANCE",
    "HostRegistry",
    "KnowledgeSource",
    "KnowledgeStore",
    "MemoryStore",
    "PackInstall",
    "PurgeAccess",
    "RecordCheck",
    "RegisteredDocument",
    "VectorRow",
]


class RecordCheck(NamedTuple):
    """A current record as ``verify`` compares it with the log: its stamps without its content,
    and whether that content is exactly what its log entry wrote (``as_logged``: the entry at
    ``version`` holds a change that added or replaced ``name`` with this very text). The
    database compares the two texts, so a check neither moves nor hashes the content."""

    name: str
    kind: str
    digest: str
    author: str
    written_at: str
    version: int
    as_logged: bool


class VectorRow(NamedTuple):
    """A stored recall vector as ``verify`` checks it, values exactly as stored (a damaged row
    may hold anything): ``scope`` is the notebook id of a note vector or the owner of a
    reviewed one; ``seal`` binds the rest (``oh.core.seals.vector_seal``) with the digest as
    stored, ``kept``. In a sealed database that is the digest's token and ``digest`` is the
    digest it opens to (the one the notebook's log holds); elsewhere the two are the same."""

    scope: Any
    model_id: Any
    digest: Any
    vector: Any
    seal: Any
    kept: Any = None

    @property
    def sealed_digest(self) -> Any:
        """The digest the seal binds: as stored."""
        return self.digest if self.kept is None else self.kept


class MemoryStore(Protocol):
    """The memory database: notebooks, their hash-chained logs and derived current records."""

    def create_notebook(
        self,
        notebook_id: str,
        *,
        owner: str,
        document: str,
        run: str,
        started_at: datetime,
        forgets_at: datetime,
        pinned_revision: int | None = None,
    ) -> Notebook:
        """Insert a notebook in state ``opening``. ``already_exists`` if id or run is taken."""
        ...

    def mark_open(self, notebook_id: str, pinned_revision: int | None) -> Notebook:
        """Finish opening: ``opening`` → ``open`` with the pin recorded."""
        ...

    def notebook(self, notebook_id: str) -> Notebook:
        """The notebook row (tombstones included); ``not_found`` if it never existed."""
        ...

    def find_notebook(self, owner: str, document: str, run: str) -> Notebook | None: ...

    def notebook_ids(self) -> list[str]: ...

    def owner_notebooks(
        self,
        owner: str,
        *,
        now: str,
        document: str | None = None,
        state: str | None = None,
        after: tuple[str, str] | None = None,
        limit: int,
    ) -> list[Notebook]:
        """``owner``'s notebooks, newest first (``started_at``, then ``id``, descending), at
        most ``limit``: only those on ``document`` and in ``state`` as a caller sees it at the
        UTC stamp ``now`` (``open``, ``expired``, ``opening``, ``purged`` or ``empty``) when
        given, and only those after the ``(started_at, id)`` of the previous page's last."""
        ...

    def notebook_activity(
        self, owner: str, notebook_ids: Sequence[str]
    ) -> dict[str, tuple[int, str | None]]:
        """For each of ``notebook_ids`` that is ``owner``'s: how many current records it holds,
        and the UTC stamp of its last logged change (None before its first); read without any
        key."""
        ...

    def remember(
        self,
        notebook_id: str,
        *,
        based_on: int,
        request_id: str,
        changes: tuple[Change, ...],
        author: str,
        now: datetime,
    ) -> RememberResult:
        """Apply a validated write atomically under docs/design.md (version check, idempotency)."""
        ...

    def remember_all(self, calls: Sequence[Call]) -> list[RememberResult | Exception]:
        """Several prepared ``remember`` calls (``Call.prepare``) at once, each decided on its own
        exactly as alone, in order (two on one notebook as one after the other): its result, or
        the error it raised, which touches no other. A backend may write them in one transaction
        and one flush (the embedded backend does); none is acknowledged before it is durable."""
        ...

    def forget(self, notebook_id: str, now: datetime) -> dict[str, int]:
        """Delete the notebook's content at once and leave a tombstone (state ``purged``);
        return the rows removed per table. ``purged`` if it was already gone."""
        ...

    def compact(self) -> bool:
        """Make deleted content leave the database files (checkpoint, vacuum)."""
        ...

    def records(self, notebook_id: str) -> list[StoredRecord]:
        """The current records, ordered by name."""
        ...

    def record(self, notebook_id: str, name: str) -> StoredRecord | None: ...

    def record_checks(self, notebook_id: str, *, page: int = 2000) -> Iterator[RecordCheck]:
        """A ``RecordCheck`` for each current record, read ``page`` records at a time (each page
        one snapshot), so memory stays flat however many there are. In the order the store
        keeps them: by name, or in a sealed store by their names' tokens."""
        ...

    def log(self, notebook_id: str) -> Iterator[LogEntry]:
        """The log entries in version order."""
        ...

    # -- what verify checks beyond the log and the current records ----------------------

    def notebook_seal(self, notebook_id: str) -> str | None:
        """The seal stored with the notebook's metadata (``oh.core.seals``); None if none is."""
        ...

    def data_key_destroyed(self, notebook_id: str) -> bool:
        """Whether the notebook's content can never be opened because its data key is gone:
        it was forgotten after this copy of the database was taken (a restored backup). False
        on a store that seals nothing."""
        ...

    def kept_answers(self, notebook_id: str) -> list[tuple[Any, ...]]:
        """Every kept answer of the notebook, expired or not, as stored: ``ANSWER_COLUMNS``
        order (``oh.storage.rows``), values raw."""
        ...

    def note_vector_rows(self, notebook_id: str) -> Iterator[VectorRow]:
        """The notebook's recall vectors, a page at a time; nothing on a backend that keeps
        no vectors."""
        ...

    def reviewed_vector_rows(self) -> Iterator[VectorRow]:
        """Every owner's reviewed-record vectors, a page at a time (nothing without them)."""
        ...

    def save_answer(self, answer: Answer, now: datetime) -> None:
        """Keep an answer for paging and explain, unless one with its id is kept already
        (ids are content-addressed), dropping this notebook's expired answers. Answers are
        ephemeral: the write need not survive power loss."""
        ...

    def answer(
        self, notebook_id: str, answer_id: str, offset: int = 0, limit: int | None = None
    ) -> Answer | None:
        """A kept answer with rows ``offset`` … ``offset + limit - 1`` (all when ``limit`` is
        None), or None if it expired or never existed."""
        ...

    def read_record(self, notebook_id: str, name: str) -> tuple[Notebook, StoredRecord | None]:
        """The notebook and one of its current records, read together (the hot read path)."""
        ...

    def changes_after(
        self, notebook_id: str, version: int
    ) -> tuple[int, list[tuple[str, str | None, str | None]]]:
        """The memory version now and, in log order, ``(name, digest, content)`` of every
        change after ``version`` (digest and content None for a remove), in one snapshot."""
        ...

    def digests(self, notebook_id: str) -> tuple[int, list[tuple[str, str]]]:
        """The memory version and ``(name, digest)`` of every current record at it, ordered
        by name (no content), read in one snapshot."""
        ...

    def replace_records(self, notebook_id: str, records: Iterable[StoredRecord]) -> None:
        """Swap the derived current table for ``records`` (used by rebuild)."""
        ...

    def close(self) -> None: ...

    # -- export and import (docs/cli.md) ------------------------------------------------------

    def import_notebook(self, notebook: Notebook, entries: Iterable[LogEntry]) -> Notebook:
        """Recreate an exported notebook exactly: its row as exported, its log entries as
        they were (request ids, authors, times, hashes) and the current records folded from
        them, in one transaction. ``already_exists`` if its id or run is taken. The caller has
        checked the chain (``oh.transfer``); ``entries`` may be a stream."""
        ...


# What the purge credential may claim is "now", bounded by the database itself: at most the
# database's own clock plus this allowance (for a worker whose clock runs a little ahead). A
# forged "now" can so purge a notebook at most this much before its forget time. The PostgreSQL
# migration 0005 writes the same figure.
PURGE_CLOCK_ALLOWANCE = timedelta(minutes=1)
# The database lets the purge credential mark ``empty`` only a notebook that has been opening at
# least this long before the (bounded) stamp it records, whatever cutoff it passes: a shorter
# grace would let it end openings still in progress.
OPENING_GRACE_FLOOR = timedelta(minutes=10)


class PreparedRemember:
    """``MemoryStore.remember`` for every backend: everything that needs no database (the
    fingerprint, the logged changes, the stamp) is prepared before any lock is taken, and the
    prepared ``Call`` goes to the backend's ``_remember``, which reads what ``decide`` needs and
    writes what it decides in one transaction."""

    def remember(
        self,
        notebook_id: str,
        *,
        based_on: int,
        request_id: str,
        changes: tuple[Change, ...],
        author: str,
        now: datetime,
    ) -> RememberResult:
        call = Call.prepare(
            notebook_id,
            based_on=based_on,
            request_id=request_id,
            changes=changes,
            author=author,
            now=now,
        )
        return self._remember(call)

    def remember_all(self, calls: Sequence[Call]) -> list[RememberResult | Exception]:
        """The prepared calls one after the other; a backend that can share a flush does."""
        outcomes: list[RememberResult | Exception] = []
        for call in calls:
            try:
                outcomes.append(self._remember(call))
            except Exception as exc:
                outcomes.append(exc)
        return outcomes

    def _remember(self, call: Call) -> RememberResult:
        raise NotImplementedError("a backend runs the prepared call")


class PurgeAccess(Protocol):
    """The purge worker's credential: exactly what docs/design.md lets the worker do, nothing else.

    It cannot create, open, reopen or write to a notebook, and cannot read note content; the
    backend enforces that with the database's own permissions, not only with this interface.
    """

    def expired(self, now: datetime, limit: int = 1000) -> list[str]:
        """Ids of notebooks past their forget time and not yet purged."""
        ...

    def stale_openings(self, cutoff: datetime, limit: int = 1000) -> list[str]:
        """Ids of notebooks still ``opening`` that started before ``cutoff``."""
        ...

    def purge(self, notebook_ids: Iterable[str], now: datetime) -> dict[str, dict[str, int]]:
        """Delete each notebook still past its forget time (re-checked atomically), leaving the
        tombstone; return the rows removed per table for each purged notebook."""
        ...

    def mark_empty(self, notebook_ids: Iterable[str], cutoff: datetime, now: datetime) -> list[str]:
        """Mark ``empty`` each notebook still ``opening`` since before ``cutoff``."""
        ...

    def compact(self) -> bool: ...

    def close(self) -> None: ...


class KnowledgeSource(Protocol):
    """Reviewed knowledge as a notebook reads it: "records at revision R" and "latest revision".

    A host that keeps reviewed knowledge elsewhere implements just this; Oh's own knowledge base
    is the default implementation. Revisions are per owner and start at 0 (empty).
    """

    def latest_revision(self, owner: str) -> int: ...

    def records_at(self, owner: str, revision: int) -> list[ReviewedRecord]:
        """Every reviewed record in view at ``revision``, ordered by name."""
        ...

    def record_at(self, owner: str, name: str, revision: int) -> ReviewedRecord | None: ...


class KnowledgeStore(KnowledgeSource, Protocol):
    """The knowledge database: append-only reviewed versions, revisions, proposals."""

    def add_proposal(self, proposal: Proposal) -> Proposal:
        """Store ``proposal`` as pending, unless a proposal for the same owner and name is
        pending already: then store nothing and return that one. Returns the pending proposal
        for the name either way; the database keeps it to one, even across processes."""
        ...

    def pending_proposal(self, owner: str, name: str) -> Proposal | None:
        """The owner's pending proposal for record ``name``, if there is one."""
        ...

    def proposal(self, proposal_id: str) -> Proposal:
        """``not_found`` if there is no such proposal."""
        ...

    def proposals(self, owner: str, state: str | None = None) -> list[Proposal]: ...

    def accept(
        self, proposal_id: str, decision: Decision, record: Record, author: str
    ) -> ReviewedRecord:
        """Atomically decide a pending proposal and add its record at revision latest+1.
        ``already_exists`` if it was decided before."""
        ...

    def reject(self, proposal_id: str, decision: Decision) -> Proposal:
        """Decide a pending proposal as rejected; ``already_exists`` if decided before."""
        ...

    def history(self, owner: str, name: str) -> list[ReviewedRecord]:
        """Every version of one reviewed record, oldest first."""
        ...

    def revisions(self, owner: str) -> list[Revision]: ...

    def owners(self) -> list[str]:
        """Every owner with a knowledge base."""
        ...

    def head(self, owner: str) -> tuple[int, str]:
        """``(latest revision, hash of its revision entry)`` as the knowledge base records it."""
        ...

    def close(self) -> None: ...

    # -- packs (docs/packs.md) ------------------------------------------------------------------

    def install_pack(
        self,
        owner: str,
        *,
        name: str,
        version: str,
        digest: str,
        content: str,
        expected: Mapping[str, str],
        made_by: str,
        made_at: str,
    ) -> PackInstall | None:
        """Record a pack install as revision latest+1 (hash-chained like a decision), in one
        transaction, only if the packs in force are exactly ``expected`` (name → digest);
        None (nothing written) when they have changed since the caller looked."""
        ...

    def installed_packs(self, owner: str, revision: int | None = None) -> list[PackInstall]:
        """The pack in force per name at ``revision`` (default: latest), ordered by name."""
        ...

    def pack_history(self, owner: str) -> list[PackInstall]:
        """Every pack install of the owner, in revision order."""
        ...

    # -- export and import (docs/cli.md) ------------------------------------------------------

    def proposal_owners(self) -> list[str]:
        """Every owner with at least one proposal, decided or not (some have no revision)."""
        ...

    def import_knowledge_base(
        self,
        owner: str,
        head: tuple[int, str],
        revisions: Iterable[Revision],
        reviewed: Iterable[ReviewedRecord],
        proposals: Iterable[Proposal],
        packs: Iterable[PackInstall] = (),
    ) -> None:
        """Recreate one owner's exported knowledge exactly, in one transaction: revision
        entries, reviewed versions, pack installs and proposals as they were (a knowledge-base
        row only when there are revisions). ``already_exists`` if the owner has a knowledge
        base here or a proposal id is taken. The caller has checked the chain."""
        ...


@dataclass(frozen=True, slots=True)
class PackInstall:
    """One install of a pack into an owner's knowledge base, as stored: the pack's canonical
    content (without its digest) and digest, and the revision that installed it."""

    owner: str
    name: str
    version: str
    digest: str
    content: str
    revision: int
    installed_by: str
    installed_at: str


class RegisteredDocument(NamedTuple):
    """A document as the host's registry holds it: its name, its owner, when it was registered."""

    document: str
    owner: str
    registered_at: str


class HostRegistry(Protocol):
    """The reference host's own records: owner-token hashes, documents, shared settings."""

    def add_owner_token(self, token_hash: str, owner: str, created_at: str) -> None: ...

    def owner_of_token(self, token_hash: str) -> str | None: ...

    def register_document(self, document: str, owner: str, at: str) -> str:
        """Register ``document`` for ``owner`` unless it exists; return its owner either way."""
        ...

    def document_owner(self, document: str) -> str | None: ...

    def owner_documents(
        self, owner: str, *, after: str | None = None, limit: int
    ) -> list[RegisteredDocument]:
        """``owner``'s documents ordered by name (code point order), at most ``limit``, only
        those named after ``after`` (the previous page's last) when given."""
        ...

    def remove_document(self, document: str) -> None: ...

    def setting(self, key: str, default: str) -> str:
        """The shared value of ``key``, storing ``default`` first if it has none (the first
        process to ask decides, every later one reads the same)."""
        ...

    def close(self) -> None: ...
