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

__all__ = ["MemoryStore"]


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
