"""Group commit (docs/design.md, "The embedded backend"): calls that arrive while a flush is in
progress share the next one.

A strategy a store may use for its writes, apart from what a write means: the store gives it a
way to write one call alone and a way to write a group of calls in one transaction; it decides
who flushes and when. A call with nobody flushing flushes itself at once (a lone writer waits
for nothing more than before). Calls arriving meanwhile queue; when the flush ends, the first of
them leads the next flush, which takes every queued call (at most ``limit``) into one
transaction and one fsync, and acknowledges them all only after the commit returned. So no call
waits longer than the flush in progress plus its own group's, and an acknowledged call is
durable exactly as one alone.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

__all__ = ["GROUP_LIMIT", "GroupCommit", "Pace", "Waiter"]

GROUP_LIMIT = 64  # calls in one group flush at most
MAX_COMPANY = 0.001  # seconds a flush waits for one more call, at most

C = TypeVar("C")
R = TypeVar("R")


class Pace:
    """What the last flush teaches the next: how many calls it held and how long it took.

    After a flush of several, the callers it answered are sending their next calls: the next
    flush may wait for as many (``company``: half the last flush's time, at most 1 ms) rather
    than write the first alone and the rest one flush later. A lone writer's last flush held
    one call, so it never waits. Shared by the store's group commit (threads) and the HTTP
    server's batches of remember calls (``oh.transports.http``, on its event loop)."""

    __slots__ = ("group", "limit", "seconds")

    def __init__(self, limit: int = GROUP_LIMIT) -> None:
        self.limit = limit  # calls in one flush at most
        self.group = 1  # how many calls the last flush held
        self.seconds = 0.0  # how long it took

    def company(self) -> float:
        """How long a flush may wait for one more call."""
        return min(self.seconds / 2, MAX_COMPANY)

    def worth_waiting(self, have: int) -> bool:
        """Whether a flush of ``have`` calls should wait for company: the last held more."""
        return have < self.group

    def record(self, group: int, seconds: float) -> None:
        self.group, self.seconds = group, seconds


class Waiter(Generic[C, R]):
    """A call queued for a flush, and what it was answered."""

    __slots__ = ("call", "done", "error", "gather", "lead", "result")

    def __init__(self, call: C, *, gather: bool = True) -> None:
        self.call = call
        self.gather = gather  # may a flush this call leads wait for more calls (``more``)?
        self.done = threading.Lock()
        self.done.acquire()  # held until the call is answered, or made to lead the next flush
        self.lead = False
        self.result: R | None = None
        self.error: BaseException | None = None

    @property
    def answered(self) -> bool:
        return self.result is not None or self.error is not None

    def outcome(self) -> R:
        if self.error is not None:
            raise self.error
        assert self.result is not None
        return self.result

    def answer(self) -> R | Exception:
        """The result, or the error (an ``Exception``: anything else went up the stack)."""
        if isinstance(self.error, Exception):
            return self.error
        return self.outcome()


class GroupCommit(Generic[C, R]):
    """Who flushes which calls, over a store's two ways to write.

    ``alone(call)`` writes one call in a transaction of its own and returns its result.
    ``together(group, gather)`` writes the calls of ``group`` in one transaction, setting each
    waiter's ``result`` or ``error``; between two calls it may take the calls queued meanwhile
    with ``more(group, deadline)``, waiting until ``deadline`` for one when ``gather`` allows
    (``company``). It sets every waiter's error if the transaction fails as a whole.
    """

    def __init__(
        self,
        alone: Callable[[C], R],
        together: Callable[[list[Waiter[C, R]], bool], None],
        *,
        limit: int = GROUP_LIMIT,
    ) -> None:
        self.alone = alone
        self.together = together
        # ``_queue`` guards the fields below it and is held for a few instructions at a time.
        self._queue = threading.Condition(threading.Lock())
        self._waiting: list[Waiter[C, R]] = []  # calls for the next flush, in arrival order
        self._leading = False  # whether a thread is flushing (or about to flush) calls
        self._pace = Pace(limit)
        self._gathering = 0  # 1 while a flush waits for one more call (``more``)

    def one(self, call: C) -> R:
        """``call``'s result, written alone or with the calls of other threads."""
        waiter: Waiter[C, R] = Waiter(call)
        self._run([waiter])
        return waiter.outcome()

    def all(self, calls: Sequence[C]) -> list[R | Exception]:
        """Several calls of one thread queued at once, so they share flushes as concurrent
        callers' calls do, each answered on its own: its result or its error."""
        waiters: list[Waiter[C, R]] = [Waiter(call, gather=False) for call in calls]
        if waiters:
            self._run(waiters)
        return [waiter.answer() for waiter in waiters]

    def company(self, gather: bool) -> float:
        """How long a flush may wait for one more call: half the last flush's time, at most
        1 ms; nothing for a batch, whose caller gathered it already."""
        return self._pace.company() if gather else 0.0

    def _run(self, waiters: list[Waiter[C, R]]) -> None:
        """Queue ``waiters`` and return once each is answered: by this thread's flush if nobody
        was flushing (or when one of them is made to lead the next), else by another's."""
        with self._queue:
            self._waiting += waiters
            follow = self._leading
            self._leading = True
            if self._gathering and len(self._waiting) >= self._gathering:
                self._queue.notify()
        if not follow:
            self._lead(waiters[0])
        for waiter in waiters:
            while not waiter.answered:
                try:
                    waiter.done.acquire()  # released when it is answered, or is to lead
                except BaseException:  # interrupted while queued: leave no one stranded
                    with self._queue:
                        for each in waiters:
                            if each in self._waiting:
                                self._waiting.remove(each)
                                if each.lead:
                                    self._pass_lead()
                    raise
                if waiter.lead and not waiter.answered:
                    waiter.lead = False
                    self._lead(waiter)

    def _lead(self, own: Waiter[C, R]) -> None:
        """Flush every queued call (``own`` among them), then let the next queued one lead."""
        group: list[Waiter[C, R]] = []
        started = 0.0
        try:
            with self._queue:  # ``own`` is first: nobody was queued, or it was made to lead
                group = self._waiting[: self._pace.limit]
                del self._waiting[: self._pace.limit]
            started = time.perf_counter()
            if len(group) == 1 and self._pace.group == 1:
                try:  # a lone writer, as without group commit
                    own.result = self.alone(own.call)
                except Exception as exc:
                    own.error = exc
            else:
                self.together(group, own.gather)
        finally:
            with self._queue:
                if started:
                    self._pace.record(len(group), time.perf_counter() - started)
                self._pass_lead()
            for each in group:
                each.done.release()

    def more(self, group: list[Waiter[C, R]], deadline: float) -> bool:
        """Between two calls of a group being written: take the calls queued meanwhile into
        ``group`` (at most ``limit`` in all). With none queued and fewer in the group than the
        last flush held, writers are concurrent but their next calls are not queued yet: wait
        for one until ``deadline`` (``company``), rather than commit now and make them wait for
        another fsync. A lone writer's last flush held one call, so it never waits;
        PostgreSQL's ``commit_delay`` with ``commit_siblings`` makes the same bet. Returns
        whether ``group`` grew."""
        with self._queue:
            if not self._waiting and self._pace.worth_waiting(len(group)):
                left = deadline - time.perf_counter()
                if left > 0:
                    self._gathering = 1
                    try:
                        self._queue.wait(left)
                    finally:
                        self._gathering = 0
            room = self._pace.limit - len(group)
            if not self._waiting or room <= 0:
                return False
            group += self._waiting[:room]
            del self._waiting[:room]
            return True

    def _pass_lead(self) -> None:
        """With ``_queue`` held: the first queued call leads the next flush, or nobody flushes."""
        if self._waiting:
            following = self._waiting[0]
            following.lead = True
            following.done.release()
        else:
            self._leading = False
