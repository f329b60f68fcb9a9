"""A notebook's view (docs/tools.md): its current notes beside the reviewed knowledge pinned at
one exact revision, with every conflict between them made visible.

Reviewed rows come only from the notebook's pinned revision; notes only from the notebook.
Nothing is merged: a note and a reviewed record that share a name are two entries.

``Views`` caches what cannot change: a record's links by its digest, the reviewed records of
a revision, and a whole view by (notebook, memory version, revision). Every key names
immutable content, so a cached value is never stale; the notebook's state is still checked on
every tool call before any view is used.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Generic, Literal, TypeVar

from oh.core.canonical import load_canonical
from oh.core.notebook import Notebook
from oh.core.records import LINK_KEYS, StoredRecord
from oh.core.reviewed import ReviewedRecord, find_conflicts
from oh.storage.base import KnowledgeSource, MemoryStore

__all__ = ["Entry", "NotebookView", "Origin", "Views", "assemble", "view_of"]

Origin = Literal["note", "reviewed"]
Links = tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]


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


def _links(record: StoredRecord | ReviewedRecord) -> Links:
    content = load_canonical(record.content)
    depends_on, supports, contradicts = (tuple(content.get(key, ())) for key in LINK_KEYS)
    return depends_on, supports, contradicts


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


K = TypeVar("K")
V = TypeVar("V")


class _Lru(Generic[K, V]):
    def __init__(self, size: int) -> None:
        self.size = size
        self.items: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V | None:
        value = self.items.get(key)
        if value is not None:
            self.items.move_to_end(key)
        return value

    def put(self, key: K, value: V) -> None:
        self.items[key] = value
        self.items.move_to_end(key)
        while len(self.items) > self.size:
            self.items.popitem(last=False)


class Views:
    """Builds notebook views, reusing everything immutable (see the module docstring)."""

    def __init__(
        self, memory: MemoryStore, knowledge: KnowledgeSource | None, *, size: int = 256
    ) -> None:
        self.memory = memory
        self.knowledge = knowledge
        self._links: dict[str, Links] = {}  # digest -> links; content per digest never changes
        self._latest: dict[str, NotebookView] = {}  # notebook -> its newest view, for reuse
        self._reviewed: _Lru[tuple[str, int], dict[str, Entry]] = _Lru(size)
        self._views: _Lru[tuple[str, int, int | None], NotebookView] = _Lru(size)

    def drop(self, notebook_id: str) -> None:
        """Forget a notebook's cached views (after forget or purge)."""
        self._latest.pop(notebook_id, None)
        for key in [key for key in self._views.items if key[0] == notebook_id]:
            del self._views.items[key]

    def reviewed(self, owner: str, revision: int | None) -> dict[str, Entry]:
        if self.knowledge is None or revision is None:
            return {}
        cached = self._reviewed.get((owner, revision))
        if cached is None:
            cached = {}
            for record in self.knowledge.records_at(owner, revision):
                links = _links(record)
                cached[record.name] = Entry(
                    "reviewed", record.name, record.kind, record.digest, *links
                )
            self._reviewed.put((owner, revision), cached)
        return cached

    def of(self, notebook: Notebook) -> NotebookView:
        # The caller read the notebook row just now: a view built at that version is current.
        key = (notebook.id, notebook.version, notebook.pinned_revision)
        cached = self._views.get(key)
        if cached is not None:
            return cached
        previous = self._latest.get(notebook.id)
        if previous is not None and previous.revision == notebook.pinned_revision:
            view = self._advance(notebook, previous)
            if view is not None:
                return self._keep(view)
        for _attempt in range(3):
            version, digests = self.memory.digests(notebook.id)
            notes = self._notes(notebook.id, digests)
            if notes is not None:
                return self._keep(self._build(notebook, version, notes))
            # A write landed between the snapshot and reading a record: take a new snapshot.
        notes = {
            name: Entry("note", name, name.partition(":")[0], digest, (), (), ())
            for name, digest in digests
        }
        return self._build(notebook, version, notes)  # degraded and never cached

    def _advance(self, notebook: Notebook, previous: NotebookView) -> NotebookView | None:
        """The previous view moved forward by the log entries written since (usually one)."""
        version, changes = self.memory.changes_after(notebook.id, previous.notebook.version)
        if len(changes) > 256:
            return None  # cheaper to read the snapshot
        notes = dict(previous.notes)
        for name, digest, content in changes:
            if digest is None or content is None:
                notes.pop(name, None)
                continue
            links = self._links.get(digest)
            if links is None:
                value = load_canonical(content)
                links = (
                    tuple(value["depends_on"]),
                    tuple(value["supports"]),
                    tuple(value["contradicts"]),
                )
                self._links[digest] = links
            notes[name] = Entry("note", name, name.partition(":")[0], digest, *links)
        return self._build(notebook, version, notes)

    def _keep(self, view: NotebookView) -> NotebookView:
        notebook = view.notebook
        self._views.put((notebook.id, notebook.version, view.revision), view)
        self._latest.pop(notebook.id, None)
        self._latest[notebook.id] = view
        if len(self._latest) > self._views.size:
            self._latest.pop(next(iter(self._latest)))
        return view

    def _notes(self, notebook_id: str, digests: list[tuple[str, str]]) -> dict[str, Entry] | None:
        """Entries for a snapshot, reusing the previous view's unchanged ones; None if a
        record changed again before it could be read."""
        previous = self._latest.get(notebook_id)
        before = previous.notes if previous is not None else {}
        links = self._links
        notes: dict[str, Entry] = {}
        missing: list[tuple[str, str]] = []
        for name, digest in digests:
            entry = before.get(name)
            if entry is not None and entry.digest == digest:
                notes[name] = entry
            elif digest in links:
                notes[name] = Entry("note", name, name.partition(":")[0], digest, *links[digest])
            else:
                missing.append((name, digest))
        if missing:
            if len(missing) > 16:
                found = {r.name: r for r in self.memory.records(notebook_id)}
            else:
                found = {n: r for n, _ in missing if (r := self.memory.record(notebook_id, n))}
            if len(links) > 200_000:
                links.clear()
            for name, digest in missing:
                record = found.get(name)
                if record is None or record.digest != digest:
                    return None
                links[digest] = _links(record)
                notes[name] = Entry("note", name, record.kind, digest, *links[digest])
        return notes

    def _build(self, notebook: Notebook, version: int, notes: dict[str, Entry]) -> NotebookView:
        return assemble(
            notebook, version, notes, self.reviewed(notebook.owner, notebook.pinned_revision)
        )


def assemble(
    notebook: Notebook, version: int, notes: dict[str, Entry], reviewed: dict[str, Entry]
) -> NotebookView:
    """The view of ``notebook`` at memory ``version`` with these notes beside the reviewed
    records of its pinned revision, conflicts found. ``verify`` assembles the views of past
    versions with it to recompute kept answers."""
    conflicts = find_conflicts(
        {name: (e.digest, e.contradicts) for name, e in notes.items()},
        {name: (e.digest, e.contradicts) for name, e in reviewed.items()},
    )
    return NotebookView(
        replace(notebook, version=version), notebook.pinned_revision, notes, reviewed, conflicts
    )


def view_of(
    memory: MemoryStore, knowledge: KnowledgeSource | None, notebook: Notebook
) -> NotebookView:
    """A notebook's view, built afresh (no caching)."""
    return Views(memory, knowledge).of(notebook)
