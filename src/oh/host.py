"""The reference host (docs/http.md): principals, credentials, documents, access checks, stamping.

The host owns users, documents and runs; Oh owns memory. Owners authenticate with owner tokens
(``oh token create``; only their sha256 is stored). Agent credentials are issued when a notebook
opens: HMAC-signed, naming exactly one notebook, so they keep identifying it after a forget or
purge (every call then answers ``purged``). On every tool call the host rechecks that the
notebook's owner still owns its document, stamps the author (``agent:<run>``) and the time, and
emits a memory card when the agent remembered or recalled something.

HTTP and MCP are thin adapters over ``Host``; ``oh.config.open_host`` opens one over a set of
locations, with the backends they name.
"""

from __future__ import annotations

import base64
import json
import logging
import secrets
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from oh.core.canonical import input_value
from oh.core.changes import LogEntry, Refused, parse_changes
from oh.core.clock import Clock, system_clock, utc_text
from oh.core.identifiers import check_identifier
from oh.core.notebook import Notebook
from oh.core.records import Record
from oh.core.reviewed import Proposal, ReviewedRecord, Revision
from oh.errors import (
    Bug,
    Forbidden,
    InvalidArgument,
    NotFound,
    OhError,
    StorageUnavailable,
    public_error,
)
from oh.profiles import Profiles
from oh.services.access import NO_DOCUMENT, Credentials, Documents, bearer_token
from oh.services.knowledge import Knowledge
from oh.services.notebooks import DEFAULT_LIFETIME, Notebooks
from oh.storage.base import HostRegistry, KnowledgeStore, MemoryStore
from oh.tools import TOOLS, Caller, RecallService, Tools
from oh.tools.remember import Remember

if TYPE_CHECKING:  # oh.recall brings numpy; a host without recall never imports it
    from oh.recall.background import CatchUpPass, CatchUpWorker, DeadlineRecall, ShadowRecall

__all__ = ["Host", "HostSettings", "MemoryCard", "Metrics", "bearer_token"]

logger = logging.getLogger("oh.host")

DEFAULT_LIST_LIMIT = 50
MAX_LIST_LIMIT = 200
NOTEBOOK_STATES = ("opening", "open", "expired", "purged", "empty")
_MAX_CURSOR = 400
_FORGET_NOTE_ATTEMPTS = 5  # an owner's removal decided again after an agent's concurrent write


@dataclass(frozen=True, slots=True)
class HostSettings:
    lifetime: timedelta = DEFAULT_LIFETIME
    token_ttl: timedelta = timedelta(minutes=10)
    # Working memory per kind of run; kinds not listed use ``memory_default``.
    memory_by_run_kind: dict[str, bool] = field(
        default_factory=lambda: {"chat": True, "staged_research": False}
    )
    memory_default: bool = True
    recall_shadow: bool = True
    # The longest one recall may take; past it the agent gets ``storage_unavailable`` at once.
    recall_deadline: timedelta = timedelta(seconds=2)
    # Shadow recalls waiting to be measured; more are dropped (and counted), never waited for.
    recall_shadow_queue: int = 64
    public_url: str = ""  # prefix for panel links in memory cards, e.g. http://127.0.0.1:8765
    # How a user of this host gets an owner token, as the panel and error messages show it; `oh
    # serve` puts the command that works as written for its own databases here.
    owner_token_command: str = "oh token create --owner NAME"  # noqa: S105 - a command


@dataclass(frozen=True, slots=True)
class MemoryCard:
    """A small event a chat UI can show: the agent remembered or recalled something."""

    kind: str  # remembered | recalled
    notebook: str
    names: tuple[str, ...]
    panel_url: str
    anchors: dict[str, str]

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "notebook": self.notebook,
            "names": list(self.names),
            "panel_url": self.panel_url,
            "anchors": self.anchors,
        }


