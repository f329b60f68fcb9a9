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
from oh.core.records import StoredRecord

__all__ = ["MemoryStore", "PurgeAccess"]


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
