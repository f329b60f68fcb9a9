"""The in-memory backend: every protocol of ``oh.storage.base`` over plain Python dicts.

No database: one ``InMemoryDatabase`` holds the tables (memory, knowledge, the host's registry)
behind one lock, and the stores and the purge credential are views on it. It is the executable
reference of what a backend does (a new backend is compared with it) and the fast backend for
tests. It is not durable (the data lives as long as the object) and not for production: in one
process there is no permission boundary, so the purge credential's limits are its interface.

What a write means comes from ``oh.core`` exactly as in the SQL backends; rows go through
``oh.storage.rows`` as theirs do. Each operation checks everything under the lock before it
changes anything, so a refused or failing call leaves the tables as they were. The invariants
a SQL database enforces with keys and triggers (one request id per notebook, one pending
proposal per name, nothing written into a notebook that is not open) are checks here.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any, NamedTuple

from oh.core.answers import Answer
from oh.core.changes import (
    LogEntry,
    Refused,
    RememberResult,
    fold,
    genesis_hash,
)
from oh.core.clock import Clock, from_utc_text, system_clock, utc_text
from oh.core.decision import Call, Reuse, Seen, Write, decide
from oh.core.notebook import Notebook, check_not_closed
from oh.core.records import Record, StoredRecord
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
from oh.core.seals import closed_seal, notebook_seal, opened_seal, row_seal
from oh.errors import AlreadyExists, NotFound, Purged
from oh.storage.base import (
    OPENING_GRACE_FLOOR,
    PURGE_CLOCK_ALLOWANCE,
    PackInstall,
    PreparedRemember,
    RecordCheck,
    RegisteredDocument,
    VectorRow,
)
from oh.storage.rows import (
    answer_from_row,
    answer_values,
    notebook_from_row,
    pack_values,
    proposal_from_row,
    proposal_values,
    reviewed_from_row,
    reviewed_values,
    revision_values,
)

__all__ = [
    "InMemoryDatabase",
    "InMemoryHostRegistry",
    "InMemoryKnowledgeStore",
    "InMemoryPurgeAccess",
    "InMemoryStore",
    "KeptAnswer",
    "NotebookRow",
]

Row = tuple[Any, ...]


class NotebookRow(NamedTuple):
    """A notebook as the database keeps it: the columns of ``NOTEBOOK_COLUMNS``, then its seal."""

    id: str
    owner: str
    document: str
    run: str
    state: str
    started_at: str
    forgets_at: str
    version: int
    pinned_revision: int | None
    head_hash: str
    purged_at: str | None
    seal: str | None


class KeptAnswer(NamedTuple):
    """A kept answer as the database keeps it: the columns of ``ANSWER_COLUMNS``."""

    notebook_id: str
    answer_id: str
    caller: str
    question: str
    params: str
    version: int
    revision: int | None
    created_at: str
    expires_at: str
    rows: str


class InMemoryDatabase:
    """The tables, each keyed as the SQL backends key theirs, and the one lock guarding them.

    ``clock`` is the database's own clock, which only bounds the stamps the purge credential
    may record (``PURGE_CLOCK_ALLOWANCE``), as SQLite's and PostgreSQL's clocks do.
    """

    def __init__(self, *, clock: Clock = system_clock) -> None:
        self.clock = clock
        self.lock = threading.RLock()
        # memory: per notebook, the log by request id (in version order), the current records
        # by name and the kept answers by id
        self.notebooks: dict[str, NotebookRow] = {}
        self.log: dict[str, dict[str, LogEntry]] = {}
        self.records: dict[str, dict[str, StoredRecord]] = {}
        self.answers: dict[str, dict[str, KeptAnswer]] = {}
        # knowledge: rows as ``oh.storage.rows`` writes them, per owner by revision
        self.knowledge_bases: dict[str, tuple[int, str]] = {}
        self.revisions: dict[str, dict[int, Row]] = {}
        self.reviewed: dict[str, dict[str, dict[int, Row]]] = {}
        self.packs: dict[str, dict[int, Row]] = {}
        self.proposals: dict[str, Row] = {}
        self.pending: dict[tuple[str, str], str] = {}  # (owner, name) → its pending proposal
        # the reference host's registry
        self.owner_tokens: dict[str, tuple[str, str]] = {}
        self.documents: dict[str, tuple[str, str]] = {}
        self.host_settings: dict[str, str] = {}


# The content tables, whose rows forget and the purge delete and count.
CONTENT_TABLES = ("answers", "records", "log")


def _delete_content(database: InMemoryDatabase, notebook_id: str) -> dict[str, int]:
    return {table: len(getattr(database, table).pop(notebook_id, {})) for table in CONTENT_TABLES}


def _closed(seal: str | None, state: str, purged_at: str) -> str | None:
    """The tombstone's seal chained from the row's seal; None stays None (verify says so)."""
    return None if type(seal) is not str else closed_seal(seal, state, purged_at)


def _stored(notebook: Notebook, seal: str | None) -> NotebookRow:
    n = notebook
    return NotebookRow(
        n.id,
        n.owner,
        n.document,
        n.run,
        n.state,
        n.started_at,
        n.forgets_at,
        n.version,
        n.pinned_revision,
        n.head_hash,
        n.purged_at,
        seal,
    )


class InMemoryStore(PreparedRemember):
    """``MemoryStore`` on an ``InMemoryDatabase`` (a new one unless given)."""

    def __init__(self, database: InMemoryDatabase | None = None) -> None:
        self.database = InMemoryDatabase() if database is None else database

    def _row(self, notebook_id: str) -> NotebookRow:
        row = self.database.notebooks.get(notebook_id)
        if row is None:
            raise NotFound(f"no notebook {notebook_id}")
        return row

    def _require_open(self, notebook_id: str) -> None:
        """What the SQL backends' triggers refuse: content into a notebook that is not open."""
        row = self.database.notebooks.get(notebook_id)
        if row is None or row.state != "open":
            raise Purged(f"notebook {notebook_id} is not open: nothing may be written into it")

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
        notebook = Notebook(
            notebook_id,
            owner,
            document,
            run,
            "opening",
            started,
            forgets,
            0,
            pinned_revision,
            genesis_hash(notebook_id),
        )
        with self.database.lock:
            if notebook_id in self.database.notebooks:
                raise AlreadyExists(f"notebook {notebook_id} already exists")
            if self._find(owner, document, run) is not None:
                raise AlreadyExists(f"run {run} of {document} already has a notebook")
            self.database.notebooks[notebook_id] = _stored(notebook, seal)
        return notebook

    def mark_open(self, notebook_id: str, pinned_revision: int | None) -> Notebook:
        with self.database.lock:
            row = self._row(notebook_id)
            notebook = notebook_from_row(row)
            if notebook.state == "open":
                return notebook
            check_not_closed(notebook.id, notebook.state)
            row = row._replace(
                state="open",
                pinned_revision=pinned_revision,
                seal=opened_seal(notebook, pinned_revision),
            )
            self.database.notebooks[notebook_id] = row
        return notebook_from_row(row)

    def notebook(self, notebook_id: str) -> Notebook:
        with self.database.lock:
            return notebook_from_row(self._row(notebook_id))

    def _find(self, owner: str, document: str, run: str) -> NotebookRow | None:
        for row in self.database.notebooks.values():
            if (row.owner, row.document, row.run) == (owner, document, run):
                return row
        return None

    def find_notebook(self, owner: str, document: str, run: str) -> Notebook | None:
        with self.database.lock:
            row = self._find(owner, document, run)
        return None if row is None else notebook_from_row(row)

    def notebook_ids(self) -> list[str]:
        with self.database.lock:
            return sorted(self.database.notebooks)

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
        def shown(row: NotebookRow) -> str:
            return "expired" if row.state == "open" and row.forgets_at <= now else row.state

        with self.database.lock:
            rows = [
                row
                for row in self.database.notebooks.values()
                if row.owner == owner
                and (document is None or row.document == document)
                and (state is None or shown(row) == state)
                and (after is None or (row.started_at, row.id) < after)
            ]
        rows.sort(key=lambda row: (row.started_at, row.id), reverse=True)
        return [notebook_from_row(row) for row in rows[:limit]]

    def notebook_activity(
        self, owner: str, notebook_ids: Sequence[str]
    ) -> dict[str, tuple[int, str | None]]:
        with self.database.lock:
            found = {}
            for notebook_id in notebook_ids:
                row = self.database.notebooks.get(notebook_id)
                if row is None or row.owner != owner:
                    continue
                entries = self.database.log.get(notebook_id, {}).values()
                last = max((entry.written_at for entry in entries), default=None)
                found[notebook_id] = (len(self.database.records.get(notebook_id, {})), last)
        return found

    # -- writes ---------------------------------------------------------------------------

    def _remember(self, call: Call) -> RememberResult:
        notebook_id, request_id = call.notebook_id, call.request_id
        database = self.database
        with database.lock:
            row = self._row(notebook_id)
            entries = database.log.get(notebook_id, {})
            prior = entries.get(request_id)
            current = database.records.get(notebook_id, {})
            seen = Seen(
                row.state,
                row.forgets_at,
                row.version,
                row.head_hash,
                None if prior is None else prior.version,
                None if prior is None else prior.fingerprint,
                [name for name in call.names if name in current],
            )
            match decide(call, seen):
                case Write(entry, result):
                    # Every check has passed: from here on nothing can fail.
                    database.log.setdefault(notebook_id, {})[request_id] = entry
                    fold(database.records.setdefault(notebook_id, {}), (entry,), StoredRecord)
                    database.notebooks[notebook_id] = row._replace(
                        version=entry.version, head_hash=entry.hash
                    )
                    return result
                case Reuse():
                    assert prior is not None
                    return prior.result()
                case Refused() as refused:
                    return refused

    def forget(self, notebook_id: str, now: datetime) -> dict[str, int]:
        """Delete a notebook's content at once, leave its tombstone; return what was removed."""
        stamp = utc_text(now)
        with self.database.lock:
            row = self._row(notebook_id)
            if row.state in ("purged", "empty"):
                check_not_closed(notebook_id, row.state)
            self.database.notebooks[notebook_id] = row._replace(
                state="purged", purged_at=stamp, seal=_closed(row.seal, "purged", stamp)
            )
            return _delete_content(self.database, notebook_id)

    def compact(self) -> bool:
        """True: deleted content is gone once the tables drop it (no files keep a copy)."""
        return True

    # -- reads ----------------------------------------------------------------------------

    def records(self, notebook_id: str) -> list[StoredRecord]:
        with self.database.lock:
            current = self.database.records.get(notebook_id, {})
            return [current[name] for name in sorted(current)]

    def record(self, notebook_id: str, name: str) -> StoredRecord | None:
        with self.database.lock:
            return self.database.records.get(notebook_id, {}).get(name)

    def record_checks(self, notebook_id: str, *, page: int = 2000) -> Iterator[RecordCheck]:
        # One snapshot whatever the page: nothing here is read from outside the process.
        with self.database.lock:
            records = self.records(notebook_id)
            by_version = {e.version: e for e in self.database.log.get(notebook_id, {}).values()}
        checks = []
        for r in records:
            entry = by_version.get(r.version)
            logged = entry is not None and any(
                op in ("add", "replace") and name == r.name and content == r.content
                for op, name, content, _ in entry.changes
            )
            checks.append(
                RecordCheck(r.name, r.kind, r.digest, r.author, r.written_at, r.version, logged)
            )
        return iter(checks)

    def log(self, notebook_id: str) -> Iterator[LogEntry]:
        with self.database.lock:
            entries = list(self.database.log.get(notebook_id, {}).values())
        return iter(sorted(entries, key=lambda entry: entry.version))

    def notebook_seal(self, notebook_id: str) -> str | None:
        with self.database.lock:
            return self._row(notebook_id).seal

    def data_key_destroyed(self, notebook_id: str) -> bool:
        return False  # nothing is sealed here

    def kept_answers(self, notebook_id: str) -> list[tuple[Any, ...]]:
        with self.database.lock:
            kept = self.database.answers.get(notebook_id, {})
            return [tuple(kept[answer_id]) for answer_id in sorted(kept)]

    def note_vector_rows(self, notebook_id: str) -> Iterator[VectorRow]:
        return iter(())  # this backend keeps no recall vectors

    def reviewed_vector_rows(self) -> Iterator[VectorRow]:
        return iter(())

    def save_answer(self, answer: Answer, now: datetime) -> None:
        row = KeptAnswer(*answer_values(answer))
        stamp = utc_text(now)
        with self.database.lock:
            self._require_open(answer.notebook_id)
            kept = {
                answer_id: other
                for answer_id, other in self.database.answers.get(answer.notebook_id, {}).items()
                if other.expires_at > stamp  # this notebook's expired answers are dropped
            }
            earlier = kept.get(row.answer_id)
            if earlier is not None:  # ids are content-addressed: keep it, for the longer time
                row = earlier._replace(expires_at=max(earlier.expires_at, row.expires_at))
            kept[row.answer_id] = row
            self.database.answers[answer.notebook_id] = kept

    def answer(
        self, notebook_id: str, answer_id: str, offset: int = 0, limit: int | None = None
    ) -> Answer | None:
        with self.database.lock:
            row = self.database.answers.get(notebook_id, {}).get(answer_id)
        return None if row is None else answer_from_row(row, offset, limit)

    def read_record(self, notebook_id: str, name: str) -> tuple[Notebook, StoredRecord | None]:
        with self.database.lock:
            row = self._row(notebook_id)
            return notebook_from_row(row), self.record(notebook_id, name)

    def changes_after(
        self, notebook_id: str, version: int
    ) -> tuple[int, list[tuple[str, str | None, str | None]]]:
        with self.database.lock:
            current = self._row(notebook_id).version
            entries = [e for e in self.log(notebook_id) if e.version > version]
        return current, [
            (name, digest, content) for e in entries for _, name, content, digest in e.changes
        ]

    def digests(self, notebook_id: str) -> tuple[int, list[tuple[str, str]]]:
        with self.database.lock:
            version = self._row(notebook_id).version
            return version, [(r.name, r.digest) for r in self.records(notebook_id)]

    def replace_records(self, notebook_id: str, records: Iterable[StoredRecord]) -> None:
        current = {r.name: r for r in records}
        with self.database.lock:
            if current:
                self._require_open(notebook_id)
            self.database.records[notebook_id] = current

    def close(self) -> None:
        """Nothing to release: the tables live as long as the database object."""

    # -- export and import (docs/cli.md) ------------------------------------------------------

    def import_notebook(self, notebook: Notebook, entries: Iterable[LogEntry]) -> Notebook:
        """Recreate an exported notebook exactly: its row as exported (``expired`` is stored
        as ``open``), its log entries as they were and its current records folded from them.
        ``already_exists`` if its id or run is taken. The caller checks the chain."""
        state = "open" if notebook.state == "expired" else notebook.state
        kept = dataclasses.replace(notebook, state=state)
        seal = row_seal(
            kept.id,
            kept.owner,
            kept.document,
            kept.run,
            kept.state,
            kept.started_at,
            kept.forgets_at,
            kept.pinned_revision,
            kept.purged_at,
        )
        log: dict[str, LogEntry] = {}
        records: dict[str, StoredRecord] = {}
        with self.database.lock:
            if notebook.id in self.database.notebooks:
                raise AlreadyExists(f"notebook {notebook.id} already exists")
            if self._find(notebook.owner, notebook.document, notebook.run) is not None:
                raise AlreadyExists(f"run {notebook.run} of {notebook.document} has a notebook")
            for entry in entries:
                if entry.request_id in log:
                    raise AlreadyExists(f"request_id {entry.request_id!r} is in the log twice")
                log[entry.request_id] = entry
                fold(records, (entry,), StoredRecord)
            if log and state != "open":
                raise Purged(f"notebook {notebook.id} is not open: it cannot hold log entries")
            self.database.notebooks[notebook.id] = _stored(kept, seal)
            if log:
                self.database.log[notebook.id] = log
                self.database.records[notebook.id] = records
        return kept