class Metrics:
    """Counters and latency sums for ``/metrics`` (Prometheus text format)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.calls: dict[tuple[str, str], int] = {}
        self.seconds: dict[str, float] = {}
        self.events: dict[str, int] = {}
        self.recall_enabled = False
        self.pending_embeddings: int | None = None
        self.embedding_failures: dict[tuple[str, str], int] = {}  # (stage, reason) -> count

    def tool(self, tool: str, outcome: str, seconds: float) -> None:
        with self._lock:
            self.calls[(tool, outcome)] = self.calls.get((tool, outcome), 0) + 1
            self.seconds[tool] = self.seconds.get(tool, 0.0) + seconds

    def count(self, event: str) -> None:
        with self._lock:
            self.events[event] = self.events.get(event, 0) + 1

    def embedding_failure(self, stage: str, reason: str, count: int = 1) -> None:
        with self._lock:
            key = (stage, reason)
            self.embedding_failures[key] = self.embedding_failures.get(key, 0) + count

    def render(self) -> str:
        with self._lock:
            lines = [
                "# HELP oh_tool_calls_total Tool calls by tool and outcome.",
                "# TYPE oh_tool_calls_total counter",
            ]
            for (tool, outcome), count in sorted(self.calls.items()):
                lines.append(f'oh_tool_calls_total{{tool="{tool}",outcome="{outcome}"}} {count}')
            lines += [
                "# HELP oh_tool_call_seconds Time spent in tool calls.",
                "# TYPE oh_tool_call_seconds summary",
            ]
            for tool in sorted(self.seconds):
                count = sum(n for (name, _), n in self.calls.items() if name == tool)
                lines.append(f'oh_tool_call_seconds_sum{{tool="{tool}"}} {self.seconds[tool]:.6f}')
                lines.append(f'oh_tool_call_seconds_count{{tool="{tool}"}} {count}')
            lines += [
                "# HELP oh_events_total Notebooks opened and forgotten, documents removed, and bugs"
                " (unexpected errors outside tool calls, which count them as outcome bug).",
                "# TYPE oh_events_total counter",
            ]
            for event, count in sorted(self.events.items()):
                lines.append(f'oh_events_total{{event="{event}"}} {count}')
            if self.recall_enabled:
                lines += [
                    "# HELP oh_recall_pending_embeddings Records in open notebooks' views that"
                    " have no vector yet, after the last catch-up pass.",
                    "# TYPE oh_recall_pending_embeddings gauge",
                ]
                if self.pending_embeddings is not None:
                    lines.append(f"oh_recall_pending_embeddings {self.pending_embeddings}")
                lines += [
                    "# HELP oh_recall_embedding_failures_total Failed embeddings by stage"
                    " (catch_up, query) and reason.",
                    "# TYPE oh_recall_embedding_failures_total counter",
                ]
                for (stage, reason), count in sorted(self.embedding_failures.items()):
                    lines.append(
                        f'oh_recall_embedding_failures_total{{stage="{stage}",reason="{reason}"}}'
                        f" {count}"
                    )
        return "\n".join(lines) + "\n"


class Host:
    """Everything the transports need, with every access check in one place.

    A facade: the stores, the services over them and the credentials are its own (none is a
    public attribute), and HTTP, MCP and the panel use only its methods, each of which checks
    who is asking. ``clock``, ``settings`` and ``metrics`` are public: they hold no data.
    """

    def __init__(
        self,
        memory: MemoryStore,
        knowledge: KnowledgeStore,
        registry: HostRegistry,
        *,
        clock: Clock = system_clock,
        settings: HostSettings | None = None,
        recall: RecallService | None = None,
    ) -> None:
        self._memory = memory
        self._knowledge = knowledge
        self._registry = registry
        self.clock = clock
        self.settings = settings or HostSettings()
        self.secret = bytes.fromhex(registry.setting("secret", secrets.token_hex(32)))
        self.metrics = Metrics()
        self._credentials = Credentials(
            registry, self.secret, clock, self.settings.owner_token_command
        )
        self._documents = Documents(registry, clock)
        self._notebooks = Notebooks(
            memory, clock=clock, lifetime=self.settings.lifetime, knowledge=knowledge
        )
        self._profiles = Profiles(knowledge, clock=clock)
        self._review = Knowledge(knowledge, memory, clock=clock, profiles=self._profiles)
        # The service as given (catch-up runs on it); the tools get it behind a deadline and,
        # in shadow mode, behind the shadow queue, so no recall ever blocks the agent.
        self._recall = recall
        self.deadline_recall: DeadlineRecall | None = None
        self.shadow_recall: ShadowRecall | None = None
        self.recall_catch_up: CatchUpWorker | None = None
        self._tools = Tools(
            memory,
            knowledge,
            self.secret,
            clock=clock,
            token_ttl=self.settings.token_ttl,
            recall=None if recall is None else self._guarded(recall),
            profiles=self._profiles,
            shadow=self.settings.recall_shadow,
        )
        self._listeners: list[Callable[[MemoryCard], None]] = []

    @property
    def recall_enabled(self) -> bool:
        """Whether the agent is offered ``recall`` (a recall service was given)."""
        return self._tools.recall_service is not None

    def _guarded(self, recall: RecallService) -> RecallService:
        from oh.recall.background import CatchUpWorker, DeadlineRecall, ShadowRecall
        from oh.recall.service import Recall

        self.metrics.recall_enabled = True
        self.deadline_recall = DeadlineRecall(
            recall,
            self.settings.recall_deadline.total_seconds(),
            on_failure=lambda reason: self.metrics.embedding_failure("query", reason),
        )
        guarded: RecallService = self.deadline_recall
        if self.settings.recall_shadow:
            self.shadow_recall = ShadowRecall(
                self.deadline_recall,
                self._measure_shadow_recall,
                queue_size=self.settings.recall_shadow_queue,
                on_drop=lambda: self.metrics.count("recall_shadow_dropped"),
            )
            guarded = self.shadow_recall
        if isinstance(recall, Recall):
            self.recall_catch_up = CatchUpWorker(recall, on_pass=self._observe_catch_up)
        return guarded

    def _observe_catch_up(self, done: CatchUpPass) -> None:
        if done.pending is not None:
            self.metrics.pending_embeddings = done.pending
        if done.failure is not None:
            self.metrics.embedding_failure("catch_up", done.failure)
        if done.refused:
            self.metrics.embedding_failure("catch_up", "refused", done.refused)

    def start_catch_up(self, every: float = 1.0) -> None:
        """Embed pending notes every ``every`` seconds in a background thread (docs/recall.md: never
        inside a write), until ``stop``. Needs a ``Recall`` service."""
        if self.recall_catch_up is None:
            raise InvalidArgument("this host has no recall service to catch up")
        self.recall_catch_up.start(every)

    def stop(self, timeout: float = 10.0) -> bool:
        """Stop the host's background work: the catch-up loop, the shadow measurements (what
        is queued is dropped) and the recall workers. The stores stay open. False if the
        catch-up or the shadow worker is still waiting for the embedder after ``timeout``
        (a recall given up at its deadline never touches a store again; those two may)."""
        stopped = True
        if self.recall_catch_up is not None:
            stopped = self.recall_catch_up.stop(timeout) and stopped
        if self.shadow_recall is not None:
            stopped = self.shadow_recall.close(timeout) and stopped
        if self.deadline_recall is not None:
            self.deadline_recall.close()
        return stopped

    def close(self, close_recall: Callable[[RecallService], None] | None = None) -> None:
        """Close the host's stores, and its recall service with ``close_recall`` when given
        (``oh.config.close_host`` stops the background work first, and passes it only if that
        work has stopped: a thread still waiting for the embedder may use the service)."""
        self._memory.close()
        self._knowledge.close()
        self._registry.close()
        if close_recall is not None and self._recall is not None:
            close_recall(self._recall)

    # -- owners and agents -----------------------------------------------------------------

    def create_owner_token(self, owner: str) -> str:
        return self._credentials.create_owner_token(owner)

    def owner(self, token: str | None) -> str:
        """The owner a bearer token authenticates; ``unauthenticated`` otherwise."""
        return self._credentials.owner(token)

    def agent_token(self, notebook_id: str) -> str:
        return self._credentials.agent_token(notebook_id)

    def agent(self, token: str | None) -> str:
        """The notebook an agent credential names; ``unauthenticated`` otherwise."""
        return self._credentials.agent(token)

    def caller(self, token: str | None, notebook_id: str | None = None) -> Caller:
        """Authenticate an agent and recheck its access, as on every tool call."""
        agent_notebook = self.agent(token)
        if notebook_id is not None and notebook_id != agent_notebook:
            raise Forbidden(
                "this agent token belongs to another notebook: use the token oh notebook open"
                " printed for this one"
            )
        notebook = self._memory.notebook(agent_notebook)
        # The owner must still own the document: a removed document closes its notebooks.
        if self._documents.owner_of(notebook.document) != notebook.owner:
            raise Forbidden("the notebook's owner no longer has access to its document")
        return Caller(notebook.id, f"agent:{notebook.id}", f"agent:{notebook.run}", notebook)

    # -- documents ------------------------------------------------------------------------

    def register_document(self, owner: str, document: str) -> bool:
        """Register ``document`` for ``owner``; True if new. ``forbidden`` if another owns it."""
        return self._documents.register(owner, document)

    def list_documents(
        self, owner: str, limit: Any = DEFAULT_LIST_LIMIT, cursor: Any = None
    ) -> dict[str, Any]:
        """The owner's registered documents by name, a page at a time: ``{"documents":
        [{"document", "registered_at"}], "next_cursor"}`` (None on the last page), including
        documents that have no notebook yet. Another owner's documents are never listed."""
        limit = input_value(limit, "limit")
        if type(limit) is not int or not 1 <= limit <= MAX_LIST_LIMIT:
            raise InvalidArgument(f"limit is an integer from 1 to {MAX_LIST_LIMIT}")
        after = None if cursor is None else _document_position(cursor)
        page = self._registry.owner_documents(owner, after=after, limit=limit + 1)
        more = len(page) > limit
        page = page[:limit]
        return {
            "documents": [
                {"document": row.document, "registered_at": row.registered_at} for row in page
            ],
            "next_cursor": _document_cursor(page[-1].document) if more else None,
        }

    def check_document(self, owner: str, document: Any) -> None:
        """``not_found`` unless ``owner`` holds ``document``: another owner's document is not
        found either, so the answer says nothing about whether it exists."""
        check_identifier(document, "document")
        if self._documents.owner_of(document) != owner:
            raise NotFound(NO_DOCUMENT.format(document=document))

    def remove_document(self, owner: str, document: str) -> int:
        """Remove a document and forget all its notebooks; return how many were forgotten."""
        self._documents.remove(owner, document)
        forgotten = 0
        for notebook_id in self._memory.notebook_ids():
            notebook = self._memory.notebook(notebook_id)
            closed = notebook.state in ("purged", "empty")
            if notebook.document == document and notebook.owner == owner and not closed:
                self._memory.forget(notebook_id, self.clock())
                self._tools.views.drop(notebook_id)
                self._evict(notebook_id)
                forgotten += 1
        self.metrics.count("document_removed")
        return forgotten

    # -- notebooks ------------------------------------------------------------------------

    def memory_enabled(self, run_kind: str) -> bool:
        return self.settings.memory_by_run_kind.get(run_kind, self.settings.memory_default)

    def open_notebook(
        self, owner: str, document: str, run: Any, pin: Any = "latest", run_kind: Any = "chat"
    ) -> tuple[Notebook, bool]:
        """Open (or return) the run's notebook; ``(notebook, created)``."""
        self._documents.check_owned(owner, document)
        check_identifier(run, "run")
        check_identifier(run_kind, "run_kind", 64)
        pin = input_value(pin, "pin")  # 1.0 is the revision 1, as over HTTP
        if not self.memory_enabled(run_kind):
            raise Forbidden(f"working memory is off for {run_kind} runs on this host")
        existing = self._memory.find_notebook(owner, document, run)
        notebook = self._notebooks.open(owner, document, run, pin)
        if existing is None:
            self.metrics.count("notebook_opened")
        return notebook, existing is None

    def list_notebooks(
        self,
        owner: str,
        document: Any = None,
        state: Any = None,
        limit: Any = DEFAULT_LIST_LIMIT,
        cursor: Any = None,
    ) -> dict[str, Any]:
        """The owner's notebooks, newest first, a page at a time: ``{"notebooks": [...],
        "next_cursor"}``. Each is the notebook object with its ``document`` and ``run``, its
        state as it stands now (``expired`` once past its forget time). ``document`` and
        ``state`` filter; ``next_cursor`` (None on the last page) continues the same listing.
        Another owner's notebooks are never listed."""
        if document is not None:
            check_identifier(document, "document")
        if state is not None and state not in NOTEBOOK_STATES:
            raise InvalidArgument(f"state is one of {', '.join(NOTEBOOK_STATES)}")
        limit = input_value(limit, "limit")
        if type(limit) is not int or not 1 <= limit <= MAX_LIST_LIMIT:
            raise InvalidArgument(f"limit is an integer from 1 to {MAX_LIST_LIMIT}")
        after = None if cursor is None else _list_position(cursor)
        now = self.clock()
        page = self._memory.owner_notebooks(
            owner, now=utc_text(now), document=document, state=state, after=after, limit=limit + 1
        )
        more = len(page) > limit
        page = page[:limit]
        last = page[-1] if more else None
        return {
            "notebooks": [
                {
                    **replace(n, state=n.state_at(now)).to_json(),
                    "document": n.document,
                    "run": n.run,
                }
                for n in page
            ],
            "next_cursor": None if last is None else _list_cursor(last),
        }

    def notebook_activity(
        self, owner: str, notebook_ids: Sequence[str]
    ) -> dict[str, tuple[int, str | None]]:
        """For each of ``notebook_ids`` that is ``owner``'s: ``(notes, last_written_at)``, how
        many working notes it holds and when it was last written (None: never)."""
        return self._memory.notebook_activity(owner, notebook_ids)

    def notebook(self, owner: str, notebook_id: str) -> Notebook:
        """The notebook as its owner sees it; another owner gets ``not_found``, learning
        nothing about whether it exists."""
        check_identifier(notebook_id, "notebook")
        try:
            return self._notebooks.get(notebook_id, owner)
        except Forbidden:
            raise NotFound(f"no notebook {notebook_id}") from None

    def forget(self, owner: str, notebook_id: str) -> dict[str, Any]:
        self.notebook(owner, notebook_id)
        report = self._notebooks.forget(notebook_id, owner)
        self._tools.views.drop(notebook_id)
        self._evict(notebook_id)
        self.metrics.count("notebook_forgotten")
        return report.to_json()

    def _measure_shadow_recall(
        self, notebook: Notebook, found: dict[str, Any] | None, error: OhError | None
    ) -> None:
        """Shadow recall, in the background: what the agent would have seen is measured and
        logged, never shown."""
        self.metrics.count("recall_shadow")
        if found is None:
            self.metrics.count("recall_shadow_failed")
            logger.debug(
                "shadow recall failed",
                extra={"notebook": notebook.id, "code": getattr(error, "code", None)},
            )
            return
        rows = found.get("rows", [])
        self.metrics.count("recall_shadow_rows" if rows else "recall_shadow_empty")
        logger.info(
            "shadow recall",
            extra={
                "notebook": notebook.id,
                "rows": len(rows),
                "top_score": rows[0]["score"] if rows else None,
            },
        )

    def _evict(self, notebook_id: str) -> None:
        """Drop what the recall service keeps in memory for a forgotten notebook."""
        evict = getattr(self._tools.recall_service, "evict", None)
        if evict is not None:
            evict(notebook_id)

    def records(self, owner: str, notebook_id: str) -> dict[str, Any]:
        """Full records for the panel: the notes and the reviewed knowledge in view."""
        notebook = self.notebook(owner, notebook_id)
        notes = []
        for stored in self._memory.records(notebook_id):
            notes.append(
                {
                    "origin": "note",
                    **stored.verified_content(),
                    "digest": stored.digest,
                    "author": stored.author,
                    "written_at": stored.written_at,
                    "version": stored.version,
                }
            )
        reviewed = []
        if notebook.pinned_revision is not None:
            reviewed = [
                r.to_json()
                for r in self._knowledge.records_at(notebook.owner, notebook.pinned_revision)
            ]
        return {"notes": notes, "reviewed": reviewed}

    def forget_note(self, owner: str, notebook_id: str, name: Any) -> dict[str, Any]:
        """Remove one working note of the owner's notebook, as a logged change the owner
        authors (``owner:<owner>``): the note leaves the current records and the agent's view,
        and its history stays in the log until the notebook is forgotten. ``not_found`` when
        the name is not a current note; ``expired``/``purged`` as for any write. A write the
        agent makes meanwhile is not lost: the removal is decided again on the new version."""
        notebook = self.notebook(owner, notebook_id)
        changes = parse_changes([{"op": "remove", "name": name}])
        request_id = f"owner-forget-{secrets.token_hex(8)}"
        version = notebook.version
        for _ in range(_FORGET_NOTE_ATTEMPTS):
            result = self._memory.remember(
                notebook_id,
                based_on=version,
                request_id=request_id,
                changes=changes,
                author=f"owner:{owner}",
                now=self.clock(),
            )
            if isinstance(result, Refused):
                version = result.current_version  # the agent wrote first: decide again
                continue
            return {"notebook": notebook_id, "version": result.version, "removed": changes[0].name}
        raise StorageUnavailable("the notebook kept changing; try again")

    def notebook_log(self, owner: str, notebook_id: str) -> Iterator[LogEntry]:
        """The notebook's log, oldest entry first, for its owner (the panel's history)."""
        self.notebook(owner, notebook_id)
        return self._memory.log(notebook_id)

    # -- review, for the owner ----------------------------------------------------------------

    def proposals(self, owner: str, state: str | None = None) -> list[Proposal]:
        """The owner's proposals, pending and decided (``state`` picks one)."""
        return self._review.store.proposals(owner, state)

    def proposal(self, owner: str, proposal_id: str) -> Proposal:
        """The owner's proposal; another owner's is ``not_found``, like a missing one."""
        check_identifier(proposal_id, "proposal_id")
        proposal = self._review.store.proposal(proposal_id)
        if proposal.owner != owner:
            raise NotFound(f"no proposal {proposal_id}")
        return proposal

    def history(self, owner: str, name: str) -> list[ReviewedRecord]:
        """Every version of one of the owner's reviewed records, oldest first."""
        return self._review.store.history(owner, name)

    def latest_revision(self, owner: str) -> int:
        """The owner's latest knowledge revision (0 before any reviewed knowledge)."""
        return self._review.store.latest_revision(owner)

    def revisions(self, owner: str) -> list[Revision]:
        """The owner's knowledge revisions, oldest first."""
        return self._review.store.revisions(owner)

    def reviewable(self, owner: str) -> Callable[[Record], Record]:
        """The check review runs on content, as things stand for ``owner`` (its profiles read
        once, so a page can check every note it shows)."""
        return self._review.reviewable(owner)

    # -- tools ----------------------------------------------------------------------------

    def subscribe(self, listener: Callable[[MemoryCard], None]) -> Callable[[], None]:
        """Receive memory cards; returns the function that unsubscribes."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    def call_tool(
        self, token: str | None, tool: str, arguments: Any, notebook_id: str | None = None
    ) -> dict[str, Any]:
        """Authenticate, recheck access, run the tool; errors come back as error bodies."""
        started = self.clock()
        try:
            caller = self.caller(token, notebook_id)
            result = self._tools.run(caller, tool, arguments)
        except Exception as exc:  # the catch-all of HTTP's and MCP's tool calls
            return self._refused(tool, exc, started)
        return self._answered(tool, caller, result, started)

    def remember_all(
        self, calls: Sequence[tuple[str | None, Any, str | None]]
    ) -> list[dict[str, Any]]:
        """``call_tool(token, "remember", arguments, notebook_id)`` for several calls at once,
        each answered exactly as alone (the same bodies, metrics and memory cards); their
        writes may share one flush (``MemoryStore.remember_all``). A transport that has several
        remember calls waiting hands them over together."""
        started = self.clock()
        bodies: list[dict[str, Any] | None] = [None] * len(calls)
        parsed: list[tuple[int, Caller, Remember]] = []
        for index, (token, arguments, notebook_id) in enumerate(calls):
            try:
                caller = self.caller(token, notebook_id)
                remember = self._tools.parse("remember", arguments)
                assert isinstance(remember, Remember)
                parsed.append((index, caller, remember))
            except Exception as exc:
                bodies[index] = self._refused("remember", exc, started)
        try:
            answers = self._tools.remember_all([(caller, a) for _, caller, a in parsed])
        except Exception as exc:  # a bug: every call of the batch answers it
            answers = [exc] * len(parsed)
        for (index, caller, _), answer in zip(parsed, answers, strict=True):
            if isinstance(answer, Exception):
                bodies[index] = self._refused("remember", answer, started)
            else:
                bodies[index] = self._answered("remember", caller, answer, started)
        answered = [body for body in bodies if body is not None]
        assert len(answered) == len(calls), "every call is answered once"
        return answered

    def _refused(self, tool: str, exc: Exception, started: datetime) -> dict[str, Any]:
        """A tool call's failure as its error body, counted (a bug also logged)."""
        error = public_error(exc)
        if isinstance(error, Bug):
            logger.exception("tool %s failed unexpectedly", tool, exc_info=exc)
        self.metrics.tool(tool, error.outcome, (self.clock() - started).total_seconds())
        return error.to_json()

    def _answered(
        self, tool: str, caller: Caller, result: dict[str, Any], started: datetime
    ) -> dict[str, Any]:
        """A tool call's result, counted, with the memory card it makes."""
        elapsed = (self.clock() - started).total_seconds()
        declared = TOOLS.get(tool)
        if declared is None:  # the bootstrap
            self.metrics.tool(tool, "ok", elapsed)
            return result
        self.metrics.tool(tool, declared.outcome(result), elapsed)
        card = declared.card(result)
        if card is not None:
            self._card(card[0], caller.notebook_id, card[1])
        return result

    def bootstrap(self, token: str | None, notebook_id: str | None = None) -> dict[str, Any]:
        return self.call_tool(token, "bootstrap", None, notebook_id)

    def _card(self, kind: str, notebook_id: str, names: tuple[str, ...]) -> None:
        panel = f"{self.settings.public_url}/panel/notebooks/{notebook_id}"
        card = MemoryCard(
            kind, notebook_id, names, panel, {name: f"{panel}#record-{name}" for name in names}
        )
        for listener in list(self._listeners):
            listener(card)

    # -- knowledge ------------------------------------------------------------------------

    def knowledge_at(self, owner: str, revision: Any = None) -> dict[str, Any]:
        revision = input_value(revision, "revision")
        latest, records = self._review.records(owner, revision)
        return {
            "revision": latest if revision is None else revision,
            "latest": latest,
            "records": [r.to_json() for r in records],
        }

    def propose(self, owner: str, body: Any) -> dict[str, Any]:
        body = _body(body, _PROPOSAL_KEYS, "a proposal is {notebook?, name?, record?, source}")
        notebook = body.get("notebook")
        if notebook is not None:
            # another owner's notebook is simply not found
            self.notebook(owner, check_identifier(notebook, "notebook"))
        proposed = self._review.submit(
            owner,
            source=body.get("source"),
            notebook=body.get("notebook"),
            name=body.get("name"),
            record=body.get("record"),
        )
        # ``created`` is False when the same proposal was pending already (HTTP 200, not 201).
        return {"proposal_id": proposed.proposal.id, "created": proposed.created}

    def decide(self, owner: str, proposal_id: str, body: Any) -> dict[str, Any]:
        check_identifier(proposal_id, "proposal_id")
        body = _body(body, _DECISION_KEYS, "a decision is {decision, reason, record?}")
        try:
            decided = self._review.decide(
                owner,
                proposal_id,
                decision=body.get("decision"),
                reason=body.get("reason"),
                record=body.get("record"),
            )
        except Forbidden:
            raise NotFound(f"no proposal {proposal_id}") from None
        return decided.to_json()


