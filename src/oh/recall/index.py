"""The in-memory similarity index of one scope (a notebook's notes, or an owner's reviewed
records) for one model: exact cosine below a threshold, an HNSW graph (usearch) above it.

The index is a cache of what the vector tables hold, rebuilt from them whenever a process
starts: it is never the only copy of anything. Either way the candidates are re-scored exactly
(float64 dot products of the stored float32 vectors, summed without BLAS), so a record gets the
same score from the graph as from the exact scan, on every platform.
"""

from __future__ import annotations

import logging
import math
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from oh.errors import InvalidArgument
from oh.recall.embedders import Vectors, import_usearch

__all__ = ["IndexSettings", "VectorIndex"]

logger = logging.getLogger("oh.recall")


@dataclass(frozen=True, slots=True)
class IndexSettings:
    """How a scope is searched.

    Below ``ann_threshold`` vectors every search is an exact scan, which reads every vector
    (10,000 of 384 dimensions are 15 MB: 0.1 ms from cache, 2 ms or more from memory). At or
    above it, once a background step has built it, an HNSW graph with int8 vectors answers;
    ``connectivity``, ``expansion_add`` and ``expansion_search`` are its usual knobs. Each
    search takes ``oversample`` × limit candidates (at least limit + 10) and re-scores them
    exactly. ``threads`` builds the graph (0: every core; 1: the same graph every time).
    """

    ann_threshold: int = 10_000
    connectivity: int = 32
    expansion_add: int = 128
    expansion_search: int = 64
    oversample: int = 2
    threads: int = 0

    def __post_init__(self) -> None:
        for name in ("ann_threshold", "connectivity", "expansion_add", "expansion_search"):
            if type(getattr(self, name)) is not int or getattr(self, name) < 1:
                raise InvalidArgument(f"{name} must be a positive integer")
        if type(self.oversample) is not int or self.oversample < 1:
            raise InvalidArgument("oversample must be a positive integer")
        if type(self.threads) is not int or self.threads < 0:
            raise InvalidArgument("threads must be 0 (every core) or a positive integer")


_warned_no_usearch = False


def _usearch() -> Any | None:
    global _warned_no_usearch
    module = import_usearch()
    if module is None and not _warned_no_usearch:
        _warned_no_usearch = True
        logger.warning(
            "usearch is not installed (pip install 'oh-memory[ann]'): large scopes use exact search"
        )
    return module


