"""Export and import (docs/cli.md): notebooks or the whole knowledge base as canonical JSON lines.

Written over the storage protocols only, so an export from one backend imports into any other
and gives the same digests: moving from the embedded files to PostgreSQL (or back) is
``oh export`` then ``oh import``. Nothing is recomputed on the way: request ids, authors,
times, hash chains and canonical contents travel exactly as stored.

The format (``format_version`` 1). Every line is one RFC 8785 object and a newline::

    {"format":"oh-export","format_version":1,"type":"header","what":"notebooks"}
    {"type":"notebook","id",...,"version","head_hash",...}     one per notebook, then its log:
    {"type":"entry","version","request_id","fingerprint","author","written_at",
     "prev_hash","hash","changes":[{"op","name","content","digest"}]}
    ...
    {"type":"end","lines":N,"sha256":"<hex of the N lines before this one>"}

A knowledge export (``"what":"knowledge"``) has, per owner, a ``knowledge_base`` line (when the
owner has revisions), then ``revision``, ``reviewed``, ``pack`` and ``proposal`` lines.
``content`` is always the stored canonical JSON text whose sha256 is the ``digest``.

Import reads the file twice: the first pass checks everything (the trailer's line count and
digest, every hash chain, every digest, every canonical form) and writes nothing; only a file
that passes is imported, each notebook and each owner in its own transaction. An id that is
already taken is ``already_exists`` (or skipped with ``skip_existing``).

A **sealed export** (docs/keys.md, Exports) is the same lines sealed under the host's master
key, for an export that is to rest anywhere the data itself may not. Its first line is a plain
RFC 8785 header naming the master key (by id, never the key) and a fresh random 32-byte salt::

    {"chunk_bytes":65536,"cipher":"AES-256-GCM","kdf":"HMAC-SHA256",
     "master_key":"<16 hex digits>","oh_sealed_export":1,"salt":"<base64>"}

then the lines as AES-256-GCM chunks, each ``chunk_bytes`` of plaintext and a 16-byte tag (the
last one shorter, maybe empty), under an export key that the master key derives from the salt
(HMAC-SHA256 under its MAC key, with a label of its own). A chunk's nonce is its index; its
associated data is the header line, the index and whether it is the last, so a chunk changed,
moved, dropped, cut short or taken from another export, and an export cut at a chunk boundary,
all fail to open: ``integrity``, and since the whole export is checked before anything is
written, nothing is imported. Both directions stream one chunk at a time (``sealed_writer``,
``open_export``). Importing opens the lines and then imports them exactly as a plaintext
export's; a store with a keyring seals what it imports under its own data keys.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import secrets
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any, BinaryIO

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

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
from oh.keys import MasterKeys, WrappingKey
from oh.storage.base import KnowledgeStore, MemoryStore, PackInstall

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer, WriteableBuffer

__all__ = [
    "CHUNK_BYTES",
    "FORMAT",
    "FORMAT_VERSION",
    "SEALED_EXPORT_VERSION",
    "ExportReport",
    "ImportReport",
    "Progress",
    "check_export",
    "export_contents",
    "export_knowledge",
    "export_notebooks",
    "import_export",
    "open_export",
    "sealed_writer",
]

FORMAT = "oh-export"
FORMAT_VERSION = 1
Progress = Callable[[str], None]


def _no_progress(_message: str) -> None:
    return None


# -- writing -----------------------------------------------------------------------------------


@dataclass(slots=True)
class ExportReport:
    what: str
    lines: int = 0
    notebooks: int = 0
    entries: int = 0
    owners: int = 0
    revisions: int = 0
    proposals: int = 0
    sha256: str = ""
    sealed_under: str | None = None  # the master key's id, for a sealed export
    # Notebooks left out of a whole export because their data key is gone: forgotten after
    # this copy of the database was taken (a restored backup); their rows can never be read.
    forgotten: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "event": "export",
            "what": self.what,
            "lines": self.lines,
            "notebooks": self.notebooks,
            "entries": self.entries,
            "owners": self.owners,
            "revisions": self.revisions,
            "proposals": self.proposals,
            "sha256": self.sha256,
            "sealed_under": self.sealed_under,
            "forgotten": list(self.forgotten),
        }


class _Writer:
    """Writes canonical lines, counting them and hashing every byte for the trailer."""

    def __init__(self, out: IO[bytes], report: ExportReport, progress: Progress) -> None:
        self.out = out
        self.report = report
        self.progress = progress
        self.digest = hashlib.sha256()
        self.last = time.monotonic()

    def line(self, value: dict[str, Any]) -> None:
        data = canonical_bytes(value, "export line") + b"\n"
        self.digest.update(data)
        self.out.write(data)
        self.report.lines += 1
        now = time.monotonic()
        if now - self.last >= 1.0:
            self.last = now
            self.progress(self._status())

    def _status(self) -> str:
        r = self.report
        if r.what == "notebooks":
            return f"export: {r.lines:,} lines, {r.notebooks:,} notebooks, {r.entries:,} entries"
        return f"export: {r.lines:,} lines, {r.owners:,} owners, {r.revisions:,} revisions"

    def finish(self) -> ExportReport:
        self.report.sha256 = self.digest.hexdigest()
        trailer = {"type": "end", "lines": self.report.lines, "sha256": self.report.sha256}
        self.out.write(canonical_bytes(trailer) + b"\n")
        self.out.flush()
        self.progress(self._status() + " (done)")
        return self.report


def _header(what: str) -> dict[str, Any]:
    return {"format": FORMAT, "format_version": FORMAT_VERSION, "type": "header", "what": what}


def _notebook_line(notebook: Notebook) -> dict[str, Any]:
    return {
        "type": "notebook",
        "id": notebook.id,
        "owner": notebook.owner,
        "document": notebook.document,
        "run": notebook.run,
        "state": notebook.state,
        "started_at": notebook.started_at,
        "forgets_at": notebook.forgets_at,
        "version": notebook.version,
        "pinned_revision": notebook.pinned_revision,
        "head_hash": notebook.head_hash,
        "purged_at": notebook.purged_at,
    }


def _entry_line(entry: LogEntry) -> dict[str, Any]:
    return {
        "type": "entry",
        "version": entry.version,
        "request_id": entry.request_id,
        "fingerprint": entry.fingerprint,
        "author": entry.author,
        "written_at": entry.written_at,
        "prev_hash": entry.prev_hash,
        "hash": entry.hash,
        "changes": [
            {"op": c.op, "name": c.name, "content": c.content, "digest": c.digest}
            for c in entry.changes
        ],
    }


def export_notebooks(
    store: MemoryStore,
    out: IO[bytes],
    notebook_ids: Iterable[str] | None = None,
    progress: Progress = _no_progress,
    *,
    seal: MasterKeys | None = None,
) -> ExportReport:
    """Write the notebooks (every one when ``notebook_ids`` is None) with their whole logs,
    sealed under ``seal``'s current master key when it is given (a sealed export).

    Each notebook is written as it was when its row was read: its log up to that version. A
    notebook forgotten while it is being written is ``integrity`` (export it again)."""
    with _sealing(out, seal) as target:
        report = _export_notebooks(store, target, notebook_ids, progress)
    report.sealed_under = None if seal is None else seal.current.id
    return report


def _export_notebooks(
    store: MemoryStore, out: IO[bytes], notebook_ids: Iterable[str] | None, progress: Progress
) -> ExportReport:
    writer = _Writer(out, ExportReport("notebooks"), progress)
    writer.line(_header("notebooks"))
    for notebook_id in store.notebook_ids() if notebook_ids is None else notebook_ids:
        notebook = store.notebook(notebook_id)
        if (
            notebook_ids is None
            and notebook.state not in ("purged", "empty")
            and store.data_key_destroyed(notebook_id)
        ):
            writer.report.forgotten.append(notebook_id)  # reported, and the export goes on
            continue
        writer.line(_notebook_line(notebook))
        writer.report.notebooks += 1
        written = 0
        for entry in store.log(notebook_id):
            if entry.version > notebook.version:
                break  # written after the row was read; the next export takes it
            writer.line(_entry_line(entry))
            written += 1
        writer.report.entries += written
        if notebook.state not in ("purged", "empty") and written != notebook.version:
            raise IntegrityError(
                f"notebook {notebook_id} changed while it was exported (forgotten?): its log"
                f" holds {written} of {notebook.version} entries; export it again"
            )
    return writer.finish()


def _revision_line(entry: Revision) -> dict[str, Any]:
    return {"type": "revision", **entry.hashed_body(), "hash": entry.hash}


def _reviewed_line(owner: str, record: ReviewedRecord) -> dict[str, Any]:
    return {
        "type": "reviewed",
        "owner": owner,
        "name": record.name,
        "revision": record.revision,
        "content": record.content,
        "digest": record.digest,
        "author": record.author,
        "written_at": record.written_at,
        "source": record.source.to_json(),
        "decision": record.decision.to_json(),
        "proposal_id": record.proposal_id,
        "supersedes": record.supersedes,
    }


def _pack_line(install: PackInstall) -> dict[str, Any]:
    return {
        "type": "pack",
        "owner": install.owner,
        "name": install.name,
        "version": install.version,
        "revision": install.revision,
        "content": install.content,
        "digest": install.digest,
        "installed_by": install.installed_by,
        "installed_at": install.installed_at,
    }


def _proposal_line(proposal: Proposal) -> dict[str, Any]:
    return {
        "type": "proposal",
        "id": proposal.id,
        "owner": proposal.owner,
        "proposed_by": proposal.proposed_by,
        "proposed_at": proposal.proposed_at,
        "name": proposal.name,
        "content": proposal.content,
        "digest": proposal.digest,
        "source": proposal.source.to_json(),
        "state": proposal.state,
        "note": proposal.note,
        "decision": None if proposal.decision is None else proposal.decision.to_json(),
        "revision": proposal.revision,
    }


def export_knowledge(
    store: KnowledgeStore,
    out: IO[bytes],
    progress: Progress = _no_progress,
    *,
    seal: MasterKeys | None = None,
) -> ExportReport:
    """Write the whole knowledge base: every owner's revisions, reviewed versions, pack
    installs and proposals (decided or not), sealed under ``seal`` when it is given."""
    with _sealing(out, seal) as target:
        report = _export_knowledge(store, target, progress)
    report.sealed_under = None if seal is None else seal.current.id
    return report


def _export_knowledge(store: KnowledgeStore, out: IO[bytes], progress: Progress) -> ExportReport:
    writer = _Writer(out, ExportReport("knowledge"), progress)
    writer.line(_header("knowledge"))
    with_base = set(store.owners())
    for owner in sorted(with_base | set(store.proposal_owners())):
        writer.report.owners += 1
        if owner in with_base:
            revision, head = store.head(owner)
            entries = [e for e in store.revisions(owner) if e.revision <= revision]
            writer.line(
                {"type": "knowledge_base", "owner": owner, "revision": revision, "head_hash": head}
            )
            for entry in entries:
                writer.line(_revision_line(entry))
            writer.report.revisions += len(entries)
            names = sorted({e.name for e in entries if e.what == "decision" and e.name})
            versions = [v for name in names for v in store.history(owner, name)]
            for version in sorted(versions, key=lambda v: v.revision):
                if version.revision <= revision:
                    writer.line(_reviewed_line(owner, version))
            for install in store.pack_history(owner):
                if install.revision <= revision:
                    writer.line(_pack_line(install))
        for proposal in store.proposals(owner):
            writer.line(_proposal_line(proposal))
            writer.report.proposals += 1
    return writer.finish()


# -- reading -----------------------------------------------------------------------------------


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
    source: BinaryIO, progress: Progress = _no_progress, *, masters: MasterKeys | None = None
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
    report = ImportReport(_header_of(*first), sealed_under=_sealed_under(source))
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
    progress: Progress = _no_progress,
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


# -- sealed exports ----------------------------------------------------------------------------

SEALED_EXPORT_VERSION = 1
CHUNK_BYTES = 64 * 1024  # plaintext per chunk: what either direction holds in memory at once
_MIN_CHUNK, _MAX_CHUNK = 64, 1024 * 1024  # what a reader accepts (a header is not a malloc size)
_CIPHER, _KDF = "AES-256-GCM", "HMAC-SHA256"
_TAG = 16
_SALT_BYTES = 32
_SEALED_MARK = b'"oh_sealed_export":'  # how a sealed header is told apart, damaged or not
_HEADER_LIMIT = 4096


def _export_aead(master: WrappingKey, salt: bytes) -> AESGCM:
    """The export key: an HMAC-SHA256 of the salt under the master key's derived MAC key, with
    a purpose label no knowledge MAC has (``WrappingKey.mac``, so a key held elsewhere serves
    too). Fresh for every export (its salt), so chunk indexes can be nonces."""
    return AESGCM(master.mac(b"oh sealed export v1\0" + salt))


def _nonce(index: int) -> bytes:
    return index.to_bytes(12, "big")


def _chunk_ad(header: bytes, index: int, final: bool) -> bytes:
    return header + index.to_bytes(8, "big") + (b"\1" if final else b"\0")


class _Sealing(io.RawIOBase):
    """Writes a sealed export to ``out``: the header at once, then a chunk each time more than
    ``chunk_bytes`` are waiting; the last chunk only on ``finish``, so an export that stops
    before it was finished never opens."""

    def __init__(self, out: IO[bytes], masters: MasterKeys, chunk_bytes: int) -> None:
        super().__init__()
        if not _MIN_CHUNK <= chunk_bytes <= _MAX_CHUNK:
            raise InvalidArgument(f"chunk_bytes must be {_MIN_CHUNK} to {_MAX_CHUNK}")
        master = masters.current
        salt = secrets.token_bytes(_SALT_BYTES)
        header = {
            "oh_sealed_export": SEALED_EXPORT_VERSION,
            "master_key": master.id,
            "salt": base64.b64encode(salt).decode("ascii"),
            "cipher": _CIPHER,
            "kdf": _KDF,
            "chunk_bytes": chunk_bytes,
        }
        self._header = canonical_bytes(header) + b"\n"
        self._aead = _export_aead(master, salt)
        self._out = out
        self._chunk = chunk_bytes
        self._waiting = bytearray()
        self._index = 0
        self._abandoned = False
        out.write(self._header)

    def writable(self) -> bool:
        return True

    def write(self, data: ReadableBuffer) -> int:
        view = memoryview(data)
        if self._abandoned:
            return view.nbytes  # an export that failed: what is left of it is dropped
        self._waiting += view
        while len(self._waiting) > self._chunk:
            self._seal(bytes(self._waiting[: self._chunk]), final=False)
            del self._waiting[: self._chunk]
        return view.nbytes

    def _seal(self, plain: bytes, *, final: bool) -> None:
        ad = _chunk_ad(self._header, self._index, final)
        self._out.write(self._aead.encrypt(_nonce(self._index), plain, ad))
        self._index += 1

    def finish(self) -> None:
        self._seal(bytes(self._waiting), final=True)
        self._waiting.clear()
        self._abandoned = True  # nothing may follow the last chunk
        self._out.flush()

    def abandon(self) -> None:
        self._abandoned = True
        self._waiting.clear()


@contextmanager
def sealed_writer(
    out: IO[bytes], masters: MasterKeys, *, chunk_bytes: int = CHUNK_BYTES
) -> Iterator[BinaryIO]:
    """A stream that writes what it is given to ``out`` as a sealed export under ``masters``'
    current key, a chunk at a time. The last chunk is written when the block ends normally;
    when it raises, the export is left without one, and never imports."""
    sealing = _Sealing(out, masters, chunk_bytes)
    stream = io.BufferedWriter(sealing, buffer_size=chunk_bytes)
    try:
        yield stream
        stream.flush()
        sealing.finish()
    except BaseException:
        sealing.abandon()
        raise
    finally:
        stream.close()  # closes the sealing stream, never ``out``


@contextmanager
def _sealing(out: IO[bytes], seal: MasterKeys | None) -> Iterator[IO[bytes]]:
    if seal is None:
        yield out
    else:
        with sealed_writer(out, seal) as stream:
            yield stream


class _Unsealing(io.RawIOBase):
    """Reads a sealed export's lines: one chunk opened at a time, the next one read ahead to
    tell whether this is the last. ``seek`` goes back to the start (and reads forward)."""

    def __init__(
        self, source: BinaryIO, header: bytes, aead: AESGCM, chunk_bytes: int, master_id: str
    ) -> None:
        super().__init__()
        self.master_id = master_id
        self._source = source
        self._header = header
        self._aead = aead
        self._frame = chunk_bytes + _TAG
        self._rewind()

    def _rewind(self) -> None:
        self._source.seek(len(self._header))
        self._index = 0
        self._plain = b""
        self._offset = 0
        self._position = 0
        self._done = False
        self._ahead = self._read_frame()

    def _read_frame(self) -> bytes:
        parts, wanted = [], self._frame
        while wanted:
            part = self._source.read(wanted)
            if not part:
                break
            parts.append(part)
            wanted -= len(part)
        return b"".join(parts)

    def _open_next(self) -> None:
        frame, index = self._ahead, self._index
        if len(frame) == self._frame:
            self._ahead = self._read_frame()
            final = not self._ahead
        else:
            self._ahead, final = b"", True
        if len(frame) < _TAG:
            raise IntegrityError(
                f"the sealed export ends inside chunk {index}: it is truncated (nothing imported)"
            )
        try:
            self._plain = self._aead.decrypt(
                _nonce(index), frame, _chunk_ad(self._header, index, final)
            )
        except InvalidTag:
            raise IntegrityError(
                f"chunk {index} of the sealed export does not open: it was changed, cut short,"
                " reordered or spliced from another export (nothing imported)"
            ) from None
        self._offset = 0
        self._index += 1
        self._done = final

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: WriteableBuffer) -> int:
        view = memoryview(buffer).cast("B")
        while self._offset >= len(self._plain):
            if self._done:
                return 0
            self._open_next()
        count = min(view.nbytes, len(self._plain) - self._offset)
        view[:count] = self._plain[self._offset : self._offset + count]
        self._offset += count
        self._position += count
        return count

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if whence == io.SEEK_CUR:
            offset += self._position
        elif whence != io.SEEK_SET:
            raise io.UnsupportedOperation("a sealed export seeks from its start only")
        if offset < self._position:
            self._rewind()
        scratch = bytearray(min(self._frame, max(offset - self._position, 1)))
        while self._position < offset:
            view = memoryview(scratch)[: offset - self._position]
            if not self.readinto(view):
                break
        return self._position


class _Unsealed(io.BufferedReader):
    """The plaintext lines of a sealed export, read a chunk at a time."""

    def __init__(self, raw: _Unsealing) -> None:
        super().__init__(raw, buffer_size=CHUNK_BYTES)
        self.master_id = raw.master_id


def _sealed_under(source: BinaryIO) -> str | None:
    return source.master_id if isinstance(source, _Unsealed) else None


def open_export(source: BinaryIO, masters: MasterKeys | None) -> BinaryIO:
    """The export's canonical lines, from a plaintext export (``source`` itself) or a sealed
    one (opened with ``masters``; ``integrity`` when none of them is the key that sealed it,
    naming that key). Only the header is read here; every chunk is checked as it is read."""
    if isinstance(source, _Unsealed):
        return source
    source.seek(0)
    first = source.readline(_HEADER_LIMIT)
    if _SEALED_MARK not in first:
        source.seek(0)
        return source
    header = _sealed_header(first)
    key_id = str(header["master_key"])
    configured = () if masters is None else (masters.current, *masters.others)
    master = next((key for key in configured if key.id == key_id), None)
    if master is None:
        have = (
            "no master key is configured here"
            if not configured
            else "the master key configured here is " + " and ".join(key.id for key in configured)
        )
        raise IntegrityError(
            f"this export is sealed under master key {key_id}, and {have}: it opens only with"
            f" master key {key_id} (docs/keys.md, Exports)"
        )
    salt = base64.b64decode(header["salt"], validate=True)
    aead = _export_aead(master, salt)
    return _Unsealed(_Unsealing(source, first, aead, header["chunk_bytes"], key_id))


def _sealed_header(first: bytes) -> dict[str, Any]:
    """The checked header of a sealed export (its first line, ``first``)."""
    damaged = "the sealed export's header is damaged"
    if not first.endswith(b"\n"):
        raise IntegrityError(f"{damaged} (no end of line)")
    try:
        header = parse_json(first[:-1], "the sealed export's header")
    except InvalidArgument:
        raise IntegrityError(f"{damaged} (not JSON)") from None
    if type(header) is not dict:
        raise IntegrityError(f"{damaged} (not an object)")
    version = header.get("oh_sealed_export")
    if type(version) is int and version != SEALED_EXPORT_VERSION:
        raise InvalidArgument(
            f"sealed export version {version} is not supported here (this Oh reads version"
            f" {SEALED_EXPORT_VERSION})"
        )
    expected = {"oh_sealed_export", "master_key", "salt", "cipher", "kdf", "chunk_bytes"}
    if (
        set(header) != expected
        or version != SEALED_EXPORT_VERSION
        or canonical_bytes(header) != first[:-1]
        or header["cipher"] != _CIPHER
        or header["kdf"] != _KDF
        or type(header["master_key"]) is not str
        or type(header["chunk_bytes"]) is not int
        or not _MIN_CHUNK <= header["chunk_bytes"] <= _MAX_CHUNK
        or type(header["salt"]) is not str
    ):
        raise IntegrityError(f"{damaged} (fields)")
    try:
        salt = base64.b64decode(header["salt"], validate=True)
    except (binascii.Error, ValueError):
        raise IntegrityError(f"{damaged} (salt)") from None
    if len(salt) != _SALT_BYTES:
        raise IntegrityError(f"{damaged} (salt)")
    return header
