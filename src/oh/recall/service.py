"""The recall service (docs/tools.md, docs/recall.md): similarity search over a notebook's view.

``Recall.recall`` embeds the query, then searches the notebook's notes and the reviewed records
of its pinned revision, and answers names, digests, origins and scores — never text, so a
similar note never enters the conversation unread. It writes nothing.

Embedding the notes happens later, outside every write transaction: ``remember`` makes no
network call. ``catch_up(notebook_id)`` / ``catch_up_all()`` embed what is pending (a host runs
them from a background thread, ``oh.recall.background.CatchUpWorker``) and ``recall`` says how
many records it could not search yet (``pending``). ``rebuild`` embeds everything again beside
the old vectors, then swaps the new ones in.

Vectors are cached by ``(model, digest)``: an unchanged note is never embedded twice; a replaced
note has a new digest and gets a new vector; a removed note's vector is deleted by the next
catch-up (and never answered meanwhile: rows come only from the current notes). Note vectors
live with their notebook, so forget and purge delete them; ``evict`` drops this process's
in-memory copy at once (``catch_up_all`` also sweeps closed notebooks out).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol

import numpy as np

from oh.core.canonical import matches_digest
from oh.core.clock import Clock, system_clock
from oh.core.notebook import Notebook, check_writable
from oh.core.records import MAX_TEXT
from oh.core.seals import STAGED_PREFIX
from oh.errors import (
    Expired,
    IntegrityError,
    InvalidArgument,
    OhError,
    Purged,
)
from oh.keys.sealing import keyring_of
from oh.recall.embedders import (
    Embedder,
    EmbedderRejected,
    EmbedderResponseInvalid,
    Vectors,
)
from oh.recall.index import IndexSettings, VectorIndex
from oh.storage.base import KnowledgeSource, MemoryStore

__all__ = [
    "DEFAULT_LIMIT",
    "MAX_LIMIT",
    "CatchUpReport",
    "Progress",
    "RebuildReport",
    "Recall",
    "RecallAnswer",
    "RecallRow",
    "VectorStore",
    "render",
]

logger = logging.getLogger("oh.recall")

DEFAULT_LIMIT = 5
MAX_LIMIT = 20
# Cosines are answered to four decimals: enough to rank, and stable against the last bits of
# float arithmetic, so the same index answers the same rows in the same order.
SCORE_DECIMALS = 4

Origin = Literal["note", "reviewed"]
Progress = Callable[[int, int], None]


class VectorStore(Protocol):
    """Where vectors live (the memory database). Rows are ``(digest, vector bytes)``, never
    text; ``oh.storage.sqlite.vectors.SqliteVectorStore`` is the embedded implementation."""

    def open_notebook_ids(self, now: datetime) -> list[str]: ...

    def note_digests(self, notebook_id: str, model_id: str) -> list[tuple[str, str, bool]]:
        """``(name, digest, has_vector)`` of every current note."""
        ...

    def pending_notes(
        self, notebook_id: str, model_id: str, limit: int, after: str = ""
    ) -> list[tuple[str, str, str]]:
        """``(name, digest, content)`` of current notes named after ``after`` that have no
        vector, by name."""
        ...

    def note_vectors(
        self, notebook_id: str, model_id: str, digests: Sequence[str]
    ) -> dict[str, bytes]: ...

    def put_note_vectors(
        self, notebook_id: str, model_id: str, rows: Sequence[tuple[str, str, bytes]]
    ) -> int:
        """Store ``(name, digest, vector)`` for notes still current; ``purged`` if the notebook
        is no longer open."""
        ...

    def prune_note_vectors(self, notebook_id: str, model_id: str) -> int: ...

    def drop_note_vectors(self, notebook_id: str | None = None) -> int: ...

    def read_with(self, keyring: Any) -> None:
        """Read the notes to embed through ``keyring``, the memory store's (None when it seals
        nothing); a store over sealed notes refuses None."""
        ...

    def reviewed_vectors(
        self, owner: str, model_id: str, digests: Sequence[str]
    ) -> dict[str, bytes]: ...

    def missing_reviewed(self, owner: str, model_id: str, digests: Sequence[str]) -> list[str]: ...

    def put_reviewed_vectors(
        self, owner: str, model_id: str, rows: Sequence[tuple[str, bytes]]
    ) -> int: ...

    def drop_reviewed_vectors(self) -> int: ...

    def drop_model_vectors(self, model_id: str) -> int:
        """Delete every vector (notes and reviewed records) of one model id."""
        ...

    def replace_vectors(self, staged_model_id: str, model_id: str) -> dict[str, int]:
        """In one transaction: delete every vector not of ``staged_model_id`` and give the
        staged ones ``model_id``; the rows deleted, per table."""
        ...


# -- answers ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RecallRow:
    name: str
    digest: str
    origin: Origin
    score: float

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "digest": self.digest,
            "origin": self.origin,
            "score": self.score,
        }


@dataclass(frozen=True, slots=True)
class RecallAnswer:
    """Rows best first (score, then name, then notes before reviewed records), and how many
    records of the view have no vector yet (``pending``: the answer could not consider them)."""

    rows: tuple[RecallRow, ...]
    pending: int
    version: int
    revision: int | None
    model_id: str
    approximate: bool  # whether an HNSW graph answered (else an exact scan)

    def to_json(self) -> dict[str, Any]:
        return {
            "rows": [row.to_json() for row in self.rows],
            "pending": self.pending,
            "version": self.version,
            "revision": self.revision,
        }


@dataclass(slots=True)
class CatchUpReport:
    notebooks: int = 0  # notebooks caught up
    notes: int = 0  # note vectors stored
    reviewed: int = 0  # reviewed-record vectors stored
    removed: int = 0  # vectors of notes no longer current, deleted
    pending: int = 0  # records still without a vector afterwards
    skipped: int = 0  # notebooks not open (forgotten, expired, still opening)
    failed: int = 0  # notebooks whose texts the embedder refused

    def add(self, other: CatchUpReport) -> None:
        for name in self.__slots__:
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def to_json(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in self.__slots__}


@dataclass(slots=True)
class RebuildReport:
    dropped: dict[str, int]
    caught_up: CatchUpReport = field(default_factory=CatchUpReport)
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "event": "index_rebuilt",
            "dropped": self.dropped,
            **self.caught_up.to_json(),
            "seconds": round(self.seconds, 3),
        }


# -- helpers ---------------------------------------------------------------------------------


def render(content: str) -> str:
    """The text a record is embedded as (docs/recall.md): ``kind name: text``."""
    record = json.loads(content)
    return f"{record['kind']} {record['name']}: {record['text']}"


def _blob(vector: Vectors) -> bytes:
    return np.asarray(vector, dtype="<f4").tobytes()


def _decoded(blobs: Sequence[bytes], dimensions: int) -> Vectors:
    width = 4 * dimensions
    for blob in blobs:
        if len(blob) != width:
            raise IntegrityError(
                f"a stored vector has {len(blob) // 4} dimensions, not {dimensions};"
                " run `oh index rebuild`"
            )
    joined = b"".join(blobs)
    return np.frombuffer(joined, dtype="<f4").reshape(len(blobs), dimensions).astype(np.float32)


def _check_text(text: Any) -> str:
    if type(text) is not str or not text.strip():
        raise InvalidArgument("text must be non-empty text")
    if len(text) > MAX_TEXT:
        raise InvalidArgument(f"text has {len(text)} characters; at most {MAX_TEXT}")
    return text


def _check_limit(limit: Any) -> int:
    if type(limit) is not int or not 1 <= limit <= MAX_LIMIT:
        raise InvalidArgument(f"limit must be an integer from 1 to {MAX_LIMIT}")
    return limit


def _score(value: float) -> float:
    return round(value, SCORE_DECIMALS) + 0.0  # + 0.0 turns -0.0 into 0.0


@dataclass(slots=True)
class _Notes:
    """This process's copy of one notebook's note vectors."""

    index: VectorIndex
    names: dict[str, str] = field(default_factory=dict)  # digest -> name of current notes
    version: int = -1  # the notebook version the copy was synced at
    pending: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


@dataclass(slots=True)
class _View:
    """The reviewed records of one pinned revision."""

    digests: frozenset[str]
    names: dict[str, str]  # digest -> name
    pending: int = -1  # -1: not checked against the vectors yet


@dataclass(slots=True)
class _Reviewed:
    """This process's copy of one owner's reviewed-record vectors (every revision)."""

    index: VectorIndex
    views: OrderedDict[int, _View] = field(default_factory=OrderedDict)
    lock: threading.Lock = field(default_factory=threading.Lock)


_VIEWS_PER_OWNER = 8


class Recall:
    """Similarity recall for the notebooks of one memory store.

    ``memory`` gives notebooks and their notes, ``vectors`` keeps vectors (usually the same
    database), ``knowledge`` gives the reviewed records at each notebook's pinned revision
    (None: notes only). ``batch`` is how many records are embedded per call to the embedder.
    Thread-safe: ``recall`` from request threads while ``catch_up_all`` runs in another.
    """

    def __init__(
        self,
        memory: MemoryStore,
        vectors: VectorStore,
        embedder: Embedder,
        knowledge: KnowledgeSource | None = None,
        *,
        clock: Clock = system_clock,
        batch: int = 64,
        settings: IndexSettings | None = None,
        cached_scopes: int = 256,
    ) -> None:
        if type(batch) is not int or batch < 1:
            raise InvalidArgument("batch must be a positive integer")
        if type(cached_scopes) is not int or cached_scopes < 1:
            raise InvalidArgument("cached_scopes must be a positive integer")
        self.memory = memory
        self.vectors = vectors
        # One wiring: the notes to embed are read through the keyring of the memory store they
        # come from (a SQL store's; other stores seal nothing), never one given separately.
        vectors.read_with(keyring_of(memory))
        self.embedder = embedder
        self.knowledge = knowledge
        self.clock = clock
        self.batch = batch
        self.settings = settings or IndexSettings()
        self.cached_scopes = cached_scopes
        self.model_id = embedder.model_id
        self.dimensions = embedder.dimensions
        self._lock = threading.Lock()
        self._notes: OrderedDict[str, _Notes] = OrderedDict()
        self._reviewed: OrderedDict[str, _Reviewed] = OrderedDict()
        self._reviewed_done: set[tuple[str, int]] = set()  # (owner, revision) fully embedded
        self._catching_up: dict[str, threading.Lock] = {}
        self._refused: dict[str, str] = {}  # notebook -> why its texts were last refused
        self._rebuilding = threading.Lock()

    # -- recall -----------------------------------------------------------------------------

    def recall(
        self, notebook: Notebook | str, text: str, limit: int = DEFAULT_LIMIT
    ) -> dict[str, Any]:
        """``{"rows": [{"name", "digest", "origin", "score"}], "pending", "version",
        "revision"}``: the ``limit`` records of the notebook's view most similar to ``text``."""
        return self.answer(notebook, text, limit).to_json()

    def answer(
        self, notebook: Notebook | str, text: str, limit: int = DEFAULT_LIMIT
    ) -> RecallAnswer:
        """``recall`` as a typed answer. ``notebook`` is a notebook already read by the caller
        (the tool layer has one) or an id; either way it must be open now."""
        text = _check_text(text)
        limit = _check_limit(limit)
        notebook = self._open(notebook)
        # Every read of the database comes before the query goes to the embedder, which may be
        # slow: a call given up at its deadline finishes in memory, whatever happened meanwhile.
        notes = self._synced_notes(notebook)
        names, pending = notes.names, notes.pending
        reviewed = self._synced_view(notebook)
        query = self._embed([text])[0]
        found: list[tuple[float, str, int, str]] = []  # (-score, name, origin rank, digest)
        for digest, score in notes.index.search(query, limit):
            name = names.get(digest)
            if name is not None:
                found.append((-_score(score), name, 0, digest))
        approximate = notes.index.approximate
        if reviewed is not None:
            scope, view = reviewed
            for digest, score in scope.index.search(query, limit, allowed=view.digests):
                found.append((-_score(score), view.names[digest], 1, digest))
            pending += view.pending
            approximate = approximate or scope.index.approximate
        found.sort()
        origins: tuple[Origin, Origin] = ("note", "reviewed")
        rows = tuple(
            RecallRow(name, digest, origins[rank], -negative)
            for negative, name, rank, digest in found[:limit]
        )
        return RecallAnswer(
            rows=rows,
            pending=pending,
            version=notebook.version,
            revision=notebook.pinned_revision,
            model_id=self.model_id,
            approximate=approximate,
        )

    def pending(self, notebook: Notebook | str) -> int:
        """How many records of the notebook's view have no vector yet."""
        notebook = self._open(notebook)
        count = sum(
            1 for *_, has in self.vectors.note_digests(notebook.id, self.model_id) if not has
        )
        reviewed = self._synced_view(notebook)
        return count + (reviewed[1].pending if reviewed is not None else 0)

    def pending_total(self) -> int:
        """How many records of every open notebook's view have no vector yet (for metrics)."""
        total = 0
        for notebook_id in self.vectors.open_notebook_ids(self.clock()):
            try:
                total += self.pending(notebook_id)
            except (Purged, Expired):
                continue  # closed since it was listed
        return total

    def _open(self, notebook: Notebook | str) -> Notebook:
        if isinstance(notebook, str):
            notebook = self.memory.notebook(notebook)
        try:
            check_writable(notebook.id, notebook.state, notebook.forgets_at, self.clock())
        except (Purged, Expired):
            self.evict(notebook.id)
            raise
        return notebook

    def _embed(self, texts: Sequence[str]) -> Vectors:
        vectors = self.embedder.embed(texts)
        if (
            not isinstance(vectors, np.ndarray)
            or vectors.shape != (len(texts), self.dimensions)
            or not np.all(np.isfinite(vectors))
        ):
            raise EmbedderResponseInvalid(
                f"the embedder {self.model_id} did not return {len(texts)} finite vectors"
                f" of {self.dimensions} dimensions"
            )
        rows = vectors.astype(np.float64)
        norms = np.linalg.norm(rows, axis=1, keepdims=True)
        return (rows / np.where(norms > 0, norms, 1.0)).astype(np.float32)

    # -- this process's copies ----------------------------------------------------------------

    def _notes_of(self, notebook_id: str) -> _Notes:
        with self._lock:
            scope = self._notes.get(notebook_id)
            if scope is None:
                scope = _Notes(VectorIndex(self.dimensions, self.settings))
                self._notes[notebook_id] = scope
                while len(self._notes) > self.cached_scopes:
                    self._notes.popitem(last=False)
            else:
                self._notes.move_to_end(notebook_id)
            return scope

    def _synced_notes(self, notebook: Notebook) -> _Notes:
        scope = self._notes_of(notebook.id)
        with scope.lock:
            if scope.version != notebook.version or scope.pending:
                rows = self.vectors.note_digests(notebook.id, self.model_id)
                current = {digest: name for name, digest, _ in rows}
                scope.index.discard(scope.index.digests() - current.keys())
                need = [digest for _, digest, has in rows if has and digest not in scope.index]
                if need:
                    stored = self.vectors.note_vectors(notebook.id, self.model_id, need)
                    digests = list(stored)
                    scope.index.add(digests, _decoded(list(stored.values()), self.dimensions))
                scope.names = current
                scope.pending = sum(1 for digest in current if digest not in scope.index)
                scope.version = notebook.version
        return scope

    def _reviewed_of(self, owner: str) -> _Reviewed:
        with self._lock:
            scope = self._reviewed.get(owner)
            if scope is None:
                scope = _Reviewed(VectorIndex(self.dimensions, self.settings))
                self._reviewed[owner] = scope
                while len(self._reviewed) > self.cached_scopes:
                    self._reviewed.popitem(last=False)
            else:
                self._reviewed.move_to_end(owner)
            return scope

    def _synced_view(self, notebook: Notebook) -> tuple[_Reviewed, _View] | None:
        revision = notebook.pinned_revision
        if self.knowledge is None or revision is None:
            return None
        scope = self._reviewed_of(notebook.owner)
        with scope.lock:
            view = scope.views.get(revision)
            if view is None:
                # A pinned revision never changes: read once, keep.
                records = self.knowledge.records_at(notebook.owner, revision)
                names = {record.digest: record.name for record in records}
                view = _View(frozenset(names), names)
                scope.views[revision] = view
                while len(scope.views) > _VIEWS_PER_OWNER:
                    scope.views.popitem(last=False)
            else:
                scope.views.move_to_end(revision)
            if view.pending:
                missing = [digest for digest in view.names if digest not in scope.index]
                if missing:
                    stored = self.vectors.reviewed_vectors(notebook.owner, self.model_id, missing)
                    digests = list(stored)
                    scope.index.add(digests, _decoded(list(stored.values()), self.dimensions))
                view.pending = sum(1 for digest in view.names if digest not in scope.index)
        return scope, view

    def evict(self, notebook_id: str) -> None:
        """Drop this process's copy of a notebook's vectors (call it after forget)."""
        with self._lock:
            self._notes.pop(notebook_id, None)
            self._catching_up.pop(notebook_id, None)

    def cached_notebooks(self) -> list[str]:
        """Notebooks whose vectors this process holds in memory, least recently used first."""
        with self._lock:
            return list(self._notes)

    def clear(self) -> None:
        """Drop every in-memory copy; the next recall reads the vector tables again."""
        with self._lock:
            self._notes.clear()
            self._reviewed.clear()
            self._reviewed_done.clear()

    # -- catch-up ---------------------------------------------------------------------------

    def catch_up(self, notebook_id: str) -> CatchUpReport:
        """Embed the notebook's pending notes and reviewed records, delete the vectors of notes
        that are gone, and build the search graph of a large scope. Notebooks that are not
        open are skipped. Embedder errors propagate; whatever was stored before them stays."""
        report = CatchUpReport()
        notebook = self.memory.notebook(notebook_id)
        if notebook.state_at(self.clock()) != "open":
            self.evict(notebook_id)
            report.skipped = 1
            return report
        with self._lock:
            lock = self._catching_up.setdefault(notebook_id, threading.Lock())
        with lock:
            try:
                report.notes = self._embed_notes(notebook)
                report.removed = self.vectors.prune_note_vectors(notebook.id, self.model_id)
                report.reviewed = self._embed_reviewed(notebook)
            except Purged:
                # Forgotten while its notes were being embedded: the database refused them.
                self.evict(notebook_id)
                return CatchUpReport(skipped=1)
            report.notebooks = 1
            report.pending = self._refresh(notebook_id)
        return report

    def _embed_notes(self, notebook: Notebook) -> int:
        stored = 0
        after = ""
        while rows := self.vectors.pending_notes(
            notebook.id, self.model_id, self.batch, after=after
        ):
            after = rows[-1][0]
            sound = []
            for name, digest, content in rows:
                if not matches_digest(content, digest):
                    # `oh verify` reports the damage; embedding it would cache a lie.
                    logger.error(
                        "note %s of %s does not match its digest; not embedded", name, notebook.id
                    )
                    continue
                sound.append((name, digest, render(content)))
            if not sound:
                continue
            vectors = self._embed([text for _, _, text in sound])
            stored += self.vectors.put_note_vectors(
                notebook.id,
                self.model_id,
                [
                    (name, digest, _blob(vector))
                    for (name, digest, _), vector in zip(sound, vectors, strict=True)
                ],
            )
        return stored

    def _embed_reviewed(self, notebook: Notebook) -> int:
        revision = notebook.pinned_revision
        if self.knowledge is None or revision is None:
            return 0
        owner = notebook.owner
        if (owner, revision) in self._reviewed_done:
            return 0
        records = self.knowledge.records_at(owner, revision)
        missing = set(
            self.vectors.missing_reviewed(owner, self.model_id, [r.digest for r in records])
        )
        todo = [record for record in records if record.digest in missing]
        stored = 0
        for start in range(0, len(todo), self.batch):
            chunk = [
                r for r in todo[start : start + self.batch] if matches_digest(r.content, r.digest)
            ]
            if not chunk:
                continue
            vectors = self._embed([render(record.content) for record in chunk])
            stored += self.vectors.put_reviewed_vectors(
                owner,
                self.model_id,
                [
                    (record.digest, _blob(vector))
                    for record, vector in zip(chunk, vectors, strict=True)
                ],
            )
        self._reviewed_done.add((owner, revision))
        return stored

    def _refresh(self, notebook_id: str) -> int:
        """Bring this process's copies up to date if they are in use (or large enough to need a
        graph, which is built here, not during a recall); return what is still pending."""
        notebook = self.memory.notebook(notebook_id)
        rows = self.vectors.note_digests(notebook.id, self.model_id)
        pending = sum(1 for *_, has in rows if not has)
        with self._lock:
            cached = notebook.id in self._notes
        if cached or len(rows) >= self.settings.ann_threshold:
            notes = self._synced_notes(notebook)
            notes.index.maintain()
            pending = notes.pending
        reviewed = self._synced_view(notebook)
        if reviewed is not None:
            scope, view = reviewed
            if len(scope.index) >= self.settings.ann_threshold:
                scope.index.maintain()
            pending += view.pending
        return pending

    def catch_up_all(self) -> CatchUpReport:
        """One catch-up pass over every open notebook; also drops in-memory copies of notebooks
        that closed. A notebook whose texts the embedder refuses is logged and skipped; an
        embedder that is down (``EmbedderUnavailable``) ends the pass."""
        report = CatchUpReport()
        open_ids = self.vectors.open_notebook_ids(self.clock())
        still_open = set(open_ids)
        with self._lock:
            closed = [nid for nid in self._notes if nid not in still_open]
        for notebook_id in closed:
            self.evict(notebook_id)
        for notebook_id in open_ids:
            try:
                report.add(self.catch_up(notebook_id))
            except (EmbedderRejected, EmbedderResponseInvalid) as exc:
                # Every pass tries again; the log says so once, not once a pass.
                if self._refused.get(notebook_id) != exc.message:
                    logger.error("catch-up of %s failed: %s", notebook_id, exc.message)
                self._refused[notebook_id] = exc.message
                report.failed += 1
            else:
                if self._refused.pop(notebook_id, None) is not None:
                    logger.warning("catch-up of %s works again", notebook_id)
        for notebook_id in [nid for nid in self._refused if nid not in still_open]:
            del self._refused[notebook_id]
        return report

    # -- rebuild ----------------------------------------------------------------------------

    def rebuild(self, progress: Progress | None = None) -> RebuildReport:
        """Embed every open notebook's view again, then replace every vector (every model)
        with the new ones, at once.

        The new vectors are built beside the old ones, under a staging model id, and swapped
        in by one transaction: until then recalls answer from the old index, and if embedding
        fails (an endpoint down, texts refused) the staged vectors are deleted, the old index
        is left exactly as it was, and the error says so. ``progress(done, total)`` is called
        once before the first notebook and after each one.
        """
        started = time.monotonic()
        staged_id = f"{STAGED_PREFIX}{self.model_id}"
        with self._rebuilding:
            # Left over by a rebuild that was killed before it swapped or cleaned up.
            self.vectors.drop_model_vectors(staged_id)
            staging = Recall(
                self.memory,
                self.vectors,
                _Staged(self.embedder, staged_id),
                self.knowledge,
                clock=self.clock,
                batch=self.batch,
                # No search graph for vectors nobody searches yet.
                settings=IndexSettings(ann_threshold=1 << 62),
                cached_scopes=1,
            )
            open_ids = self.vectors.open_notebook_ids(self.clock())
            caught_up = CatchUpReport()
            if progress is not None:
                progress(0, len(open_ids))
            try:
                for done, notebook_id in enumerate(open_ids, start=1):
                    caught_up.add(staging.catch_up(notebook_id))
                    if progress is not None:
                        progress(done, len(open_ids))
            except BaseException as exc:
                self.vectors.drop_model_vectors(staged_id)
                if isinstance(exc, OhError):
                    raise type(exc)(
                        f"index rebuild stopped, the index is unchanged: {exc.message}",
                        **exc.details,
                    ) from exc
                raise
            dropped = self.vectors.replace_vectors(staged_id, self.model_id)
            in_use = self.cached_notebooks()
            self.clear()
            for notebook_id in in_use:
                # What this process was searching is loaded again now (with its graph when
                # large), not by the next recall.
                try:
                    self._refresh(notebook_id)
                except OhError:
                    continue
        report = RebuildReport(dropped, caught_up)
        report.seconds = time.monotonic() - started
        return report


class _Staged:
    """An embedder under another model id: a rebuild stores its vectors beside the old ones."""

    def __init__(self, inner: Embedder, model_id: str) -> None:
        self.inner = inner
        self._model_id = model_id

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def dimensions(self) -> int:
        return self.inner.dimensions

    def embed(self, texts: Sequence[str]) -> Vectors:
        return self.inner.embed(texts)
