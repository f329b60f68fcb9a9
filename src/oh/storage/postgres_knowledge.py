"""The knowledge database on PostgreSQL: the same tables, triggers and semantics as the
embedded knowledge database, shared by every server.

Deciding a proposal locks the proposal's row, then the owner's knowledge-base row, in that
order and in one transaction: two servers deciding at once take turns, each revision number is
made once, and a proposal is decided once (the trigger refuses changing a decided proposal).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

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
from oh.errors import AlreadyExists, NotFound, StorageUnavailable
from oh.storage.base import PackInstall
from oh.storage.postgres import PostgresDatabase
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

if TYPE_CHECKING:
    import psycopg

__all__ = ["KNOWLEDGE_MIGRATIONS", "PostgresKnowledgeStore", "open_postgres_knowledge"]

KNOWLEDGE_MIGRATIONS = "oh.storage.migrations.postgres_knowledge"

_INSERT_PROPOSAL = insert("proposals", PROPOSAL_COLUMNS, "%s")
_INSERT_REVISION = insert("revisions", REVISION_COLUMNS, "%s")
_INSERT_REVIEWED = insert("reviewed", f"owner, {REVIEWED_COLUMNS}", "%s")
_INSERT_PACK = insert("packs", PACK_COLUMNS, "%s")
_ADD_PROPOSAL = (
    _INSERT_PROPOSAL + " ON CONFLICT (owner, name) WHERE state = 'pending' DO NOTHING RETURNING id"
)


class PostgresKnowledgeStore(PostgresDatabase):
    """``KnowledgeStore`` on PostgreSQL."""

    COMPONENT = "knowledge"
    MIGRATIONS = KNOWLEDGE_MIGRATIONS

    # -- KnowledgeSource ------------------------------------------------------------------

    def latest_revision(self, owner: str) -> int:
        with self._transaction() as conn:
            row = conn.execute(
                "SELECT revision FROM knowledge_bases WHERE owner = %s", (owner,)
            ).fetchone()
        return 0 if row is None else int(row[0])

    @staticmethod
    def _check_revision(conn: psycopg.Connection[Any], owner: str, revision: int) -> None:
        row = conn.execute(
            "SELECT revision FROM knowledge_bases WHERE owner = %s", (owner,)
        ).fetchone()
        latest = 0 if row is None else row[0]
        if not 0 <= revision <= latest:
            raise NotFound(f"no revision {revision}; the latest is {latest}", latest=latest)

    def records_at(self, owner: str, revision: int) -> list[ReviewedRecord]:
        with self._snapshot() as conn:
            self._check_revision(conn, owner, revision)
            rows = conn.execute(
                f"SELECT DISTINCT ON (name) {REVIEWED_COLUMNS} FROM reviewed"
                " WHERE owner = %s AND revision <= %s ORDER BY name, revision DESC",
                (owner, revision),
            ).fetchall()
        return [reviewed_from_row(row) for row in rows]

    def record_at(self, owner: str, name: str, revision: int) -> ReviewedRecord | None:
        with self._snapshot() as conn:
            self._check_revision(conn, owner, revision)
            row = conn.execute(
                f"SELECT {REVIEWED_COLUMNS} FROM reviewed"
                " WHERE owner = %s AND name = %s AND revision <= %s"
                " ORDER BY revision DESC LIMIT 1",
                (owner, name, revision),
            ).fetchone()
        return None if row is None else reviewed_from_row(row)

    # -- proposals and decisions ----------------------------------------------------------

    def add_proposal(self, proposal: Proposal) -> Proposal:
        row = proposal_values(proposal, pending=True)
        # The partial unique index decides between servers proposing one name at once: the
        # loser's insert waits for the winner's commit, then does nothing, and reads the
        # winner's proposal. Should that be decided in between, there is room again: retry.
        for _ in range(8):
            with self._transaction() as conn:
                made = conn.execute(_ADD_PROPOSAL, row).fetchone()
                if made is not None:
                    return proposal
                pending = self._pending(conn, proposal.owner, proposal.name)
            if pending is not None:
                return pending
        raise StorageUnavailable(f"proposals for {proposal.name} kept changing; retry")

    @staticmethod
    def _pending(conn: psycopg.Connection[Any], owner: str, name: str) -> Proposal | None:
        row = conn.execute(
            f"SELECT {PROPOSAL_COLUMNS} FROM proposals"
            " WHERE owner = %s AND name = %s AND state = 'pending'",
            (owner, name),
        ).fetchone()
        return None if row is None else proposal_from_row(row)

    def pending_proposal(self, owner: str, name: str) -> Proposal | None:
        with self._transaction() as conn:
            return self._pending(conn, owner, name)

    @staticmethod
    def _proposal(conn: psycopg.Connection[Any], proposal_id: str, lock: bool = False) -> Proposal:
        row = conn.execute(
            f"SELECT {PROPOSAL_COLUMNS} FROM proposals WHERE id = %s"
            + (" FOR UPDATE" if lock else ""),
            (proposal_id,),
        ).fetchone()
        if row is None:
            raise NotFound(f"no proposal {proposal_id}")
        return proposal_from_row(row)

    def proposal(self, proposal_id: str) -> Proposal:
        with self._transaction() as conn:
            return self._proposal(conn, proposal_id)

    def proposals(self, owner: str, state: str | None = None) -> list[Proposal]:
        sql = f"SELECT {PROPOSAL_COLUMNS} FROM proposals WHERE owner = %s"
        params: tuple[Any, ...] = (owner,)
        if state is not None:
            sql += " AND state = %s"
            params += (state,)
        with self._transaction() as conn:
            rows = conn.execute(sql + " ORDER BY proposed_at, id", params).fetchall()
        return [proposal_from_row(row) for row in rows]

    @staticmethod
    def _lock_knowledge_base(conn: psycopg.Connection[Any], owner: str) -> tuple[int, str]:
        """Lock ``owner``'s knowledge-base row (made at revision 0 if it has none) and return
        its revision and head: the owner's one lock, so installs and decisions queue."""
        conn.execute(
            "INSERT INTO knowledge_bases (owner, revision, head_hash) VALUES (%s, 0, %s)"
            " ON CONFLICT (owner) DO NOTHING",
            (owner, knowledge_genesis(owner)),
        )
        row = conn.execute(
            "SELECT revision, head_hash FROM knowledge_bases WHERE owner = %s FOR UPDATE",
            (owner,),
        ).fetchone()
        assert row is not None
        return int(row[0]), str(row[1])

    @staticmethod
    def _check_pending(proposal: Proposal) -> None:
        if proposal.state != "pending":
            raise AlreadyExists(
                f"proposal {proposal.id} was already decided ({proposal.state})",
                proposal_id=proposal.id,
            )

    @classmethod
    def _decide(
        cls,
        conn: psycopg.Connection[Any],
        proposal: Proposal,
        state: str,
        decision: Decision,
        revision: int | None,
    ) -> None:
        cls._check_pending(proposal)
        conn.execute(
            "UPDATE proposals SET state = %s, decision = %s, revision = %s"
            " WHERE id = %s AND state = 'pending'",
            (state, canonical_text(decision.to_json()), revision, proposal.id),
        )

    def accept(
        self, proposal_id: str, decision: Decision, record: Record, author: str
    ) -> ReviewedRecord:
        with self._transaction() as conn:
            # Lock order: the proposal, then the owner's knowledge base (rejections take only
            # the first), so concurrent decisions queue and never deadlock.
            proposal = self._proposal(conn, proposal_id, lock=True)
            self._check_pending(proposal)
            owner = proposal.owner
            latest, head = self._lock_knowledge_base(conn, owner)
            revision = latest + 1
            self._decide(conn, proposal, "accepted", decision, revision)
            before_row = conn.execute(
                "SELECT max(revision) FROM reviewed WHERE owner = %s AND name = %s",
                (owner, record.name),
            ).fetchone()
            before = None if before_row is None else before_row[0]
            reviewed, entry = accepted_version(
                proposal,
                decision,
                record,
                author=author,
                revision=revision,
                prev_hash=head,
                supersedes=before,
            )
            made = entry.hash
            conn.execute(_INSERT_REVISION, revision_values(entry))
            conn.execute(_INSERT_REVIEWED, reviewed_values(owner, reviewed))
            conn.execute(
                "UPDATE knowledge_bases SET revision = %s, head_hash = %s WHERE owner = %s",
                (revision, made, owner),
            )
        return reviewed

    def reject(self, proposal_id: str, decision: Decision) -> Proposal:
        with self._transaction() as conn:
            proposal = self._proposal(conn, proposal_id, lock=True)
            self._decide(conn, proposal, "rejected", decision, None)
            return self._proposal(conn, proposal_id)

    # -- history --------------------------------------------------------------------------

    def history(self, owner: str, name: str) -> list[ReviewedRecord]:
        with self._transaction() as conn:
            rows = conn.execute(
                f"SELECT {REVIEWED_COLUMNS} FROM reviewed WHERE owner = %s AND name = %s"
                " ORDER BY revision",
                (owner, name),
            ).fetchall()
        return [reviewed_from_row(row) for row in rows]

    def revisions(self, owner: str) -> list[Revision]:
        with self._transaction() as conn:
            rows = conn.execute(
                f"SELECT {REVISION_COLUMNS} FROM revisions WHERE owner = %s ORDER BY revision",
                (owner,),
            ).fetchall()
        return [Revision(*row) for row in rows]

    def owners(self) -> list[str]:
        with self._transaction() as conn:
            rows = conn.execute("SELECT owner FROM knowledge_bases ORDER BY owner").fetchall()
        return [row[0] for row in rows]

    def head(self, owner: str) -> tuple[int, str]:
        with self._transaction() as conn:
            row = conn.execute(
                "SELECT revision, head_hash FROM knowledge_bases WHERE owner = %s", (owner,)
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
        with self._transaction() as conn:
            latest, head = self._lock_knowledge_base(conn, owner)
            in_force = dict(
                conn.execute(
                    "SELECT DISTINCT ON (name) name, digest FROM packs WHERE owner = %s"
                    " ORDER BY name, revision DESC",
                    (owner,),
                ).fetchall()
            )
            if in_force != dict(expected):
                # Nothing is written on a refusal, not even the row taken for the lock.
                if latest == 0:
                    conn.execute(
                        "DELETE FROM knowledge_bases WHERE owner = %s AND revision = 0", (owner,)
                    )
                return None
            revision = latest + 1
            entry = pack_revision(
                owner, revision, name, digest, made_by=made_by, made_at=made_at, prev_hash=head
            )
            made = entry.hash
            conn.execute(_INSERT_REVISION, revision_values(entry))
            install = PackInstall(owner, name, version, digest, content, revision, made_by, made_at)
            conn.execute(_INSERT_PACK, pack_values(install))
            conn.execute(
                "UPDATE knowledge_bases SET revision = %s, head_hash = %s WHERE owner = %s",
                (revision, made, owner),
            )
        return install

    def installed_packs(self, owner: str, revision: int | None = None) -> list[PackInstall]:
        with self._snapshot() as conn:
            if revision is not None:
                self._check_revision(conn, owner, revision)
            rows = conn.execute(
                f"SELECT DISTINCT ON (name) {PACK_COLUMNS} FROM packs"
                " WHERE owner = %s AND (%s::BIGINT IS NULL OR revision <= %s)"
                " ORDER BY name, revision DESC",
                (owner, revision, revision),
            ).fetchall()
        return [PackInstall(*row) for row in rows]

    def pack_history(self, owner: str) -> list[PackInstall]:
        with self._transaction() as conn:
            rows = conn.execute(
                f"SELECT {PACK_COLUMNS} FROM packs WHERE owner = %s ORDER BY revision", (owner,)
            ).fetchall()
        return [PackInstall(*row) for row in rows]

    # -- export and import ----------------------------------------------------------------

    def proposal_owners(self) -> list[str]:
        """Every owner with at least one proposal, decided or not."""
        with self._transaction() as conn:
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
        """Recreate one owner's exported knowledge exactly, in one transaction: the revision
        entries, every reviewed version, every pack install and every proposal as they were.
        ``already_exists`` if the owner has a knowledge base here or a proposal id is taken.
        The caller checks the chain."""
        entries = list(revisions)
        with self._transaction() as conn:
            if entries:
                conn.execute(
                    "INSERT INTO knowledge_bases (owner, revision, head_hash) VALUES (%s, %s, %s)",
                    (owner, head[0], head[1]),
                )
            elif conn.execute(
                "SELECT 1 FROM knowledge_bases WHERE owner = %s", (owner,)
            ).fetchone():
                raise AlreadyExists(f"{owner} already has a knowledge base here", owner=owner)
            with conn.cursor() as cur:
                cur.executemany(_INSERT_REVISION, [revision_values(e) for e in entries])
                cur.executemany(_INSERT_REVIEWED, [reviewed_values(owner, r) for r in reviewed])
                cur.executemany(_INSERT_PACK, [pack_values(p) for p in packs])
                cur.executemany(_INSERT_PROPOSAL, [proposal_values(p) for p in proposals])


def open_postgres_knowledge(url: str, **options: Any) -> PostgresKnowledgeStore:
    """The knowledge store at a ``postgresql://`` URL (migrated on open)."""
    return PostgresKnowledgeStore(url, **options)