class InMemoryPurgeAccess:
    """The purge worker's credential on an ``InMemoryDatabase``: its six methods, nothing else.

    "Expired" and "past the grace" are judged against the stamp it records, which is at most
    the database's clock plus ``PURGE_CLOCK_ALLOWANCE``, whatever ``now`` the caller claims.
    """

    def __init__(self, database: InMemoryDatabase) -> None:
        self._database = database

    def _bound(self) -> str:
        """The latest stamp the database accepts: its own clock plus the allowance."""
        return utc_text(self._database.clock() + PURGE_CLOCK_ALLOWANCE)

    def _stamp(self, now: datetime) -> str:
        """``now`` as the stamp to record, at most the bound: a worker whose clock runs ahead
        purges less rather than failing."""
        return min(utc_text(now), self._bound())

    @staticmethod
    def _due(row: NotebookRow, stamp: str) -> bool:
        return row.state == "open" and row.forgets_at <= stamp

    @staticmethod
    def _stuck(row: NotebookRow, cutoff: datetime, stamp: str) -> bool:
        """Opening since before ``cutoff`` and since the grace floor before ``stamp``."""
        floor = utc_text(from_utc_text(stamp) - OPENING_GRACE_FLOOR)
        return row.state == "opening" and row.started_at <= min(utc_text(cutoff), floor)

    def expired(self, now: datetime, limit: int = 1000) -> list[str]:
        """Ids of open notebooks whose forget time has passed, the earliest first."""
        with self._database.lock:
            stamp = self._stamp(now)
            due = [row for row in self._database.notebooks.values() if self._due(row, stamp)]
        return [row.id for row in sorted(due, key=lambda row: row.forgets_at)[:limit]]

    def stale_openings(self, cutoff: datetime, limit: int = 1000) -> list[str]:
        """Ids of notebooks still ``opening`` that started before ``cutoff``."""
        with self._database.lock:
            bound = self._bound()
            rows = self._database.notebooks.values()
            return [row.id for row in rows if self._stuck(row, cutoff, bound)][:limit]

    def purge(self, notebook_ids: Iterable[str], now: datetime) -> dict[str, dict[str, int]]:
        """Delete each notebook still past its forget time, leaving the tombstone."""
        purged: dict[str, dict[str, int]] = {}
        with self._database.lock:
            stamp = self._stamp(now)
            for notebook_id in notebook_ids:
                row = self._database.notebooks.get(notebook_id)
                if row is not None and self._due(row, stamp):
                    self._close(row, "purged", stamp)
                    purged[notebook_id] = _delete_content(self._database, notebook_id)
        return purged

    def mark_empty(self, notebook_ids: Iterable[str], cutoff: datetime, now: datetime) -> list[str]:
        """Mark ``empty`` each notebook still ``opening`` since before ``cutoff`` (and since at
        least ``OPENING_GRACE_FLOOR`` before the stamp recorded)."""
        marked = []
        with self._database.lock:
            stamp = self._stamp(now)
            for notebook_id in notebook_ids:
                row = self._database.notebooks.get(notebook_id)
                if row is not None and self._stuck(row, cutoff, stamp):
                    self._close(row, "empty", stamp)
                    _delete_content(self._database, notebook_id)
                    marked.append(notebook_id)
        return marked

    def _close(self, row: NotebookRow, state: str, stamp: str) -> None:
        self._database.notebooks[row.id] = row._replace(
            state=state, purged_at=stamp, seal=_closed(row.seal, state, stamp)
        )

    def compact(self) -> bool:
        return True

    def close(self) -> None:
        """Nothing to release."""


