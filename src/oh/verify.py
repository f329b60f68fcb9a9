"""Verify and rebuild (docs/design.md, docs/cli.md): the log is the truth, the rest derived copies.

``verify`` replays each notebook's log from the start, checks the hash chain, every version and
every digest, compares the replayed state with the current-record table, and reports each
difference. Every other derived or stamped value is checked too: each kept answer is recomputed
from the log at its version (and the knowledge pinned at its revision) and compared row by row;
each recall vector and the notebook's metadata are checked against the seals written with them
(``oh.core.seals``). ``rebuild`` replaces the current-record table with the replayed state.

``verify_store`` can spread the notebooks over processes (``jobs``): each worker opens its own
read connections with the picklable ``reopen`` it is given and verifies a run of consecutive
notebooks; the parent joins the runs' reports in notebook order, so the report is the same,
problem for problem, as one process makes. A worker that raises or dies ends the verify with a
typed error, never a hang.
"""

from __future__ import annotations

import atexit
import itertools
import json
import math
import signal
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from oh.core.answers import answer_id, encode_rows
from oh.core.canonical import (
    canonical_text,
    load_canonical,
    matches_digest,
    sha256_hex,
)
from oh.core.changes import LogChain, LogEntry, fold, replay
from oh.core.notebook import Notebook
from oh.core.records import LINK_KEYS, PLAIN_RECORD, kind_of
from oh.core.reviewed import RevisionChain
from oh.core.seals import seal_matches, vector_seal
from oh.errors import (
    Bug,
    IntegrityError,
    InvalidArgument,
    OhError,
    StorageUnavailable,
    error_for_code,
)
from oh.keys.macs import AuthenticatedKnowledge, KnowledgeMacs, refusal
from oh.query import QUESTIONS, ask
from oh.storage.base import KnowledgeSource, KnowledgeStore, MemoryStore
from oh.view import Entry, Views, assemble

if TYPE_CHECKING:
    from concurrent.futures import ProcessPoolExecutor

__all__ = [
    "SPREAD_FROM_ENTRIES",
    "Problem",
    "Reopen",
    "VerifyReport",
    "rebuild",
    "replay",
    "verify_knowledge",
    "verify_notebook",
    "verify_reviewed_vectors",
    "verify_store",
]


@dataclass(frozen=True, slots=True)
class Problem:
    notebook_id: str
    # chain | version | digest | canonical | drift | head | forgotten | damaged
    # | seal (notebook metadata) | vector (recall vectors) | answer (kept answers)
    # | mac (a knowledge row's MAC missing or wrong)
    what: str
    detail: str

    def to_json(self) -> dict[str, str]:
        return {"notebook": self.notebook_id, "what": self.what, "detail": self.detail}


@dataclass(slots=True)
class VerifyReport:
    notebooks: int = 0
    entries: int = 0
    records: int = 0
    problems: list[Problem] = field(default_factory=list)
    # Notebooks whose data key is gone though their rows are here: forgotten after this copy
    # was taken (a restored backup). Not a problem: their rows can never be read, by design.
    forgotten: list[str] = field(default_factory=list)

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
            "forgotten": list(self.forgotten),
        }


def _is_canonical(text: str) -> bool:
    """Whether ``text`` is exactly the canonical serialization of the JSON it holds."""
    if PLAIN_RECORD.fullmatch(text) is not None:
        return True
    try:
        return canonical_text(load_canonical(text)) == text
    except (ValueError, OhError):
        return False


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
                elif content is not None and not _is_canonical(content):
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
    reviewed = Views(store, _unchecked(knowledge)).reviewed(
        notebook.owner, notebook.pinned_revision
    )
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


# What a worker process calls to open its own read connections to the data the parent verifies.
# It must pickle (a module-level function, or a ``functools.partial`` of one), since workers are
# started with ``spawn``: the parent may hold threads and open connections, which fork would copy.
Reopen = Callable[[], tuple[MemoryStore, KnowledgeSource | None]]

# Below this many log entries (summed over the notebooks) verify stays in process. A worker
# takes about 0.8 s to start (a fresh interpreter importing Oh and opening its connections),
# as long as verifying some 80,000 entries here, and this process verifies meanwhile; below
# about that much a worker would be ready only when nothing is left (bench/bench_verify.py).
SPREAD_FROM_ENTRIES = 100_000

# Whether this process verifies runs too while its workers do (tests turn it off, so that the
# workers verify every notebook however fast this process would be).
_SHARE_WITH_PARENT = True

# Runs of consecutive notebooks per worker: a few per worker, so one large notebook does not
# leave the others idle, and few enough that sending the reports back costs nothing.
_RUNS_PER_JOB = 8


