"""Recall off the agent's request path (docs/recall.md): a deadline on every call, shadow
measurements in a bounded background worker, and the loop that catches up pending embeddings.

* ``DeadlineRecall`` runs each recall on a few worker threads and waits for it at most
  ``deadline`` seconds. A call that takes longer answers ``RecallDeadlineExceeded``
  (``storage_unavailable``), and the late work finishes or fails in the background. The agent
  never waits out an embedding endpoint's timeouts and retries.
* ``ShadowRecall`` is shadow mode: ``recall`` queues the search and answers no rows at once.
  One worker thread runs the queue and hands every outcome to ``measure``. When the queue is
  full, a search is dropped and counted, not waited for.
* ``CatchUpWorker.run_pass()`` is one catch-up pass over every open notebook. ``start()``
  repeats it in a thread. A failure is logged once when it starts, in a summary now and then
  while it lasts, and once when it ends: never once per pass.

Every thread here is a daemon thread on purpose. A call dropped at its deadline may go on
waiting for a slow endpoint for minutes, and a process told to stop must not wait for it
(``concurrent.futures`` joins its worker threads when the interpreter exits, which is why it is
not used).
"""

from __future__ import annotations

import contextlib
import logging
import math
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any, Protocol

from oh.core.notebook import Notebook
from oh.errors import InvalidArgument, OhError, StorageUnavailable
from oh.recall.embedders import EmbedderRejected, EmbedderResponseInvalid
from oh.recall.service import CatchUpReport, Recall

__all__ = [
    "DEFAULT_DEADLINE",
    "CatchUpPass",
    "CatchUpWorker",
    "DeadlineRecall",
    "RecallDeadlineExceeded",
    "ShadowRecall",
    "failure_reason",
]

logger = logging.getLogger("oh.recall")

DEFAULT_DEADLINE = 2.0  # seconds


class RecallLike(Protocol):
    def recall(self, notebook: Notebook, text: str, limit: int) -> dict[str, Any]: ...


class RecallDeadlineExceeded(StorageUnavailable):
    """A recall did not finish within its deadline. Nothing was recalled and nothing changed."""


def failure_reason(exc: BaseException) -> str | None:
    """The ``reason`` label of a failed embedding, or None for errors that are not about
    embedding (a purged notebook, bad arguments)."""
    if isinstance(exc, RecallDeadlineExceeded):
        return "deadline"
    if isinstance(exc, EmbedderRejected):
        return "rejected"
    if isinstance(exc, EmbedderResponseInvalid):
        return "invalid_response"
    if isinstance(exc, StorageUnavailable):  # EmbedderUnavailable, or the store behind it
        return "unavailable"
    if isinstance(exc, OhError):
        return None
    return "error"


def _seconds(value: Any, what: str) -> float:
    if type(value) not in (int, float) or not 0 < value < math.inf:
        raise InvalidArgument(f"{what} must be a positive number of seconds")
    return float(value)


def _count(value: Any, what: str) -> int:
    if type(value) is not int or value < 1:
        raise InvalidArgument(f"{what} must be a positive integer")
    return value


def _pending(service: object, notebook: Notebook) -> int | None:
    """``service.pending(notebook)``: a count from the database, never an embedding; None
    when the service cannot say."""
    pending = getattr(service, "pending", None)
    count = None if pending is None else pending(notebook)
    return None if count is None else int(count)


# -- the deadline ------------------------------------------------------------------------------


@dataclass(slots=True)
class _Job:
    future: Future[dict[str, Any]]
    notebook: Notebook
    text: str
    limit: int


