"""The tool service: the state every tool shares, and the one dispatch of a call.

Each tool is declared once in its own module (``oh.tools.remember`` and the others, listed in
``oh.tools.registry``); this class holds what they run over (the memory store, the knowledge
source, the token signer, the views, the caches of kept answers and profile schemas) and runs a
call: ``Tools.call`` parses the arguments once, with the tool's own parser (every transport hands
it what the agent sent), hands the typed value to the tool, and turns every error into the
public error body. Every call names the notebook and the caller (the host has authenticated the
agent credential); the host supplies author and time, no tool accepts them, and unknown
arguments are rejected.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

from oh.core.answers import Answer, answer_id
from oh.core.changes import Change, RememberResult, Remove
from oh.core.clock import Clock, from_utc_text, system_clock, utc_text
from oh.core.decision import Call
from oh.core.notebook import Notebook, check_writable
from oh.errors import (
    Bug,
    InvalidArgument,
    NotFound,
    OhError,
    TokenExpired,
    public_error,
)
from oh.profiles import Profiles, Schema
from oh.services.query import TokenSigner, ask
from oh.services.view import Views
from oh.storage.base import KnowledgeSource, MemoryStore
from oh.tools import bootstrap
from oh.tools.registry import TOOLS
from oh.tools.remember import Remember
from oh.tools.spec import Caller, RecallService, Tool

__all__ = ["Tools"]

logger = logging.getLogger("oh.tools")


def _declared(tool: str) -> Tool[Any]:
    """The tool named ``tool`` (``oh.tools.TOOLS``); ``not_found`` listing them otherwise."""
    declared = TOOLS.get(tool)
    if declared is None:
        raise NotFound(f"no tool {tool!r}; the tools are {', '.join(TOOLS)}")
    return declared


def _answer(result: RememberResult | Exception) -> dict[str, Any] | Exception:
    return result if isinstance(result, Exception) else result.to_json()


class Tools:
    """The tool surface over one memory store and one knowledge source."""

    def __init__(
        self,
        memory: MemoryStore,
        knowledge: KnowledgeSource | None,
        secret: bytes,
        *,
        clock: Clock = system_clock,
        token_ttl: timedelta = timedelta(minutes=10),
        recall: RecallService | None = None,
        profiles: Profiles | None = None,
        shadow: bool = True,
        on_recall_shadow: Callable[[Caller, dict[str, Any]], None] | None = None,
    ) -> None:
        self.memory = memory
        self.knowledge = knowledge
        self.signer = TokenSigner(secret, token_ttl)
        self.clock = clock
        self.recall_service = recall
        self.shadow = shadow
        self.on_recall_shadow = on_recall_shadow
        self.views = Views(memory, knowledge)
        self.profiles = profiles
        # The kinds in force at a revision never change: one schema per (owner, revision).
        self._schemas: dict[tuple[str, int], Schema] = {}
        # Answers are immutable once computed; this process remembers the ones it kept.
        self._answers: dict[str, Answer] = {}
        # notebook id -> (owner, pinned revision), for notebooks seen open (``profiled``).
        self._pins: dict[str, tuple[str, int | None]] = {}

    # -- dispatch -------------------------------------------------------------------------

    def call(self, caller: Caller, tool: str, arguments: Any) -> dict[str, Any]:
        """Run one tool; every failure comes back as ``{"error": {"code", "message"}}``.

        The library's catch-all: a bug must not become a crash in the agent's loop, so it is
        logged for the operator and answered as ``storage_unavailable`` (``oh.errors.Bug``).
        ``Host.call_tool``, which HTTP and MCP use, has its own, which also counts it.
        """
        try:
            return self.run(caller, tool, arguments)
        except Exception as exc:
            error = public_error(exc)
            if isinstance(error, Bug):
                logger.exception("tool %s failed unexpectedly", tool)
            return error.to_json()

    def run(self, caller: Caller, tool: str, arguments: Any) -> dict[str, Any]:
        """Run one tool and return its result; a failure raises (an ``OhError`` unless a bug)."""
        try:
            if tool == "bootstrap":
                return bootstrap.run(self, caller)
            declared = _declared(tool)
            return declared.run(self, caller, declared.parse(arguments))
        except (RecursionError, MemoryError) as exc:
            raise InvalidArgument(f"arguments too large or deep: {type(exc).__name__}") from None

    @staticmethod
    def parse(tool: str, arguments: Any) -> Any:
        """A tool's arguments read by its parser and checked against its published schema."""
        declared = _declared(tool)
        try:
            return declared.parse(arguments)
        except (RecursionError, MemoryError) as exc:
            raise InvalidArgument(f"arguments too large or deep: {type(exc).__name__}") from None

    def open_notebook(self, caller: Caller) -> Notebook:
        """The caller's notebook, refused unless it is open; an advisory check for the write
        tools (their transaction decides) and the check for the ones that only read."""
        notebook = caller.notebook or self.memory.notebook(caller.notebook_id)
        check_writable(notebook.id, notebook.state, notebook.forgets_at, self.clock())
        return notebook

    # -- remember -------------------------------------------------------------------------

    def remember_all(
        self, calls: Sequence[tuple[Caller, Remember]]
    ) -> list[dict[str, Any] | Exception]:
        """Several ``remember`` calls at once (``MemoryStore.remember_all``: they may share one
        flush), each answered exactly as ``remember`` answers it alone: its result, or the
        error it raised."""
        prepared: list[Call] = []
        answers: list[dict[str, Any] | Exception | None] = []
        for caller, arguments in calls:
            try:
                prepared.append(
                    Call.prepare(
                        caller.notebook_id,
                        based_on=arguments.based_on,
                        request_id=arguments.request_id,
                        changes=self.profiled(caller, arguments.changes),
                        author=caller.author,
                        now=self.clock(),
                    )
                )
                answers.append(None)
            except Exception as exc:
                answers.append(exc)
        results = iter(self.memory.remember_all(prepared))
        return [_answer(next(results)) if answer is None else answer for answer in answers]

    def profiled(self, caller: Caller, changes: tuple[Change, ...]) -> tuple[Change, ...]:
        """``changes`` with the ``fields`` of profile kinds checked (``_checked``).

        A write reads no notebook row for this: whether the notebook is open is decided by the
        write itself, under its lock, and the owner and pinned revision of an open notebook
        never change, so they are kept from the first call that saw it open. When the check
        refuses a change, the notebook is read after all: a notebook that is no longer open
        answers that first, as it does for every call."""
        if self.profiles is None:
            return changes
        pin = self._pins.get(caller.notebook_id)
        if pin is None:
            notebook = self.open_notebook(caller)
            pin = (notebook.owner, notebook.pinned_revision)
            if len(self._pins) >= 4096:
                self._pins.clear()
            self._pins[caller.notebook_id] = pin
            return self._checked(pin, changes)
        try:
            return self._checked(pin, changes)
        except OhError:
            self.open_notebook(caller)
            raise

    def _checked(
        self, pin: tuple[str, int | None], changes: tuple[Change, ...]
    ) -> tuple[Change, ...]:
        """Validate and canonicalize ``fields`` of kinds that belong to a profile installed at
        the notebook's pinned revision (``pin``: its owner and revision; docs/packs.md), before
        the write is fingerprinted."""
        if self.profiles is None or pin[1] is None:
            return changes
        key = (pin[0], pin[1])
        schema = self._schemas.get(key)
        if schema is None:
            schema = self.profiles.schema(*key)
            if len(self._schemas) > 256:
                self._schemas.clear()
            self._schemas[key] = schema
        if not schema.kinds:
            return changes
        return tuple(
            change if isinstance(change, Remove) else type(change)(schema.check(change.record))
            for change in changes
        )

    # -- query and explain ----------------------------------------------------------------

    def answer(
        self,
        caller: Caller,
        notebook: Notebook,
        question: str,
        params: dict[str, Any],
        now: datetime,
    ) -> Answer:
        """Compute (or reuse) the answer at the notebook's current version and keep it.

        The answer id is a digest of everything the answer depends on, so asking the same
        question again before memory moves on reuses the kept answer instead of writing it.
        """
        view = self.views.of(notebook)
        identity = answer_id(
            notebook.id, view.notebook.version, view.revision, question, params, caller.principal
        )
        expires = now + self.signer.ttl
        kept = self._answers.get(identity)
        if kept is not None and from_utc_text(kept.expires_at) - now > self.signer.ttl / 2:
            return kept
        log = self.memory.log(notebook.id) if question == "changes_since" else ()
        rows = tuple(ask(view, question, params, log))
        computed = Answer(
            answer_id=identity,
            notebook_id=notebook.id,
            caller=caller.principal,
            question=question,
            params=params,
            version=view.notebook.version,
            revision=view.revision,
            created_at=utc_text(now),
            expires_at=utc_text(expires),
            rows=rows,
            total=len(rows),
        )
        self.memory.save_answer(computed, now)
        if len(self._answers) >= 256:
            self._answers.pop(next(iter(self._answers)))
        self._answers[identity] = computed
        return computed

    def kept_answer(self, notebook_id: str, answer_id: str, offset: int, limit: int) -> Answer:
        """A kept answer's page, from this process or the store; ``token_expired`` if gone."""
        kept = self._answers.get(answer_id)
        if kept is not None and kept.notebook_id == notebook_id:
            return kept
        answer = self.memory.answer(notebook_id, answer_id, offset, limit)
        if answer is None:
            raise TokenExpired("that answer has expired; ask the question again")
        return answer
