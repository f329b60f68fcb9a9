"""Reviewed knowledge as values (docs/design.md): sources, decisions, reviewed records, conflicts.

A reviewed record is a §1 record plus the ``source`` it cites and the reviewer's ``decision``;
one without both cannot be built. Its digest is the §1 digest of its seven content keys, so a
note and a reviewed record with the same content have the same digest.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from oh.core.canonical import canonical_text, check_json, matches_digest, parse_json, sha256_hex
from oh.core.changes import Break
from oh.core.identifiers import check_identifier
from oh.core.records import Record
from oh.errors import AlreadyExists, IntegrityError, InvalidArgument

__all__ = [
    "DISCARDED",
    "LOCATOR_KEYS",
    "MAX_PASSAGE",
    "MAX_REASON",
    "Decision",
    "Proposal",
    "ReviewedRecord",
    "Revision",
    "RevisionChain",
    "Source",
    "accepted_version",
    "check_pending",
    "check_reviewable",
    "find_conflicts",
    "knowledge_genesis",
    "pack_revision",
    "revision_hash",
]

MAX_PASSAGE = 4000
MAX_REASON = 2000
LOCATOR_KEYS = ("page", "section", "offset", "line", "paragraph")
_LOCATOR_KEYS = frozenset(LOCATOR_KEYS)


def _text(value: Any, where: str, limit: int) -> str:
    if type(value) is not str or not value.strip():
        raise InvalidArgument(f"{where} is required and must be non-empty text")
    if len(value) > limit:
        raise InvalidArgument(f"{where} has {len(value)} characters; at most {limit}")
    check_json(value, where)
    return value


def _short(value: Any, where: str) -> str:
    """A locator or cited document: an identifier that says something."""
    return check_identifier(_text(value, where, 200), where)


def _locator(value: Any) -> str | dict[str, Any]:
    if type(value) is str:
        return _short(value, "source.locator")
    if type(value) is not dict or not value:
        raise InvalidArgument(
            "source.locator is required: text (e.g. 'p. 4, §2') or an object with"
            " page, section, offset, line or paragraph"
        )
    unknown = set(value) - _LOCATOR_KEYS
    if unknown:
        raise InvalidArgument(f"source.locator has unknown keys: {', '.join(sorted(unknown))}")
    for key, item in value.items():
        if type(item) is int:
            if item < 0:
                raise InvalidArgument(f"source.locator.{key} must not be negative")
        elif type(item) is str:
            _short(item, f"source.locator.{key}")
        else:
            raise InvalidArgument(f"source.locator.{key} must be an integer or text")
    return dict(value)


def check_reviewable(record: Record) -> Record:
    """``record`` if it can be reviewed knowledge: a note may be blank, but a reviewed record
    with no text states nothing a reader could check against its source."""
    if not record.text.strip():
        raise InvalidArgument(
            f"{record.name}: reviewed knowledge needs text; this record's text is empty"
            " (rule reviewed.text)",
            field="text",
            rule="reviewed.text",
            name=record.name,
        )
    return record


@dataclass(frozen=True, slots=True)
class Source:
    """What a reviewed record cites: the document, the exact passage, and where it stands."""

    document: str
    passage: str
    locator: str | dict[str, Any]

    @classmethod
    def parse(cls, value: Any) -> Source:
        if not isinstance(value, Mapping):
            raise InvalidArgument("source must be an object {document, passage, locator}")
        unknown = set(value) - {"document", "passage", "locator"}
        if unknown:
            raise InvalidArgument(
                f"source has unknown keys: {', '.join(sorted(map(str, unknown)))}"
            )
        return cls(
            document=_short(value.get("document"), "source.document"),
            passage=_text(value.get("passage"), "source.passage", MAX_PASSAGE),
            locator=_locator(value.get("locator")),
        )

    def to_json(self) -> dict[str, Any]:
        return {"document": self.document, "passage": self.passage, "locator": self.locator}


DecisionKind = Literal["accept", "accept_with_edits", "reject"]


@dataclass(frozen=True, slots=True)
class Decision:
    """A reviewer's decision on a proposal: what, who, when and why."""

    decision: DecisionKind
    by: str
    at: str
    reason: str

    @staticmethod
    def parse_reason(value: Any) -> str:
        return _text(value, "reason", MAX_REASON)

    def to_json(self) -> dict[str, Any]:
        return {"decision": self.decision, "by": self.by, "at": self.at, "reason": self.reason}

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> Decision:
        return cls(value["decision"], value["by"], value["at"], value["reason"])