def verify_store(
    store: MemoryStore,
    progress: Callable[[int, int], None] | None = None,
    *,
    knowledge: KnowledgeSource | None = None,
    jobs: int = 1,
    reopen: Reopen | None = None,
) -> VerifyReport:
    """Verify every notebook; ``progress(done, total)`` is called as they are done. With
    ``knowledge``, kept answers at a pinned revision are recomputed too.

    With ``jobs`` above 1 and ``reopen``, the notebooks are shared among up to ``jobs`` worker
    processes when there are at least two and ``SPREAD_FROM_ENTRIES`` log entries; the report
    is the same as in process. A worker that fails raises its ``OhError`` here (anything else
    it raises becomes a ``Bug``), and one that dies raises ``StorageUnavailable``.
    """
    ids = store.notebook_ids()
    if jobs > 1 and reopen is not None and len(ids) > 1 and _worth_spreading(store, ids):
        return _verify_spread(store, knowledge, ids, jobs, reopen, progress)
    report = VerifyReport()
    for done, notebook_id in enumerate(ids, 1):
        verify_notebook(store, notebook_id, report, knowledge=knowledge)
        if progress is not None:
            progress(done, len(ids))
    return report


def _worth_spreading(store: MemoryStore, ids: list[str]) -> bool:
    """Whether the notebooks hold enough log entries to pay for starting workers (a notebook's
    version counts its entries; reading stops once the threshold is passed)."""
    entries = 0
    for notebook_id in ids:
        try:
            entries += max(store.notebook(notebook_id).version, 0)
        except (OhError, TypeError, ValueError):
            continue  # verify reports it; counting it does not matter
        if entries >= SPREAD_FROM_ENTRIES:
            return True
    return False


def _verify_spread(
    store: MemoryStore,
    knowledge: KnowledgeSource | None,
    ids: list[str],
    jobs: int,
    reopen: Reopen,
    progress: Callable[[int, int], None] | None,
) -> VerifyReport:
    """Share runs of consecutive notebooks among ``jobs`` processes: this one and ``jobs - 1``
    workers. A worker is slow to start (``SPREAD_FROM_ENTRIES``), so this process verifies runs
    from the end meanwhile, and a worker is given runs from the front only once it says it is
    ready, one more queued than it works on so it never waits. A directory done before any
    worker is ready is verified in process alone, and the workers still starting are ended.
    The reports are joined in notebook order."""
    size = max(1, math.ceil(len(ids) / (jobs * _RUNS_PER_JOB)))
    runs = [ids[first : first + size] for first in range(0, len(ids), size)]
    reports: list[VerifyReport | None] = [None] * len(runs)
    workers = min(jobs - 1, len(runs) - 1)
    # Imported here: multiprocessing is loaded only by a verify that starts workers (embedding
    # Oh loads no more than it uses).
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    pool = ProcessPoolExecutor(
        max_workers=workers,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_start_worker,
        initargs=(reopen,),
    )
    front, back = 0, len(runs) - 1  # runs front..back are not claimed yet
    starting = {pool.submit(_open_worker) for _ in range(workers)}
    ready = 0
    pending: dict[Future[_Outcome], int] = {}
    done = 0

    def finished(index: int, part: VerifyReport) -> None:
        nonlocal done
        reports[index] = part
        done += len(runs[index])
        if progress is not None:
            progress(done, len(ids))

    def collect(block: bool) -> None:
        nonlocal ready
        if block:
            wait([*starting, *pending], return_when=FIRST_COMPLETED)
        for future in [future for future in starting if future.done()]:
            starting.discard(future)
            _report_of(future)  # raises what stopped the worker opening its connections
            ready += 1
        for future in [future for future in pending if future.done()]:
            finished(pending.pop(future), _report_of(future))

    try:
        while front <= back:
            collect(block=False)
            while len(pending) < 2 * ready and front <= back:
                pending[pool.submit(_verify_run, runs[front])] = front
                front += 1
            if not _SHARE_WITH_PARENT:
                collect(block=True)
            elif front <= back:
                part = VerifyReport()
                for notebook_id in runs[back]:
                    verify_notebook(store, notebook_id, part, knowledge=knowledge)
                finished(back, part)
                back -= 1
        while pending:
            collect(block=True)
    except BrokenProcessPool:  # seen by ``submit`` before any result says so
        _stop(pool)
        raise _worker_died() from None
    except BaseException:
        _stop(pool)  # an error, Ctrl-C: the workers end now, their work is dropped
        raise
    if starting:
        _stop(pool)  # no need to wait for a worker that is still starting
    else:
        pool.shutdown(wait=True)
    report = VerifyReport()
    for joined in reports:
        assert joined is not None
        report.notebooks += joined.notebooks
        report.entries += joined.entries
        report.records += joined.records
        report.problems.extend(joined.problems)
        report.forgotten.extend(joined.forgotten)
    return report


