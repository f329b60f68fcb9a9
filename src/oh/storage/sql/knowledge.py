"""Reviewed knowledge on a SQL database, written once for the embedded and PostgreSQL backends.

Reviewed versions and revisions are append-only (the databases' triggers refuse updates and
deletes); a proposal is decided once (a trigger refuses changing a decided proposal). Revisions
are hash-chained per owner like the notebook log.

Every change is one ``_write`` transaction (``oh.storage.sql``). On libSQL that is ``BEGIN
IMMEDIATE``: one writer at a time, so nothing changes between one statement and the next. On
PostgreSQL it is READ COMMITTED on many servers at once, so a change locks what it decides on:
deciding a proposal locks the proposal's row, then the owner's knowledge-base row, in that
order (a rejection takes only the first, a pack install only the second). Two servers deciding
at once take turns and never deadlock, each revision number is made once, and a proposal is
decided once.

A store opened with ``macs`` (``oh.keys.macs``) writes every row with its MAC in the same
statement and checks the MAC of every row it serves; without, it neither writes nor checks one.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Self

from oh.core.canonical import canonical_text
from oh.core.records import Record
from oh.core.reviewed import (
    DISCARDED,
    Decision,
    Proposal,
    ReviewedRecord,
    Revision,
    accepted_version,
    check_pending,
    knowledge_genesis,
    pack_revision,
)
from oh.errors import (
    AlreadyExists,
    IntegrityError,
    InvalidArgument,
    NotFound,
    StorageUnavailable,
)
from oh.keys import MasterKeys
from oh.keys.macs import KnowledgeMacs, RowKind
from oh.storage.base import PackInstall
from oh.storage.rows import (
    KINDS,
    PACK,
    PACK_COLUMNS,
    PROPOSAL,
    PROPOSAL_COLUMNS,
    REVIEWED,
    REVIEWED_COLUMNS,
    REVISION,
    REVISION_COLUMNS,
    insert,
    pack_values,
    proposal_from_row,
    proposal_values,
    reviewed_from_row,
    reviewed_values,
    revision_values,
)
from oh.storage.sql import Connection, SqlDatabase

__all__ = ["SqlKnowledgeStore"]

_INSERT_PROPOSAL = insert("proposals", PROPOSAL_COLUMNS, "?")
_INSERT_REVISION = insert("revisions", REVISION_COLUMNS, "?")
_INSERT_REVIEWED = insert("reviewed", f"owner, {REVIEWED_COLUMNS}", "?")
_INSERT_PACK = insert("packs", PACK_COLUMNS, "?")
_PENDING_CONFLICT = " ON CONFLICT (owner, name) WHERE state = 'pending' DO NOTHING RETURNING id"
_ADD_PROPOSAL = _INSERT_PROPOSAL + _PENDING_CONFLICT

# The same statements with the row's MAC (a store opened with ``macs``).
_INSERT_PROPOSAL_MAC = insert("proposals", f"{PROPOSAL_COLUMNS}, mac", "?")
_INSERT_REVISION_MAC = insert("revisions", f"{REVISION_COLUMNS}, mac", "?")
_INSERT_REVIEWED_MAC = insert("reviewed", f"owner, {REVIEWED_COLUMNS}, mac", "?")
_INSERT_PACK_MAC = insert("packs", f"{PACK_COLUMNS}, mac", "?")
_ADD_PROPOSAL_MAC = _INSERT_PROPOSAL_MAC + _PENDING_CONFLICT
# Where deciding changes a proposal's row (``PROPOSAL_COLUMNS``), to MAC the decided row.
_STATE, _DECISION, _DECIDED_AT = (
    PROPOSAL.columns.index(c) for c in ("state", "decision", "revision")
)
_CONTENT, _DIGEST = (PROPOSAL.columns.index(c) for c in ("content", "digest"))


class SqlKnowledgeStore(SqlDatabase):
    """``KnowledgeStore`` on a ``SqlDatabase``. A backend's class names its database class
    first, so that the database's transactions are the ones the statements here run in.

    A backend's ``__init__`` calls ``_use_macs`` once its database is migrated."""

    macs: KnowledgeMacs | None = None

    # What is in view at a revision: of each name in {table} (reviewed versions or pack
    # installs) of owner ?, the row with the largest revision (at most ?, where {upto} says
    # so), by name. A backend whose database reads it faster another way writes its own.
    LATEST_PER_NAME = (
        "SELECT {columns} FROM {table} AS t WHERE owner = ? AND revision = (SELECT max(revision)"
        " FROM {table} WHERE owner = t.owner AND name = t.name{upto}) ORDER BY name"
    )

    def _in_view(
        self, table: str, columns: str, owner: str, revision: int | None
    ) -> tuple[str, tuple[Any, ...]]:
        """``LATEST_PER_NAME`` and its parameters, at ``revision`` (None: the latest)."""
        upto, params = (
            ("", (owner,)) if revision is None else (" AND revision <= ?", (owner, revision))
        )
        return self.LATEST_PER_NAME.format(table=table, columns=columns, upto=upto), params

    # -- MACs (oh.keys.macs) -----------------------------------------------------------

    def _use_macs(self, macs: KnowledgeMacs | None) -> None:
        """Write and check MACs with ``macs`` from now on. The first time MACs are used with
        this host's key store, every row written before (one without a MAC) is MACed, in one
        transaction, and the marker set; never again after that (``oh.keys.macs``)."""
        self.macs = macs
        if macs is not None and not macs.marked():
            self._mac_unmaced(macs)
        self._discard_rejected_text()

    def _discard_rejected_text(self) -> None:
        """Empty the text of every proposal rejected before rejecting did it (``DISCARDED``),
        with its MAC recomputed when this store writes MACs; a row whose MAC does not hold is
        left as it is, for ``verify`` to report. Then ``_compact_discarded``."""
        macs = self.macs
        select = (
            f"SELECT {self._with_mac(PROPOSAL_COLUMNS)} FROM proposals"
            " WHERE state = 'rejected' AND (content <> '' OR digest <> '')"
        )
        with self._statement() as conn:  # a read: most opens find nothing to do
            if conn.execute(select).fetchone() is None:
                return
        with self._write() as conn:
            rows = conn.execute(select).fetchall()
            for row in rows:
                values = list(row if macs is None else row[:-1])
                if macs is not None and macs.problem(PROPOSAL, values, row[-1]) is not None:
                    continue
                values[_CONTENT], values[_DIGEST] = DISCARDED, DISCARDED
                if macs is None:
                    conn.execute(
                        "UPDATE proposals SET content = ?, digest = ? WHERE id = ?",
                        (DISCARDED, DISCARDED, values[0]),
                    )
                else:
                    conn.execute(
                        "UPDATE proposals SET content = ?, digest = ?, mac = ? WHERE id = ?",
                        (DISCARDED, DISCARDED, macs.mac(PROPOSAL, values), values[0]),
                    )
        if rows:
            self._compact_discarded()

    def _compact_discarded(self) -> None:
        """Make discarded text leave the database's files where the backend can (the embedded
        one checkpoints its WAL; its pages were overwritten by ``secure_delete``)."""

    def _mac_unmaced(self, macs: KnowledgeMacs) -> None:
        with self._write() as conn:
            for kind in KINDS:
                rows = conn.execute(
                    f"SELECT {', '.join(kind.columns)} FROM {kind.table} WHERE mac IS NULL"
                ).fetchall()
                if rows:
                    conn.executemany(
                        f"UPDATE {kind.table} SET mac = ? WHERE {_by_key(kind)} AND mac IS NULL",
                        [(macs.mac(kind, row), *_key(kind, row)) for row in rows],
                    )
        macs.mark()

    def _with_mac(self, columns: str) -> str:
        """``columns``, and the MAC after them when this store checks MACs."""
        return columns if self.macs is None else columns + ", mac"

    def _checked(
        self, kind: RowKind, rows: Sequence[Any], owner: str | None = None
    ) -> Sequence[Any]:
        """``rows`` (read with ``_with_mac``), each MAC checked; ``owner`` goes before each
        row's own columns where the row holds none (a reviewed version)."""
        macs = self.macs
        if macs is not None:
            for row in rows:
                macs.check(kind, row[:-1] if owner is None else (owner, *row[:-1]), row[-1])
        return rows

    def unchecked(self) -> Self:
        """This store, on the same connections, serving rows without checking their MACs: for
        ``verify``, which reports each refused row instead of stopping at the first. Never close
        it (that closes this store)."""
        clone = copy.copy(self)
        clone.macs = None
        return clone

    def mac_rows(self) -> list[tuple[RowKind, tuple[Any, ...], Any]]:
        """Every MACed row of every kind, as ``(kind, values, mac)``, in one snapshot."""
        found: list[tuple[RowKind, tuple[Any, ...], Any]] = []
        with self._read() as conn:
            for kind in KINDS:
                rows = conn.execute(
                    f"SELECT {', '.join(kind.columns)}, mac FROM {kind.table}"
                    f" ORDER BY {', '.join(kind.key)}"
                ).fetchall()
                found += [(kind, tuple(row[:-1]), row[-1]) for row in rows]
        return found

    def remac(self, masters: MasterKeys) -> int:
        """MAC every row again under ``masters.current`` in one transaction, after checking it
        under the key it was MACed with; return how many. ``integrity`` and nothing changed if
        any row's MAC is missing or wrong (``oh.keys.macs.remac``)."""
        if self.macs is None:
            raise InvalidArgument("this knowledge store was opened without MACs: nothing to MAC")
        new = KnowledgeMacs(masters, self.macs.markers, self.macs.clock)
        count = 0
        with self._write() as conn:
            for kind in KINDS:
                rows = conn.execute(
                    f"SELECT {', '.join(kind.columns)}, mac FROM {kind.table}"
                    f" ORDER BY {', '.join(kind.key)}" + self.FOR_UPDATE
                ).fetchall()
                refused = [
                    f"{kind.describe(row[:-1])}: MAC {why}"
                    for row in rows
                    if (why := new.problem(kind, row[:-1], row[-1])) is not None
                ]
                if refused:
                    raise IntegrityError(
                        f"{len(refused)} knowledge rows are refused, nothing was MACed again: "
                        + "; ".join(refused[:5]),
                        refused=refused,
                    )
                for row in rows:
                    # RETURNING, not rowcount: PostgreSQL's pipeline gives a row count only once
                    # the result is fetched.
                    changed = conn.execute(
                        f"UPDATE {kind.table} SET mac = ? WHERE {_by_key(kind)} AND mac = ?"
                        " RETURNING 1",
                        (new.mac(kind, row[:-1]), *_key(kind, row), row[-1]),
                    ).fetchall()
                    if len(changed) != 1:
                        raise StorageUnavailable(
                            f"{kind.describe(row[:-1])} changed while it was MACed again; retry"
                        )
                count += len(rows)
        self.macs = new
        return count

    # -- KnowledgeSource ------------------------------------------------------------------

    def latest_revision(self, owner: str) -> int:
        with self._statement() as conn:
            row = conn.execute(
                "SELECT revision FROM knowledge_bases WHERE owner = ?", (owner,)
            ).fetchone()
        return 0 if row is None else int(row[0])

    @staticmethod
    def _check_revision(conn: Connection, owner: str, revision: int) -> None:
        row = conn.execute(
            "SELECT revision FROM knowledge_bases WHERE owner = ?", (owner,)
        ).fetchone()
        latest = 0 if row is None else row[0]
        if not 0 <= revision <= latest:
            raise NotFound(f"no revision {revision}; the latest is {latest}", latest=latest)

    def records_at(self, owner: str, revision: int) -> list[ReviewedRecord]:
        with self._read() as conn:
            self._check_revision(conn, owner, revision)
            rows = conn.execute(
                *self._in_view("reviewed", self._with_mac(REVIEWED_COLUMNS), owner, revision)
            ).fetchall()
        return [reviewed_from_row(row) for row in self._checked(REVIEWED, rows, owner)]

    def record_at(self, owner: str, name: str, revision: int) -> ReviewedRecord | None:
        with self._read() as conn:
            self._check_revision(conn, owner, revision)
            row = conn.execute(
                f"SELECT {self._with_mac(REVIEWED_COLUMNS)} FROM reviewed"
                " WHERE owner = ? AND name = ? AND revision <= ?"
                " ORDER BY revision DESC LIMIT 1",
                (owner, name, revision),
            ).fetchone()
        if row is None:
            return None
        self._checked(REVIEWED, (row,), owner)
        return reviewed_from_row(row)

    # -- proposals and decisions ----------------------------------------------------------

    def add_proposal(self, proposal: Proposal) -> Proposal:
        row = proposal_values(proposal, pending=True)
        add = _ADD_PROPOSAL
        if self.macs is not None:
            row, add = (*row, self.macs.mac(PROPOSAL, row)), _ADD_PROPOSAL_MAC
        # The partial unique index (one pending proposal per owner and name) decides, and a new
        # name, the usual call, is one statement: the insert does nothing if the name has a
        # pending proposal, and that one is read instead. On libSQL no other writer can run in
        # between, so it is there to read. On PostgreSQL the insert waits for a concurrent
        # proposer's commit, then does nothing, and the read sees the winner's proposal;
        # should that be decided in between, there is room again: retry.
        for _ in range(8):
            with self._write() as conn:
                if conn.execute(add, row).fetchall():
                    return proposal
                pending = self._pending(conn, proposal.owner, proposal.name)
            if pending is not None:
                return pending
        raise StorageUnavailable(f"proposals for {proposal.name} kept changing; retry")

    def _pending(self, conn: Connection, owner: str, name: str) -> Proposal | None:
        row = conn.execute(
            f"SELECT {self._with_mac(PROPOSAL_COLUMNS)} FROM proposals"
            " WHERE owner = ? AND name = ? AND state = 'pending'",
            (owner, name),
        ).fetchone()
        return None if row is None else proposal_from_row(self._checked(PROPOSAL, (row,))[0])

    def pending_proposal(self, owner: str, name: str) -> Proposal | None:
        with self._statement() as conn:
            return self._pending(conn, owner, name)

    def _proposal_row(self, conn: Connection, proposal_id: str, lock: bool = False) -> Any:
        """The proposal's row (``_with_mac``), its MAC checked."""
        row = conn.execute(
            f"SELECT {self._with_mac(PROPOSAL_COLUMNS)} FROM proposals WHERE id = ?"
            + (self.FOR_UPDATE if lock else ""),
            (proposal_id,),
        ).fetchone()
        if row is None:
            raise NotFound(f"no proposal {proposal_id}")
        return self._checked(PROPOSAL, (row,))[0]

    def _proposal(self, conn: Connection, proposal_id: str, lock: bool = False) -> Proposal:
        return proposal_from_row(self._proposal_row(conn, proposal_id, lock))

    def proposal(self, proposal_id: str) -> Proposal:
        with self._statement() as conn:
            return self._proposal(conn, proposal_id)

    def proposals(self, owner: str, state: str | None = None) -> list[Proposal]:
        sql = f"SELECT {self._with_mac(PROPOSAL_COLUMNS)} FROM proposals WHERE owner = ?"
        params: tuple[Any, ...] = (owner,)
        if state is not None:
            sql += " AND state = ?"
            params += (state,)
        with self._statement() as conn:
            rows = conn.execute(sql + " ORDER BY proposed_at, id", params).fetchall()
        return [proposal_from_row(row) for row in self._checked(PROPOSAL, rows)]

    def _lock_knowledge_base(self, conn: Connection, owner: str) -> tuple[int, str]:
        """Lock ``owner``'s knowledge-base row (made at revision 0 if it has none) and return
        its revision and head: the owner's one lock, so installs and decisions queue."""
        lock = "SELECT revision, head_hash FROM knowledge_bases WHERE owner = ?" + self.FOR_UPDATE
        row = conn.execute(lock, (owner,)).fetchone()
        if row is None:
            # On PostgreSQL an owner's first two writers both get here: the second one's insert
            # waits for the first one's commit, then does nothing, and it locks that row.
            conn.execute(
                "INSERT INTO knowledge_bases (owner, revision, head_hash) VALUES (?, 0, ?)"
                " ON CONFLICT (owner) DO NOTHING",
                (owner, knowledge_genesis(owner)),
            )
            row = conn.execute(lock, (owner,)).fetchone()
        return int(row[0]), str(row[1])

    def _decide(
        self, conn: Connection, row: Any, state: str, decision: Decision, revision: int | None
    ) -> None:
        """Record the decision on the proposal ``row`` (as ``_proposal_row`` read it), with the
        decided row's MAC in the same statement."""
        text = canonical_text(decision.to_json())
        # Rejected: the decision stays, the proposed text goes (``Proposal.discarded``).
        content, digest = (
            (DISCARDED, DISCARDED) if state == "rejected" else (row[_CONTENT], row[_DIGEST])
        )
        if self.macs is None:
            conn.execute(
                "UPDATE proposals SET state = ?, decision = ?, revision = ?, content = ?,"
                " digest = ? WHERE id = ? AND state = 'pending'",
                (state, text, revision, content, digest, row[0]),
            )
            return
        decided = list(row[:-1])
        decided[_STATE], decided[_DECISION], decided[_DECIDED_AT] = state, text, revision
        decided[_CONTENT], decided[_DIGEST] = content, digest
        conn.execute(
            "UPDATE proposals SET state = ?, decision = ?, revision = ?, content = ?, digest = ?,"
            " mac = ? WHERE id = ? AND state = 'pending'",
            (state, text, revision, content, digest, self.macs.mac(PROPOSAL, decided), row[0]),
        )

    def _insert(self, conn: Connection, plain: str, maced: str, kind: RowKind, values: Any) -> None:
        """Insert one row, with its MAC when this store writes MACs."""
        if self.macs is None:
            conn.execute(plain, values)
        else:
            conn.execute(maced, (*values, self.macs.mac(kind, values)))

    def _insert_all(
        self, conn: Connection, plain: str, maced: str, kind: RowKind, rows: list[Any]
    ) -> None:
        macs = self.macs
        if macs is None:
            conn.executemany(plain, rows)
        else:
            conn.executemany(maced, [(*values, macs.mac(kind, values)) for values in rows])

    def accept(
        self, proposal_id: str, decision: Decision, record: Record, author: str
    ) -> ReviewedRecord:
        with self._write() as conn:
            # Lock order: the proposal, then the owner's knowledge base (see above).
            row = self._proposal_row(conn, proposal_id, lock=True)
            proposal = proposal_from_row(row)
            check_pending(proposal)
            owner = proposal.owner
            latest, head = self._lock_knowledge_base(conn, owner)
            revision = latest + 1
            self._decide(conn, row, "accepted", decision, revision)
            before = conn.execute(
                "SELECT max(revision) FROM reviewed WHERE owner = ? AND name = ?",
                (owner, record.name),
            ).fetchone()[0]
            reviewed, entry = accepted_version(
                proposal,
                decision,
                record,
                author=author,
                revision=revision,
                prev_hash=head,
                supersedes=before,
            )
            self._insert(
                conn, _INSERT_REVISION, _INSERT_REVISION_MAC, REVISION, revision_values(entry)
            )
            self._insert(
                conn,
                _INSERT_REVIEWED,
                _INSERT_REVIEWED_MAC,
                REVIEWED,
                reviewed_values(owner, reviewed),
            )
            conn.execute(
                "UPDATE knowledge_bases SET revision = ?, head_hash = ? WHERE owner = ?",
                (revision, entry.hash, owner),
            )
        return reviewed

    def reject(self, proposal_id: str, decision: Decision) -> Proposal:
        with self._write() as conn:
            row = self._proposal_row(conn, proposal_id, lock=True)
            check_pending(proposal_from_row(row))
            self._decide(conn, row, "rejected", decision, None)
            rejected = self._proposal(conn, proposal_id)
        self._compact_discarded()
        return rejected

    # -- history --------------------------------------------------------------------------

    def history(self, owner: str, name: str) -> list[ReviewedRecord]:
        with self._statement() as conn:
            rows = conn.execute(
                f"SELECT {self._with_mac(REVIEWED_COLUMNS)} FROM reviewed"
                " WHERE owner = ? AND name = ? ORDER BY revision",
                (owner, name),
            ).fetchall()
        return [reviewed_from_row(row) for row in self._checked(REVIEWED, rows, owner)]

    def revisions(self, owner: str) -> list[Revision]:
        with self._statement() as conn:
            rows = conn.execute(
                f"SELECT {self._with_mac(REVISION_COLUMNS)} FROM revisions WHERE owner = ?"
                " ORDER BY revision",
                (owner,),
            ).fetchall()
        return [Revision(*row[:10]) for row in self._checked(REVISION, rows)]

    def owners(self) -> list[str]:
        with self._statement() as conn:
            rows = conn.execute("SELECT owner FROM knowledge_bases ORDER BY owner").fetchall()
        return [row[0] for row in rows]

    def head(self, owner: str) -> tuple[int, str]:
        with self._statement() as conn:
            row = conn.execute(
                "SELECT revision, head_hash FROM knowledge_bases WHERE owner = ?", (owner,)
            ).fetchone()
        return (0, knowledge_genesis(owner)) if row is None else (row[0], row[1])

    # -- packs (docs/packs.md) ------------------------------------------------------------------

    def install_pack(
        self,
        owner: str,
        *,
        name: str,
        version: str,
        digest: str,
        content: str,
        expected: Mapping[str, str],
        made_by: str,
        made_at: str,
    ) -> PackInstall | None:
        with self._write() as conn:
            # The lock comes first, so that no install lands between the look and the write.
            latest, head = self._lock_knowledge_base(conn, owner)
            if self.macs is None:
                in_force = dict(
                    conn.execute(*self._in_view("packs", "name, digest", owner, None)).fetchall()
                )
            else:
                rows = conn.execute(*self._in_view("packs", f"{PACK_COLUMNS}, mac", owner, None))
                in_force = {r[1]: r[3] for r in self._checked(PACK, rows.fetchall())}
            if in_force != dict(expected):
                # Nothing is written on a refusal, not even the row taken for the lock. A row
                # at revision 0 is never committed (whoever makes one adds revision 1 or takes
                # it back), so this one is this transaction's own; on PostgreSQL a concurrent
                # insert waiting on it then finds no conflict and makes its own.
                if latest == 0:
                    conn.execute(
                        "DELETE FROM knowledge_bases WHERE owner = ? AND revision = 0", (owner,)
                    )
                return None
            revision = latest + 1
            entry = pack_revision(
                owner, revision, name, digest, made_by=made_by, made_at=made_at, prev_hash=head
            )
            install = PackInstall(owner, name, version, digest, content, revision, made_by, made_at)
            self._insert(
                conn, _INSERT_REVISION, _INSERT_REVISION_MAC, REVISION, revision_values(entry)
            )
            self._insert(conn, _INSERT_PACK, _INSERT_PACK_MAC, PACK, pack_values(install))
            conn.execute(
                "UPDATE knowledge_bases SET revision = ?, head_hash = ? WHERE owner = ?",
                (revision, entry.hash, owner),
            )
        return install

    def installed_packs(self, owner: str, revision: int | None = None) -> list[PackInstall]:
        with self._read() as conn:
            if revision is not None:
                self._check_revision(conn, owner, revision)
            rows = conn.execute(
                *self._in_view("packs", self._with_mac(PACK_COLUMNS), owner, revision)
            ).fetchall()
        return [PackInstall(*row[:8]) for row in self._checked(PACK, rows)]

    def pack_history(self, owner: str) -> list[PackInstall]:
        with self._statement() as conn:
            rows = conn.execute(
                f"SELECT {self._with_mac(PACK_COLUMNS)} FROM packs WHERE owner = ?"
                " ORDER BY revision",
                (owner,),
            ).fetchall()
        return [PackInstall(*row[:8]) for row in self._checked(PACK, rows)]

    # -- export and import (docs/cli.md) ------------------------------------------------------

    def proposal_owners(self) -> list[str]:
        """Every owner with at least one proposal, decided or not."""
        with self._statement() as conn:
            rows = conn.execute("SELECT DISTINCT owner FROM proposals ORDER BY owner").fetchall()
        return [row[0] for row in rows]

    def import_knowledge_base(
        self,
        owner: str,
        head: tuple[int, str],
        revisions: Iterable[Revision],
        reviewed: Iterable[ReviewedRecord],
        proposals: Iterable[Proposal],
        packs: Iterable[PackInstall] = (),
    ) -> None:
        """Recreate one owner's exported knowledge exactly, in one transaction: revision
        entries, reviewed versions, pack installs and proposals as they were.
        ``already_exists`` if the owner has a knowledge base here or a proposal id is taken.
        The caller checks the chain."""
        entries = list(revisions)
        with self._write() as conn:
            if entries:
                conn.execute(
                    "INSERT INTO knowledge_bases (owner, revision, head_hash) VALUES (?, ?, ?)",
                    (owner, head[0], head[1]),
                )
            elif conn.execute("SELECT 1 FROM knowledge_bases WHERE owner = ?", (owner,)).fetchone():
                raise AlreadyExists(f"{owner} already has a knowledge base here", owner=owner)
            self._insert_all(
                conn,
                _INSERT_REVISION,
                _INSERT_REVISION_MAC,
                REVISION,
                [revision_values(e) for e in entries],
            )
            self._insert_all(
                conn,
                _INSERT_REVIEWED,
                _INSERT_REVIEWED_MAC,
                REVIEWED,
                [reviewed_values(owner, r) for r in reviewed],
            )
            self._insert_all(
                conn, _INSERT_PACK, _INSERT_PACK_MAC, PACK, [pack_values(p) for p in packs]
            )
            self._insert_all(
                conn,
                _INSERT_PROPOSAL,
                _INSERT_PROPOSAL_MAC,
                PROPOSAL,
                [proposal_values(p) for p in proposals],
            )


def _by_key(kind: RowKind) -> str:
    return " AND ".join(f"{column} = ?" for column in kind.key)


def _key(kind: RowKind, row: Sequence[Any]) -> tuple[Any, ...]:
    """The primary key of a row read in ``kind.columns`` order."""
    return tuple(row[kind.columns.index(column)] for column in kind.key)
