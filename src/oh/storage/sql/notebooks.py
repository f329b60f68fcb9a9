"""The memory store's statements both SQL backends run, written once.

``SqlMemoryStore`` holds every ``MemoryStore`` method whose SQL is the same on libSQL and
PostgreSQL: notebooks (create, open, find), current records, seals, kept answers and the hot
read. A backend class inherits it beside its database class and supplies what only it can do
(``SqlMemoryBackend``): writing a log entry in its own layout, inserting current records in
bulk, an answer's relaxed-durability commit. What a write means is decided in ``oh.core``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, suppress
from datetime import datetime
from typing import Any, Protocol

from oh.core.answers import Answer
from oh.core.changes import LogEntry, fold, genesis_hash
from oh.core.clock import system_clock, utc_text
from oh.core.notebook import Notebook, check_not_closed
from oh.core.records import StoredRecord, kind_of
from oh.core.seals import notebook_seal, opened_seal, row_seal
from oh.errors import IntegrityError, NotFound, Purged
from oh.keys import Keyring, NotebookCipher
from oh.keys.sealing import (
    SEALED_MARKER,
    check_keys_fit,
    cipher_for_sealing,
    entry_tokens,
    is_plain,
    open_answer_row,
    open_entry,
    open_record_row,
    seal_answer_fields,
    seal_answer_values,
    seal_entry,
    seal_records,
    tokens,
)
from oh.storage.base import PreparedRemember, VectorRow
from oh.storage.log_rows import (
    LOG_COLUMNS,
    LOG_PAGE_CHANGES,
    change_columns,
    entry_from_row,
    json_rows,
)
from oh.storage.rows import (
    ANSWER_COLUMNS,
    NOTEBOOK_COLUMNS,
    answer_from_row,
    answer_values,
    insert,
    notebook_from_row,
)
from oh.storage.sql import Connection, SqlDatabase

__all__ = ["RECORD_COLUMNS", "SqlMemoryBackend", "SqlMemoryStore"]

# The notebooks a first sealed open seals: every one that is not closed.
NOTEBOOKS_TO_SEAL = (
    "SELECT id FROM notebooks WHERE state IN ('opening', 'open', 'expired') ORDER BY id"
)

RECORD_COLUMNS = "name, kind, content, digest, author, written_at, version"

_CREATE_NOTEBOOK = (
    "INSERT INTO notebooks (id, owner, document, run, state, started_at, forgets_at, version,"
    " pinned_revision, head_hash, seal) VALUES (?, ?, ?, ?, 'opening', ?, ?, 0, ?, ?, ?)"
    f" RETURNING {NOTEBOOK_COLUMNS}"
)
_READ_NOTEBOOK = f"SELECT {NOTEBOOK_COLUMNS} FROM notebooks WHERE id = ?"
# The hot read path: a notebook and one of its records, in one statement (one snapshot).
_READ_RECORD = (
    f"SELECT {', '.join(f'n.{c.strip()}' for c in NOTEBOOK_COLUMNS.split(','))}, r.name, r.kind,"
    " r.content, r.digest, r.author, r.written_at, r.version FROM notebooks AS n"
    " LEFT JOIN records AS r ON r.notebook_id = n.id AND r.name = ? WHERE n.id = ?"
)
_IMPORT_NOTEBOOK = (
    "INSERT INTO notebooks (id, owner, document, run, state, started_at, forgets_at, version,"
    " pinned_revision, head_hash, purged_at) VALUES (?, ?, ?, ?, ?, ?, ?, 0, ?, ?, NULL)"
)
# A notebook whose names, kinds, digests, request ids, fingerprints, hashes and answer ids are
# kept as tokens (``NotebookCipher.token``): every notebook a sealing store creates or imports,
# and each one written before, once it is converted (``_token_notebooks``).
_VALUES_SEALED = "INSERT INTO sealed_values (notebook_id) VALUES (?)"
_VALUES_TO_SEAL = (
    "SELECT id FROM notebooks WHERE state IN ('opening', 'open', 'expired')"
    " AND id NOT IN (SELECT notebook_id FROM sealed_values) ORDER BY id"
)


def _by_name(record: StoredRecord) -> str:
    return record.name


_SAVE_ANSWER = (
    insert("answers", ANSWER_COLUMNS, "?") + " ON CONFLICT (notebook_id, answer_id) DO UPDATE"
    " SET expires_at = CASE WHEN excluded.expires_at > answers.expires_at"
    " THEN excluded.expires_at ELSE answers.expires_at END"
)


class SqlMemoryBackend(SqlDatabase, Protocol):
    """What a SQL backend adds to ``SqlDatabase`` for the shared memory statements."""

    def _ephemeral(self) -> AbstractContextManager[Connection]:
        """A write transaction whose commit need not survive power loss (kept answers)."""

    def _insert_records(
        self, conn: Connection, notebook_id: str, records: Sequence[StoredRecord]
    ) -> None:
        """Insert current records in bulk, inside the caller's write transaction."""

    def _sealing_recorded(self) -> bool:
        """Whether the database's ``sealing`` row says its content is sealed."""

    def _where(self) -> str:
        """The memory database as a person names it, with no credential."""

    def _compact_sealed(self) -> None:
        """Make the plain text that sealing replaced leave the database's files."""