# What a worker sends back: its report, or the error that stopped it as (code, message) (code
# ``None`` for an exception Oh did not expect). Exceptions are not sent as themselves: one that
# does not pickle back would surface as a different error than the one raised.
_Outcome = VerifyReport | tuple[str | None, str]


def _report_of(future: Future[_Outcome]) -> VerifyReport:
    from concurrent.futures.process import BrokenProcessPool

    try:
        outcome = future.result()
    except BrokenProcessPool:
        raise _worker_died() from None
    if isinstance(outcome, VerifyReport):
        return outcome
    code, message = outcome
    if code is None:
        raise Bug(f"a verify worker failed: {message}")
    raise error_for_code(code, message)


def _worker_died() -> StorageUnavailable:
    return StorageUnavailable(
        "a verify worker process ended before it finished (killed, or out of memory?);"
        " nothing was reported: run oh verify again, or with --jobs 1"
    )


def _stop(pool: ProcessPoolExecutor) -> None:
    """End the pool without waiting for the work in flight: cancel what has not started and
    terminate the workers (``shutdown`` alone would wait for each running run)."""
    workers = {worker.pid: worker for worker in (getattr(pool, "_processes", None) or {}).values()}
    pool.shutdown(wait=False, cancel_futures=True)
    # A worker the pool started meanwhile (it replaces them lazily) is stopped too.
    workers.update((w.pid, w) for w in (getattr(pool, "_processes", None) or {}).values())
    for worker in workers.values():
        if worker.is_alive():
            worker.terminate()
    for worker in workers.values():
        worker.join(5)
        if worker.is_alive():  # still starting up, or stuck: SIGKILL cannot be ignored
            worker.kill()
            worker.join(5)
    # The pool's own thread reaps what is left; with every worker ended it returns at once,
    # so no process of this verify outlives it.
    pool.shutdown(wait=True)


# The worker's own connections, opened by its first task (``_open_worker``, so that a failure to
# open is sent back as that task's error, not lost in the initializer) and kept for its runs.
_worker_reopen: Reopen | None = None
_worker_stores: tuple[MemoryStore, KnowledgeSource | None] | None = None


def _close_worker_stores() -> None:
    if _worker_stores is not None:
        for opened in _worker_stores:
            close = getattr(opened, "close", None)
            if close is not None:
                close()


def _start_worker(reopen: Reopen) -> None:
    # Ctrl-C reaches the whole process group; the parent alone decides to stop the pool, so a
    # worker neither prints a traceback nor half-stops.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    global _worker_reopen
    _worker_reopen = reopen


def _worker_connections() -> tuple[MemoryStore, KnowledgeSource | None]:
    global _worker_stores
    if _worker_stores is None:
        assert _worker_reopen is not None
        _worker_stores = _worker_reopen()
        atexit.register(_close_worker_stores)
    return _worker_stores


def _open_worker() -> _Outcome:
    """Open the worker's connections; the parent gives it runs once this is done."""
    try:
        _worker_connections()
        return VerifyReport()
    except OhError as exc:
        return (exc.code, exc.message)
    except Exception as exc:
        return (None, f"{type(exc).__name__}: {exc}")


def _verify_run(ids: list[str]) -> _Outcome:
    try:
        store, knowledge = _worker_connections()
        report = VerifyReport()
        for notebook_id in ids:
            verify_notebook(store, notebook_id, report, knowledge=knowledge)
        return report
    except OhError as exc:
        return (exc.code, exc.message)
    except Exception as exc:
        return (None, f"{type(exc).__name__}: {exc}")


def verify_reviewed_vectors(
    memory: MemoryStore, knowledge: KnowledgeStore, report: VerifyReport | None = None
) -> VerifyReport:
    """Check every reviewed-record vector: it matches its seal (the vector embedded for that
    digest, by that model, for that owner) and indexes a version its owner's review decided."""
    report = report if report is not None else VerifyReport()
    decided: dict[str, set[str]] = {}
    for owner, model_id, digest, vector, seal, _ in memory.reviewed_vector_rows():
        where = f"knowledge:{owner}"
        if (
            type(owner) is not str
            or type(model_id) is not str
            or type(digest) is not str
            or not isinstance(vector, (bytes, bytearray, memoryview))
        ):
            report.problems.append(
                Problem(where, "vector", "a reviewed-record vector holds a value of the wrong type")
            )
            continue
        if seal != vector_seal("reviewed", owner, model_id, digest, vector):
            report.problems.append(
                Problem(
                    where,
                    "vector",
                    f"the recall vector of reviewed digest {digest[:16]} ({model_id}) was"
                    " altered: it does not match its seal",
                )
            )
        if owner not in decided:
            decided[owner] = {
                e.digest
                for e in _unchecked(knowledge).revisions(owner)
                if e.what == "decision" and e.digest
            }
        if digest not in decided[owner]:
            report.problems.append(
                Problem(
                    where,
                    "vector",
                    f"a recall vector ({model_id}) indexes digest {digest[:16]}, which no"
                    " decision of this knowledge base accepted",
                )
            )
    return report


