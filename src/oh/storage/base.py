"""The narrow storage protocol every memory backend implements.

A backend does I/O and enforces invariants with its database (one writer per notebook version,
unique request ids); what a write *means* comes from ``oh.core``. Convenience (verify, rebuild,
lifecycle) lives above this protocol, never in a backend.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import Protocol

from oh.core.changes import Change, LogEntry, RememberResult
from oh.core.notebook import Notebook
from oh.core.records import Record, StoredRecord
from oh.core.reviewed import Decision, Proposal, ReviewedRecord, Revision

__all__ = ["KnowledgeSource", "KnowledgeStore", "MemoryStore", "PurgeAccess"]


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
        """Apply a validated write atomically under SPEC §2 (version check, idempotency)."""
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

    def log(self, notebook_id: str) -> Iterator[LogEntry]:
        """The log entries in version order."""
        ...

    def replace_records(self, notebook_id: str, records: Iterable[StoredRecord]) -> None:
        """Swap the derived current table for ``records`` (used by rebuild)."""
        ...

    def close(self) -> None: ...


class PurgeAccess(Protocol):
    """The purge worker's credential: exactly what SPEC §3 lets the worker do, nothing else.

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

    def add_proposal(self, proposal: Proposal) -> None: ...

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