class SqlMemoryStore(PreparedRemember, SqlMemoryBackend):
    """The ``MemoryStore`` methods whose SQL both backends run.

    With a keyring (``_keyring``, docs/keys.md) every notebook created gets a data key and its
    content is sealed here on the way in and opened on the way out (``oh.keys.sealing``);
    without one, content is kept as it is."""

    _keyring: Keyring | None = None

    @property
    def keyring(self) -> Keyring | None:
        """The keyring this store seals with (it owns and closes it), or None."""
        return self._keyring

    def data_key_destroyed(self, notebook_id: str) -> bool:
        keyring = self._keyring
        return keyring is not None and not keyring.has_key(notebook_id)

    # -- the log: one row per entry (``oh.storage.log_rows``) ---------------------------------

    @staticmethod
    def _log_entry(conn: Connection, notebook_id: str, entry: LogEntry) -> None:
        conn.execute(
            "INSERT INTO log (notebook_id, version, request_id, fingerprint, author, written_at,"
            " prev_hash, hash, changes, op, name, content, digest)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                notebook_id,
                *entry[1:6],
                entry.prev_hash,
                entry.hash,
                *change_columns(entry.changes),
            ),
        )

    def _entries(self, conn: Connection, notebook_id: str, first: int, last: int) -> list[LogEntry]:
        """The entries with versions ``first`` to ``last``, in version order."""
        rows = conn.execute(
            f"SELECT {LOG_COLUMNS} FROM log"
            " WHERE notebook_id = ? AND version BETWEEN ? AND ? ORDER BY version",
            (notebook_id, first, last),
        ).fetchall()
        try:
            return self._opened(notebook_id, [entry_from_row(notebook_id, row) for row in rows])
        except ValueError as exc:
            raise IntegrityError(f"notebook {notebook_id}: {exc}") from exc

    def log(self, notebook_id: str, *, batch: int = 1000) -> Iterator[LogEntry]:
        """The log in version order, read a page at a time (each page one read transaction).

        A page holds at most ``batch`` entries and about ``LOG_PAGE_CHANGES`` changes, so
        memory stays flat whatever the log's length or the number of changes per entry, and the
        consumer's work on one page overlaps nothing: the lock is released between pages. A row
        whose changes cannot be read raises ``IntegrityError`` when the reader reaches it.
        """
        after, size = 0, min(batch, 16)
        make = entry_from_row
        keyring, cipher = self._keyring, None
        while True:
            with self._read() as conn:
                rows = conn.execute(
                    f"SELECT {LOG_COLUMNS} FROM log"
                    " WHERE notebook_id = ? AND version > ? ORDER BY version LIMIT ?",
                    (notebook_id, after, size),
                ).fetchall()
            for row in rows:
                try:
                    entry = make(notebook_id, row)
                except ValueError as exc:
                    raise IntegrityError(f"notebook {notebook_id}: {exc}") from exc
                if keyring is not None:
                    if cipher is None:
                        cipher = keyring.cipher(notebook_id)
                    entry = open_entry(cipher, entry)
                yield entry
            if len(rows) < size:
                return
            after = rows[-1][0]
            changes = sum(row[7] if type(row[7]) is int else 1 for row in rows)
            size = max(1, min(batch, size * LOG_PAGE_CHANGES // max(changes, 1)))

    def changes_after(
        self, notebook_id: str, version: int
    ) -> tuple[int, list[tuple[str, str | None, str | None]]]:
        with self._read() as conn:
            current = self._version(conn, notebook_id)
            rows = conn.execute(
                f"SELECT {LOG_COLUMNS} FROM log"
                " WHERE notebook_id = ? AND version > ? ORDER BY version",
                (notebook_id, version),
            ).fetchall()
        try:
            entries = self._opened(notebook_id, [entry_from_row(notebook_id, row) for row in rows])
        except ValueError as exc:
            raise IntegrityError(f"notebook {notebook_id}: {exc}") from exc
        return current, [
            (name, digest, content)
            for entry in entries
            for _, name, content, digest in entry.changes
        ]

    def _seal_log(self, conn: Connection, notebook_id: str, cipher: NotebookCipher) -> None:
        """Each log row's plain content sealed: a column, or a JSON array of them."""
        rows = conn.execute(
            "SELECT version, changes, name, content, digest FROM log WHERE notebook_id = ?",
            (notebook_id,),
        ).fetchall()
        for version, count, name, content, digest in rows:
            if count == 1:
                if not is_plain(content):
                    continue
                sealed = cipher.seal(content, name, version, digest or "")
            else:
                names, contents, digests = (json.loads(v) for v in (name, content, digest))
                sealed = json_rows(
                    [
                        cipher.seal(c, n, version, d or "") if is_plain(c) else c
                        for n, c, d in zip(names, contents, digests, strict=True)
                    ]
                )
            conn.execute(
                "UPDATE log SET content = ? WHERE notebook_id = ? AND version = ?",
                (sealed, notebook_id, version),
            )

    def _token_log(self, conn: Connection, notebook_id: str, cipher: NotebookCipher) -> None:
        """Each log row's plain values as tokens: a column, or a JSON array of them. The
        notebook's recall vectors are dropped: derived data, sealed to the plain digest,
        embedded again by the next catch-up and kept under the digests' tokens."""
        token = cipher.token
        rows = conn.execute(
            "SELECT version, changes, request_id, fingerprint, prev_hash, hash, name, digest"
            " FROM log WHERE notebook_id = ?",
            (notebook_id,),
        ).fetchall()
        for version, count, request_id, fingerprint, prev_hash, hash_, name, digest in rows:
            if count == 1:
                name = token(name, "name")
                digest = None if digest is None else token(digest, "digest")
            else:
                name = json_rows(tokens(cipher, json.loads(name), "name"))
                digest = json_rows(
                    [None if d is None else token(d, "digest") for d in json.loads(digest)]
                )
            conn.execute(
                "UPDATE log SET request_id = ?, fingerprint = ?, prev_hash = ?, hash = ?,"
                " name = ?, digest = ? WHERE notebook_id = ? AND version = ?",
                (
                    *entry_tokens(cipher, request_id, fingerprint, prev_hash, hash_),
                    name,
                    digest,
                    notebook_id,
                    version,
                ),
            )
        conn.execute("DELETE FROM note_vectors WHERE notebook_id = ?", (notebook_id,))

    def _opened_vector_rows(
        self, notebook_id: str, rows: Iterable[VectorRow]
    ) -> Iterator[VectorRow]:
        """A notebook's stored vector rows as ``verify`` checks them: in a sealed database
        each digest opened from its token (``kept`` the token the seal binds)."""
        cipher = None
        if self._keyring is not None:
            with suppress(Purged):  # a forgotten notebook's leftovers are counted as they are
                cipher = self._keyring.cipher(notebook_id)
        if cipher is None:
            yield from rows
            return
        for row in rows:
            try:
                digest = cipher.untoken(row.digest, "digest")
            except IntegrityError:
                digest = row.digest  # verify reports it: no digest this notebook wrote
            yield row._replace(digest=digest, kept=row.digest)

    def _cipher(self, notebook_id: str) -> NotebookCipher | None:
        """The notebook's cipher, or None when this store seals nothing."""
        keyring = self._keyring
        return None if keyring is None else keyring.cipher(notebook_id)

    def _has_content(self, notebook_id: str) -> bool:
        """Whether the notebook has current records (a notebook without a data key has none,
        unless it was forgotten after this copy of the database was taken)."""
        with self._statement() as conn:
            found = conn.execute(
                "SELECT 1 FROM records WHERE notebook_id = ? LIMIT 1", (notebook_id,)
            ).fetchone()
        return found is not None

    def _notebook_of(self, row: Sequence[Any], cipher: NotebookCipher | None = None) -> Notebook:
        """A ``NOTEBOOK_COLUMNS`` row as a notebook, its head hash opened when this store seals
        (with ``cipher``, the notebook's, when the caller has it). A forgotten notebook's stays
        as kept: nothing opens it; a damaged one too, for verify to report."""
        keyring = self._keyring
        if keyring is None:
            return notebook_from_row(row)
        if row[4] in ("purged", "empty"):
            keyring.drop(row[0])  # forgotten, maybe through another server: no key stays here
            return notebook_from_row(row)
        try:
            if cipher is None:
                cipher = keyring.cipher(row[0])
            head = cipher.untoken(row[9], "hash")
        except (Purged, IntegrityError):
            return notebook_from_row(row)
        return notebook_from_row(row, head)

    def _sealed(self, entry: LogEntry) -> LogEntry:
        """``entry`` as it is written: its content sealed when this store seals."""
        keyring = self._keyring
        return entry if keyring is None else seal_entry(keyring.cipher(entry.notebook_id), entry)

    def _kinds(self, entry: LogEntry) -> list[str]:
        """The kinds of ``entry``'s changes as the records keep them (tokens when sealing)."""
        kinds = [kind_of(change.name) for change in entry.changes]
        keyring = self._keyring
        if keyring is None:
            return kinds
        return tokens(keyring.cipher(entry.notebook_id), kinds, "kind")

    def _check_values(self, notebook_id: str, rows: Sequence[Sequence[Any]]) -> list[Any]:
        """verify's rows of current records (name, kind, digest, then stamps) with their
        values opened when sealing; a value that does not open is left as stored, for verify
        to report."""
        keyring = self._keyring
        if keyring is None or not rows:
            return list(rows)
        cipher = keyring.cipher(notebook_id)
        opened = []
        for row in rows:
            values = list(row)
            for i, column in enumerate(("name", "kind", "digest")):
                with suppress(IntegrityError):
                    values[i] = cipher.untoken(row[i], column)
            opened.append(values)
        return opened

    def _opened(self, notebook_id: str, entries: list[LogEntry]) -> list[LogEntry]:
        """``entries`` as read: their content opened when this store seals."""
        keyring = self._keyring
        if keyring is None or not entries:
            return entries
        cipher = keyring.cipher(notebook_id)
        return [open_entry(cipher, entry) for entry in entries]

    # -- sealing a database (docs/keys.md) ------------------------------------------------

    def _check_sealing(self) -> None:
        """On open: refuse a sealed database without a keyring; with one, seal (once) every
        notebook written before keys, then record that the database is sealed."""
        sealed = self._sealing_recorded()
        keyring = self._keyring
        if sealed:
            check_keys_fit(keyring, self._where())
        if keyring is None:
            return
        if keyring.store.marker(SEALED_MARKER) is None:
            if self._seal_notebooks(keyring):
                self._compact_sealed()
            keyring.store.mark(SEALED_MARKER, self._where())
        if self._token_notebooks(keyring):
            self._compact_sealed()
        if not sealed:
            # ``since`` is bookkeeping for a person reading the table, never compared: the
            # host's clock, not the database's (Oh takes no time from the database).
            since = utc_text(system_clock())
            with self._write() as conn:
                conn.execute(
                    "INSERT INTO sealing (id, since) VALUES (1, ?) ON CONFLICT (id) DO NOTHING",
                    (since,),
                )

    def _seal_notebooks(self, keyring: Keyring) -> int:
        """Seal every notebook written before the database had keys: give each notebook that
        is not closed a data key (if the key store has none yet) and seal its plain content,
        one notebook a transaction under its row's lock (stores opening at once take turns).
        Sealed values are left as they are, so a run stopped half way is finished by the next
        open. Returns how many notebooks were sealed."""
        with self._write() as conn:
            ids = [row[0] for row in conn.execute(NOTEBOOKS_TO_SEAL).fetchall()]
        for notebook_id in ids:
            with self._write() as conn:
                conn.execute(
                    "SELECT 1 FROM notebooks WHERE id = ?" + self.FOR_UPDATE, (notebook_id,)
                )
                cipher = cipher_for_sealing(keyring, notebook_id)
                self._seal_log(conn, notebook_id, cipher)
                _seal_current(conn, notebook_id, cipher)
        return len(ids)

    def _token_notebooks(self, keyring: Keyring) -> int:
        """Keep as tokens the values of every notebook written before they were (a database
        sealed by an earlier version of Oh): one notebook a transaction under its row's lock,
        marked done in the same transaction, so a run stopped half way is finished by the next
        open and two stores opening at once take turns. A notebook without a data key was
        forgotten after this copy was taken: nothing of it can be opened, it is left as it is.
        Returns how many notebooks were converted."""
        with self._write() as conn:
            ids = [row[0] for row in conn.execute(_VALUES_TO_SEAL).fetchall()]
        done = 0
        for notebook_id in ids:
            try:
                cipher = keyring.cipher(notebook_id)
            except Purged:
                continue
            with self._write() as conn:
                conn.execute(
                    "SELECT 1 FROM notebooks WHERE id = ?" + self.FOR_UPDATE, (notebook_id,)
                )
                if conn.execute(
                    "SELECT 1 FROM sealed_values WHERE notebook_id = ?", (notebook_id,)
                ).fetchone():
                    continue  # another store converted it meanwhile
                self._token_log(conn, notebook_id, cipher)
                _token_current(conn, notebook_id, cipher)
                conn.execute(_VALUES_SEALED, (notebook_id,))
            done += 1
        return done

    def _entry(self, conn: Connection, notebook_id: str, version: int) -> LogEntry:
        """One log entry, which must be there (a version the notebook's head counts)."""
        entries = self._entries(conn, notebook_id, version, version)
        if not entries:
            raise IntegrityError(f"log entry {version} of {notebook_id} is missing")
        return entries[0]

    # -- notebooks ------------------------------------------------------------------------

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
        started, forgets = utc_text(started_at), utc_text(forgets_at)
        seal = notebook_seal(
            notebook_id, owner, document, run, started, forgets, pinned_revision, "opening"
        )
        values = (notebook_id, owner, document, run, started, forgets, pinned_revision)
        keyring = self._keyring
        head = genesis_hash(notebook_id)
        if keyring is not None:
            # The key is kept before the notebook exists, so no content is ever written
            # without one; a notebook that then fails to be created leaves no key behind.
            head = keyring.create(notebook_id).token(head, "hash")
        try:
            with self._write() as conn:
                row = conn.execute(_CREATE_NOTEBOOK, (*values, head, seal)).fetchone()
                if keyring is not None:
                    conn.execute(_VALUES_SEALED, (notebook_id,))
        except BaseException:
            if keyring is not None:
                keyring.destroy([notebook_id])
            raise
        return self._notebook_of(row)

    def mark_open(self, notebook_id: str, pinned_revision: int | None) -> Notebook:
        with self._write() as conn:
            notebook = self._notebook(conn, notebook_id, lock=True)
            if notebook.state == "open":
                return notebook
            check_not_closed(notebook.id, notebook.state)
            row = conn.execute(
                "UPDATE notebooks SET state = 'open', pinned_revision = ?, seal = ?"
                f" WHERE id = ? RETURNING {NOTEBOOK_COLUMNS}",
                (pinned_revision, opened_seal(notebook, pinned_revision), notebook_id),
            ).fetchone()
        return self._notebook_of(row)

    def _notebook(self, conn: Connection, notebook_id: str, lock: bool = False) -> Notebook:
        """The notebook's row (locked until the transaction ends with ``lock``)."""
        sql = _READ_NOTEBOOK + self.FOR_UPDATE if lock else _READ_NOTEBOOK
        row = conn.execute(sql, (notebook_id,)).fetchone()
        if row is None:
            raise NotFound(f"no notebook {notebook_id}")
        return self._notebook_of(row)

    def notebook(self, notebook_id: str) -> Notebook:
        with self._statement() as conn:
            return self._notebook(conn, notebook_id)

    def find_notebook(self, owner: str, document: str, run: str) -> Notebook | None:
        with self._statement() as conn:
            row = conn.execute(
                f"SELECT {NOTEBOOK_COLUMNS} FROM notebooks"
                " WHERE owner = ? AND document = ? AND run = ?",
                (owner, document, run),
            ).fetchone()
        return None if row is None else self._notebook_of(row)

    def notebook_ids(self) -> list[str]:
        with self._statement() as conn:
            return [
                row[0] for row in conn.execute("SELECT id FROM notebooks ORDER BY id").fetchall()
            ]

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
        where, values = ["owner = ?"], [owner]
        if document is not None:
            where.append("document = ?")
            values.append(document)
        if state in ("open", "expired"):  # an open notebook past its forget time is expired
            where.append("state = 'open' AND forgets_at " + ("> ?" if state == "open" else "<= ?"))
            values.append(now)
        elif state is not None:
            where.append("state = ?")
            values.append(state)
        if after is not None:
            where.append("(started_at < ? OR (started_at = ? AND id < ?))")
            values += [after[0], after[0], after[1]]
        with self._statement() as conn:
            rows = conn.execute(
                f"SELECT {NOTEBOOK_COLUMNS} FROM notebooks WHERE {' AND '.join(where)}"
                " ORDER BY started_at DESC, id DESC LIMIT ?",
                (*values, limit),
            ).fetchall()
        return [self._notebook_of(row) for row in rows]

    def notebook_activity(
        self, owner: str, notebook_ids: Sequence[str]
    ) -> dict[str, tuple[int, str | None]]:
        ids = list(dict.fromkeys(notebook_ids))
        found: dict[str, tuple[int, str | None]] = {}
        for start in range(0, len(ids), 500):  # within every SQL engine's parameter limit
            chunk = tuple(ids[start : start + 500])
            marks = ", ".join("?" for _ in chunk)
            with self._read() as conn:
                known = conn.execute(
                    f"SELECT id FROM notebooks WHERE owner = ? AND id IN ({marks})",
                    (owner, *chunk),
                ).fetchall()
                counts = conn.execute(
                    f"SELECT notebook_id, count(*) FROM records WHERE notebook_id IN ({marks})"
                    " GROUP BY notebook_id",
                    chunk,
                ).fetchall()
                written = conn.execute(
                    f"SELECT notebook_id, max(written_at) FROM log WHERE notebook_id IN ({marks})"
                    " GROUP BY notebook_id",
                    chunk,
                ).fetchall()
            notes, last = dict(counts), dict(written)
            found.update({row[0]: (int(notes.get(row[0], 0)), last.get(row[0])) for row in known})
        return found

    def notebook_seal(self, notebook_id: str) -> str | None:
        with self._statement() as conn:
            row = conn.execute("SELECT seal FROM notebooks WHERE id = ?", (notebook_id,)).fetchone()
        if row is None:
            raise NotFound(f"no notebook {notebook_id}")
        return row[0]  # type: ignore[no-any-return]

    # -- current records ------------------------------------------------------------------

    def records(self, notebook_id: str) -> list[StoredRecord]:
        # Rows are turned into records a thousand at a time, so the driver's rows for the
        # whole notebook never sit in memory beside the records (and it is faster, too).
        records: list[StoredRecord] = []
        with self._read() as conn:
            cursor = conn.execute(
                f"SELECT {RECORD_COLUMNS} FROM records WHERE notebook_id = ? ORDER BY name",
                (notebook_id,),
            )
            keyring, cipher = self._keyring, None
            while rows := cursor.fetchmany(1000):
                if keyring is not None and cipher is None:
                    cipher = keyring.cipher(notebook_id)
                if cipher is None:
                    records += [StoredRecord(*row) for row in rows]
                else:
                    records += [open_record_row(cipher, row) for row in rows]
        if cipher is not None:  # the rows came in the order of their names' tokens
            records.sort(key=_by_name)
        return records

    def record(self, notebook_id: str, name: str) -> StoredRecord | None:
        try:
            cipher = self._cipher(notebook_id)  # rows are found by their names' tokens
        except Purged:
            if self._has_content(notebook_id):
                raise
            return None
        with self._statement() as conn:
            row = conn.execute(
                f"SELECT {RECORD_COLUMNS} FROM records WHERE notebook_id = ? AND name = ?",
                (notebook_id, name if cipher is None else cipher.token(name, "name")),
            ).fetchone()
        if row is None:
            return None
        return StoredRecord(*row) if cipher is None else open_record_row(cipher, row, name)

    def read_record(self, notebook_id: str, name: str) -> tuple[Notebook, StoredRecord | None]:
        try:
            cipher = self._cipher(notebook_id)  # rows are found by their names' tokens
        except Purged:
            # No data key: a forgotten notebook reads as one (the caller says so), a notebook
            # forgotten after this copy of the database was taken is ``purged``.
            notebook = self.notebook(notebook_id)
            if notebook.state not in ("purged", "empty"):
                raise
            return notebook, None
        kept = name if cipher is None else cipher.token(name, "name")
        with self._statement() as conn:
            row = conn.execute(_READ_RECORD, (kept, notebook_id)).fetchone()
        if row is None:
            raise NotFound(f"no notebook {notebook_id}")
        notebook = self._notebook_of(row[:11], cipher)
        if row[11] is None:
            return notebook, None
        if cipher is None:
            return notebook, StoredRecord(*row[11:])
        return notebook, open_record_row(cipher, row[11:], name)

    def digests(self, notebook_id: str) -> tuple[int, list[tuple[str, str]]]:
        with self._read() as conn:
            version = self._version(conn, notebook_id)
            rows = conn.execute(
                "SELECT name, digest FROM records WHERE notebook_id = ? ORDER BY name",
                (notebook_id,),
            ).fetchall()
        cipher = self._cipher(notebook_id) if rows else None
        if cipher is None:
            return version, [(name, digest) for name, digest in rows]
        untoken = cipher.untoken
        return version, sorted(
            (untoken(name, "name"), untoken(digest, "digest")) for name, digest in rows
        )

    @staticmethod
    def _version(conn: Connection, notebook_id: str) -> int:
        """The notebook's memory version; ``not_found`` if there is no such notebook."""
        row = conn.execute("SELECT version FROM notebooks WHERE id = ?", (notebook_id,)).fetchone()
        if row is None:
            raise NotFound(f"no notebook {notebook_id}")
        return int(row[0])

    def replace_records(self, notebook_id: str, records: Iterable[StoredRecord]) -> None:
        rows = list(records)
        cipher = self._cipher(notebook_id)
        if cipher is not None:
            rows = seal_records(cipher, rows)
        with self._write() as conn:
            conn.execute("DELETE FROM records WHERE notebook_id = ?", (notebook_id,))
            self._insert_records(conn, notebook_id, rows)

    # -- import ---------------------------------------------------------------------------

    def import_notebook(self, notebook: Notebook, entries: Iterable[LogEntry]) -> Notebook:
        """Recreate an exported notebook exactly, in one write transaction: its row, its log
        entries as they were and its current records folded from them. ``already_exists`` if
        its id or run is taken. The caller checks the chain; ``entries`` may be a stream."""
        # ``expired`` is computed from the forget time, never stored.
        stored = "open" if notebook.state in ("open", "expired") else notebook.state
        identity = (notebook.id, notebook.owner, notebook.document, notebook.run, stored)
        times = (notebook.started_at, notebook.forgets_at, notebook.pinned_revision)
        keyring = self._keyring
        cipher = None
        if keyring is not None and stored in ("open", "opening"):
            cipher = keyring.create(notebook.id)  # ``already_exists`` for an id that has a key
        head = notebook.head_hash if cipher is None else cipher.token(notebook.head_hash, "hash")
        try:
            with self._write() as conn:
                conn.execute(_IMPORT_NOTEBOOK, (*identity, *times, genesis_hash(notebook.id)))
                if cipher is not None:
                    conn.execute(_VALUES_SEALED, (notebook.id,))
                state: dict[str, StoredRecord] = {}
                for entry in entries:
                    self._log_entry(
                        conn, notebook.id, entry if cipher is None else seal_entry(cipher, entry)
                    )
                    fold(state, (entry,), StoredRecord)
                current = list(state.values())
                self._insert_records(
                    conn, notebook.id, current if cipher is None else seal_records(cipher, current)
                )
                seal = row_seal(*identity, *times, notebook.purged_at)
                updated = (notebook.version, head, stored, notebook.purged_at, seal)
                row = conn.execute(
                    "UPDATE notebooks SET version = ?, head_hash = ?, state = ?, purged_at = ?,"
                    f" seal = ? WHERE id = ? RETURNING {NOTEBOOK_COLUMNS}",
                    (*updated, notebook.id),
                ).fetchone()
        except BaseException:
            if keyring is not None and cipher is not None:
                keyring.destroy([notebook.id])
            raise
        return self._notebook_of(row)

    # -- kept answers ---------------------------------------------------------------------

    def save_answer(self, answer: Answer, now: datetime) -> None:
        values = answer_values(answer)
        cipher = self._cipher(answer.notebook_id)
        if cipher is not None:
            values = seal_answer_values(cipher, values)
        with self._ephemeral() as conn:
            conn.execute(
                "DELETE FROM answers WHERE notebook_id = ? AND expires_at <= ?",
                (answer.notebook_id, utc_text(now)),
            )
            conn.execute(_SAVE_ANSWER, values)

    def answer(
        self, notebook_id: str, answer_id: str, offset: int = 0, limit: int | None = None
    ) -> Answer | None:
        try:
            cipher = self._cipher(notebook_id)  # answers are found by their ids' tokens
        except Purged:
            return None
        with self._statement() as conn:
            row = conn.execute(
                f"SELECT {ANSWER_COLUMNS} FROM answers WHERE notebook_id = ? AND answer_id = ?",
                (notebook_id, answer_id if cipher is None else cipher.token(answer_id, "answer")),
            ).fetchone()
        if row is None:
            return None
        return answer_from_row(
            row if cipher is None else open_answer_row(cipher, row), offset, limit
        )

    def kept_answers(self, notebook_id: str) -> list[tuple[Any, ...]]:
        with self._statement() as conn:
            rows = conn.execute(
                f"SELECT {ANSWER_COLUMNS} FROM answers WHERE notebook_id = ? ORDER BY answer_id",
                (notebook_id,),
            ).fetchall()
        cipher = self._cipher(notebook_id) if rows else None
        if cipher is None:
            return [tuple(row) for row in rows]
        # verify's view: a value that does not open is left as stored, for verify to report
        opened = [open_answer_row(cipher, row, strict=False) for row in rows]
        return sorted(opened, key=lambda row: str(row[1]))


def _seal_current(conn: Connection, notebook_id: str, cipher: NotebookCipher) -> None:
    """Seal the plain content of one notebook's current records and kept answers."""
    for name, version, digest, content in conn.execute(
        "SELECT name, version, digest, content FROM records WHERE notebook_id = ?",
        (notebook_id,),
    ).fetchall():
        if is_plain(content):
            conn.execute(
                "UPDATE records SET content = ? WHERE notebook_id = ? AND name = ?",
                (cipher.seal(content, name, version, digest), notebook_id, name),
            )
    for answer_id, *fields in conn.execute(
        "SELECT answer_id, question, params, rows FROM answers WHERE notebook_id = ?",
        (notebook_id,),
    ).fetchall():
        if any(is_plain(value) for value in fields):
            conn.execute(
                "UPDATE answers SET question = ?, params = ?, rows = ?"
                " WHERE notebook_id = ? AND answer_id = ?",
                (*seal_answer_fields(cipher, answer_id, fields), notebook_id, answer_id),
            )


def _token_current(conn: Connection, notebook_id: str, cipher: NotebookCipher) -> None:
    """Keep as tokens the plain values of one notebook's current records (name, kind, digest),
    kept answers (id) and head hash."""
    token = cipher.token
    for name, kind, digest in conn.execute(
        "SELECT name, kind, digest FROM records WHERE notebook_id = ?", (notebook_id,)
    ).fetchall():
        conn.execute(
            "UPDATE records SET name = ?, kind = ?, digest = ? WHERE notebook_id = ? AND name = ?",
            (token(name, "name"), token(kind, "kind"), token(digest, "digest"), notebook_id, name),
        )
    for (answer_id,) in conn.execute(
        "SELECT answer_id FROM answers WHERE notebook_id = ?", (notebook_id,)
    ).fetchall():
        conn.execute(
            "UPDATE answers SET answer_id = ? WHERE notebook_id = ? AND answer_id = ?",
            (token(answer_id, "answer"), notebook_id, answer_id),
        )
    (head,) = conn.execute(
        "SELECT head_hash FROM notebooks WHERE id = ?", (notebook_id,)
    ).fetchone()
    conn.execute(
        "UPDATE notebooks SET head_hash = ? WHERE id = ?", (token(head, "hash"), notebook_id)
    )