class DeadlineRecall:
    """``inner.recall`` with a deadline: at most ``deadline`` seconds per call.

    ``workers`` threads run the calls. At most ``workers + backlog`` calls can be waiting or
    running at once; a call beyond that is refused at once, since the ones before it are
    already waiting for the embedder. ``on_failure(reason)`` hears of each failed embedding
    (``failure_reason``), for metrics.
    """

    def __init__(
        self,
        inner: RecallLike,
        deadline: float = DEFAULT_DEADLINE,
        *,
        workers: int = 4,
        backlog: int = 8,
        on_failure: Callable[[str], None] | None = None,
    ) -> None:
        self.inner = inner
        self.deadline = _seconds(deadline, "the recall deadline")
        self.workers = _count(workers, "workers")
        self.backlog = _count(backlog, "backlog")
        self.on_failure = on_failure
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._outstanding = 0  # calls submitted and neither finished nor given up
        self._closed = False

    def recall(self, notebook: Notebook, text: str, limit: int) -> dict[str, Any]:
        future: Future[dict[str, Any]] = Future()
        with self._lock:
            if self._closed:
                raise StorageUnavailable("recall has stopped on this host")
            if self._outstanding >= self.workers + self.backlog:
                error = RecallDeadlineExceeded(
                    f"recall is busy: {self._outstanding} earlier calls are still waiting for"
                    " the embedder; nothing was recalled, try again later",
                    deadline_seconds=self.deadline,
                )
                busy = True
            else:
                busy = False
                self._outstanding += 1
                if not self._threads:
                    self._start_workers()
        if busy:
            self._failed(error)
            raise error
        self._jobs.put(_Job(future, notebook, text, limit))
        try:
            return future.result(timeout=self.deadline)
        except FutureTimeout:
            if future.cancel():  # still queued: it will never run
                self._done()
            error = RecallDeadlineExceeded(
                f"recall did not finish within its deadline of {self.deadline:g} s (the"
                " embedder is slow or unreachable); nothing was recalled, try again later",
                deadline_seconds=self.deadline,
            )
            self._failed(error)
            raise error from None
        except OhError as exc:
            self._failed(exc)
            raise

    def _failed(self, exc: BaseException) -> None:
        reason = failure_reason(exc)
        if reason is not None and self.on_failure is not None:
            self.on_failure(reason)

    def _done(self) -> None:
        with self._lock:
            self._outstanding -= 1

    def _start_workers(self) -> None:
        for number in range(self.workers):
            thread = threading.Thread(target=self._work, name=f"oh-recall-{number}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            if not job.future.set_running_or_notify_cancel():
                continue  # given up while queued; _done was called then
            try:
                job.future.set_result(self.inner.recall(job.notebook, job.text, job.limit))
            except Exception as exc:  # handed to the waiting caller, who reports it
                job.future.set_exception(exc)
            except BaseException as exc:
                # E.g. a driver's panic: the caller must get an error it can answer with,
                # not an exception that would end its thread.
                failure = StorageUnavailable(f"internal error: {type(exc).__name__}")
                failure.__cause__ = exc
                job.future.set_exception(failure)
            finally:
                self._done()

    def pending(self, notebook: Notebook) -> int | None:
        """What the inner service says is pending (None if it cannot say); no embedding."""
        return _pending(self.inner, notebook)

    def evict(self, notebook_id: str) -> None:
        evict = getattr(self.inner, "evict", None)
        if evict is not None:
            evict(notebook_id)

    def close(self) -> None:
        """Stop taking calls and let the workers end. A worker still waiting for the
        embedder ends when that call does; nobody waits for it."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            threads = list(self._threads)
        for _ in threads:
            self._jobs.put(None)


# -- shadow mode -------------------------------------------------------------------------------

Measure = Callable[[Notebook, dict[str, Any] | None, OhError | None], None]


class ShadowRecall:
    """Shadow mode (docs/tools.md recall) off the request path.

    ``recall`` queues ``(notebook, text, limit)`` and answers ``{"rows": []}`` at once (with
    ``pending`` when the inner service can count it without embedding). One worker thread runs
    the queued searches on ``inner`` and calls ``measure(notebook, found, error)`` with each
    outcome. The queue holds ``queue_size`` searches; beyond that a search is dropped and
    ``on_drop()`` is called. ``close`` stops the worker; queued searches are dropped.
    """

    def __init__(
        self,
        inner: RecallLike,
        measure: Measure,
        *,
        queue_size: int = 64,
        on_drop: Callable[[], None] | None = None,
    ) -> None:
        self.inner = inner
        self.measure = measure
        self.on_drop = on_drop
        self.queue_size = _count(queue_size, "the shadow queue size")
        self._queue: queue.Queue[tuple[Notebook, str, int] | None] = queue.Queue(queue_size)
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._unfinished = 0  # queued or running
        self._thread: threading.Thread | None = None
        self._closed = False
        self.dropped = 0
        self.measured = 0

    def recall(self, notebook: Notebook, text: str, limit: int) -> dict[str, Any]:
        with self._lock:
            accepted = not self._closed
            if accepted:
                try:
                    self._queue.put_nowait((notebook, text, limit))
                    self._unfinished += 1
                except queue.Full:
                    accepted = False
                if self._thread is None:
                    self._thread = threading.Thread(
                        target=self._work, name="oh-recall-shadow", daemon=True
                    )
                    self._thread.start()
            if not accepted:
                self.dropped += 1
        if not accepted and self.on_drop is not None:
            self.on_drop()
        answer: dict[str, Any] = {"rows": []}
        pending = _pending(self.inner, notebook)
        if pending is not None:
            answer["pending"] = pending
        return answer

    def _work(self) -> None:
        while (job := self._queue.get()) is not None:
            notebook, text, limit = job
            try:
                self._run(notebook, text, limit)
            finally:
                with self._lock:
                    self._unfinished -= 1
                    self.measured += 1
                    self._idle.notify_all()

    def _run(self, notebook: Notebook, text: str, limit: int) -> None:
        found: dict[str, Any] | None = None
        error: OhError | None = None
        try:
            found = self.inner.recall(notebook, text, limit)
        except OhError as exc:
            error = exc
        except Exception as exc:  # a bug must not stop the measurements
            logger.exception("shadow recall of %s failed unexpectedly", notebook.id)
            error = StorageUnavailable(f"internal error: {type(exc).__name__}")
        try:
            self.measure(notebook, found, error)
        except Exception:
            logger.exception("measuring a shadow recall failed")

    def drain(self, timeout: float) -> bool:
        """Wait until every queued search has been measured; False if ``timeout`` ran out."""
        end = time.monotonic() + timeout
        with self._idle:
            while self._unfinished:
                remaining = end - time.monotonic()
                if remaining <= 0:
                    return False
                self._idle.wait(remaining)
        return True

    def pending(self, notebook: Notebook) -> int | None:
        return _pending(self.inner, notebook)

    def evict(self, notebook_id: str) -> None:
        evict = getattr(self.inner, "evict", None)
        if evict is not None:
            evict(notebook_id)

    def close(self, timeout: float = 10.0) -> bool:
        """Drop what is queued, let the search in progress end (it has its own deadline when
        ``inner`` is a ``DeadlineRecall``) and stop the worker, waiting at most ``timeout``.
        True when the worker has ended."""
        with self._lock:
            self._closed = True
            thread = self._thread
            while True:
                try:
                    job = self._queue.get_nowait()
                except queue.Empty:
                    break
                if job is not None:
                    self._unfinished -= 1
                    self.dropped += 1
            self._idle.notify_all()
            if thread is not None and thread.is_alive():
                with contextlib.suppress(queue.Full):
                    self._queue.put_nowait(None)
        if thread is None:
            return True
        thread.join(timeout)
        return not thread.is_alive()


# -- catch-up ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CatchUpPass:
    """What one catch-up pass did: its report (None if it failed), why it failed (a
    ``failure_reason``), how many notebooks' texts were refused, and what is still pending
    (None if that could not be counted)."""

    report: CatchUpReport | None
    failure: str | None
    message: str | None
    refused: int
    pending: int | None


class CatchUpWorker:
    """Embeds pending notes outside every write (docs/recall.md): ``run_pass`` once, or every
    ``every`` seconds in a thread with ``start``.

    While passes fail, one line is logged when the failure starts, one every ``summary_every``
    seconds while it lasts, and one when a pass succeeds again. ``on_pass`` hears of every
    pass (for metrics). ``monotonic`` measures the bursts; tests inject it.
    """

    def __init__(
        self,
        recall: Recall,
        *,
        every: float = 1.0,
        summary_every: float = 300.0,
        on_pass: Callable[[CatchUpPass], None] | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.recall = recall
        self.every = _seconds(every, "the catch-up interval")
        self.summary_every = _seconds(summary_every, "the summary interval")
        self.on_pass = on_pass
        self.monotonic = monotonic
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._burst_started: float | None = None
        self._last_logged = 0.0
        self._failed_passes = 0

    @property
    def failing(self) -> bool:
        return self._burst_started is not None

    def run_pass(self) -> CatchUpPass:
        """One pass over every open notebook. Never raises: a failure is logged and reported."""
        report: CatchUpReport | None = None
        failure: str | None = None
        message: str | None = None
        unexpected = False
        try:
            report = self.recall.catch_up_all()
        except OhError as exc:
            failure, message = failure_reason(exc) or "error", exc.message
        except Exception as exc:  # a bug: shown with its traceback, once per burst
            failure, message, unexpected = "error", f"{type(exc).__name__}: {exc}", True
        refused = report.failed if report is not None else 0
        if report is not None and not refused:
            pending: int | None = report.pending
        else:
            # The report does not count notebooks the pass did not reach, or refused.
            try:
                pending = self.recall.pending_total()
            except Exception:
                pending = None
        self._log(failure, message, unexpected, pending)
        done = CatchUpPass(report, failure, message, refused, pending)
        if self.on_pass is not None:
            try:
                self.on_pass(done)
            except Exception:
                logger.exception("reporting a catch-up pass failed")
        return done

    def _log(
        self, failure: str | None, message: str | None, unexpected: bool, pending: Any
    ) -> None:
        now = self.monotonic()
        if failure is None:
            if self._burst_started is not None:
                # At the level of the line that said it failed, so whoever saw one sees both.
                logger.warning(
                    "recall catch-up recovered after %d failed passes in %.0f s",
                    self._failed_passes,
                    now - self._burst_started,
                )
                self._burst_started = None
                self._failed_passes = 0
            return
        self._failed_passes += 1
        if self._burst_started is None:
            self._burst_started = self._last_logged = now
            logger.warning(
                "recall catch-up failed: %s; new notes wait for their vectors (%s pending),"
                " retrying every %g s; logged again when it recovers",
                message,
                "?" if pending is None else pending,
                self.every,
                exc_info=unexpected,
            )
        elif now - self._last_logged >= self.summary_every:
            self._last_logged = now
            logger.warning(
                "recall catch-up still failing after %d passes in %.0f s: %s (%s pending)",
                self._failed_passes,
                now - self._burst_started,
                message,
                "?" if pending is None else pending,
            )

    def start(self, every: float | None = None) -> None:
        """Run a pass every ``every`` seconds (default: as constructed) in a daemon thread
        until ``stop``."""
        if every is not None:
            self.every = _seconds(every, "the catch-up interval")
        if self._thread is not None:
            return
        self._stop.clear()

        def loop() -> None:
            while not self._stop.is_set():
                self.run_pass()
                self._stop.wait(self.every)

        self._thread = threading.Thread(target=loop, name="oh-recall-catch-up", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> bool:
        """End the loop after the pass in progress, waiting for it at most ``timeout``. True
        when the loop has ended (False: a pass is still waiting for the embedder)."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is None:
            return True
        thread.join(timeout)
        return not thread.is_alive()