@dataclass(frozen=True, slots=True)
class ReviewedRecord:
    """One version of a reviewed record, valid from ``revision`` until a later one supersedes it."""

    name: str
    kind: str
    content: str  # canonical JSON of the seven keys
    digest: str
    author: str
    written_at: str
    revision: int
    source: Source
    decision: Decision
    proposal_id: str | None = None
    supersedes: int | None = None  # the revision of the version this one replaced

    def __post_init__(self) -> None:
        if not isinstance(self.source, Source) or not isinstance(self.decision, Decision):
            raise InvalidArgument("a reviewed record needs both a source and a decision")
        if self.decision.decision == "reject":
            raise InvalidArgument("a rejected proposal never becomes a reviewed record")

    def verified_content(self) -> dict[str, Any]:
        if not matches_digest(self.content, self.digest):
            raise IntegrityError(f"reviewed record {self.name} does not match its digest")
        value = parse_json(self.content, "reviewed record")
        if canonical_text(value) != self.content or value.get("name") != self.name:
            raise IntegrityError(f"reviewed record {self.name} is not in canonical form")
        return dict(value)

    def to_json(self) -> dict[str, Any]:
        """The ``read`` shape of docs/tools.md for a reviewed record (content verified first)."""
        return {
            "origin": "reviewed",
            **self.verified_content(),
            "digest": self.digest,
            "author": self.author,
            "written_at": self.written_at,
            "revision": self.revision,
            "source": self.source.to_json(),
            "decision": self.decision.to_json(),
        }

    def links(self) -> dict[str, list[str]]:
        content = parse_json(self.content, "reviewed record")
        return {key: list(content[key]) for key in ("depends_on", "supports", "contradicts")}


def find_conflicts(
    notes: Mapping[str, tuple[str, Iterable[str]]],
    reviewed: Mapping[str, tuple[str, Iterable[str]]],
) -> dict[tuple[str, str], list[str]]:
    """Conflicts in one view (docs/tools.md): ``{(origin, name): [names it conflicts with]}``.

    ``notes`` and ``reviewed`` map name → (digest, contradicts). A note and a reviewed record
    that share a name but differ in digest conflict (each lists that shared name). An explicit
    ``contradicts`` link between two records in view makes both sides conflict, whichever side
    declared it. Nothing is merged or hidden.
    """
    conflicts: dict[tuple[str, str], set[str]] = {}

    def mark(origin: str, name: str, other: str) -> None:
        conflicts.setdefault((origin, name), set()).add(other)

    for name, (digest, _) in notes.items():
        if name in reviewed and reviewed[name][0] != digest:
            mark("note", name, name)
            mark("reviewed", name, name)
    views = (("note", notes), ("reviewed", reviewed))
    for origin, records in views:
        for name, (_, contradicts) in records.items():
            for target in contradicts:
                for other_origin, other_records in views:
                    if target in other_records:
                        mark(origin, name, target)
                        mark(other_origin, target, name)
    return {key: sorted(names) for key, names in conflicts.items()}


ProposalState = Literal["pending", "accepted", "rejected"]


# What a rejected proposal's content and digest become: the decision stays, the text goes.
DISCARDED = ""


@dataclass(frozen=True, slots=True)
class Proposal:
    """A proposed reviewed record, with a copy of the note as it was when proposed (so the
    proposal outlives the notebook's purge), and — once decided — the decision."""

    id: str
    owner: str
    proposed_by: str
    proposed_at: str
    name: str
    content: str  # canonical JSON of the seven keys as proposed
    digest: str
    source: Source
    state: ProposalState = "pending"
    note: dict[str, Any] | None = None  # {notebook, name, author, version} when from a note
    decision: Decision | None = None
    revision: int | None = None

    @property
    def discarded(self) -> bool:
        """A rejected proposal keeps its decision, not its text: rejecting it emptied its
        content and digest (``DISCARDED``), so no copy of the database taken afterwards holds
        what was proposed, and no guess of it can be confirmed."""
        return self.state == "rejected" and self.content == DISCARDED and self.digest == DISCARDED

    def verified_record(self) -> dict[str, Any]:
        """The proposed record's content, after recomputing its digest."""
        if not matches_digest(self.content, self.digest):
            raise IntegrityError(f"proposal {self.id} does not match its digest")
        return dict(parse_json(self.content, "proposal"))

    def to_json(self) -> dict[str, Any]:
        return {
            "proposal_id": self.id,
            "owner": self.owner,
            "proposed_by": self.proposed_by,
            "proposed_at": self.proposed_at,
            "state": self.state,
            "record": parse_json(self.content, "proposal"),
            "digest": self.digest,
            "source": self.source.to_json(),
            "note": self.note,
            "decision": None if self.decision is None else self.decision.to_json(),
            "revision": self.revision,
        }


