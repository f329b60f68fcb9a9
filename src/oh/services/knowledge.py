"""Review (docs/design.md): the only road by which anything outlives a notebook.

The owner proposes a working note (by notebook and name) or a new record, citing a source; the
proposal keeps a copy of the content as it was, so it survives the notebook's purge. The owner
then accepts (optionally with edits) or rejects it, with a reason; who and when are stamped.
An accepted proposal becomes a reviewed record at a new revision of the owner's knowledge base.

What can be reviewed knowledge is checked the same way when proposing and when accepting:
non-empty text, and the kinds and fields of the installed profiles. One name has at most one
pending proposal: proposing the same content with the same source and origin again answers
the pending proposal; anything else for that name is ``already_exists`` until it is decided.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from oh.core.clock import Clock, system_clock, utc_text
from oh.core.identifiers import check_identifier
from oh.core.records import Record, check_name
from oh.core.reviewed import (
    Decision,
    Proposal,
    ReviewedRecord,
    Source,
    check_pending,
    check_reviewable,
)
from oh.errors import AlreadyExists, Forbidden, InvalidArgument, NotFound
from oh.profiles import Profiles
from oh.storage.base import KnowledgeStore, MemoryStore

__all__ = ["Decided", "Knowledge", "Proposed", "new_proposal_id"]


def new_proposal_id() -> str:
    return "pr_" + secrets.token_hex(16)


@dataclass(frozen=True, slots=True)
class Decided:
    proposal: Proposal
    record: ReviewedRecord | None  # the new reviewed record when accepted

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"proposal_id": self.proposal.id, "state": self.proposal.state}
        if self.record is not None:
            body["revision"] = self.record.revision
            body["name"] = self.record.name
            body["digest"] = self.record.digest
        return body


@dataclass(frozen=True, slots=True)
class Proposed:
    """What proposing answered: the pending proposal, and whether this call made it (False
    when the same proposal was pending already and nothing was stored)."""

    proposal: Proposal
    created: bool


def _origin(note: dict[str, Any] | None) -> tuple[Any, Any] | None:
    """Where a proposal's content came from, for telling a repeat from another proposal: the
    note's notebook and name (not its version: the same content rewritten is the same note)."""
    return None if note is None else (note.get("notebook"), note.get("name"))


