"""The agent's tools (docs/tools.md): remember, query, read, explain, recall, and the bootstrap.

Defined once, here; HTTP and MCP only adapt them. Every call names the notebook and the caller
(the host has authenticated the agent credential); the host supplies author and time, no tool
accepts them, and unknown arguments are rejected. ``Tools.call`` parses the arguments once, with
the one parser every transport shares (``oh.schemas.parse_arguments``), hands the typed value to
the tool, and turns every error into the public error body.
"""

from __future__ import annotations

import heapq
import itertools
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from oh.core.answers import Answer, answer_id
from oh.core.canonical import canonical_text
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
from oh.query import TokenSigner, ask, describe
from oh.schemas import Explain, Query, Read, Recall, Remember, parse_arguments
from oh.storage.base import KnowledgeSource, MemoryStore
from oh.view import Views

__all__ = [
    "BOOTSTRAP_CHARS",
    "BOOTSTRAP_ROWS",
    "TOOL_NAMES",
    "Caller",
    "RecallService",
    "Tools",
]

logger = logging.getLogger("oh.tools")

BOOTSTRAP_ROWS = 24
BOOTSTRAP_CHARS = 4000
TOOL_NAMES = ("remember", "query", "read", "explain", "recall")


@dataclass(frozen=True, slots=True)
class Caller:
    """Who is calling which notebook, as the host authenticated it."""

    notebook_id: str
    principal: str  # the agent credential's identity; tokens are bound to it
    author: str  # stamped on every write, e.g. ``agent:<run>``
    # The notebook as the host read it to authenticate this very call, so the tool need not
    # read it again; None makes the tool read it. A caller therefore lives for one call.
    notebook: Notebook | None = None