@dataclass(frozen=True, slots=True)
class Revision:
    owner: str
    revision: int
    what: str  # decision | pack
    proposal_id: str | None
    name: str | None
    digest: str | None
    made_by: str
    made_at: str
    prev_hash: str
    hash: str

    def hashed_body(self) -> dict[str, Any]:
        """Every field but ``hash``: what ``revision_hash`` covers, and an export line holds."""
        return {
            "owner": self.owner,
            "revision": self.revision,
            "what": self.what,
            "proposal_id": self.proposal_id,
            "name": self.name,
            "digest": self.digest,
            "made_by": self.made_by,
            "made_at": self.made_at,
            "prev_hash": self.prev_hash,
        }

    def to_json(self) -> dict[str, Any]:
        """The entry as a caller sees it: without the owner (known) and the chain."""
        body = self.hashed_body()
        del body["owner"], body["prev_hash"]
        return body


def knowledge_genesis(owner: str) -> str:
    return sha256_hex("oh/knowledge/genesis\n" + owner)


def revision_hash(entry: Revision) -> str:
    return sha256_hex(canonical_text(entry.hashed_body()))


class RevisionChain:
    """One owner's chain of knowledge revisions, followed entry by entry.

    Revision *n* is the owner's *n*-th entry, names the hash of the one before it (the genesis
    hash for the first) as its ``prev_hash``, and hashes to its own ``hash``. ``follow`` says
    what an entry breaks and moves on to it either way, so ``verify`` reports every break while
    an import refuses at the first, by the same rule. After the last entry, ``revision`` and
    ``head`` are where the chain ends: the knowledge base's head must be these.
    """

    __slots__ = ("head", "owner", "revision")

    def __init__(self, owner: str) -> None:
        self.owner = owner
        self.revision = 0  # how many entries were followed
        self.head = knowledge_genesis(owner)  # the hash the next entry names

    def follow(self, entry: Revision) -> Break | None:
        """What ``entry`` breaks as the next revision; None when it breaks nothing. An entry of
        another owner is misplaced: a chain holds one owner's decisions."""
        self.revision += 1
        misplaced = entry.revision != self.revision or entry.owner != self.owner
        detached = entry.prev_hash != self.head
        altered = revision_hash(entry) != entry.hash
        self.head = entry.hash
        if misplaced or detached or altered:
            return Break(self.revision, misplaced, detached, altered)
        return None


def pack_revision(
    owner: str,
    revision: int,
    name: str,
    digest: str,
    *,
    made_by: str,
    made_at: str,
    prev_hash: str,
) -> Revision:
    """The hash-chained revision entry that installs pack ``name`` (``digest``) at
    ``revision``. One definition, so every backend writes the same thing."""
    entry = Revision(owner, revision, "pack", None, name, digest, made_by, made_at, prev_hash, "")
    return dataclasses.replace(entry, hash=revision_hash(entry))


def accepted_version(
    proposal: Proposal,
    decision: Decision,
    record: Record,
    *,
    author: str,
    revision: int,
    prev_hash: str,
    supersedes: int | None,
) -> tuple[ReviewedRecord, Revision]:
    """What accepting ``proposal`` writes at ``revision``: the reviewed version and its
    hash-chained revision entry. One definition, so every backend writes the same thing, and
    refuses the same things: a record without text is never accepted, whoever calls."""
    name = check_reviewable(record).name
    content = record.canonical()
    digest = sha256_hex(content)
    reviewed = ReviewedRecord(
        name=name,
        kind=record.kind,
        content=content,
        digest=digest,
        author=author,
        written_at=decision.at,
        revision=revision,
        source=proposal.source,
        decision=decision,
        proposal_id=proposal.id,
        supersedes=supersedes,
    )
    entry = Revision(
        proposal.owner,
        revision,
        "decision",
        proposal.id,
        name,
        digest,
        decision.by,
        decision.at,
        prev_hash,
        "",
    )
    return reviewed, dataclasses.replace(entry, hash=revision_hash(entry))


def check_pending(proposal: Proposal) -> None:
    """``already_exists`` unless ``proposal`` waits for a decision: a decision is made once."""
    if proposal.state != "pending":
        raise AlreadyExists(
            f"proposal {proposal.id} was already decided ({proposal.state})",
            proposal_id=proposal.id,
        )
