"""Verifying a whole store, in this process or spread over worker processes (``oh.verify``):
each worker opens its own read connections with the picklable ``reopen`` it is given and
verifies a run of consecutive notebooks; the parent joins the reports in notebook order."""

from __future__ import annotations

import atexit
import math
import signal
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, wait
from typing import TYPE_CHECKING

from oh.errors import Bug, OhError, StorageUnavailable, error_for_code
from oh.storage.base import KnowledgeSource, MemoryStore
from oh.verify.notebooks import verify_notebook
from oh.verify.report import VerifyReport

if TYPE_CHECKING:
    from concurrent.futures import ProcessPoolExecutor

__all__ = ["SPREAD_FROM_ENTRIES", "Reopen", "verify_store"]


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
