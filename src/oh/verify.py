"""Verify and rebuild (SPEC §2, §9): the log is the truth, everything else is a derived copy.

``verify`` replays each notebook's log from the start, checks the hash chain, every version and
every digest, compares the replayed state with the current-record table, and reports each
difference. ``rebuild`` replaces the current-record table with the replayed state.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from oh.core.canonical import CANONICAL_STRING, canonical_text, load_canonical, sha256_hex
from oh.core.changes import LogEntry, entry_hash, genesis_hash
from oh.core.records import StoredRecord, kind_of
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
    what: str  # chain | version | digest | canonical | drift | head | forgotten | damaged
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


# A record's content with no ``fields``, written the one way RFC 8785 writes it: the seven keys in
# order, every string in canonical form, link lists of strings. Text that matches is canonical
# (it holds no numbers, no non-ASCII keys and nests two levels), so verify needs no parse for the
# common note; anything else takes the full check.
_CANONICAL_PLAIN_RECORD = re.compile(
    (
        r'\{"contradicts":\[(?:S(?:,S)*+)?\],"depends_on":\[(?:S(?:,S)*+)?\],"fields":\{\}'
        r',"kind":S,"name":S,"supports":\[(?:S(?:,S)*+)?\],"text":S\}'
    ).replace("S", CANONICAL_STRING)
)


def _is_canonical(text: str) -> bool:
    """Whether ``text`` is exactly the canonical serialization of the JSON it holds."""
    if _CANONICAL_PLAIN_RECORD.fullmatch(text) is not None:
        return True
    try:
        return canonical_text(load_canonical(text)) == text
    except (ValueError, OhError):
        return False


def replay(entries: Iterable[LogEntry]) -> dict[str, StoredRecord]:
    """Fold a log from the start into the current records it implies (``fold``, inlined)."""
    state: dict[str, StoredRecord] = {}
    record = StoredRecord
    for _, version, _, _, author, written_at, changes, _, _ in entries:
        for op, name, content, digest in changes:
            if op == "remove":
                state.pop(name, None)
            else:
                assert content is not None and digest is not None
                state[name] = record(
                    name, name.partition(":")[0], content, digest, author, written_at, version
                )
    return state


def verify_notebook(
    store: MemoryStore, notebook_id: str, report: VerifyReport | None = None
) -> VerifyReport:
    """Replay one notebook's log and check it; compare the current records with the replay.

    Every content in the log is hashed against its digest, which the entry hash covers, and
    checked to be canonical. The replay keeps no content: for each current name it keeps the
    hash of the content that wrote it (the same as its digest unless that change is reported),
    the digest and the stamps, and each current record is compared through the hash of its
    content. That is the comparison of the content itself, without holding the notebook twice.
    """
    report = report if report is not None else VerifyReport()
    problems = report.problems

    def problem(what: str, detail: str) -> None:
        problems.append(Problem(notebook_id, what, detail))

    notebook = store.notebook(notebook_id)
    report.notebooks += 1
    if notebook.state in ("purged", "empty"):
        # A tombstone keeps its identity, version and head, and nothing else: any log entry or
        # record left behind is content that forgetting should have removed.
        leftover_entries = sum(1 for _ in store.log(notebook_id))
        leftover_records = len(store.records(notebook_id))
        if leftover_entries or leftover_records:
            problem(
                "forgotten",
                f"{notebook.state} notebook still holds {leftover_entries} log entries and"
                f" {leftover_records} records",
            )
        return report
    # name -> (hash of the content written, digest, author, written_at, version)
    state: dict[str, tuple[str, str, str, str, int]] = {}
    prev = genesis_hash(notebook_id)
    expected_version = 0
    sha256 = hashlib.sha256
    entries = iter(store.log(notebook_id))
    while True:
        try:
            entry = next(entries)
        except StopIteration:
            break
        except (OhError, TypeError, ValueError, AttributeError) as exc:
            problem("damaged", f"the log could not be read past entry {expected_version}: {exc}")
            break
        nid, version, request_id, fingerprint, author, written_at, changes, prev_hash, hash_ = entry
        report.entries += 1
        expected_version += 1
        if version != expected_version:
            problem("version", f"log entry {version} found where {expected_version} belongs")
            expected_version = version
        if prev_hash != prev:
            problem("chain", f"entry {version} does not follow the entry before it")
        try:
            expected = entry_hash(
                nid, version, request_id, fingerprint, author, written_at, changes, prev_hash
            )
        except (OhError, TypeError, ValueError, AttributeError):
            expected = None  # a stored value of the wrong type: the entry cannot be genuine
        if hash_ != expected:
            problem("chain", f"entry {version} was altered (its hash does not match)")
        prev = hash_
        for op, name, content, digest in changes:
            mismatch = None  # the content's hash, kept only when it is not the digest
            if op != "remove" and (type(content) is not str or type(digest) is not str):
                problem("damaged", f"entry {version}: {name} lost its content or digest")
                state.pop(name, None)
                continue
            if content is not None:
                actual = sha256(content.encode("utf-8")).hexdigest()
                if actual != digest:
                    problem("digest", f"entry {version}: {name} does not match its digest")
                    mismatch = actual
                elif not _is_canonical(content):
                    problem("canonical", f"entry {version}: {name} is not canonical")
            if op == "remove":
                state.pop(name, None)
            else:
                assert content is not None and digest is not None
                state[name] = (mismatch or digest, digest, author, written_at, version)
    if notebook.version != expected_version:
        problem("head", f"notebook says version {notebook.version}; log ends at {expected_version}")
    if notebook.head_hash != prev:
        problem("head", "notebook head hash does not match the last log entry (truncated log?)")

    # Differences are found in whatever order the records come and reported by name.
    drift: list[tuple[str, int, Problem]] = []

    def differs(name: str, order: int, what: str, detail: str) -> None:
        drift.append((name, order, Problem(notebook_id, what, detail)))

    for check in store.record_checks(notebook_id):
        report.records += 1
        name = check.name if type(check.name) is str else repr(check.name)
        want = state.pop(name, None)
        if check.as_logged and want is not None and check.version == want[4]:
            # Its content is the text the replay hashed for this name: compare the stamps.
            if (
                check.digest != want[1]
                or check.author != want[2]
                or check.written_at != want[3]
                or check.kind != kind_of(name)
            ):
                differs(name, 0, "drift", f"{name} differs from the log's version {want[4]}")
            if want[0] != check.digest:
                differs(name, 1, "digest", f"current {name} does not match its digest")
            continue
        # Anything else is read whole and its content hashed, to say what differs.
        have = store.record(notebook_id, check.name)
        if have is None:
            differs(name, 0, "drift", f"{name} changed while it was being checked")
            continue
        if type(have.content) is not str:
            differs(str(name), 0, "damaged", f"current {name!r} holds a value of the wrong type")
            continue
        written = sha256(have.content.encode("utf-8")).hexdigest()
        if want is None:
            differs(name, 0, "drift", f"{name} is current but the log removed or never wrote it")
        elif (
            written != want[0]
            or have.digest != want[1]
            or have.author != want[2]
            or have.written_at != want[3]
            or have.version != want[4]
            or have.kind != kind_of(name)
        ):
            differs(name, 0, "drift", f"{name} differs from the log's version {want[4]}")
        if written != have.digest:
            differs(name, 1, "digest", f"current {name} does not match its digest")
    for name in map(str, state):
        differs(name, 0, "drift", f"{name} is missing from the current records")
    drift.sort(key=lambda found: found[:2])
    problems.extend(found for _, _, found in drift)
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