class InMemoryKnowledgeStore:
    """``KnowledgeStore`` on an ``InMemoryDatabase`` (a new one unless given).

    Reviewed versions, revisions and pack installs are only ever added; a proposal is decided
    once. Rows are kept as ``oh.storage.rows`` writes them, so every read builds new values.
    """

    def __init__(self, database: InMemoryDatabase | None = None) -> None:
        self.database = InMemoryDatabase() if database is None else database

    # -- KnowledgeSource ------------------------------------------------------------------

    def latest_revision(self, owner: str) -> int:
        with self.database.lock:
            return self.database.knowledge_bases.get(owner, (0, ""))[0]

    def _check_revision(self, owner: str, revision: int) -> None:
        latest = self.latest_revision(owner)
        if not 0 <= revision <= latest:
            raise NotFound(f"no revision {revision}; the latest is {latest}", latest=latest)

    def _version_at(self, owner: str, name: str, revision: int) -> ReviewedRecord | None:
        versions = self.database.reviewed.get(owner, {}).get(name, {})
        last = max((r for r in versions if r <= revision), default=None)
        return None if last is None else reviewed_from_row(versions[last])

    def records_at(self, owner: str, revision: int) -> list[ReviewedRecord]:
        with self.database.lock:
            self._check_revision(owner, revision)
            found = (self._version_at(owner, n, revision) for n in self._names(owner))
            return [record for record in found if record is not None]

    def _names(self, owner: str) -> list[str]:
        return sorted(self.database.reviewed.get(owner, {}))

    def record_at(self, owner: str, name: str, revision: int) -> ReviewedRecord | None:
        with self.database.lock:
            self._check_revision(owner, revision)
            return self._version_at(owner, name, revision)

    # -- proposals and decisions ----------------------------------------------------------

    def add_proposal(self, proposal: Proposal) -> Proposal:
        with self.database.lock:
            pending = self.pending_proposal(proposal.owner, proposal.name)
            if pending is not None:
                return pending
            self.database.proposals[proposal.id] = proposal_values(proposal, pending=True)
            self.database.pending[proposal.owner, proposal.name] = proposal.id
        return proposal

    def pending_proposal(self, owner: str, name: str) -> Proposal | None:
        with self.database.lock:
            proposal_id = self.database.pending.get((owner, name))
            return None if proposal_id is None else self.proposal(proposal_id)

    def proposal(self, proposal_id: str) -> Proposal:
        with self.database.lock:
            row = self.database.proposals.get(proposal_id)
        if row is None:
            raise NotFound(f"no proposal {proposal_id}")
        return proposal_from_row(row)

    def proposals(self, owner: str, state: str | None = None) -> list[Proposal]:
        with self.database.lock:
            every = [proposal_from_row(row) for row in self.database.proposals.values()]
        chosen = [p for p in every if p.owner == owner and (state is None or p.state == state)]
        return sorted(chosen, key=lambda p: (p.proposed_at, p.id))

    def _undecided(self, proposal_id: str) -> Proposal:
        proposal = self.proposal(proposal_id)
        check_pending(proposal)
        return proposal

    def _decided(self, proposal: Proposal) -> None:
        self.database.proposals[proposal.id] = proposal_values(proposal)
        del self.database.pending[proposal.owner, proposal.name]

    def _add_revision(self, entry: Revision) -> None:
        self.database.revisions.setdefault(entry.owner, {})[entry.revision] = revision_values(entry)
        self.database.knowledge_bases[entry.owner] = (entry.revision, entry.hash)

    def accept(
        self, proposal_id: str, decision: Decision, record: Record, author: str
    ) -> ReviewedRecord:
        with self.database.lock:
            proposal = self._undecided(proposal_id)
            owner = proposal.owner
            latest, head = self.head(owner)
            versions = self.database.reviewed.get(owner, {}).get(record.name, {})
            reviewed, entry = accepted_version(
                proposal,
                decision,
                record,
                author=author,
                revision=latest + 1,
                prev_hash=head,
                supersedes=max(versions, default=None),
            )
            self._decided(
                dataclasses.replace(
                    proposal, state="accepted", decision=decision, revision=entry.revision
                )
            )
            self._add_revision(entry)
            self.database.reviewed.setdefault(owner, {}).setdefault(reviewed.name, {})[
                reviewed.revision
            ] = reviewed_values(owner, reviewed)[1:]
        return reviewed

    def reject(self, proposal_id: str, decision: Decision) -> Proposal:
        with self.database.lock:
            proposal = self._undecided(proposal_id)
            # The decision stays, the proposed text goes (``Proposal.discarded``).
            rejected = dataclasses.replace(
                proposal,
                state="rejected",
                decision=decision,
                content=DISCARDED,
                digest=DISCARDED,
            )
            self._decided(rejected)
            return self.proposal(proposal_id)

    # -- history --------------------------------------------------------------------------

    def history(self, owner: str, name: str) -> list[ReviewedRecord]:
        with self.database.lock:
            versions = self.database.reviewed.get(owner, {}).get(name, {})
            return [reviewed_from_row(versions[r]) for r in sorted(versions)]

    def revisions(self, owner: str) -> list[Revision]:
        with self.database.lock:
            entries = self.database.revisions.get(owner, {})
            return [Revision(*entries[r]) for r in sorted(entries)]

    def owners(self) -> list[str]:
        with self.database.lock:
            return sorted(self.database.knowledge_bases)

    def head(self, owner: str) -> tuple[int, str]:
        with self.database.lock:
            return self.database.knowledge_bases.get(owner, (0, knowledge_genesis(owner)))

    def close(self) -> None:
        """Nothing to release: the tables live as long as the database object."""

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
        with self.database.lock:
            in_force = {p.name: p.digest for p in self.installed_packs(owner)}
            if in_force != dict(expected):
                return None
            latest, head = self.head(owner)
            entry = pack_revision(
                owner, latest + 1, name, digest, made_by=made_by, made_at=made_at, prev_hash=head
            )
            install = PackInstall(
                owner, name, version, digest, content, entry.revision, made_by, made_at
            )
            self._add_revision(entry)
            self.database.packs.setdefault(owner, {})[entry.revision] = pack_values(install)
        return install

    def installed_packs(self, owner: str, revision: int | None = None) -> list[PackInstall]:
        with self.database.lock:
            if revision is not None:
                self._check_revision(owner, revision)
            in_force: dict[str, PackInstall] = {}
            for install in self.pack_history(owner):  # in revision order: the last one wins
                if revision is None or install.revision <= revision:
                    in_force[install.name] = install
        return [in_force[name] for name in sorted(in_force)]

    def pack_history(self, owner: str) -> list[PackInstall]:
        with self.database.lock:
            installs = self.database.packs.get(owner, {})
            return [PackInstall(*installs[r]) for r in sorted(installs)]

    # -- export and import (docs/cli.md) ------------------------------------------------------

    def proposal_owners(self) -> list[str]:
        with self.database.lock:
            return sorted(
                {proposal_from_row(row).owner for row in self.database.proposals.values()}
            )

    def import_knowledge_base(
        self,
        owner: str,
        head: tuple[int, str],
        revisions: Iterable[Revision],
        reviewed: Iterable[ReviewedRecord],
        proposals: Iterable[Proposal],
        packs: Iterable[PackInstall] = (),
    ) -> None:
        """Recreate one owner's exported knowledge exactly: revision entries, reviewed
        versions, pack installs and proposals as they were (a knowledge base only when there
        are revisions). ``already_exists`` if the owner has a knowledge base here, a proposal
        id is taken or a name would have two pending proposals. The caller checks the chain."""
        entries, versions, installs = list(revisions), list(reviewed), list(packs)
        added = list(proposals)
        pending = [(p.owner, p.name) for p in added if p.state == "pending"]
        ids = [p.id for p in added]
        database = self.database
        with database.lock:
            if owner in database.knowledge_bases:
                raise AlreadyExists(f"{owner} already has a knowledge base here", owner=owner)
            if len(set(ids)) < len(ids) or not database.proposals.keys().isdisjoint(ids):
                raise AlreadyExists(f"a proposal of {owner} is here already", owner=owner)
            if len(set(pending)) < len(pending) or not database.pending.keys().isdisjoint(pending):
                raise AlreadyExists(f"a name of {owner} has a pending proposal", owner=owner)
            if entries:
                database.knowledge_bases[owner] = head
            for entry in entries:
                database.revisions.setdefault(entry.owner, {})[entry.revision] = revision_values(
                    entry
                )
            for record in versions:
                database.reviewed.setdefault(owner, {}).setdefault(record.name, {})[
                    record.revision
                ] = reviewed_values(owner, record)[1:]
            for install in installs:
                database.packs.setdefault(install.owner, {})[install.revision] = pack_values(
                    install
                )
            for proposal in added:
                database.proposals[proposal.id] = proposal_values(proposal)
                if proposal.state == "pending":
                    database.pending[proposal.owner, proposal.name] = proposal.id


