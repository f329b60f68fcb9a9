"""A notebook's view (SPEC §4, §5): its current notes beside the reviewed knowledge pinned at
one exact revision, with every conflict between them made visible.

Reviewed rows come only from the notebook's pinned revision; notes only from the notebook.
Nothing is merged: a note and a reviewed record that share a name are two entries.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

from oh.core.notebook import Notebook
from oh.core.records import LINK_KEYS, StoredRecord
from oh.core.reviewed import ReviewedRecord, find_conflicts
from oh.storage.base import KnowledgeSource, MemoryStore

__all__ = ["Entry", "NotebookView", "Origin", "view_of"]

Origin = Literal["note", "reviewed"]


@dataclass(frozen=True, slots=True)
class Entry:
    """One record in view, by origin: what queries walk over (no text)."""

    origin: Origin
    name: str
    kind: str
    digest: str
    depends_on: tuple[str, ...]
    supports: tuple[str, ...]
    contradicts: tuple[str, ...]


def _entry(origin: Origin, record: StoredRecord | ReviewedRecord) -> Entry:
    content = json.loads(record.content)
    links = [tuple(content.get(key, ())) for key in LINK_KEYS]
    return Entry(origin, record.name, record.kind, record.digest, *links)


@dataclass(frozen=True, slots=True)
class NotebookView:
    notebook: Notebook
    revision: int | None
    notes: dict[str, Entry]
    reviewed: dict[str, Entry]
    conflicts: dict[tuple[str, str], list[str]]  # (origin, name) -> names it conflicts with

    def entries(self) -> Iterator[Entry]:
        """Notes first, then reviewed records, each in name order."""
        yield from (self.notes[name] for name in sorted(self.notes))
        yield from (self.reviewed[name] for name in sorted(self.reviewed))

    def conflicts_of(self, entry: Entry) -> list[str]:
        return self.conflicts.get((entry.origin, entry.name), [])


def view_of(
    memory: MemoryStore, knowledge: KnowledgeSource | None, notebook: Notebook
) -> NotebookView:
    notes = {r.name: _entry("note", r) for r in memory.records(notebook.id)}
    reviewed: dict[str, Entry] = {}
    revision = notebook.pinned_revision
    if knowledge is not None and revision is not None:
        reviewed = {
            r.name: _entry("reviewed", r) for r in knowledge.records_at(notebook.owner, revision)
        }
    conflicts = find_conflicts(
        {name: (e.digest, e.contradicts) for name, e in notes.items()},
        {name: (e.digest, e.contradicts) for name, e in reviewed.items()},
    )
    return NotebookView(notebook, revision, notes, reviewed, conflicts)
