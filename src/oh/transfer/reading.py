"""Reading an export: every line checked (trailer, hash chains, digests, canonical forms)
before anything is written, then imported, each notebook and each owner in its own transaction
(``oh.transfer``)."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any, BinaryIO

from oh.core.canonical import canonical_bytes, canonical_text, matches_digest, parse_json
from oh.core.changes import MAX_CHANGES, LogChain, LogEntry, LoggedChange
from oh.core.identifiers import contains_control
from oh.core.notebook import STATES, Notebook
from oh.core.records import kind_of
from oh.core.reviewed import (
    DISCARDED,
    Decision,
    Proposal,
    ReviewedRecord,
    Revision,
    RevisionChain,
    Source,
    knowledge_genesis,
)
from oh.errors import AlreadyExists, IntegrityError, InvalidArgument
from oh.keys import MasterKeys
from oh.storage.base import KnowledgeStore, MemoryStore, PackInstall

if TYPE_CHECKING:
    pass

from oh.transfer.format import FORMAT, FORMAT_VERSION, Progress, no_progress
from oh.transfer.sealed import open_export, sealed_under

__all__ = ["ImportReport", "check_export", "export_contents", "import_export"]


def _lines(source: IO[bytes]) -> Iterator[tuple[int, dict[str, Any]]]:
    """Every line before the trailer, parsed; the trailer's count and digest checked last."""
    digest = hashlib.sha256()
    count = 0
    trailer: dict[str, Any] | None = None
    for number, raw in enumerate(source, 1):
        if trailer is not None:
            raise IntegrityError(f"line {number}: data after the end of the export")
        if not raw.endswith(b"\n"):
            raise IntegrityError(f"line {number}: the export is truncated")
        value = parse_json(raw[:-1], f"line {number}")
        if type(value) is not dict:
            raise InvalidArgument(f"line {number}: not a JSON object")
        if canonical_bytes(value) != raw[:-1]:
            raise IntegrityError(f"line {number}: not in canonical form (edited?)")
        if value.get("type") == "end":
            trailer = value
            continue
        digest.update(raw)
        count += 1
        yield number, value
    if trailer is None:
        if count == 0:
            raise InvalidArgument("the export is empty")
        raise IntegrityError("the export has no end line: it is truncated")
    if trailer.get("lines") != count or trailer.get("sha256") != digest.hexdigest():
        raise IntegrityError("the export's end line does not match its content (damaged?)")


def _header_of(number: int, line: dict[str, Any]) -> str:
    if (
        number != 1
        or line.get("type") != "header"
        or line.get("format") != FORMAT
        or line.get("what") not in ("notebooks", "knowledge")
    ):
        raise InvalidArgument("not an Oh export (no oh-export header on the first line)")
    if line.get("format_version") != FORMAT_VERSION:
        raise InvalidArgument(
            f"export format version {line.get('format_version')} is not supported here"
            f" (this Oh reads version {FORMAT_VERSION})"
        )
    return str(line["what"])


def export_contents(source: BinaryIO, masters: MasterKeys | None = None) -> str:
    """What the export in ``source`` holds, ``"notebooks"`` or ``"knowledge"``, read from its
    header line alone (a sealed export's first chunk alone, opened with ``masters``): which
    store to open before ``import_export`` checks the whole of it."""
    source = open_export(source, masters)
    source.seek(0)
    first = source.readline()
    header = parse_json(first.rstrip(b"\n"), "line 1") if first else {}
    return _header_of(1, header if isinstance(header, dict) else {})


