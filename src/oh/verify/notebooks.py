"""A notebook verified by replaying its log (``oh.verify``), and rebuilt from it."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterator
from typing import Any

from oh.core.answers import answer_id, encode_rows
from oh.core.canonical import (
    load_canonical,
    matches_digest,
    sha256_hex,
)
from oh.core.changes import LogChain, LogEntry, fold, replay
from oh.core.notebook import Notebook
from oh.core.records import LINK_KEYS, kind_of
from oh.core.seals import seal_matches, vector_seal
from oh.errors import (
    IntegrityError,
    OhError,
)
from oh.services.query import QUESTIONS, ask
from oh.services.view import Entry, Views, assemble
from oh.storage.base import KnowledgeSource, MemoryStore
from oh.verify.report import Problem, VerifyReport, is_canonical, unchecked

__all__ = ["rebuild", "replay", "verify_notebook"]


def verify_notebook(
    store: MemoryStore,
    notebook_id: str,
    report: VerifyReport | None = None,
    *,
    knowledge: KnowledgeSource | None = None,
) -> VerifyReport:
    """Replay one notebook's log and check it; compare the current records with the replay.

    Every content in the log is hashed against its digest, which the entry hash covers, and
    checked to be canonical. The replay keeps no content: for each current name it keeps the
    hash of the content that wrote it (the same as its digest unless that change is reported),
    the digest and the stamps, and each current record is compared through the hash of its
    content. That is the comparison of the content itself, without holding the notebook twice.

    The notebook's metadata is checked against its seal, each recall vector against its seal
    and the digests the notebook holds or wrote, and each kept answer is recomputed. Answers at
    a pinned revision are recomputed only when ``knowledge`` is given (their note rows and ids
    are checked either way).
    """
    report = report if report is not None else VerifyReport()
    problems = report.problems

    def problem(what: str, detail: str) -> None:
        problems.append(Problem(notebook_id, what, detail))

    notebook = store.notebook(notebook_id)
    report.notebooks += 1
    _check_seal(store, notebook, problem)
    if notebook.state in ("purged", "empty"):
        # A tombstone keeps its identity, version and head, and nothing else: any log entry,
        # record, kept answer or vector left behind is content forgetting should have removed.
        leftover_entries = sum(1 for _ in store.log(notebook_id))
        leftover_records = len(store.records(notebook_id))
        leftover_answers = len(store.kept_answers(notebook_id))
        leftover_vectors = sum(1 for _ in store.note_vector_rows(notebook_id))
        if leftover_entries or leftover_records or leftover_answers or leftover_vectors:
            problem(
                "forgotten",
                f"{notebook.state} notebook still holds {leftover_entries} log entries,"
                f" {leftover_records} records, {leftover_answers} kept answers and"
                f" {leftover_vectors} recall vectors",
            )
        return report
    if store.data_key_destroyed(notebook_id):
        # Forgotten after this copy of the database was taken: its key went with the forget,
        # so its rows can never be opened, which is the promise. Reported, not a problem.
        report.forgotten.append(notebook_id)
        return report
    # name -> (hash of the content written, digest, author, written_at, version)
    state: dict[str, tuple[str, str, str, str, int]] = {}
    # name -> hash of the content written, while that write does not match its digest (reported)
    altered: dict[str, str] = {}

    def kept(
        name: str, kind: str, content: Any, digest: Any, author: str, written_at: str, version: int
    ) -> tuple[str, str, str, str, int] | None:
        if type(content) is not str or type(digest) is not str:
            return None  # reported as damaged: nothing is current under the name
        written = altered.get(name, digest) if altered else digest
        return (written, digest, author, written_at, version)

    chain = LogChain(notebook_id)

    def checked() -> Iterator[LogEntry]:
        """The log, each entry checked (chain, digests, canonical form) before it is folded."""
        entries = iter(store.log(notebook_id))
        while True:
            try:
                entry = next(entries)
            except StopIteration:
                break
            except (OhError, TypeError, ValueError, AttributeError) as exc:
                problem("damaged", f"the log could not be read past entry {chain.version}: {exc}")
                break
            version = entry.version
            report.entries += 1
            broken = chain.follow(entry)
            if broken is not None:
                if broken.misplaced:
                    problem("version", f"log entry {version} found where {broken.expected} belongs")
                if broken.detached:
                    problem("chain", f"entry {version} does not follow the entry before it")
                if broken.altered:
                    problem("chain", f"entry {version} was altered (its hash does not match)")
            for op, name, content, digest in entry.changes:
                if op != "remove" and (type(content) is not str or type(digest) is not str):
                    problem("damaged", f"entry {version}: {name} lost its content or digest")
                elif content is not None and not matches_digest(content, digest):
                    problem("digest", f"entry {version}: {name} does not match its digest")
                    if op != "remove":
                        altered[name] = sha256_hex(content)
                        continue
                elif content is not None and not is_canonical(content):
                    problem("canonical", f"entry {version}: {name} is not canonical")
                if altered:
                    altered.pop(name, None)
            yield entry

    fold(state, checked(), kept)
    if notebook.version != chain.version:
        problem("head", f"notebook says version {notebook.version}; log ends at {chain.version}")
    if notebook.head_hash != chain.head:
        problem("head", "notebook head hash does not match the last log entry (truncated log?)")
    _check_vectors(store, notebook_id, state, problem)

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
        try:
            have = store.record(notebook_id, check.name)
        except IntegrityError as exc:  # sealed content that does not open (docs/keys.md)
            differs(str(name), 0, "damaged", f"current {name!r}: {exc}")
            continue
        if have is None:
            differs(name, 0, "drift", f"{name} changed while it was being checked")
            continue
        if type(have.content) is not str:
            differs(str(name), 0, "damaged", f"current {name!r} holds a value of the wrong type")
            continue
        intact = matches_digest(have.content, have.digest)
        written = have.digest if intact else sha256_hex(have.content)
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
        if not intact:
            differs(name, 1, "digest", f"current {name} does not match its digest")
    for name in map(str, state):
        differs(name, 0, "drift", f"{name} is missing from the current records")
    drift.sort(key=lambda found: found[:2])
    problems.extend(found for _, _, found in drift)
    _check_answers(store, notebook, knowledge, problem)
    return report


Report = Callable[[str, str], None]


def _check_seal(store: MemoryStore, notebook: Notebook, problem: Report) -> None:
    """The notebook's metadata is what Oh sealed: an edit that does not recompute the seal
    (forgets_at pushed to 2999 to escape the purge, another owner, a moved pin) is reported."""
    seal = store.notebook_seal(notebook.id)
    if seal is None:
        problem("seal", "the notebook's metadata has no seal (its row was written outside Oh)")
        return
    if not seal_matches(
        seal,
        notebook.id,
        notebook.owner,
        notebook.document,
        notebook.run,
        notebook.state,
        notebook.started_at,
        notebook.forgets_at,
        notebook.pinned_revision,
        notebook.purged_at,
    ):
        problem(
            "seal",
            "the notebook's metadata does not match its seal: owner, document, run, started_at,"
            " forgets_at, pinned_revision or state was changed after Oh wrote it (now: state"
            f" {notebook.state}, started_at {notebook.started_at}, forgets_at"
            f" {notebook.forgets_at}, pinned_revision {notebook.pinned_revision}, purged_at"
            f" {notebook.purged_at})",
        )


def _check_vectors(
    store: MemoryStore,
    notebook_id: str,
    state: dict[str, tuple[str, str, str, str, int]],
    problem: Report,
) -> None:
    """Each recall vector matches its seal (so it is the vector embedded for that digest by
    that model in this notebook) and indexes a digest this notebook holds, or one it wrote
    earlier (a replaced note's vector stays cached until the next catch-up deletes it)."""
    rows = iter(store.note_vector_rows(notebook_id))
    first = next(rows, None)
    if first is None:
        return
    names = {want[1]: name for name, want in state.items()}
    stale: dict[str, str] = {}  # digest -> model of vectors whose digest is not current
    for row in itertools.chain((first,), rows):
        model_id, digest, vector, seal = row.model_id, row.digest, row.vector, row.seal
        if (
            type(model_id) is not str
            or type(digest) is not str
            or not isinstance(vector, (bytes, bytearray, memoryview))
        ):
            problem("vector", f"a recall vector holds a value of the wrong type ({digest!r:.40})")
            continue
        label = names.get(digest)
        if seal != vector_seal("note", notebook_id, model_id, row.sealed_digest, vector):
            what = label or f"digest {digest[:16]}"
            problem(
                "vector",
                f"the recall vector of {what} ({model_id}) was altered: it does not match its seal",
            )
        if label is None:
            stale[digest] = model_id
    if stale:
        try:
            for entry in store.log(notebook_id):
                for change in entry.changes:
                    if type(change.digest) is str:
                        stale.pop(change.digest, None)
                if not stale:
                    break
        except (OhError, TypeError, ValueError, AttributeError):
            pass  # a log that cannot be read is reported already; what is left is unexplained
        for digest, model_id in sorted(stale.items()):
            problem(
                "vector",
                f"a recall vector ({model_id}) indexes digest {digest[:16]}, which this notebook"
                " never wrote",
            )


def _params(text: Any) -> dict[str, Any] | None:
    if type(text) is not str:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if type(value) is dict else None


def _first_difference(stored: str, recomputed: str) -> str:
    have = stored.split("\n") if stored else []
    want = recomputed.split("\n") if recomputed else []
    for row, (mine, theirs) in enumerate(zip(have, want, strict=False)):
        if mine != theirs:
            name, other = (line.split("\t")[2:3] or [line[:40]] for line in (mine, theirs))
            if name == other:
                return f"row {row} ({name[0]}) differs"
            return f"row {row} names {name[0]}, the recomputation {other[0]}"
    return f"it has {len(have)} rows, the recomputation {len(want)}"


def _check_answers(
    store: MemoryStore, notebook: Notebook, knowledge: KnowledgeSource | None, problem: Report
) -> None:
    """Each kept answer is the answer its id names, at the notebook's pin and a version the log
    reached, and its rows are exactly what the question answers at that version: the view is
    rebuilt from the log up to the version (and the reviewed records of the pinned revision)
    and the question asked again. One pass over the log serves every kept answer."""
    due: dict[int, list[tuple[str, str, dict[str, Any], str]]] = {}
    for row in store.kept_answers(notebook.id):
        _, kept_id, caller, question, params_text, version, revision, _, _, rows = row
        label = kept_id if type(kept_id) is str else repr(kept_id)
        params = _params(params_text)
        if (
            params is None
            or type(caller) is not str
            or type(question) is not str
            or type(rows) is not str
            or type(version) is not int
            or not (revision is None or type(revision) is int)
        ):
            problem("answer", f"kept answer {label} holds a value of the wrong type")
            continue
        try:
            genuine = answer_id(notebook.id, version, revision, question, params, caller)
        except (OhError, TypeError, ValueError):
            genuine = None
        if kept_id != genuine:
            problem(
                "answer",
                f"kept answer {label} is not the answer it names: its question, parameters,"
                " version, revision or caller was changed",
            )
        elif revision != notebook.pinned_revision:
            problem(
                "answer",
                f"kept answer {label} is at revision {revision}; the notebook pins"
                f" {notebook.pinned_revision}",
            )
        elif not 0 <= version <= notebook.version or question not in QUESTIONS:
            problem("answer", f"kept answer {label} ({question} at version {version}) cannot exist")
        elif revision is None or knowledge is not None:
            due.setdefault(version, []).append((label, question, params, rows))
    if not due:
        return
    # The reviewed records as stored, MACs unchecked: a refused row is verify_knowledge's to
    # report, and the answers are recomputed from what the database holds.
    reviewed = Views(store, unchecked(knowledge)).reviewed(notebook.owner, notebook.pinned_revision)
    notes: dict[str, Entry] = {}
    links: dict[str, tuple[tuple[str, ...], ...]] = {}
    logged: list[LogEntry] = []  # the log without content, for changes_since

    def recompute(version: int) -> None:
        view = assemble(notebook, version, dict(notes), reviewed)
        for label, question, params, rows in due.pop(version):
            try:
                want = encode_rows(tuple(ask(view, question, params, logged)))
            except (OhError, TypeError, ValueError, KeyError) as exc:
                problem(
                    "answer",
                    f"kept answer {label} ({question} at version {version}) cannot be"
                    f" recomputed: {exc}",
                )
                continue
            if want != rows:
                problem(
                    "answer",
                    f"kept answer {label} ({question} at version {version}) is not what the"
                    f" log answers: {_first_difference(rows, want)}",
                )

    def note(
        name: str, kind: str, content: Any, digest: Any, author: str, written_at: str, version: int
    ) -> Entry | None:
        if type(name) is not str or type(digest) is not str:
            return notes.get(name)  # damage, reported by the log pass: the note stays as it was
        found = links.get(digest)
        if found is None:
            found = links[digest] = _links_of(content)
        return Entry("note", name, kind, digest, *found)

    if 0 in due:
        recompute(0)
    try:
        for entry in store.log(notebook.id):
            if not due:
                break
            fold(notes, (entry,), note)
            logged.append(
                entry._replace(changes=tuple(c._replace(content=None) for c in entry.changes))
            )
            for version in sorted(v for v in due if v <= entry.version):
                recompute(version)
    except (OhError, TypeError, ValueError, AttributeError):
        return  # a log that cannot be read is reported already


def _links_of(content: Any) -> tuple[tuple[str, ...], ...]:
    try:
        value = load_canonical(content)
        return tuple(tuple(value.get(key, ())) for key in LINK_KEYS)
    except (OhError, TypeError, ValueError, AttributeError):
        return ((), (), ())  # damaged content, reported by the log pass


def rebuild(store: MemoryStore, notebook_id: str) -> int:
    """Replace the derived current records with a replay of the log; return how many."""
    state = replay(store.log(notebook_id))
    store.replace_records(notebook_id, state.values())
    return len(state)
