"""Notebook lifecycle (docs/design.md): per-run notebooks, expiry, forget now, and the purge.

One notebook per ``(owner, document, run)``. Opening is two-phase: the row is created
``opening`` with its knowledge pin, what the agent needs is prepared (``prepare``), then it is
marked ``open``.
Every notebook forgets ``lifetime`` after it starts. ``purge_expired`` is a plain function that
receives only a ``PurgeAccess`` credential.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Literal

from oh.core.clock import Clock, system_clock, utc_text
from oh.core.identifiers import check_identifier
from oh.core.notebook import Notebook, check_not_closed, new_notebook_id
from oh.errors import AlreadyExists, Forbidden, InvalidArgument, NotFound
from oh.storage.base import OPENING_GRACE_FLOOR, KnowledgeSource, MemoryStore, PurgeAccess

__all__ = [
    "DEFAULT_LIFETIME",
    "DEFAULT_OPENING_GRACE",
    "ForgetReport",
    "Notebooks",
    "Pin",
    "PurgeReport",
    "purge_expired",
    "read_purge_status",
    "write_purge_status",
]

DEFAULT_LIFETIME = timedelta(hours=24)
# A notebook still ``opening`` after this long never finished opening: the purge marks it empty.
# Never shorter than the floor the database itself enforces on the purge credential.
DEFAULT_OPENING_GRACE = OPENING_GRACE_FLOOR

Pin = int | Literal["latest"]
# Prepares what a notebook needs before it opens (e.g. the bootstrap), between phase one (row
# created ``opening`` with its pin) and phase two (marked ``open``).
Prepare = Callable[[Notebook], None]


def _nothing_to_prepare(_notebook: Notebook) -> None:
    return None


@dataclass(frozen=True, slots=True)
class ForgetReport:
    notebook_id: str
    purged_at: str
    removed: dict[str, int]

    def to_json(self) -> dict[str, Any]:
        return {"notebook": self.notebook_id, "purged_at": self.purged_at, "removed": self.removed}


class Notebooks:
    """Opening, finding and forgetting notebooks on a ``MemoryStore`` with an injected clock."""

    def __init__(
        self,
        store: MemoryStore,
        *,
        clock: Clock = system_clock,
        lifetime: timedelta = DEFAULT_LIFETIME,
        knowledge: KnowledgeSource | None = None,
        prepare: Prepare = _nothing_to_prepare,
    ) -> None:
        if lifetime <= timedelta(0):
            raise InvalidArgument("a notebook's lifetime must be positive")
        self.store = store
        self.clock = clock
        self.lifetime = lifetime
        self.knowledge = knowledge
        self.prepare = prepare

    def open(self, owner: str, document: str, run: str, pin: Pin = "latest") -> Notebook:
        """Open the run's notebook, or return it if this run already has one open.

        A new run always gets a new, empty notebook. A run whose notebook was forgotten or
        purged answers ``purged``; one past its forget time answers ``expired``.
        """
        check_identifier(owner, "owner")
        check_identifier(document, "document")
        check_identifier(run, "run")
        if pin != "latest" and (type(pin) is not int or pin < 0):
            raise InvalidArgument('pin must be a revision number or "latest"')
        notebook = self.store.find_notebook(owner, document, run)
        if notebook is None:
            # The pin is resolved before the row exists, so a bad pin creates nothing.
            pinned = self.resolve_pin(owner, pin)
            now = self.clock()
            try:
                notebook = self.store.create_notebook(
                    new_notebook_id(),
                    owner=owner,
                    document=document,
                    run=run,
                    started_at=now,
                    forgets_at=now + self.lifetime,
                    pinned_revision=pinned,
                )
            except AlreadyExists:
                # Another process opened the same run a moment ago: that notebook is the one.
                notebook = self.store.find_notebook(owner, document, run)
                if notebook is None:
                    raise
        return self._finish_opening(notebook)

    def resolve_pin(self, owner: str, pin: Pin) -> int | None:
        """The exact knowledge revision a new notebook will see (None: no knowledge source)."""
        if self.knowledge is None:
            return None
        latest = self.knowledge.latest_revision(owner)
        if pin == "latest":
            return latest
        if pin > latest:
            raise NotFound(f"no knowledge revision {pin}; the latest is {latest}", latest=latest)
        return pin

    def _finish_opening(self, notebook: Notebook) -> Notebook:
        state = notebook.state_at(self.clock())
        check_not_closed(notebook.id, state)
        if state == "open":
            return notebook
        self.prepare(notebook)
        return self.store.mark_open(notebook.id, notebook.pinned_revision)

    def get(self, notebook_id: str, owner: str) -> Notebook:
        """The notebook as its owner sees it now (``expired`` once past its forget time)."""
        notebook = self.store.notebook(notebook_id)
        if notebook.owner != owner:
            raise Forbidden(f"notebook {notebook_id} belongs to another owner")
        return replace(notebook, state=notebook.state_at(self.clock()))

    def forget(self, notebook_id: str, owner: str) -> ForgetReport:
        """Forget now: delete the notebook's notes, log, request ids and derived data at once."""
        self.get(notebook_id, owner)
        now = self.clock()
        removed = self.store.forget(notebook_id, now)
        return ForgetReport(notebook_id, utc_text(now), removed)