def _field(line: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    value = line.get(key)
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise InvalidArgument(f"{where}: {key} is missing or has the wrong type")
    # Ids, names and stamps: what the API never accepts, an import never stores (a NUL would be
    # cut off by the driver, and the data would no longer match its hashes).
    if type(value) is str and contains_control(value):
        raise InvalidArgument(f"{where}: {key} holds an invisible character (control or bidi)")
    return value


def _notebook_of(line: dict[str, Any], where: str) -> Notebook:
    text = (str,)
    optional_text = (str, type(None))
    state = _field(line, "state", text, where)
    if state not in STATES:
        raise InvalidArgument(f"{where}: unknown notebook state {state!r}")
    pinned = line.get("pinned_revision")
    if pinned is not None and (type(pinned) is not int or pinned < 0):
        raise InvalidArgument(f"{where}: pinned_revision must be a revision number or null")
    version = _field(line, "version", int, where)
    if version < 0:
        raise InvalidArgument(f"{where}: version must not be negative")
    return Notebook(
        id=_field(line, "id", text, where),
        owner=_field(line, "owner", text, where),
        document=_field(line, "document", text, where),
        run=_field(line, "run", text, where),
        state=state,
        started_at=_field(line, "started_at", text, where),
        forgets_at=_field(line, "forgets_at", text, where),
        version=version,
        pinned_revision=pinned,
        head_hash=_field(line, "head_hash", text, where),
        purged_at=_field(line, "purged_at", optional_text, where),
    )


def _content_digest(content: Any, digest: Any, where: str) -> str:
    """``content`` is canonical JSON text whose sha256 is ``digest``; returns it."""
    if type(content) is not str or type(digest) is not str:
        raise InvalidArgument(f"{where}: content and digest must be text")
    if not matches_digest(content, digest):
        raise IntegrityError(f"{where}: content does not match its digest")
    if canonical_text(parse_json(content, where)) != content:
        raise IntegrityError(f"{where}: content is not canonical JSON")
    return content


def _entry_of(notebook_id: str, line: dict[str, Any], where: str) -> LogEntry:
    text = (str,)
    changes = []
    for index, change in enumerate(_field(line, "changes", list, where)):
        at = f"{where}, change {index}"
        if type(change) is not dict:
            raise InvalidArgument(f"{at}: not an object")
        op, name = change.get("op"), change.get("name")
        if op not in ("add", "replace", "remove") or type(name) is not str:
            raise InvalidArgument(f"{at}: op or name is missing")
        content, digest = change.get("content"), change.get("digest")
        if op == "remove":
            if content is not None or digest is not None:
                raise InvalidArgument(f"{at}: a remove carries no content")
        else:
            text_content = _content_digest(content, digest, at)
            if parse_json(text_content, at).get("name") != name:
                raise IntegrityError(f"{at}: content names another record")
        changes.append(LoggedChange(op, name, content, digest))
    if not 1 <= len(changes) <= MAX_CHANGES:  # what no remember call can have written
        raise InvalidArgument(f"{where}: an entry holds 1 to {MAX_CHANGES} changes")
    return LogEntry(
        notebook_id,
        _field(line, "version", int, where),
        _field(line, "request_id", text, where),
        _field(line, "fingerprint", text, where),
        _field(line, "author", text, where),
        _field(line, "written_at", text, where),
        tuple(changes),
        _field(line, "prev_hash", text, where),
        _field(line, "hash", text, where),
    )


class _Chain:
    """Checks one notebook's log as it streams past (``LogChain``), then its head."""

    def __init__(self, notebook: Notebook) -> None:
        self.notebook = notebook
        self.chain = LogChain(notebook.id)

    def check(self, entry: LogEntry, where: str) -> None:
        if self.notebook.state in ("purged", "empty", "opening"):
            raise IntegrityError(f"{where}: a {self.notebook.state} notebook has no log")
        broken = self.chain.follow(entry)
        if broken is None:
            return
        if broken.misplaced:
            raise IntegrityError(f"{where}: entry {entry.version} where {broken.expected} belongs")
        raise IntegrityError(f"{where}: entry {entry.version} breaks the hash chain")

    def close(self, where: str) -> None:
        if self.notebook.state in ("purged", "empty", "opening"):
            return  # a tombstone keeps its version and head, never its log
        chain = self.chain
        if chain.version != self.notebook.version or chain.head != self.notebook.head_hash:
            raise IntegrityError(
                f"{where}: notebook {self.notebook.id} says version {self.notebook.version};"
                f" its log ends at {chain.version} (truncated?)"
            )


def _revision_of(line: dict[str, Any], where: str) -> Revision:
    text, optional_text = (str,), (str, type(None))
    return Revision(
        owner=_field(line, "owner", text, where),
        revision=_field(line, "revision", int, where),
        what=_field(line, "what", text, where),
        proposal_id=_field(line, "proposal_id", optional_text, where),
        name=_field(line, "name", optional_text, where),
        digest=_field(line, "digest", optional_text, where),
        made_by=_field(line, "made_by", text, where),
        made_at=_field(line, "made_at", text, where),
        prev_hash=_field(line, "prev_hash", text, where),
        hash=_field(line, "hash", text, where),
    )


def _decision_of(value: Any, where: str) -> Decision:
    if type(value) is not dict or set(value) != {"decision", "by", "at", "reason"}:
        raise InvalidArgument(f"{where}: decision must be {{decision, by, at, reason}}")
    if value["decision"] not in ("accept", "accept_with_edits", "reject"):
        raise InvalidArgument(f"{where}: unknown decision {value['decision']!r}")
    return Decision.from_json(value)


def _reviewed_of(line: dict[str, Any], where: str) -> ReviewedRecord:
    text = (str,)
    name = _field(line, "name", text, where)
    content = _content_digest(line.get("content"), line.get("digest"), where)
    supersedes = line.get("supersedes")
    if supersedes is not None and type(supersedes) is not int:
        raise InvalidArgument(f"{where}: supersedes must be a revision number or null")
    return ReviewedRecord(
        name=name,
        kind=kind_of(name),
        content=content,
        digest=line["digest"],
        author=_field(line, "author", text, where),
        written_at=_field(line, "written_at", text, where),
        revision=_field(line, "revision", int, where),
        source=Source.parse(line.get("source")),
        decision=_decision_of(line.get("decision"), where),
        proposal_id=_field(line, "proposal_id", (str, type(None)), where),
        supersedes=supersedes,
    )


def _pack_of(line: dict[str, Any], where: str) -> PackInstall:
    text = (str,)
    content, digest = line.get("content"), line.get("digest")
    if type(content) is not str or type(digest) is not str or not matches_digest(content, digest):
        raise IntegrityError(f"{where}: pack content does not match its digest")
    return PackInstall(
        owner=_field(line, "owner", text, where),
        name=_field(line, "name", text, where),
        version=_field(line, "version", text, where),
        digest=digest,
        content=content,
        revision=_field(line, "revision", int, where),
        installed_by=_field(line, "installed_by", text, where),
        installed_at=_field(line, "installed_at", text, where),
    )


def _proposal_of(line: dict[str, Any], where: str) -> Proposal:
    text = (str,)
    state = _field(line, "state", text, where)
    discarded = state == "rejected" and line.get("content") == line.get("digest") == DISCARDED
    if not discarded:  # a rejected proposal keeps its decision, not its text
        _content_digest(line.get("content"), line.get("digest"), where)
    if state not in ("pending", "accepted", "rejected"):
        raise InvalidArgument(f"{where}: unknown proposal state {state!r}")
    decision = line.get("decision")
    if (state == "pending") != (decision is None):
        raise IntegrityError(f"{where}: a proposal has a decision exactly when it was decided")
    note = line.get("note")
    if note is not None and type(note) is not dict:
        raise InvalidArgument(f"{where}: note must be an object or null")
    revision = line.get("revision")
    if revision is not None and type(revision) is not int:
        raise InvalidArgument(f"{where}: revision must be a number or null")
    return Proposal(
        id=_field(line, "id", text, where),
        owner=_field(line, "owner", text, where),
        proposed_by=_field(line, "proposed_by", text, where),
        proposed_at=_field(line, "proposed_at", text, where),
        name=_field(line, "name", text, where),
        content=line["content"],
        digest=line["digest"],
        source=Source.parse(line.get("source")),
        state=state,
        note=note,
        decision=None if decision is None else _decision_of(decision, where),
        revision=revision,
    )


@dataclass(slots=True)
class _Owner:
    """One owner's knowledge as read from an export, checked as a whole."""

    owner: str
    head: tuple[int, str] | None = None
    revisions: list[Revision] = field(default_factory=list)
    reviewed: list[ReviewedRecord] = field(default_factory=list)
    packs: list[PackInstall] = field(default_factory=list)
    proposals: list[Proposal] = field(default_factory=list)

    def check(self) -> None:
        where = f"knowledge of {self.owner}"
        chain = RevisionChain(self.owner)
        for entry in self.revisions:
            broken = chain.follow(entry)
            if broken is not None and broken.misplaced:
                raise IntegrityError(f"{where}: revision {entry.revision} is out of place")
            if broken is not None:
                raise IntegrityError(f"{where}: revision {entry.revision} breaks the hash chain")
        if self.revisions and self.head != (chain.revision, chain.head):
            raise IntegrityError(f"{where}: the head does not match the last revision")
        if self.head is not None and not self.revisions:
            raise IntegrityError(f"{where}: a knowledge base without revisions")
        made = {(e.what, e.name, e.digest, e.revision) for e in self.revisions}
        for record in self.reviewed:
            if ("decision", record.name, record.digest, record.revision) not in made:
                raise IntegrityError(
                    f"{where}: {record.name} at revision {record.revision} is not what was decided"
                )
        for install in self.packs:
            if install.owner != self.owner or (
                ("pack", install.name, install.digest, install.revision) not in made
            ):
                raise IntegrityError(
                    f"{where}: pack {install.name} at revision {install.revision} is not"
                    " what was installed"
                )
        for proposal in self.proposals:
            if proposal.owner != self.owner:
                raise IntegrityError(f"{where}: proposal {proposal.id} belongs to another owner")


class _Peekable:
    def __init__(self, lines: Iterator[tuple[int, dict[str, Any]]]) -> None:
        self._lines = lines
        self._next: tuple[int, dict[str, Any]] | None = None

    def peek(self) -> tuple[int, dict[str, Any]] | None:
        if self._next is None:
            self._next = next(self._lines, None)
        return self._next

    def pop(self) -> tuple[int, dict[str, Any]]:
        item = self.peek()
        assert item is not None
        self._next = None
        return item


def _notebooks(lines: _Peekable) -> Iterator[tuple[Notebook, Iterator[LogEntry]]]:
    """Each notebook with a stream of its checked entries (consume one before the next)."""
    while lines.peek() is not None:
        number, line = lines.pop()
        where = f"line {number}"
        if line.get("type") != "notebook":
            raise InvalidArgument(f"{where}: expected a notebook line, found {line.get('type')!r}")
        notebook = _notebook_of(line, where)
        chain = _Chain(notebook)

        def entries(notebook: Notebook = notebook, chain: _Chain = chain) -> Iterator[LogEntry]:
            while (following := lines.peek()) is not None and following[1].get("type") == "entry":
                at, value = lines.pop()
                entry = _entry_of(notebook.id, value, f"line {at}")
                chain.check(entry, f"line {at}")
                yield entry
            chain.close(f"notebook {notebook.id}")

        yield notebook, entries()


def _owners(lines: _Peekable) -> Iterator[_Owner]:
    current: _Owner | None = None
    order = {"knowledge_base": 0, "revision": 1, "reviewed": 2, "pack": 3, "proposal": 4}
    stage = 0
    while lines.peek() is not None:
        number, line = lines.pop()
        where = f"line {number}"
        kind = line.get("type")
        if kind not in order:
            raise InvalidArgument(f"{where}: unexpected {kind!r} line in a knowledge export")
        owner = _field(line, "owner", str, where)
        if current is None or owner != current.owner:
            if current is not None:
                if owner <= current.owner:
                    raise IntegrityError(f"{where}: owners out of order (or split)")
                current.check()
                yield current
            current, stage = _Owner(owner), 0
        if order[kind] < stage:
            raise IntegrityError(f"{where}: a {kind} line out of place")
        stage = order[kind]
        if kind == "knowledge_base":
            if current.head is not None:
                raise IntegrityError(f"{where}: a second knowledge_base line for {owner}")
            current.head = (
                _field(line, "revision", int, where),
                _field(line, "head_hash", str, where),
            )
        elif kind == "revision":
            current.revisions.append(_revision_of(line, where))
        elif kind == "reviewed":
            current.reviewed.append(_reviewed_of(line, where))
        elif kind == "pack":
            current.packs.append(_pack_of(line, where))
        else:
            current.proposals.append(_proposal_of(line, where))
    if current is not None:
        current.check()
        yield current


@dataclass(slots=True)
class ImportReport:
    what: str
    notebooks: int = 0
    entries: int = 0
    owners: int = 0
    revisions: int = 0
    proposals: int = 0
    skipped: list[str] = field(default_factory=list)
    sealed_under: str | None = None  # the master key's id, for a sealed export

    def to_json(self) -> dict[str, Any]:
        return {
            "event": "import",
            "what": self.what,
            "notebooks": self.notebooks,
            "entries": self.entries,
            "owners": self.owners,
            "revisions": self.revisions,
            "proposals": self.proposals,
            "skipped": self.skipped,
            "sealed_under": self.sealed_under,
        }


def check_export(
    source: BinaryIO, progress: Progress = no_progress, *, masters: MasterKeys | None = None
) -> ImportReport:
    """Read a whole export, plaintext or sealed (opened with ``masters``), and check it
    (format, trailer, chains, digests, and every chunk of a sealed one); write nothing.
    Returns what importing it would bring in."""
    source = open_export(source, masters)
    source.seek(0)
    lines = _lines(source)
    first = next(lines, None)
    if first is None:
        raise InvalidArgument("the export is empty")
    report = ImportReport(_header_of(*first), sealed_under=sealed_under(source))
    peekable = _Peekable(lines)
    last = time.monotonic()
    if report.what == "notebooks":
        for _notebook, entries in _notebooks(peekable):
            report.notebooks += 1
            for _entry in entries:
                report.entries += 1
                if time.monotonic() - last >= 1.0:
                    last = time.monotonic()
                    progress(f"check: {report.notebooks:,} notebooks, {report.entries:,} entries")
    else:
        for owner in _owners(peekable):
            report.owners += 1
            report.revisions += len(owner.revisions)
            report.proposals += len(owner.proposals)
    return report


def import_export(
    source: BinaryIO,
    *,
    memory: MemoryStore | None = None,
    knowledge: KnowledgeStore | None = None,
    skip_existing: bool = False,
    progress: Progress = no_progress,
    masters: MasterKeys | None = None,
) -> ImportReport:
    """Check a whole export, then import it into ``memory`` (a notebooks export) or
    ``knowledge`` (a knowledge export). ``source`` must be seekable (it is read twice). A
    sealed export opens with ``masters`` (the key that sealed it must be one of them); what it
    holds is then imported exactly as a plaintext export's lines."""
    source = open_export(source, masters)
    expected = check_export(source, progress)
    if expected.what == "notebooks" and memory is None:
        raise InvalidArgument("a notebooks export needs a memory store to import into")
    if expected.what == "knowledge" and knowledge is None:
        raise InvalidArgument("a knowledge export needs a knowledge store to import into")
    source.seek(0)
    lines = _lines(source)
    next(lines)
    peekable = _Peekable(lines)
    report = ImportReport(expected.what, sealed_under=expected.sealed_under)
    last = time.monotonic()
    if memory is not None and expected.what == "notebooks":
        for notebook, entries in _notebooks(peekable):
            counted = _Counted(entries)
            try:
                memory.import_notebook(notebook, counted)
            except AlreadyExists:
                if not skip_existing:
                    raise
                report.skipped.append(notebook.id)
                for _ in counted:  # move past its lines
                    pass
                continue
            report.notebooks += 1
            report.entries += counted.count
            if time.monotonic() - last >= 1.0:
                last = time.monotonic()
                progress(f"import: {report.notebooks:,} notebooks, {report.entries:,} entries")
    elif knowledge is not None:
        for owner in _owners(peekable):
            try:
                knowledge.import_knowledge_base(
                    owner.owner,
                    owner.head or (0, knowledge_genesis(owner.owner)),
                    owner.revisions,
                    owner.reviewed,
                    owner.proposals,
                    owner.packs,
                )
            except AlreadyExists:
                if not skip_existing:
                    raise
                report.skipped.append(owner.owner)
                continue
            report.owners += 1
            report.revisions += len(owner.revisions)
            report.proposals += len(owner.proposals)
    progress(
        f"import: {report.notebooks:,} notebooks, {report.entries:,} entries, "
        f"{report.owners:,} owners (done)"
    )
    return report


class _Counted:
    def __init__(self, entries: Iterator[LogEntry]) -> None:
        self._entries = entries
        self.count = 0

    def __iter__(self) -> Iterator[LogEntry]:
        for entry in self._entries:
            self.count += 1
            yield entry