class InMemoryHostRegistry:
    """``HostRegistry`` on an ``InMemoryDatabase`` (a new one unless given)."""

    def __init__(self, database: InMemoryDatabase | None = None) -> None:
        self.database = InMemoryDatabase() if database is None else database

    def add_owner_token(self, token_hash: str, owner: str, created_at: str) -> None:
        with self.database.lock:
            if token_hash in self.database.owner_tokens:
                raise AlreadyExists("this owner token is registered already")
            self.database.owner_tokens[token_hash] = (owner, created_at)

    def owner_of_token(self, token_hash: str) -> str | None:
        with self.database.lock:
            found = self.database.owner_tokens.get(token_hash)
        return None if found is None else found[0]

    def register_document(self, document: str, owner: str, at: str) -> str:
        with self.database.lock:
            return self.database.documents.setdefault(document, (owner, at))[0]

    def document_owner(self, document: str) -> str | None:
        with self.database.lock:
            found = self.database.documents.get(document)
        return None if found is None else found[0]

    def owner_documents(
        self, owner: str, *, after: str | None = None, limit: int
    ) -> list[RegisteredDocument]:
        with self.database.lock:
            found = [
                RegisteredDocument(document, holder, at)
                for document, (holder, at) in self.database.documents.items()
                if holder == owner and (after is None or document > after)
            ]
        # Code point order is UTF-8 byte order: the SQL backends' order.
        found.sort(key=lambda row: row.document)
        return found[:limit]

    def remove_document(self, document: str) -> None:
        with self.database.lock:
            self.database.documents.pop(document, None)

    def setting(self, key: str, default: str) -> str:
        with self.database.lock:
            return self.database.host_settings.setdefault(key, default)

    def close(self) -> None:
        """Nothing to release."""