def _list_cursor(last: Notebook) -> str:
    """Where the next page of a listing starts: after ``last`` (its start time and id)."""
    position = json.dumps([last.started_at, last.id], separators=(",", ":"))
    return base64.urlsafe_b64encode(position.encode("utf-8")).decode("ascii").rstrip("=")


def _list_position(cursor: Any) -> tuple[str, str]:
    """The ``(started_at, id)`` a cursor names; ``invalid_argument`` for anything else. A
    cursor only says where in the caller's own list to go on, so it needs no signature."""
    try:
        if type(cursor) is not str or len(cursor) > _MAX_CURSOR or not cursor.isascii():
            raise ValueError("not a cursor")
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        started_at, notebook_id = json.loads(raw)
        if type(started_at) is not str or type(notebook_id) is not str:
            raise ValueError("not a cursor")
    except (ValueError, TypeError):
        raise InvalidArgument("cursor is not one a listing of notebooks returned") from None
    return started_at, notebook_id


def _document_cursor(last: str) -> str:
    """Where the next page of an owner's documents starts: after the document ``last``."""
    return base64.urlsafe_b64encode(last.encode("utf-8")).decode("ascii").rstrip("=")


def _document_position(cursor: Any) -> str:
    """The document a cursor of ``list_documents`` names; ``invalid_argument`` otherwise."""
    try:
        if type(cursor) is not str or len(cursor) > _MAX_CURSOR or not cursor.isascii():
            raise ValueError("not a cursor")
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        return check_identifier(raw.decode("utf-8"), "cursor")
    except (ValueError, InvalidArgument):
        raise InvalidArgument("cursor is not one a listing of documents returned") from None


_PROPOSAL_KEYS = frozenset(("notebook", "name", "record", "source"))
_DECISION_KEYS = frozenset(("decision", "reason", "record"))


def _body(body: Any, keys: frozenset[str], shape: str) -> dict[str, Any]:
    """An owner request's body read as every transport reads it: an object of known keys, each
    given a value (``null`` is not "left out"), numbers by the input rule."""
    body = input_value(body, "body")
    if type(body) is not dict:
        raise InvalidArgument(shape)
    unknown = set(body) - keys
    if unknown:
        raise InvalidArgument(f"unknown keys: {', '.join(sorted(unknown))}")
    for key, value in body.items():
        if value is None:
            raise InvalidArgument(f"{key} is null; leave it out instead")
    return body