class VectorIndex:
    """Vectors keyed by digest. Thread-safe; the graph is built outside the lock."""

    def __init__(self, dimensions: int, settings: IndexSettings | None = None) -> None:
        self.dimensions = dimensions
        self.settings = settings or IndexSettings()
        self._lock = threading.RLock()
        self._matrix: NDArray[np.float32] = np.zeros((0, dimensions), dtype=np.float32)
        self._alive: NDArray[np.bool_] = np.zeros(0, dtype=np.bool_)
        self._digests: list[str | None] = []  # row (the graph's key) -> digest
        self._rows: dict[str, int] = {}  # digest -> row
        self._ann: Any = None
        # While a graph is built outside the lock: the changes made meanwhile, in order
        # (row and vector for an add, row and None for a removal).
        self._journal: list[tuple[int, NDArray[np.float32] | None]] | None = None
        # Masks of allowed digests, by the identity of the frozenset the caller keeps.
        self._masks: OrderedDict[int, tuple[frozenset[str], int, NDArray[np.bool_]]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._rows)

    def __contains__(self, digest: object) -> bool:
        return digest in self._rows

    def digests(self) -> set[str]:
        with self._lock:
            return set(self._rows)

    @property
    def approximate(self) -> bool:
        """Whether searches go through the graph (else they scan exactly)."""
        return self._ann is not None

    # -- changes ----------------------------------------------------------------------------

    def add(self, digests: Sequence[str], vectors: Vectors) -> int:
        """Add vectors for digests not yet present; return how many were added."""
        if vectors.shape != (len(digests), self.dimensions):
            raise InvalidArgument(
                f"expected {len(digests)} vectors of {self.dimensions} dimensions,"
                f" got an array of shape {vectors.shape}"
            )
        with self._lock:
            fresh: dict[str, int] = {}
            for position, digest in enumerate(digests):
                if digest not in self._rows and digest not in fresh:
                    fresh[digest] = position
            if not fresh:
                return 0
            start = len(self._digests)
            end = start + len(fresh)
            if end > self._matrix.shape[0]:
                capacity = max(end, 2 * self._matrix.shape[0], 64)
                matrix = np.zeros((capacity, self.dimensions), dtype=np.float32)
                matrix[:start] = self._matrix[:start]
                alive = np.zeros(capacity, dtype=np.bool_)
                alive[:start] = self._alive[:start]
                self._matrix, self._alive = matrix, alive
            rows = np.arange(start, end)
            self._matrix[start:end] = vectors[list(fresh.values())]
            self._alive[start:end] = True
            for row, digest in zip(rows.tolist(), fresh, strict=True):
                self._digests.append(digest)
                self._rows[digest] = row
            if self._ann is not None:
                self._ann.add(rows.astype(np.uint64), self._matrix[start:end], threads=1)
            if self._journal is not None:
                self._journal.extend((row, self._matrix[row].copy()) for row in rows.tolist())
            self._masks.clear()
            return len(fresh)

    def discard(self, digests: Iterable[str]) -> int:
        """Remove the vectors of ``digests``; return how many were present."""
        removed = 0
        with self._lock:
            for digest in digests:
                row = self._rows.pop(digest, None)
                if row is None:
                    continue
                removed += 1
                self._alive[row] = False
                self._digests[row] = None
                if self._ann is not None:
                    self._ann.remove(row)
                if self._journal is not None:
                    self._journal.append((row, None))
            if removed:
                self._masks.clear()
        return removed

    # -- upkeep (background) ----------------------------------------------------------------

    def maintain(self) -> None:
        """Compact away removed rows, and build (or drop) the graph as the size asks."""
        with self._lock:
            dead = len(self._digests) - len(self._rows)
            if self._journal is None and dead > max(1024, len(self._rows)):
                self._compact()
            small = len(self._rows) < self.settings.ann_threshold // 2
            if small and self._ann is not None:
                self._ann = None
        if len(self._rows) >= self.settings.ann_threshold:
            self.build_graph()

    def _compact(self) -> None:
        live = [digest for digest in self._digests if digest is not None]
        rows = np.asarray([self._rows[digest] for digest in live], dtype=np.int64)
        matrix = self._matrix[rows].copy() if len(rows) else self._matrix[:0].copy()
        rebuild_graph = self._ann is not None
        self._matrix = matrix
        self._alive = np.ones(len(live), dtype=np.bool_)
        self._digests = list(live)
        self._rows = {digest: row for row, digest in enumerate(live)}
        self._ann = None
        self._masks.clear()
        if rebuild_graph:
            logger.info("compacted a recall index to %d vectors; its graph is dropped", len(live))

    def build_graph(self) -> bool:
        """Build the HNSW graph if the scope is large enough; True if searches now use it."""
        usearch = _usearch()
        if usearch is None:
            return False
        with self._lock:
            if self._ann is not None or self._journal is not None:
                return self._ann is not None
            if len(self._rows) < self.settings.ann_threshold:
                return False
            rows = np.flatnonzero(self._alive[: len(self._digests)])
            vectors = self._matrix[rows].copy()
            self._journal = []
        try:
            graph = usearch.Index(
                ndim=self.dimensions,
                metric="cos",
                dtype="i8",
                connectivity=self.settings.connectivity,
                expansion_add=self.settings.expansion_add,
                expansion_search=self.settings.expansion_search,
            )
            graph.add(rows.astype(np.uint64), vectors, threads=self.settings.threads)
        except BaseException:
            with self._lock:
                self._journal = None
            raise
        with self._lock:
            for row, vector in self._journal or ():
                if vector is not None:
                    graph.add(np.asarray([row], dtype=np.uint64), vector[None, :], threads=1)
                elif row in graph:
                    graph.remove(row)
            self._journal = None
            self._ann = graph
        return True

    # -- search -----------------------------------------------------------------------------

    def _mask(self, allowed: frozenset[str]) -> NDArray[np.bool_]:
        key = id(allowed)
        cached = self._masks.get(key)
        size = len(self._digests)
        if cached is not None and cached[0] is allowed and cached[1] == size:
            self._masks.move_to_end(key)
            return cached[2]
        mask = np.fromiter(
            (digest is not None and digest in allowed for digest in self._digests),
            dtype=np.bool_,
            count=size,
        )
        self._masks[key] = (allowed, size, mask)
        while len(self._masks) > 8:
            self._masks.popitem(last=False)
        return mask

    def search(
        self, query: Vectors, limit: int, allowed: frozenset[str] | None = None
    ) -> list[tuple[str, float]]:
        """Up to ``oversample`` × ``limit`` candidates (at least ``limit`` + 10) nearest to
        ``query`` (a normalised vector), each with its exact cosine, best first. ``allowed``
        restricts the answer to those digests (keep passing the same frozenset: its mask is
        cached)."""
        if query.shape != (self.dimensions,):
            raise InvalidArgument(f"the query must have {self.dimensions} dimensions")
        want = max(limit * self.settings.oversample, limit + 10)
        with self._lock:
            if not self._rows:
                return []
            mask = None if allowed is None else self._mask(allowed)
            rows = None
            if self._ann is not None:
                rows = self._graph_candidates(query, want, mask)
            if rows is None:
                rows = self._exact_candidates(query, want, mask)
            return self._scored(query, rows)

    def _graph_candidates(
        self, query: Vectors, want: int, mask: NDArray[np.bool_] | None
    ) -> NDArray[np.int64] | None:
        live = len(self._rows)
        eligible = live if mask is None else int(mask.sum())
        if eligible == 0:
            return np.zeros(0, dtype=np.int64)
        share = eligible / live
        if share < 0.5:
            return None  # most of the graph is out of view: a scan of the view is cheaper
        count = min(live, math.ceil(want / share) + 10)
        matches = self._ann.search(query, count, threads=1)
        rows = np.asarray(matches.keys, dtype=np.int64)
        rows = rows[self._alive[rows]]
        if mask is not None:
            rows = rows[mask[rows]]
        if len(rows) < min(want, eligible):
            return None  # the graph came back short: never answer with less than a scan
        return rows[:want]

    def _exact_candidates(
        self, query: Vectors, want: int, mask: NDArray[np.bool_] | None
    ) -> NDArray[np.int64]:
        size = len(self._digests)
        usable = self._alive[:size] if mask is None else mask
        rows = np.flatnonzero(usable)
        if len(rows) == 0:
            return rows
        candidates = self._matrix[:size] if len(rows) == size else self._matrix[rows]
        scores = candidates @ query
        if len(rows) <= want:
            return rows
        best = np.argpartition(-scores, want - 1)[:want]
        return rows[best]

    def _scored(self, query: Vectors, rows: NDArray[np.int64]) -> list[tuple[str, float]]:
        if len(rows) == 0:
            return []
        # Products and pairwise sums in float64, no BLAS: the same score on every path.
        scores = (self._matrix[rows].astype(np.float64) * query.astype(np.float64)).sum(axis=1)
        found: list[tuple[str, float]] = []
        for row, score in zip(rows.tolist(), scores.tolist(), strict=True):
            digest = self._digests[row]
            if digest is not None:
                found.append((digest, score))
        found.sort(key=lambda item: (-item[1], item[0]))
        return found
