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
    revision_hash,
)
from oh.errors import AlreadyExists, NotFound
from oh.storage.base import PackInstall
from oh.storage.libsql import LibsqlDatabase, translated
from oh.storage.rows import (
    PROPOSAL_COLUMNS,
    REVIEWED_COLUMNS,
    proposal_from_row,
    reviewed_from_row,
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

    def add_proposal(self, proposal: Proposal) -> None:
        note = proposal.note or {}
        with self._write() as conn:
            conn.execute(
                "INSERT INTO proposals (id, owner, proposed_by, proposed_at, notebook_id,"
                " note_name, note_author, note_version, name, content, digest, source, state)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending')",
                (
                    proposal.id,
                    proposal.owner,
                    proposal.proposed_by,
                    proposal.proposed_at,
                    note.get("notebook"),
                    note.get("name"),
                    note.get("author"),
                    note.get("version"),
                    proposal.name,
                    proposal.content,
                    proposal.digest,
                    canonical_text(proposal.source.to_json()),
                ),
            )

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
            row = conn.execute(
                "SELECT revision, head_hash FROM knowledge_bases WHERE owner = ?", (owner,)
            ).fetchone()
            if row is None:
                latest, head = 0, knowledge_genesis(owner)
                conn.execute(
                    "INSERT INTO knowledge_bases (owner, revision, head_hash) VALUES (?, 0, ?)",
                    (owner, head),
                )
            else:
                latest, head = row
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
            entry_hash = entry.hash
            conn.execute(
                "INSERT INTO revisions (owner, revision, what, proposal_id, name, digest,"
                " made_by, made_at, prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    owner,
                    revision,
                    "decision",
                    proposal.id,
                    record.name,
                    reviewed.digest,
                    decision.by,
                    decision.at,
                    head,
                    entry_hash,
                ),
            )
            conn.execute(
                f"INSERT INTO reviewed (owner, {REVIEWED_COLUMNS})"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    owner,
                    reviewed.name,
                    reviewed.kind,
                    reviewed.content,
                    reviewed.digest,
                    reviewed.author,
                    reviewed.written_at,
                    revision,
                    canonical_text(reviewed.source.to_json()),
                    canonical_text(decision.to_json()),
                    proposal.id,
                    before,
                ),
            )
            conn.execute(
                "UPDATE knowledge_bases SET revision = ?, head_hash = ? WHERE owner = ?",
                (revision, entry_hash, owner),
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
            row = conn.execute(
                "SELECT revision, head_hash FROM knowledge_bases WHERE owner = ?", (owner,)
            ).fetchone()
            if row is None:
                latest, head = 0, knowledge_genesis(owner)
                conn.execute(
                    "INSERT INTO knowledge_bases (owner, revision, head_hash) VALUES (?, 0, ?)",
                    (owner, head),
                )
            else:
                latest, head = row
            revision = latest + 1
            entry = Revision(
                owner, revision, "pack", None, name, digest, made_by, made_at, head, ""
            )
            entry_hash = revision_hash(entry)
            conn.execute(
                "INSERT INTO revisions (owner, revision, what, proposal_id, name, digest,"
                " made_by, made_at, prev_hash, hash) VALUES (?, ?, 'pack', NULL, ?, ?, ?, ?, ?, ?)",
                (owner, revision, name, digest, made_by, made_at, head, entry_hash),
            )
            conn.execute(
                f"INSERT INTO packs ({_PACK_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (owner, name, version, digest, content, revision, made_by, made_at),
            )
            conn.execute(
                "UPDATE knowledge_bases SET revision = ?, head_hash = ? WHERE owner = ?",
                (revision, entry_hash, owner),
            )
        return PackInstall(owner, name, version, digest, content, revision, made_by, made_at)

    def installed_packs(self, owner: str, revision: int | None = None) -> list[PackInstall]:
        with self._read() as conn:
            if revision is not None:
                self._check_revision(conn, owner, revision)
            rows = conn.execute(
                f"SELECT {_PACK_COLUMNS} FROM packs AS p WHERE owner = ? AND {_PACK_IN_FORCE}"
                " ORDER BY name",
                (owner, revision),
            ).fetchall()
        return [PackInstall(*row) for row in rows]

    def pack_history(self, owner: str) -> list[PackInstall]:
        with self._lock, translated():
            rows = self._conn.execute(
                f"SELECT {_PACK_COLUMNS} FROM packs WHERE owner = ? ORDER BY revision", (owner,)
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
            conn.executemany(
                "INSERT INTO revisions (owner, revision, what, proposal_id, name, digest,"
                " made_by, made_at, prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        e.owner,
                        e.revision,
                        e.what,
                        e.proposal_id,
                        e.name,
                        e.digest,
                        e.made_by,
                        e.made_at,
                        e.prev_hash,
                        e.hash,
                    )
                    for e in entries
                ],
            )
            for record in reviewed:
                conn.execute(
                    f"INSERT INTO reviewed (owner, {REVIEWED_COLUMNS})"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        owner,
                        record.name,
                        record.kind,
                        record.content,
                        record.digest,
                        record.author,
                        record.written_at,
                        record.revision,
                        canonical_text(record.source.to_json()),
                        canonical_text(record.decision.to_json()),
                        record.proposal_id,
                        record.supersedes,
                    ),
                )
            for install in packs:
                conn.execute(
                    f"INSERT INTO packs ({_PACK_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        install.owner,
                        install.name,
                        install.version,
                        install.digest,
                        install.content,
                        install.revision,
                        install.installed_by,
                        install.installed_at,
                    ),
                )
            for proposal in proposals:
                note = proposal.note or {}
                conn.execute(
                    "INSERT INTO proposals (id, owner, proposed_by, proposed_at, notebook_id,"
                    " note_name, note_author, note_version, name, content, digest, source,"
                    " state, decision, revision)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        proposal.id,
                        proposal.owner,
                        proposal.proposed_by,
                        proposal.proposed_at,
                        note.get("notebook"),
                        note.get("name"),
                        note.get("author"),
                        note.get("version"),
                        proposal.name,
                        proposal.content,
                        proposal.digest,
                        canonical_text(proposal.source.to_json()),
                        proposal.state,
                        None
                        if proposal.decision is None
                        else canonical_text(proposal.decision.to_json()),
                        proposal.revision,
                    ),
                )


_PACK_COLUMNS = "owner, name, version, digest, content, revision, installed_by, installed_at"
# Per name, the install with the largest revision <= ?2 (every install when ?2 is NULL).
_PACK_IN_FORCE = (
    "revision = (SELECT max(revision) FROM packs WHERE owner = p.owner AND name = p.name"
    " AND (?2 IS NULL OR revision <= ?2))"
)
