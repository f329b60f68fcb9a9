"""The embedded knowledge database: one libSQL file, separate from the memory database.

Reviewed versions and revisions are append-only (triggers refuse updates and deletes); a
proposal is decided once (a trigger refuses changing a decided proposal). Revisions are
hash-chained per owner like the notebook log.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from oh.core.canonical import canonical_text
from oh.core.records import Record
from oh.core.reviewed import (
    Decision,
    Proposal,
    ReviewedRecord,
    Revision,
    accepted_version,
    knowledge_genesis,
    pack_revision,
)
from oh.errors import AlreadyExists, NotFound
from oh.storage.base import PackInstall
from oh.storage.libsql import LibsqlDatabase, translated
from oh.storage.rows import (
    PACK_COLUMNS,
    PROPOSAL_COLUMNS,
    REVIEWED_COLUMNS,
    REVISION_COLUMNS,
    insert,
    pack_values,
    proposal_from_row,
    proposal_values,
    reviewed_from_row,
    reviewed_values,
    revision_values,
)

__all__ = ["LibsqlKnowledgeStore"]


class LibsqlKnowledgeStore(LibsqlDatabase):
    """``KnowledgeStore`` on one libSQL file."""

    MIGRATIONS = "oh.storage.migrations.libsql_knowledge"

    # -- KnowledgeSource ------------------------------------------------------------------

    def latest_revision(self, owner: str) -> int:
        with self._lock, translated():
            row = self._conn.execute(
                "SELECT revision FROM knowledge_bases WHERE owner = ?", (owner,)
            ).fetchone()
        return 0 if row is None else int(row[0])

    def _check_revision(self, conn: Any, owner: str, revision: int) -> None:
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
                f"SELECT {REVIEWED_COLUMNS} FROM reviewed AS r"
                " WHERE owner = ? AND revision = (SELECT max(revision) FROM reviewed"
                " WHERE owner = r.owner AND name = r.name AND revision <= ?)"
                " ORDER BY name",
                (owner, revision),
            ).fetchall()
        return [reviewed_from_row(row) for row in rows]

    def record_at(self, owner: str, name: str, revision: int) -> ReviewedRecord | None:
        with self._read() as conn:
            self._check_revision(conn, owner, revision)
            row = conn.execute(
                f"SELECT {REVIEWED_COLUMNS} FROM reviewed"
                " WHERE owner = ? AND name = ? AND revision <= ?"
                " ORDER BY revision DESC LIMIT 1",
                (owner, name, revision),
            ).fetchone()
        return None if row is None else reviewed_from_row(row)

    # -- proposals and decisions ----------------------------------------------------------

    def add_proposal(self, proposal: Proposal) -> Proposal:
        with self._write() as conn:
            # One writer at a time (BEGIN IMMEDIATE): nobody can add one between the look and
            # the insert; the partial unique index would refuse it if anybody did.
            pending = self._pending(conn, proposal.owner, proposal.name)
            if pending is not None:
                return pending
            conn.execute(_INSERT_PROPOSAL, proposal_values(proposal, pending=True))
        return proposal

    @staticmethod
    def _pending(conn: Any, owner: str, name: str) -> Proposal | None:
        row = conn.execute(
            f"SELECT {PROPOSAL_COLUMNS} FROM proposals"
            " WHERE owner = ? AND name = ? AND state = 'pending'",
            (owner, name),
        ).fetchone()
        return None if row is None else proposal_from_row(row)

    def pending_proposal(self, owner: str, name: str) -> Proposal | None:
        with self._lock, translated():
            return self._pending(self._conn, owner, name)

    def _proposal(self, conn: Any, proposal_id: str) -> Proposal:
        row = conn.execute(
            f"SELECT {PROPOSAL_COLUMNS} FROM proposals WHERE id = ?", (proposal_id,)
        ).fetchone()
        if row is None:
            raise NotFound(f"no proposal {proposal_id}")
        return proposal_from_row(row)

    def proposal(self, proposal_id: str) -> Proposal:
        with self._lock, translated():
            return self._proposal(self._conn, proposal_id)

    def proposals(self, owner: str, state: str | None = None) -> list[Proposal]:
        sql = f"SELECT {PROPOSAL_COLUMNS} FROM proposals WHERE owner = ?"
        params: tuple[Any, ...] = (owner,)
        if state is not None:
            sql += " AND state = ?"
            params += (state,)
        with self._lock, translated():
            rows = self._conn.execute(sql + " ORDER BY proposed_at, id", params).fetchall()
        return [proposal_from_row(row) for row in rows]

    @staticmethod
    def _knowledge_base(conn: Any, owner: str) -> tuple[int, str]:
        """``owner``'s revision and head inside the caller's write transaction, its row made at
        revision 0 if it has none."""
        row = conn.execute(
            "SELECT revision, head_hash FROM knowledge_bases WHERE owner = ?", (owner,)
        ).fetchone()
        if row is not None:
            return int(row[0]), str(row[1])
        head = knowledge_genesis(owner)
        conn.execute(
            "INSERT INTO knowledge_bases (owner, revision, head_hash) VALUES (?, 0, ?)",
            (owner, head),
        )
        return 0, head

    @staticmethod
    def _decide(
        conn: Any, proposal: Proposal, state: str, decision: Decision, revision: int | None
    ) -> None:
        if proposal.state != "pending":
            raise AlreadyExists(
                f"proposal {proposal.id} was already decided ({proposal.state})",
                proposal_id=proposal.id,
            )
        conn.execute(
            "UPDATE proposals SET state = ?, decision = ?, revision = ?"
            " WHERE id = ? AND state = 'pending'",
            (state, canonical_text(decision.to_json()), revision, proposal.id),
        )

    def accept(
        self, proposal_id: str, decision: Decision, record: Record, author: str
    ) -> ReviewedRecord:
        with self._write() as conn:
            proposal = self._proposal(conn, proposal_id)
            owner = proposal.owner
            latest, head = self._knowledge_base(conn, owner)
            revision = latest + 1
            self._decide(conn, proposal, "accepted", decision, revision)
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
            conn.execute(_INSERT_REVISION, revision_values(entry))
            conn.execute(_INSERT_REVIEWED, reviewed_values(owner, reviewed))
            conn.execute(
                "UPDATE knowledge_bases SET revision = ?, head_hash = ? WHERE owner = ?",
                (revision, entry.hash, owner),
            )
        return reviewed

    def reject(self, proposal_id: str, decision: Decision) -> Proposal:
        with self._write() as conn:
            proposal = self._proposal(conn, proposal_id)
            self._decide(conn, proposal, "rejected", decision, None)
            return self._proposal(conn, proposal_id)

    # -- history --------------------------------------------------------------------------

    def history(self, owner: str, name: str) -> list[ReviewedRecord]:
        with self._lock, translated():
            rows = self._conn.execute(
                f"SELECT {REVIEWED_COLUMNS} FROM reviewed WHERE owner = ? AND name = ?"
                " ORDER BY revision",
                (owner, name),
            ).fetchall()
        return [reviewed_from_row(row) for row in rows]

    def revisions(self, owner: str) -> list[Revision]:
        with self._lock, translated():
            rows = self._conn.execute(
                "SELECT owner, revision, what, proposal_id, name, digest, made_by, made_at,"
                " prev_hash, hash FROM revisions WHERE owner = ? ORDER BY revision",
                (owner,),
            ).fetchall()
        return [Revision(*row) for row in rows]

    def owners(self) -> list[str]:
        with self._lock, translated():
            rows = self._conn.execute("SELECT owner FROM knowledge_bases ORDER BY owner").fetchall()
        return [row[0] for row in rows]

    def head(self, owner: str) -> tuple[int, str]:
        with self._lock, translated():
            row = self._conn.execute(
                "SELECT revision, head_hash FROM knowledge_bases WHERE owner = ?", (owner,)
            ).fetchone()
        return (0, knowledge_genesis(owner)) if row is None else (row[0], row[1])

    # -- packs (SPEC §8) ------------------------------------------------------------------

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
            in_force = {
                row[0]: row[1]
                for row in conn.execute(
                    f"SELECT name, digest FROM packs AS p WHERE owner = ? AND {_PACK_IN_FORCE}",
                    (owner, None),
                ).fetchall()
            }
            if in_force != dict(expected):
                return None
            latest, head = self._knowledge_base(conn, owner)
            revision = latest + 1
            entry = pack_revision(
                owner, revision, name, digest, made_by=made_by, made_at=made_at, prev_hash=head
            )
            install = PackInstall(owner, name, version, digest, content, revision, made_by, made_at)
            conn.execute(_INSERT_REVISION, revision_values(entry))
            conn.execute(_INSERT_PACK, pack_values(install))
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
                f"SELECT {PACK_COLUMNS} FROM packs AS p WHERE owner = ? AND {_PACK_IN_FORCE}"
                " ORDER BY name",
                (owner, revision),
            ).fetchall()
        return [PackInstall(*row) for row in rows]

    def pack_history(self, owner: str) -> list[PackInstall]:
        with self._lock, translated():
            rows = self._conn.execute(
                f"SELECT {PACK_COLUMNS} FROM packs WHERE owner = ? ORDER BY revision", (owner,)
            ).fetchall()
        return [PackInstall(*row) for row in rows]

    # -- export and import (SPEC §9) ------------------------------------------------------

    def proposal_owners(self) -> list[str]:
        """Every owner with at least one proposal, decided or not."""
        with self._lock, translated():
            rows = self._conn.execute(
                "SELECT DISTINCT owner FROM proposals ORDER BY owner"
            ).fetchall()
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
            conn.executemany(_INSERT_REVISION, [revision_values(e) for e in entries])
            conn.executemany(_INSERT_REVIEWED, [reviewed_values(owner, r) for r in reviewed])
            conn.executemany(_INSERT_PACK, [pack_values(p) for p in packs])
            conn.executemany(_INSERT_PROPOSAL, [proposal_values(p) for p in proposals])


_INSERT_PROPOSAL = insert("proposals", PROPOSAL_COLUMNS, "?")
_INSERT_REVISION = insert("revisions", REVISION_COLUMNS, "?")
_INSERT_REVIEWED = insert("reviewed", f"owner, {REVIEWED_COLUMNS}", "?")
_INSERT_PACK = insert("packs", PACK_COLUMNS, "?")
# Per name, the install with the largest revision <= ?2 (every install when ?2 is NULL).
_PACK_IN_FORCE = (
    "revision = (SELECT max(revision) FROM packs WHERE owner = p.owner AND name = p.name"
    " AND (?2 IS NULL OR revision <= ?2))"
)
