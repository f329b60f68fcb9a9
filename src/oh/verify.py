"""Verify and rebuild (SPEC §2, §9): the log is the truth, everything else is a derived copy.

``verify`` replays each notebook's log from the start, checks the hash chain, every version and
every digest, compares the replayed state with the current-record table, and reports each
difference. ``rebuild`` replaces the current-record table with the replayed state.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from oh.core.canonical import canonical_text, sha256_hex
from oh.core.changes import LogEntry, fold, genesis_hash
from oh.core.records import StoredRecord
from oh.core.reviewed import knowledge_genesis, revision_hash
from oh.errors import OhError
from oh.storage.base import KnowledgeStore, MemoryStore

__all__ = [
    "Problem",
    "VerifyReport",
    "rebuild",
    "replay",
    "verify_knowledge",
    "verify_notebook",
    "verify_store",
]


@dataclass(frozen=True, slots=True)
class Problem:
    notebook_id: str
    what: str  # chain | version | digest | canonical | drift | head
    detail: str

    def to_json(self) -> dict[str, str]:
        return {"notebook": self.notebook_id, "what": self.what, "detail": self.detail}


@dataclass(slots=True)
class VerifyReport:
    notebooks: int = 0
    entries: int = 0
    records: int = 0
    problems: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "notebooks": self.notebooks,
            "entries": self.entries,
            "records": self.records,
            "problems": [p.to_json() for p in self.problems],
        }


def _is_canonical(text: str) -> bool:
    try:
        return canonical_text(json.loads(text)) == text
    except (ValueError, OhError):
        return False


def replay(entries: Iterable[LogEntry]) -> dict[str, StoredRecord]:
    """Fold a log from the start into the current records it implies."""
    state: dict[str, StoredRecord] = {}
    for entry in entries:
        fold(state, entry)
    return state


def verify_notebook(
    store: MemoryStore, notebook_id: str, report: VerifyReport | None = None
) -> VerifyReport:
    report = report if report is not None else VerifyReport()
    problems = report.problems

    def problem(what: str, detail: str) -> None:
        problems.append(Problem(notebook_id, what, detail))

    notebook = store.notebook(notebook_id)
    report.notebooks += 1
    state: dict[str, StoredRecord] = {}
    prev = genesis_hash(notebook_id)
    expected_version = 0
    for entry in store.log(notebook_id):
        report.entries += 1
        expected_version += 1
        if entry.version != expected_version:
            problem("version", f"log entry {entry.version} found where {expected_version} belongs")
            expected_version = entry.version
        if entry.prev_hash != prev:
            problem("chain", f"entry {entry.version} does not follow the entry before it")
        if entry.expected_hash() != entry.hash:
            problem("chain", f"entry {entry.version} was altered (its hash does not match)")
        prev = entry.hash
        for change in entry.changes:
            if change.content is None:
                continue
            if sha256_hex(change.content) != change.digest:
                problem("digest", f"entry {entry.version}: {change.name} does not match its digest")
            elif not _is_canonical(change.content):
                problem("canonical", f"entry {entry.version}: {change.name} is not canonical")
        fold(state, entry)
    if notebook.version != expected_version:
        problem("head", f"notebook says version {notebook.version}; log ends at {expected_version}")
    if notebook.head_hash != prev:
        problem("head", "notebook head hash does not match the last log entry (truncated log?)")

    current = {record.name: record for record in store.records(notebook_id)}
    report.records += len(current)
    for name in sorted(state.keys() | current.keys()):
        want, have = state.get(name), current.get(name)
        if want is None:
            problem("drift", f"{name} is current but the log removed or never wrote it")
        elif have is None:
            problem("drift", f"{name} is missing from the current records")
        elif have != want:
            problem("drift", f"{name} differs from the log's version {want.version}")
        if have is not None and sha256_hex(have.content) != have.digest:
            problem("digest", f"current {name} does not match its digest")
    return report


def verify_store(
    store: MemoryStore, progress: Callable[[int, int], None] | None = None
) -> VerifyReport:
    """Verify every notebook; ``progress(done, total)`` is called after each one."""
    report = VerifyReport()
    ids = store.notebook_ids()
    for done, notebook_id in enumerate(ids, 1):
        verify_notebook(store, notebook_id, report)
        if progress is not None:
            progress(done, len(ids))
    return report


def verify_knowledge(store: KnowledgeStore, report: VerifyReport | None = None) -> VerifyReport:
    """Check each owner's revision chain, and that every reviewed version matches its digest,
    is canonical, and is the one its revision entry names."""
    report = report if report is not None else VerifyReport()
    for owner in store.owners():
        where = f"knowledge:{owner}"

        def problem(what: str, detail: str, where: str = where) -> None:
            report.problems.append(Problem(where, what, detail))

        prev = knowledge_genesis(owner)
        entries = store.revisions(owner)
        for expected, entry in enumerate(entries, 1):
            report.entries += 1
            if entry.revision != expected:
                problem("version", f"revision {entry.revision} found where {expected} belongs")
            if entry.prev_hash != prev:
                problem("chain", f"revision {entry.revision} does not follow the one before it")
            if revision_hash(entry) != entry.hash:
                problem("chain", f"revision {entry.revision} was altered")
            prev = entry.hash
        latest, head = store.head(owner)
        if latest != len(entries) or head != prev:
            problem("head", f"knowledge base says revision {latest}; entries end at {len(entries)}")
        named = {(e.name, e.revision): e.digest for e in entries if e.what == "decision" and e.name}
        for name in sorted({name for name, _ in named}):
            for version in store.history(owner, name):
                report.records += 1
                if sha256_hex(version.content) != version.digest:
                    problem("digest", f"{name} at revision {version.revision} does not match")
                elif not _is_canonical(version.content):
                    problem("canonical", f"{name} at revision {version.revision} is not canonical")
                if named.get((name, version.revision)) != version.digest:
                    problem(
                        "drift", f"{name} at revision {version.revision} is not what was decided"
                    )
    return report


def rebuild(store: MemoryStore, notebook_id: str) -> int:
    """Replace the derived current records with a replay of the log; return how many."""
    state = replay(store.log(notebook_id))
    store.replace_records(notebook_id, state.values())
    return len(state)