class RecallService(Protocol):
    def recall(self, notebook: Notebook, text: str, limit: int) -> dict[str, Any]:
        """``{"rows": [{"name", "digest", "origin", "score"}], "pending": int}``."""
        ...


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
        # notebook id -> (owner, pinned revision), for notebooks seen open (``_profiled``).
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
                return self.bootstrap(caller)
            match self.parse(tool, arguments):
                case Remember() as parsed:
                    return self.remember(caller, parsed)
                case Query() as parsed:
                    return self.query(caller, parsed)
                case Read() as parsed:
                    return self.read(caller, parsed)
                case Explain() as parsed:
                    return self.explain(caller, parsed)
                case Recall() as parsed:
                    return self.recall(caller, parsed)
        except (RecursionError, MemoryError) as exc:
            raise InvalidArgument(f"arguments too large or deep: {type(exc).__name__}") from None
        raise AssertionError(f"no parser answers {tool}")  # pragma: no cover

    @staticmethod
    def parse(tool: str, arguments: Any) -> Remember | Query | Read | Explain | Recall:
        """A tool's arguments read by its parser and checked against its published schema."""
        if tool not in TOOL_NAMES:
            raise NotFound(f"no tool {tool!r}; the tools are {', '.join(TOOL_NAMES)}")
        try:
            return parse_arguments(tool, arguments)
        except (RecursionError, MemoryError) as exc:
            raise InvalidArgument(f"arguments too large or deep: {type(exc).__name__}") from None

    def _open_notebook(self, caller: Caller) -> Notebook:
        """The caller's notebook, refused unless it is open; an advisory check for the write
        tools (their transaction decides) and the check for the ones that only read."""
        notebook = caller.notebook or self.memory.notebook(caller.notebook_id)
        check_writable(notebook.id, notebook.state, notebook.forgets_at, self.clock())
        return notebook

    # -- remember -------------------------------------------------------------------------

    def remember(self, caller: Caller, arguments: Remember) -> dict[str, Any]:
        result = self.memory.remember(
            caller.notebook_id,
            based_on=arguments.based_on,
            request_id=arguments.request_id,
            changes=self._profiled(caller, arguments.changes),
            author=caller.author,
            now=self.clock(),
        )
        return result.to_json()

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
                        changes=self._profiled(caller, arguments.changes),
                        author=caller.author,
                        now=self.clock(),
                    )
                )
                answers.append(None)
            except Exception as exc:
                answers.append(exc)
        results = iter(self.memory.remember_all(prepared))
        return [_answer(next(results)) if answer is None else answer for answer in answers]

    def _profiled(self, caller: Caller, changes: tuple[Change, ...]) -> tuple[Change, ...]:
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
            notebook = self._open_notebook(caller)
            pin = (notebook.owner, notebook.pinned_revision)
            if len(self._pins) >= 4096:
                self._pins.clear()
            self._pins[caller.notebook_id] = pin
            return self._checked(pin, changes)
        try:
            return self._checked(pin, changes)
        except OhError:
            self._open_notebook(caller)
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

    def query(self, caller: Caller, arguments: Query) -> dict[str, Any]:
        question = arguments.question
        notebook = self._open_notebook(caller)
        limit = arguments.limit
        now = self.clock()
        if arguments.cursor is not None:
            claims = self.signer.verify(
                arguments.cursor,
                notebook_id=notebook.id,
                caller=caller.principal,
                now=now,
                kind="cursor",
            )
            offset = claims["o"]
            page = self._answer(notebook.id, claims["a"], offset, limit)
            params = arguments.params
            if page.question != question or any(page.params.get(k) != v for k, v in params.items()):
                raise InvalidArgument("a cursor continues the question it came from, unchanged")
        else:  # the parser saw to it that the question has exactly its parameters
            params = arguments.params
            page = self._ask(caller, notebook, question, params, now)
            offset = 0
        rows = page.rows[offset - page.offset : offset - page.offset + limit]
        claims = {
            "k": "explain",
            "a": page.answer_id,
            "n": notebook.id,
            "c": caller.principal,
            "e": _epoch(page.expires_at),
        }
        next_offset = offset + len(rows)
        next_cursor = None
        if next_offset < page.total:
            next_cursor = self.signer.sign({**claims, "k": "cursor", "o": next_offset})
        return {
            "answer_id": page.answer_id,
            "question": page.question,
            "version": page.version,
            "revision": page.revision,
            "token": self.signer.sign(claims),
            "token_expires_at": page.expires_at,
            "rows": [row.to_json(offset + i) for i, row in enumerate(rows)],
            "next_cursor": next_cursor,
        }

    def _ask(
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
        answer = Answer(
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
        self.memory.save_answer(answer, now)
        if len(self._answers) >= 256:
            self._answers.pop(next(iter(self._answers)))
        self._answers[identity] = answer
        return answer

    def _answer(self, notebook_id: str, answer_id: str, offset: int, limit: int) -> Answer:
        kept = self._answers.get(answer_id)
        if kept is not None and kept.notebook_id == notebook_id:
            return kept
        answer = self.memory.answer(notebook_id, answer_id, offset, limit)
        if answer is None:
            raise TokenExpired("that answer has expired; ask the question again")
        return answer

    def explain(self, caller: Caller, arguments: Explain) -> dict[str, Any]:
        notebook = self._open_notebook(caller)
        claims = self.signer.verify(
            arguments.token,
            notebook_id=notebook.id,
            caller=caller.principal,
            now=self.clock(),
            kind="explain",
        )
        index = arguments.row
        answer = self._answer(notebook.id, claims["a"], index, 1)
        if index >= answer.total:
            raise InvalidArgument(f"the answer has {answer.total} rows; no row {index}")
        row = answer.rows[index - answer.offset]
        return {
            "row": index,
            "name": row.name,
            "origin": row.origin,
            "question": answer.question,
            "reason": describe(
                answer.question, answer.params, row, answer.version, answer.revision
            ),
            "path": list(row.path) or [row.name],
            "version": answer.version,
            "revision": answer.revision,
        }

    # -- read -----------------------------------------------------------------------------

    def read(self, caller: Caller, arguments: Read) -> dict[str, Any]:
        name = arguments.name
        origin = arguments.origin
        notebook, stored = self.memory.read_record(caller.notebook_id, name)
        check_writable(notebook.id, notebook.state, notebook.forgets_at, self.clock())
        body: dict[str, Any] | None = None
        reviewed_names = self.views.reviewed(notebook.owner, notebook.pinned_revision)
        if origin != "reviewed" and stored is not None:
            body = {
                "origin": "note",
                **stored.verified_content(),
                "digest": stored.digest,
                "author": stored.author,
                "written_at": stored.written_at,
                "version": stored.version,
            }
            if origin is None and name in reviewed_names:
                body["also_reviewed"] = True
        if body is None and origin != "note" and name in reviewed_names:
            assert self.knowledge is not None and notebook.pinned_revision is not None
            reviewed = self.knowledge.record_at(notebook.owner, name, notebook.pinned_revision)
            if reviewed is not None:
                body = reviewed.to_json()
        if body is None:
            where = {"note": " as a note", "reviewed": " as reviewed knowledge"}.get(
                origin or "", ""
            )
            raise NotFound(f"{name} is not in view{where}", name=name)
        if arguments.digest is not None:
            body["changed"] = arguments.digest != body["digest"]
        return body

    # -- bootstrap and recall -------------------------------------------------------------

    def bootstrap(self, caller: Caller) -> dict[str, Any]:
        """``current_notes`` once, on the agent's behalf: at most 24 rows or 4,000 characters
        of the rows' RFC 8785 form, names and digests only."""
        notebook = self._open_notebook(caller)
        view = self.views.of(notebook)
        # current_notes' order (name, then note before reviewed) over two sorted lists.
        ordered = heapq.merge(
            (view.notes[name] for name in sorted(view.notes)),
            (view.reviewed[name] for name in sorted(view.reviewed)),
            key=lambda e: (e.name, e.origin != "note"),
        )
        total = len(view.notes) + len(view.reviewed)
        rows: list[dict[str, Any]] = []
        size = 2  # "[]"
        for entry in itertools.islice(ordered, BOOTSTRAP_ROWS):
            item = {
                "origin": entry.origin,
                "kind": entry.kind,
                "name": entry.name,
                "digest": entry.digest,
            }
            grown = size + len(canonical_text(item)) + (1 if rows else 0)
            if grown > BOOTSTRAP_CHARS:
                break
            rows.append(item)
            size = grown
        return {
            "rows": rows,
            "total": total,
            "truncated": len(rows) < total,
            "version": view.notebook.version,
            "revision": view.revision,
        }

    def recall(self, caller: Caller, arguments: Recall) -> dict[str, Any]:
        notebook = self._open_notebook(caller)
        if self.recall_service is None:
            raise NotFound("recall is not enabled on this host")
        found = self.recall_service.recall(notebook, arguments.text, arguments.limit)
        if self.shadow:
            # Measured, never shown: a similar note must not enter the conversation unread.
            if self.on_recall_shadow is not None:
                self.on_recall_shadow(caller, found)
            return {"rows": [], "shadow": True, "pending": found.get("pending", 0)}
        return {"rows": found["rows"], "shadow": False, "pending": found.get("pending", 0)}


def _epoch(text: str) -> int:
    return int(from_utc_text(text).timestamp())
