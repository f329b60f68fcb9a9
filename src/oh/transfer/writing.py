"""Writing an export: notebooks (each with its log) or a knowledge base, as canonical JSON
lines ending with a trailer that counts and digests them (``oh.transfer``)."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any

from oh.core.canonical import canonical_bytes
from oh.core.changes import LogEntry
from oh.core.notebook import Notebook
from oh.core.reviewed import (
    Proposal,
    ReviewedRecord,
    Revision,
)
from oh.errors import IntegrityError
from oh.keys import MasterKeys
from oh.storage.base import KnowledgeStore, MemoryStore, PackInstall

if TYPE_CHECKING:
    pass

from oh.transfer.format import FORMAT, FORMAT_VERSION, Progress, no_progress
from oh.transfer.sealed import sealing

__all__ = ["ExportReport", "export_knowledge", "export_notebooks"]


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
    progress: Progress = no_progress,
    *,
    seal: MasterKeys | None = None,
) -> ExportReport:
    """Write the notebooks (every one when ``notebook_ids`` is None) with their whole logs,
    sealed under ``seal``'s current master key when it is given (a sealed export).

    Each notebook is written as it was when its row was read: its log up to that version. A
    notebook forgotten while it is being written is ``integrity`` (export it again)."""
    with sealing(out, seal) as target:
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
    progress: Progress = no_progress,
    *,
    seal: MasterKeys | None = None,
) -> ExportReport:
    """Write the whole knowledge base: every owner's revisions, reviewed versions, pack
    installs and proposals (decided or not), sealed under ``seal`` when it is given."""
    with sealing(out, seal) as target:
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