@dataclass(slots=True)
class PurgeReport:
    at: str
    purged: list[str] = field(default_factory=list)
    emptied: list[str] = field(default_factory=list)
    removed: dict[str, int] = field(default_factory=dict)
    compacted: bool = True

    def to_json(self) -> dict[str, Any]:
        return {
            "event": "purge_pass",
            "at": self.at,
            "purged": len(self.purged),
            "emptied": len(self.emptied),
            "removed": self.removed,
            "compacted": self.compacted,
        }


def purge_expired(
    access: PurgeAccess,
    now: datetime,
    *,
    opening_grace: timedelta = DEFAULT_OPENING_GRACE,
    batch: int = 200,
) -> PurgeReport:
    """One purge pass: delete every notebook past its forget time, mark ``empty`` every notebook
    stuck in ``opening`` longer than ``opening_grace``, then compact the files.

    ``opening_grace`` may not be shorter than ``OPENING_GRACE_FLOOR``: the database refuses the
    purge credential anything shorter, so a shorter grace would silently not be honoured.
    """
    if opening_grace < OPENING_GRACE_FLOOR:
        raise InvalidArgument(
            f"the opening grace must be at least {OPENING_GRACE_FLOOR.total_seconds():.0f}"
            " seconds (the database never lets the purge end a younger opening)"
        )
    report = PurgeReport(at=utc_text(now))
    while ids := access.expired(now, limit=batch):
        done = access.purge(ids, now)
        report.purged.extend(done)
        for counts in done.values():
            for table, count in counts.items():
                report.removed[table] = report.removed.get(table, 0) + count
        if len(done) < len(ids):
            break  # someone else purged part of this batch; the next pass sees the rest
    cutoff = now - opening_grace
    while ids := access.stale_openings(cutoff, limit=batch):
        marked = access.mark_empty(ids, cutoff, now)
        report.emptied.extend(marked)
        if len(marked) < len(ids):
            break
    if report.purged or report.emptied:
        report.compacted = access.compact()
    return report


def write_purge_status(path: Path, status: Mapping[str, Any]) -> None:
    """Keep a purge worker's last pass in ``path`` (``oh purge --status-file``), replaced
    atomically; a status that cannot be written never stops the worker."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        temporary.write_text(json.dumps(dict(status)) + "\n", "utf-8")
        os.replace(temporary, path)
    except OSError:
        pass


def read_purge_status(path: Path) -> dict[str, Any] | None:
    """The last pass ``write_purge_status`` kept; None before the first (or if unreadable)."""
    try:
        status = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return None
    return status if isinstance(status, dict) else None