class Knowledge:
    """Proposals and decisions over a ``KnowledgeStore``, reading notes from a ``MemoryStore``.

    ``owner`` arguments are the principal acting, already authenticated by the host: only the
    owner of a notebook can propose its notes, and only the owner of a knowledge base can decide
    its proposals.
    """

    def __init__(
        self,
        store: KnowledgeStore,
        memory: MemoryStore,
        *,
        clock: Clock = system_clock,
        profiles: Profiles | None = None,
    ) -> None:
        self.store = store
        self.memory = memory
        self.clock = clock
        self.profiles = profiles

    def reviewable(self, owner: str) -> Callable[[Record], Record]:
        """The check review runs on content, for ``owner`` as things stand: a record comes back
        as reviewed knowledge would hold it, or ``invalid_argument`` says why not — non-empty
        text, and once profiles are installed, their kinds, with fields of those kinds
        validated and canonicalized (docs/packs.md, docs/tools.md). The installed profiles are
        read once, so a page can check every note it shows."""
        schema = None if self.profiles is None else self.profiles.schema(owner)

        def check(record: Record) -> Record:
            check_reviewable(record)
            return record if schema is None else schema.check(record, reviewed=True)

        return check

    def _checked(self, owner: str, record: Record) -> Record:
        return self.reviewable(owner)(record)

    def propose(
        self,
        owner: str,
        *,
        source: Any,
        notebook: Any = None,
        name: Any = None,
        record: Any = None,
    ) -> Proposal:
        """Propose a note (``notebook`` + ``name``) or a new ``record``, citing ``source``;
        see ``submit``."""
        return self.submit(
            owner, source=source, notebook=notebook, name=name, record=record
        ).proposal

    def submit(
        self,
        owner: str,
        *,
        source: Any,
        notebook: Any = None,
        name: Any = None,
        record: Any = None,
    ) -> Proposed:
        """Propose a note (``notebook`` + ``name``) or a new ``record``, citing ``source``.

        The content must be reviewable (``_checked``). If a proposal for the same name is
        pending, the same content, source and origin answer it (``created`` False, nothing
        stored); anything else is ``already_exists`` naming the pending proposal."""
        check_identifier(owner, "owner")
        parsed_source = Source.parse(source)
        from_note = notebook is not None or name is not None
        if from_note == (record is not None):
            raise InvalidArgument("propose either a note (notebook and name) or a new record")
        note: dict[str, Any] | None = None
        if from_note:
            if type(notebook) is not str or type(name) is not str:
                raise InvalidArgument("notebook and name must both be given as text")
            check_identifier(notebook, "notebook")
            check_name(name)
            found = self.memory.notebook(notebook)
            if found.owner != owner:
                raise Forbidden(f"notebook {notebook} belongs to another owner")
            if found.state in ("purged", "empty"):
                raise NotFound(f"notebook {notebook} was forgotten; its notes are gone")
            stored = self.memory.record(notebook, name)
            if stored is None:
                raise NotFound(f"{name} is not a current note of {notebook}", name=name)
            content = Record.parse(stored.verified_content())
            note = {
                "notebook": notebook,
                "name": name,
                "author": stored.author,
                "version": stored.version,
            }
        else:
            content = Record.parse(record)
        content = self._checked(owner, content)
        canonical = content.canonical()
        proposal = Proposal(
            id=new_proposal_id(),
            owner=owner,
            proposed_by=owner,
            proposed_at=utc_text(self.clock()),
            name=content.name,
            content=canonical,
            digest=content.digest,
            source=parsed_source,
            note=note,
        )
        pending = self.store.add_proposal(proposal)
        if pending.id == proposal.id:
            return Proposed(proposal, created=True)
        same = (
            pending.digest == proposal.digest
            and pending.source == proposal.source
            and _origin(pending.note) == _origin(proposal.note)
        )
        if same:
            return Proposed(pending, created=False)
        raise AlreadyExists(
            f"{proposal.name} already has a pending proposal, {pending.id}, with other"
            f" {_difference(pending, proposal)}; decide it before proposing {proposal.name} again",
            proposal_id=pending.id,
            name=proposal.name,
        )

    def decide(
        self,
        owner: str,
        proposal_id: Any,
        *,
        decision: Any,
        reason: Any,
        record: Any = None,
    ) -> Decided:
        """Accept (optionally with an edited ``record``) or reject a pending proposal."""
        check_identifier(owner, "owner")
        check_identifier(proposal_id, "proposal_id")
        if decision not in ("accept", "reject"):
            raise InvalidArgument('decision must be "accept" or "reject"')
        why = Decision.parse_reason(reason)
        proposal = self.store.proposal(proposal_id)
        if proposal.owner != owner:
            raise Forbidden(f"proposal {proposal_id} belongs to another owner")
        at = utc_text(self.clock())
        if decision == "reject":
            if record is not None:
                raise InvalidArgument("a rejection takes no record")
            rejected = self.store.reject(proposal_id, Decision("reject", owner, at, why))
            return Decided(rejected, None)
        check_pending(proposal)  # before its text is read: a rejected one has none left
        original = Record.parse(proposal.verified_record())
        final = self._checked(owner, original if record is None else Record.parse(record))
        if final.name != proposal.name:
            raise InvalidArgument(
                f"an edit keeps the proposed name {proposal.name}; propose another name anew"
            )
        verdict = Decision(
            "accept" if final.digest == proposal.digest else "accept_with_edits", owner, at, why
        )
        reviewed = self.store.accept(proposal_id, verdict, final, author=proposal.proposed_by)
        return Decided(self.store.proposal(proposal_id), reviewed)

    def records(self, owner: str, revision: Any = None) -> tuple[int, list[ReviewedRecord]]:
        """``(latest, records at revision)``; ``revision`` defaults to the latest."""
        latest = self.store.latest_revision(owner)
        if revision is None:
            revision = latest
        if type(revision) is not int or revision < 0:
            raise InvalidArgument("revision must be a non-negative integer")
        return latest, self.store.records_at(owner, revision)


def _difference(pending: Proposal, proposal: Proposal) -> str:
    """What differs between two proposals for one name, in words, for the refusal."""
    parts = []
    if pending.digest != proposal.digest:
        parts.append("content")
    if pending.source != proposal.source:
        parts.append("source")
    if _origin(pending.note) != _origin(proposal.note):
        parts.append("origin")
    return " and ".join(parts)
