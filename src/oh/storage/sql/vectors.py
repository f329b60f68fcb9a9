"""Recall's vector tables on both SQL backends (docs/recall.md): derived ``(digest, vector)``
rows only, written once here over the shared statements (``oh.storage.sql``).

``note_vectors`` is working memory: scoped to one notebook, so forget and purge delete it with
the notebook's other content. ``reviewed_vectors`` caches the vectors of an owner's reviewed
records. Vectors are opaque bytes here; ``oh.recall`` decides what they mean. In a sealed
database (docs/keys.md) a note's vector is kept sealed under its notebook's data key
(``NotebookCipher.seal_vector``), read through the memory store's keyring, so forgetting the
notebook makes every copy of it unreadable, as for the note itself.

A backend supplies its transactions (``SqlDatabase``), a name for messages (``_where``) and
``_scrub``, which makes rows deleted a moment ago leave its files.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any

from oh.core.clock import utc_text
from oh.core.seals import vector_seal
from oh.errors import IntegrityError, Purged, StorageUnavailable
from oh.keys import SEALED_VECTOR, Keyring, NotebookCipher
from oh.storage.sql import Connection, SqlDatabase

__all__ = ["VECTORS_SEALED_MARKER", "VECTOR_TABLES", "SqlVectorStore"]

# The key store's marker: this host's note vectors are sealed (plain ones were dropped once).
VECTORS_SEALED_MARKER = "note_vectors_sealed"

# Notebook-scoped tables of this module: forget and the purge delete them with the notebook.
VECTOR_TABLES = ("note_vectors",)

# Far below SQLite's 32,766 host parameters (and PostgreSQL's 65,535).
_CHUNK = 500


def _for_digests(
    conn: Connection, select: str, params: tuple[Any, ...], digests: Sequence[str]
) -> Iterator[tuple[Any, ...]]:
    """The rows of ``select … AND digest IN (digests)``, asked ``_CHUNK`` digests at a time."""
    for start in range(0, len(digests), _CHUNK):
        chunk = digests[start : start + _CHUNK]
        marks = ",".join("?" * len(chunk))
        yield from conn.execute(f"{select} AND digest IN ({marks})", (*params, *chunk)).fetchall()


def _opened(cipher: NotebookCipher, row: Sequence[Any]) -> tuple[str, str, str]:
    """A pending note's name, digest and content opened; the content as stored if it does not
    open, so that the recall service, which embeds only content that matches its digest, skips
    it as damaged."""
    name, digest, content, version = row
    try:
        name, digest = cipher.untoken(name, "name"), cipher.untoken(digest, "digest")
        return name, digest, cipher.open(content, name, version, digest)
    except IntegrityError:
        return str(name), str(digest), str(content)


def _count(conn: Connection, sql: str, params: Sequence[Any]) -> int:
    """How many rows a write statement ending ``RETURNING 1`` touched (a result both databases
    give at once, where a row count may wait for the end of a pipeline)."""
    return len(conn.execute(sql, params).fetchall())


class SqlVectorStore(SqlDatabase):
    """Note and reviewed-record vectors in the memory database. ``_sealed``: whether the
    database records that its notebooks are sealed (the backend reads it when it opens)."""

    _keyring: Keyring | None = None
    _sealed: bool = False

    def _where(self) -> str:
        """The memory database as a person names it, with no credential."""
        raise NotImplementedError

    def _scrub(self) -> None:
        """Make the rows deleted a moment ago leave the database's files and log."""
        raise NotImplementedError

    def read_with(self, keyring: Keyring | None) -> None:
        """Read the notes to embed through ``keyring``: the memory store's, the one object
        that opens them (``Recall`` hands it over; the memory store owns and closes it). A
        sealed database without it is refused here, loudly: its notes would be sealed text
        that never matches a digest, and recall would silently find nothing."""
        self._keyring = keyring
        self._keys()
        if keyring is not None and self._sealed:
            self._drop_plain_vectors(keyring)

    def _keys(self) -> Keyring | None:
        """The keyring notes and vectors are sealed with; None on a database that seals
        nothing; ``storage_unavailable`` on a sealed one this store was given no keys for, so
        it never reads sealed text as a note nor writes a plain vector beside sealed ones."""
        keyring = self._keyring
        if keyring is None and self._sealed:
            raise StorageUnavailable(
                f"the notebooks in {self._where()} are sealed: recall reads their notes through"
                " the memory store's keys, and this memory store has none. Open the memory store"
                " with its keys (oh.config.open_memory_store, docs/keys.md) and give it to Recall"
            )
        return keyring

    def _drop_plain_vectors(self, keyring: Keyring) -> None:
        """Once per key store: drop every note vector of this sealed database that was stored
        before vectors were sealed (they are derived data: catch-up embeds the notes again,
        sealed), and scrub the files, so no plain vector stays in them."""
        if keyring.store.marker(VECTORS_SEALED_MARKER) is not None:
            return
        with self._write() as conn:
            dropped = _count(
                conn,
                "DELETE FROM note_vectors WHERE substr(vector, 1, 4) <> ? RETURNING 1",
                (SEALED_VECTOR,),
            )
        if dropped:
            self._scrub()
        keyring.store.mark(VECTORS_SEALED_MARKER, self._where())

    # -- notes ----------------------------------------------------------------------------

    def open_notebook_ids(self, now: datetime) -> list[str]:
        """Notebooks that are open and not yet past their forget time, by id."""
        with self._read() as conn:
            rows = conn.execute(
                "SELECT id FROM notebooks WHERE state = 'open' AND forgets_at > ? ORDER BY id",
                (utc_text(now),),
            ).fetchall()
        return [row[0] for row in rows]

    def note_digests(self, notebook_id: str, model_id: str) -> list[tuple[str, str, bool]]:
        """``(name, digest, has_vector)`` of every current note, by name."""
        with self._read() as conn:
            rows = conn.execute(
                "SELECT r.name, r.digest, v.digest IS NOT NULL FROM records AS r"
                " LEFT JOIN note_vectors AS v ON v.notebook_id = r.notebook_id"
                " AND v.model_id = ? AND v.digest = r.digest"
                " WHERE r.notebook_id = ? ORDER BY r.name",
                (model_id, notebook_id),
            ).fetchall()
        cipher = self._cipher(notebook_id) if rows else None
        if cipher is None:
            return [(name, digest, bool(has)) for name, digest, has in rows]
        untoken = cipher.untoken
        return sorted(
            (untoken(name, "name"), untoken(digest, "digest"), bool(has))
            for name, digest, has in rows
        )

    def _cipher(self, notebook_id: str) -> NotebookCipher | None:
        """The notebook's cipher when this database is sealed (its rows keep names and digests
        as tokens), else None; ``purged`` when the notebook has no data key."""
        keyring = self._keys()
        return None if keyring is None else keyring.cipher(notebook_id)

    def pending_notes(
        self, notebook_id: str, model_id: str, limit: int, after: str = ""
    ) -> list[tuple[str, str, str]]:
        """``(name, digest, canonical content)`` of current notes after ``after`` that have no
        vector (``after``, the last name of a page, pages through them; in a sealed database they
        come in the order of their names' tokens)."""
        try:
            cipher = self._cipher(notebook_id)
        except Purged:
            return []  # forgotten: nothing of it is embedded again
        if cipher is not None and after:
            after = cipher.token(after, "name")
        with self._read() as conn:
            rows = conn.execute(
                "SELECT r.name, r.digest, r.content, r.version FROM records AS r"
                " WHERE r.notebook_id = ? AND r.name > ?"
                " AND NOT EXISTS (SELECT 1 FROM note_vectors AS v WHERE v.notebook_id = ?"
                " AND v.model_id = ? AND v.digest = r.digest) ORDER BY r.name LIMIT ?",
                (notebook_id, after, notebook_id, model_id, limit),
            ).fetchall()
        if cipher is None:
            return [(name, digest, content) for name, digest, content, _ in rows]
        return [_opened(cipher, row) for row in rows]

    def note_vectors(
        self, notebook_id: str, model_id: str, digests: Sequence[str]
    ) -> dict[str, bytes]:
        """The stored vectors of ``digests`` (those that have one), opened when sealed; one that
        does not open is left out (embedded again; ``oh verify`` reports it)."""
        try:
            cipher = self._cipher(notebook_id)
        except Purged:
            return {}
        if cipher is not None:  # found by the digests' tokens
            plain = {cipher.token(digest, "digest"): digest for digest in digests}
            digests = list(plain)
        with self._read() as conn:
            rows = list(
                _for_digests(
                    conn,
                    "SELECT digest, vector FROM note_vectors"
                    " WHERE notebook_id = ? AND model_id = ?",
                    (notebook_id, model_id),
                    digests,
                )
            )
        if cipher is None:
            return {digest: bytes(vector) for digest, vector in rows}
        opened = {}
        for kept, vector in rows:
            digest = plain[kept]
            try:
                opened[digest] = cipher.open_vector(bytes(vector), model_id, digest)
            except IntegrityError:
                continue
        return opened

    def put_note_vectors(
        self, notebook_id: str, model_id: str, rows: Sequence[tuple[str, str, bytes]]
    ) -> int:
        """Store ``(name, digest, vector)`` rows whose note is still current, each sealed to its
        notebook, model and digest; return how many were new. A note replaced or removed while
        it was being embedded stores nothing; a notebook no longer open is refused by the
        database (``purged``)."""
        keyring = self._keys()
        if keyring is not None:
            # Sealed under the notebook's data key (``purged`` once it is gone); the seal that
            # verify checks is over the bytes stored, so it confirms no guessed vector.
            # Name and digest are found as the records keep them: tokens.
            cipher = keyring.cipher(notebook_id)
            token = cipher.token
            rows = [
                (
                    token(name, "name"),
                    token(digest, "digest"),
                    cipher.seal_vector(vector, model_id, digest),
                )
                for name, digest, vector in rows
            ]
        sealed = [
            (digest, vector, name, vector_seal("note", notebook_id, model_id, digest, vector))
            for name, digest, vector in rows
        ]
        stored = 0
        with self._write() as conn:
            for digest, vector, name, seal in sealed:
                stored += _count(
                    conn,
                    "INSERT INTO note_vectors (notebook_id, model_id, digest, vector, seal)"
                    " SELECT ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM records"
                    " WHERE notebook_id = ? AND name = ? AND digest = ?)"
                    " ON CONFLICT DO NOTHING RETURNING 1",
                    (notebook_id, model_id, digest, vector, seal, notebook_id, name, digest),
                )
        return stored

    def prune_note_vectors(self, notebook_id: str, model_id: str) -> int:
        """Delete this model's vectors of digests that are no longer a current note."""
        with self._write() as conn:
            return _count(
                conn,
                "DELETE FROM note_vectors WHERE notebook_id = ? AND model_id = ?"
                " AND digest NOT IN (SELECT digest FROM records WHERE notebook_id = ?)"
                " RETURNING 1",
                (notebook_id, model_id, notebook_id),
            )

    def drop_note_vectors(self, notebook_id: str | None = None) -> int:
        """Delete every note vector of every model (of one notebook, or of all)."""
        with self._write() as conn:
            if notebook_id is None:
                return _count(conn, "DELETE FROM note_vectors RETURNING 1", ())
            return _count(
                conn, "DELETE FROM note_vectors WHERE notebook_id = ? RETURNING 1", (notebook_id,)
            )

    # -- reviewed knowledge -----------------------------------------------------------------

    def reviewed_vectors(
        self, owner: str, model_id: str, digests: Sequence[str]
    ) -> dict[str, bytes]:
        with self._read() as conn:
            return {
                digest: bytes(vector)
                for digest, vector in _for_digests(
                    conn,
                    "SELECT digest, vector FROM reviewed_vectors WHERE owner = ? AND model_id = ?",
                    (owner, model_id),
                    digests,
                )
            }

    def missing_reviewed(self, owner: str, model_id: str, digests: Sequence[str]) -> list[str]:
        """Those of ``digests`` (in their order) that have no vector yet."""
        with self._read() as conn:
            present = {
                row[0]
                for row in _for_digests(
                    conn,
                    "SELECT digest FROM reviewed_vectors WHERE owner = ? AND model_id = ?",
                    (owner, model_id),
                    digests,
                )
            }
        return [digest for digest in digests if digest not in present]

    def put_reviewed_vectors(
        self, owner: str, model_id: str, rows: Sequence[tuple[str, bytes]]
    ) -> int:
        sealed = [
            (digest, vector, vector_seal("reviewed", owner, model_id, digest, vector))
            for digest, vector in rows
        ]
        stored = 0
        with self._write() as conn:
            for digest, vector, seal in sealed:
                stored += _count(
                    conn,
                    "INSERT INTO reviewed_vectors (owner, model_id, digest, vector, seal)"
                    " VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING 1",
                    (owner, model_id, digest, vector, seal),
                )
        return stored

    def drop_reviewed_vectors(self) -> int:
        with self._write() as conn:
            return _count(conn, "DELETE FROM reviewed_vectors RETURNING 1", ())

    # -- rebuild --------------------------------------------------------------------------

    def drop_model_vectors(self, model_id: str) -> int:
        """Delete every vector of one model id, notes and reviewed records."""
        with self._write() as conn:
            return sum(
                _count(conn, f"DELETE FROM {table} WHERE model_id = ? RETURNING 1", (model_id,))
                for table in ("note_vectors", "reviewed_vectors")
            )

    def replace_vectors(self, staged_model_id: str, model_id: str) -> dict[str, int]:
        """Swap a rebuilt index in, in one transaction: delete every vector that is not of
        ``staged_model_id`` (every model), then give the staged vectors ``model_id``. Returns
        the rows deleted per table. Readers see the old index or the new one, never neither."""
        dropped: dict[str, int] = {}
        with self._write() as conn:
            for table in ("note_vectors", "reviewed_vectors"):
                dropped[table] = _count(
                    conn,
                    f"DELETE FROM {table} WHERE model_id <> ? RETURNING 1",
                    (staged_model_id,),
                )
                conn.execute(
                    f"UPDATE {table} SET model_id = ? WHERE model_id = ?",
                    (model_id, staged_model_id),
                )
        return dropped

    def vector_count(self) -> dict[str, int]:
        """Rows per vector table (for reports and tests)."""
        counts: dict[str, int] = {}
        with self._read() as conn:
            for table in ("note_vectors", "reviewed_vectors"):
                row: Any = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
                counts[table] = int(row[0])
        return counts