def _unchecked(knowledge: Any) -> Any:
    """``knowledge`` serving its rows without checking their MACs, so that verify reports a
    refused row instead of stopping at it (``AuthenticatedKnowledge.unchecked``)."""
    return knowledge.unchecked() if isinstance(knowledge, AuthenticatedKnowledge) else knowledge


def _check_macs(store: KnowledgeStore, macs: KnowledgeMacs, report: VerifyReport) -> None:
    """One ``mac`` problem for each knowledge row whose MAC is missing or wrong."""
    if not isinstance(store, AuthenticatedKnowledge):
        raise InvalidArgument(f"a {type(store).__name__} keeps no MACs to verify")
    for kind, values, mac in store.mac_rows():
        why = macs.problem(kind, values, mac)
        if why is not None:
            owner = dict(zip(kind.columns, values, strict=True)).get("owner")
            report.problems.append(Problem(f"knowledge:{owner}", "mac", refusal(kind, values, why)))


def verify_knowledge(
    store: KnowledgeStore, report: VerifyReport | None = None, *, macs: KnowledgeMacs | None = None
) -> VerifyReport:
    """Check each owner's revision chain, and that every reviewed version matches its digest,
    is canonical, and is the one its revision entry names. With ``macs`` (by default the
    store's own, if it was opened with MACs), also every row's MAC (docs/keys.md): each reviewed
    version, proposal, revision entry and pack install whose MAC is missing or wrong is a
    ``mac`` problem. The other checks read the rows as stored, so a refused row is reported,
    never a reason to stop."""
    report = report if report is not None else VerifyReport()
    if macs is None and isinstance(store, AuthenticatedKnowledge):
        macs = store.macs
    if macs is not None:
        _check_macs(store, macs, report)
    store = _unchecked(store)
    for owner in store.owners():
        where = f"knowledge:{owner}"

        def problem(what: str, detail: str, where: str = where) -> None:
            report.problems.append(Problem(where, what, detail))

        chain = RevisionChain(owner)
        entries = store.revisions(owner)
        for entry in entries:
            report.entries += 1
            broken = chain.follow(entry)
            if broken is None:
                continue
            if broken.misplaced:
                problem(
                    "version", f"revision {entry.revision} found where {broken.expected} belongs"
                )
            if broken.detached:
                problem("chain", f"revision {entry.revision} does not follow the one before it")
            if broken.altered:
                problem("chain", f"revision {entry.revision} was altered")
        latest, head = store.head(owner)
        if latest != chain.revision or head != chain.head:
            problem("head", f"knowledge base says revision {latest}; entries end at {len(entries)}")
        named = {(e.name, e.revision): e.digest for e in entries if e.what == "decision" and e.name}
        for name in sorted({name for name, _ in named}):
            try:
                versions = store.history(owner, name)
            except (OhError, ValueError, TypeError, KeyError) as exc:
                problem("damaged", f"the versions of {name} cannot be read: {exc}")
                continue
            for version in versions:
                report.records += 1
                if not matches_digest(version.content, version.digest):
                    problem("digest", f"{name} at revision {version.revision} does not match")
                elif not _is_canonical(version.content):
                    problem("canonical", f"{name} at revision {version.revision} is not canonical")
                if named.get((name, version.revision)) != version.digest:
                    problem(
                        "drift", f"{name} at revision {version.revision} is not what was decided"
                    )
            # A version its revision entry names but the database no longer holds: what no
            # row's MAC can show, since the row is gone.
            held = {version.revision for version in versions}
            for revision in sorted(r for n, r in named if n == name and r not in held):
                problem("drift", f"{name} at revision {revision} was decided but is missing")
    return report


def rebuild(store: MemoryStore, notebook_id: str) -> int:
    """Replace the derived current records with a replay of the log; return how many."""
    state = replay(store.log(notebook_id))
    store.replace_records(notebook_id, state.values())
    return len(state)
